//! BIOS settings: staged in the BMC's pending settings, applied by the next boot, and read back.
//!
//! Each call observes first: values the BMC already reports are done, values already pending
//! are not staged again, and a boot is issued only while they are pending. So a call after a
//! restart of this process (which forgets the progress) neither stages nor boots twice. What
//! only this process can know is that the boot meant to apply them happened: with it, a value
//! the BMC dropped is told as an error instead of staged and booted again forever.

use std::time::Instant;

use ferrometal_bmc::{Bios, PowerAction, PowerState};

use super::host_state::SettingsProgress;
use super::provisioner::RedfishProvisioner;
use crate::{ErrorKind, FirmwareChanges, HostInfo, ProvisionerError, Result, Step};

/// The wanted settings the BMC does not report yet: (name, wanted, current).
fn differing<'a>(
    bios: &Bios,
    changes: &'a FirmwareChanges,
) -> Vec<(&'a str, &'a str, Option<String>)> {
    changes
        .settings
        .iter()
        .filter_map(|(name, wanted)| {
            let current = bios.current_text(name);
            (current.as_deref() != Some(wanted.as_str())).then_some((
                name.as_str(),
                wanted.as_str(),
                current,
            ))
        })
        .collect()
}

fn names(list: &[(&str, &str, Option<String>)]) -> String {
    list.iter()
        .map(|(n, _, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

impl RedfishProvisioner {
    pub(super) async fn apply_settings(
        &self,
        host: &HostInfo,
        changes: &FirmwareChanges,
    ) -> Result<Step> {
        let (mut st, bmc) = self.session(host).await?;
        let st = &mut *st;
        let bios = bmc.bios().await?;
        let left = differing(&bios, changes);
        if left.is_empty() {
            st.settings = None;
            return Ok(Step::Done(()));
        }
        if st
            .settings
            .as_ref()
            .is_none_or(|p| p.wanted != changes.settings)
        {
            st.settings = Some(SettingsProgress {
                wanted: changes.settings.clone(),
                booted: None,
            });
        }
        let pending = left
            .iter()
            .all(|(name, wanted, _)| bios.pending_text(name).as_deref() == Some(*wanted));
        let booted = st.settings.as_ref().and_then(|p| p.booted);
        if let Some(booted) = booted {
            let power = self.observe_power(st, &*bmc).await?;
            if pending && booted.elapsed() < self.options.action_timeout {
                return self.waiting_power(format!(
                    "the BMC holds {} pending; the boot issued {}s ago applies them (power {power})",
                    names(&left),
                    booted.elapsed().as_secs()
                ));
            }
            // Forget the boot, so a retry (after the controller's backoff) starts over.
            st.settings = None;
            let message = if pending {
                format!(
                    "BMC {} still holds {} pending {}s after the boot that applies them",
                    bmc.endpoint(),
                    names(&left),
                    booted.elapsed().as_secs()
                )
            } else {
                let what: Vec<String> = left
                    .iter()
                    .map(|(name, wanted, current)| {
                        format!(
                            "{name}: wanted {wanted:?}, reports {:?}",
                            current.as_deref().unwrap_or("nothing")
                        )
                    })
                    .collect();
                format!(
                    "BMC {} did not apply the BIOS settings at boot ({})",
                    bmc.endpoint(),
                    what.join("; ")
                )
            };
            return Err(ProvisionerError::new(ErrorKind::Failed, message));
        }
        if !pending {
            let staged = left
                .iter()
                .map(|(name, wanted, _)| (name.to_string(), bios.typed_value(name, wanted)))
                .collect();
            bmc.set_bios(&staged).await?;
            return self.step_waiting(&format!("BIOS settings staged: {}", names(&left)));
        }
        // Staged: the next boot applies them. A running host restarts; one that is off starts.
        let power = self.observe_power(st, &*bmc).await?;
        let action = if power == PowerState::Off {
            PowerAction::On
        } else {
            PowerAction::ForceRestart
        };
        self.issue(st, &*bmc, action).await?;
        if let Some(p) = st.settings.as_mut() {
            p.booted = Some(Instant::now());
        }
        self.waiting_power(format!(
            "{} issued to apply the BIOS settings {}",
            action.as_str(),
            names(&left)
        ))
    }
}
