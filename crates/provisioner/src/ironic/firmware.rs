//! Firmware changes through Ironic, as metal3 has Ironic make them: BIOS settings through its
//! bios interface (`apply_configuration`), firmware images through its firmware interface
//! (`update`, each component in turn: `UpdateService.SimpleUpdate`, the BMC's task followed,
//! the reboot that applies it).
//!
//! On a provisioned host both run as service steps (`service`, API 1.87), settings first, as
//! metal3 orders them. On a host that is not provisioned they run in a manual cleaning:
//! settings alone without the agent ramdisk (`disable_ramdisk`); updates with it, since
//! Ironic's `update` clean step needs its agent booted (IPA, `--deploy-kernel-url` and
//! `--deploy-ramdisk-url` or `--deploy-iso-url`; without one they are refused with that
//! reason). Ironic checks after the boot that the BMC reports every
//! value; a value the BMC did not take, or a failed update task, fails the step, and that
//! failure is the host's error.
//!
//! After a manual cleaning without the agent the node is powered off (hard), as Ironic ends its
//! own cleaning: the step's boot left it in whatever it boots without an image, where a
//! graceful shutdown may never be answered. One with the agent is left as Ironic ends it (with
//! fast track the agent stays up, and the automated cleaning that follows uses it without
//! booting again). A serviced node is left on, booted into its own OS.
//!
//! A step is known to be ours and finished by the node's `provision_updated_at`: the one read
//! before the request is remembered, and the node back in its resting state with another one
//! has been through it. After a restart of this process the steps are simply asked for again;
//! Ironic skips the reboot when the BMC already reports every value (an update, like the
//! redfish provisioner's, is flashed again: a BMC keeps no record of which image it flashed).

use reqwest::Method;
use serde_json::{Value, json};

use super::errors::{Context, Inner};
use super::memo::{Memo, Phase};
use super::node::{last_error, power_of, provision_state, str_of, uuid};
use super::provisioner::IronicProvisioner;
use crate::{ErrorKind, FirmwareChanges, HostInfo, ProvisionerError, Step};
use ferrometal_bmc::PowerState;

/// Ironic's API version with the `service` verb.
const SERVICE_API_VERSION: &str = "1.87";

/// The steps, as Ironic takes them, in metal3's order: the BIOS settings as a list of name and
/// value, then the firmware images as a list of component and URL (flashed in that order).
fn steps(changes: &FirmwareChanges) -> Value {
    let mut steps = Vec::new();
    if !changes.settings.is_empty() {
        let settings: Vec<Value> = changes
            .settings
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
        steps.push(json!({
            "interface": "bios",
            "step": "apply_configuration",
            "args": {"settings": settings},
        }));
    }
    if !changes.updates.is_empty() {
        let settings: Vec<Value> = changes
            .updates
            .iter()
            .map(|u| json!({"component": u.component, "url": u.url}))
            .collect();
        steps.push(json!({
            "interface": "firmware",
            "step": "update",
            "args": {"settings": settings},
        }));
    }
    Value::Array(steps)
}

/// Whether the steps asked for `asked` make `now` as well. What is still wanted shrinks while
/// the steps run (a setting read back from the BMC as applied before the update step ended is
/// no longer wanted); it is the same work, not new work to ask for again.
fn covers(asked: &FirmwareChanges, now: &FirmwareChanges) -> bool {
    now.settings
        .iter()
        .all(|(name, value)| asked.settings.get(name) == Some(value))
        && now.updates.iter().all(|u| asked.updates.contains(u))
}

/// Firmware images on a host that is not provisioned, with no agent ramdisk configured:
/// Ironic's `update` clean step needs it booted.
fn updates_refused(host: &HostInfo, changes: &FirmwareChanges) -> ProvisionerError {
    let components: Vec<&str> = changes
        .updates
        .iter()
        .map(|u| u.component.as_str())
        .collect();
    ProvisionerError::new(
        ErrorKind::Unsupported,
        format!(
            "firmware updates of host {} ({}) before it is provisioned: Ironic's firmware \
             update in cleaning needs its agent ramdisk booted, and none is configured \
             (--deploy-kernel-url and --deploy-ramdisk-url, or --deploy-iso-url); or provision \
             the host and reboot it with a HostUpdatePolicy saying firmwareUpdates: onReboot",
            host.key,
            components.join(", ")
        ),
    )
}

