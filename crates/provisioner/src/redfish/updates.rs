//! Firmware updates: one component at a time, `UpdateService.SimpleUpdate` with the image's
//! URL, then the BMC's task followed to its end before the next one starts.
//!
//! What completed is remembered in memory only (a BMC keeps no record of which URL it
//! flashed): after a restart of this process in the middle, the controller asks again for the
//! updates not yet recorded in the host's HostFirmwareComponents, and those are flashed again.

use ferrometal_bmc::{FirmwareComponent, UpdateState};

use super::host_state::UpdatesProgress;
use super::provisioner::{RedfishProvisioner, unsupported};
use crate::{ComponentUpdate, ErrorKind, HostInfo, ProvisionerError, Result, Step};

impl RedfishProvisioner {
    pub(super) async fn apply_updates(
        &self,
        host: &HostInfo,
        updates: &[ComponentUpdate],
    ) -> Result<Step> {
        let (mut st, bmc) = self.session(host).await?;
        let st = &mut *st;
        if st.updates.as_ref().is_none_or(|p| p.wanted != updates) {
            st.updates = Some(UpdatesProgress {
                wanted: updates.to_vec(),
                done: 0,
                task: None,
            });
        }
        let Some(progress) = st.updates.as_mut() else {
            return Ok(Step::Done(()));
        };
        while let Some(next) = progress.wanted.get(progress.done).cloned() {
            let Some(task) = progress.task.clone() else {
                let Some(component) = FirmwareComponent::parse(&next.component) else {
                    return Err(unsupported(format!(
                        "firmware component {} of host {} is not updated through its BMC \
                         (bios, bmc and nic:<adapter Id> are)",
                        next.component, host.key
                    )));
                };
                let task = bmc.start_update(component, &next.url).await?;
                progress.task = Some(task);
                return self.step_waiting(&format!(
                    "{} firmware update from {} started",
                    next.component, next.url
                ));
            };
            match bmc.update_state(&task).await? {
                UpdateState::Running { percent } => {
                    return self.waiting_power(format!(
                        "{} firmware update {}",
                        next.component,
                        percent.map_or("running".to_string(), |p| format!("{p}% done"))
                    ));
                }
                UpdateState::Completed => {
                    progress.done += 1;
                    progress.task = None;
                }
                UpdateState::Failed(why) => {
                    // Forget it all, so a retry (after the controller's backoff) starts over.
                    st.updates = None;
                    return Err(ProvisionerError::new(
                        ErrorKind::Failed,
                        format!(
                            "{} firmware update from {} failed on BMC {}: {why}",
                            next.component,
                            next.url,
                            bmc.endpoint()
                        ),
                    ));
                }
            }
        }
        st.updates = None;
        Ok(Step::Done(()))
    }
}
