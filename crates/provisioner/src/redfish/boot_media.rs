//! Booting an ISO from virtual media: a live ISO, or the deploy agent's ramdisk.

use ferrometal_bmc::{BootDevice, PowerAction, PowerState};

use super::RedfishProvisioner;
use super::host_state::DeployProgress;
use super::image;
use crate::{ErrorKind, HostInfo, ProvisionerError, Result, Step};

impl RedfishProvisioner {
    /// Drives the host into booting `url` from its virtual CD: off, media, boot override once,
    /// on (or a restart where power must stay on). Done once the host runs with it.
    pub(super) async fn boot_media(&self, host: &HostInfo, url: &str) -> Result<Step> {
        let (mut st, bmc) = self.session(host).await?;
        let st = &mut *st;
        if st.deploy.as_ref().is_none_or(|d| d.url != url) {
            st.deploy = Some(DeployProgress {
                url: url.to_string(),
                ..DeployProgress::default()
            });
            st.teardown_restarted = false;
        }
        let media = bmc.media_status().await?;
        let ours = media.inserted && media.image.as_deref() == Some(url);
        let power = self.observe_power(st, &*bmc).await?;

        if !ours {
            // Ironic's ramdisk deploy order: off, media + boot, on. Inserting only into a host
            // that is off makes "our media + On" mean the host booted it, even after a restart.
            if !host.disable_power_off && power != PowerState::Off {
                return match self
                    .drive_power_from(st, &*bmc, PowerAction::ForceOff, power)
                    .await?
                {
                    Step::Done(()) => self.step_waiting("powered off; inserting media next"),
                    waiting => Ok(waiting),
                };
            }
            bmc.insert_media(url).await.map_err(image::insert_error)?;
            let progress = st.deploy.as_mut().expect("set above");
            progress.inserted = true;
            progress.boot_set = false;
            progress.powered_on = false;
            progress.restarted = false;
            tracing::debug!(host = %host.key, "virtual media inserted");
            return self.step_waiting("virtual media inserted");
        }

        let progress = st.deploy.clone().expect("set above");
        let booted = progress.powered_on || progress.restarted;
        match power {
            PowerState::On if booted => {
                st.in_flight = None;
                Ok(Step::Done(()))
            }
            // Media ours and On, with no memory of inserting it: a previous run powered the
            // host on with the image (media goes only into hosts that are off). Hosts whose
            // power must stay on cannot tell, so they get the restart.
            PowerState::On if !progress.inserted && !host.disable_power_off => Ok(Step::Done(())),
            PowerState::On | PowerState::Off if !progress.boot_set => {
                if host.boot_mode == Some(ferrometal_api::BootMode::UefiSecureBoot)
                    && !bmc.secure_boot().await?
                {
                    // Observed again on the next call before the boot override is set.
                    bmc.set_secure_boot(true).await?;
                    return self.step_waiting("UEFI Secure Boot enabled");
                }
                bmc.set_boot(Self::boot_override(host, BootDevice::Cd))
                    .await?;
                st.deploy.as_mut().expect("set above").boot_set = true;
                self.step_waiting("boot override set to Cd once")
            }
            PowerState::On => {
                self.issue(st, &*bmc, PowerAction::ForceRestart).await?;
                st.deploy.as_mut().expect("set above").restarted = true;
                self.waiting_power("restarted into the image".into())
            }
            PowerState::Off | PowerState::PoweringOn | PowerState::PoweringOff => {
                // Media and boot override are in place: whatever powers it on now boots them.
                let step = self
                    .drive_power_from(st, &*bmc, PowerAction::On, power)
                    .await?;
                st.deploy.as_mut().expect("set above").powered_on = true;
                Ok(step)
            }
            PowerState::Unknown => Err(ProvisionerError::new(
                ErrorKind::Failed,
                format!("BMC {} reports an unknown power state", bmc.endpoint()),
            )),
        }
    }
}