impl IronicProvisioner {
    pub(super) async fn do_change_firmware(
        &self,
        host: &HostInfo,
        changes: &FirmwareChanges,
    ) -> Inner<Step> {
        if changes.is_empty() {
            return Ok(Step::Done(()));
        }
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.require(host, &mut memo).await? else {
            return self.wait("node registered again in Ironic");
        };
        let state = provision_state(&node);
        let since = str_of(&node, "provision_updated_at").to_string();
        // Asked for steps that make these changes: (whether the node moved on since).
        let asked = memo
            .firmware_since
            .as_ref()
            .filter(|(_, asked)| covers(asked, changes))
            .map(|(before, _)| *before != since);
        let moved = asked == Some(true);
        match state {
            // The step's boot left the node on, in whatever it boots without an image: off
            // again, hard (as Ironic's own cleaning ends), before the host goes on preparing.
            "manageable"
                if moved && changes.updates.is_empty() && power_of(&node) != PowerState::Off =>
            {
                if str_of(&node, "target_power_state").is_empty() {
                    self.power_action(host, &node, "power off").await?;
                }
                self.wait("node powered off after its firmware step")
            }
            "manageable" | "active" if moved => {
                memo.firmware_since = None;
                Ok(Step::Done(()))
            }
            "available" | "manageable"
                if !changes.updates.is_empty() && !self.driver_opts().has_ramdisk() =>
            {
                Err(updates_refused(host, changes).into())
            }
            "available" => {
                self.provision_action(host, &node, "manage", None).await?;
                // Kept manageable until the step ran (not made available again meanwhile).
                memo.phase = Phase::Manageable;
                self.wait("node made manageable for its BIOS settings")
            }
            "manageable" | "active" if asked == Some(false) => {
                self.wait("Ironic takes the firmware steps")
            }
            "manageable" => {
                // Settings alone need no agent; Ironic boots it for an update.
                let ramdisk = !changes.updates.is_empty();
                let body = json!({"clean_steps": steps(changes), "disable_ramdisk": !ramdisk});
                self.provision_action(host, &node, "clean", Some(body))
                    .await?;
                memo.firmware_since = Some((since, changes.clone()));
                self.wait(format!(
                    "Ironic makes the firmware changes (manual cleaning{}): {}",
                    if ramdisk { " with its agent" } else { "" },
                    changes.describe()
                ))
            }
            "active" => {
                self.service(host, &mut memo, &node, changes).await?;
                self.wait(format!(
                    "Ironic makes the firmware changes (servicing): {}",
                    changes.describe()
                ))
            }
            "clean failed" | "service failed" if moved => {
                memo.firmware_since = None;
                let why = self.failure(&node).await;
                // Back to where it rests, so the host is otherwise as it was and a retry
                // starts over.
                let back = if state == "clean failed" {
                    "manage"
                } else {
                    "abort"
                };
                self.provision_action(host, &node, back, None).await?;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!(
                        "Ironic did not make the firmware changes ({}): {why}",
                        changes.describe()
                    ),
                )
                .into())
            }
            "clean failed" => {
                self.provision_action(host, &node, "manage", None).await?;
                self.wait("node back to manageable")
            }
            "service failed" => {
                self.provision_action(host, &node, "abort", None).await?;
                self.wait("node back to active")
            }
            other => self.wait(format!(
                "Ironic state {other}{}",
                last_error(&node)
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            )),
        }
    }

    async fn service(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        node: &Value,
        changes: &FirmwareChanges,
    ) -> Inner<()> {
        let body = json!({"target": "service", "service_steps": steps(changes)});
        self.client
            .call_at(
                SERVICE_API_VERSION,
                Method::PUT,
                &format!("/v1/nodes/{}/states/provision", uuid(node)),
                Some(&body),
            )
            .await
            .ctx(|| format!("service on node {}", host.key))?;
        memo.firmware_since = Some((
            str_of(node, "provision_updated_at").to_string(),
            changes.clone(),
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ComponentUpdate;

    #[test]
    fn steps_asked_cover_what_is_still_wanted_while_they_run() {
        let update = |c: &str| ComponentUpdate {
            component: c.to_string(),
            url: format!("http://files/{c}.bin"),
        };
        let asked = FirmwareChanges {
            settings: [("ProcTurboMode".to_string(), "Disabled".to_string())].into(),
            updates: vec![update("bios")],
        };
        let applied = FirmwareChanges {
            settings: Default::default(),
            ..asked.clone()
        };
        assert!(covers(&asked, &asked));
        assert!(covers(&asked, &applied));
        let other_value = FirmwareChanges {
            settings: [("ProcTurboMode".to_string(), "Enabled".to_string())].into(),
            ..asked.clone()
        };
        assert!(!covers(&asked, &other_value));
        let more = FirmwareChanges {
            updates: vec![update("bios"), update("bmc")],
            ..asked.clone()
        };
        assert!(!covers(&asked, &more));
    }

    #[test]
    fn settings_then_updates_become_metal3s_two_steps() {
        let settings = FirmwareChanges {
            settings: [("ProcTurboMode", "Disabled"), ("NumCores", "8")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            updates: Vec::new(),
        };
        assert_eq!(
            steps(&settings),
            json!([{"interface": "bios", "step": "apply_configuration", "args": {"settings": [
                {"name": "NumCores", "value": "8"},
                {"name": "ProcTurboMode", "value": "Disabled"},
            ]}}])
        );
        let both = FirmwareChanges {
            updates: ["bmc", "bios"]
                .into_iter()
                .map(|c| ComponentUpdate {
                    component: c.to_string(),
                    url: format!("http://files/{c}.bin"),
                })
                .collect(),
            ..settings
        };
        let steps = steps(&both);
        assert_eq!(steps[0]["interface"], "bios");
        assert_eq!(
            steps[1],
            json!({"interface": "firmware", "step": "update", "args": {"settings": [
                {"component": "bmc", "url": "http://files/bmc.bin"},
                {"component": "bios", "url": "http://files/bios.bin"},
            ]}})
        );
    }
}
