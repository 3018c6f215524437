//! BIOS settings through Ironic's bios interface, as metal3 has Ironic make them: the
//! `apply_configuration` step, in a manual cleaning without the agent ramdisk
//! (`disable_ramdisk`) on a host that is not provisioned, and in servicing (`service`, API
//! 1.87) on a provisioned one. Ironic stages the values in the BMC's pending settings, reboots
//! the node, and checks after the boot that the BMC reports them; a value the BMC did not take
//! fails the step, and that failure is the host's error.
//!
//! After a manual cleaning the node is powered off (hard), as Ironic ends its own cleaning: the
//! step's boot left it in whatever it boots without an image, where a graceful shutdown may
//! never be answered. A serviced node is left on, booted into its own OS.
//!
//! A step is known to be ours and finished by the node's `provision_updated_at`: the one read
//! before the request is remembered, and the node back in its resting state with another one
//! has been through it. After a restart of this process the step is simply asked for again;
//! Ironic skips the reboot when the BMC already reports every value.

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

/// The step, as Ironic's bios interface takes it: settings as a list of name and value.
fn bios_steps(changes: &FirmwareChanges) -> Value {
    let settings: Vec<Value> = changes
        .settings
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    json!([{
        "interface": "bios",
        "step": "apply_configuration",
        "args": {"settings": settings},
    }])
}

impl IronicProvisioner {
    pub(super) async fn do_change_firmware(
        &self,
        host: &HostInfo,
        changes: &FirmwareChanges,
    ) -> Inner<Step> {
        if !changes.updates.is_empty() {
            let components: Vec<&str> = changes
                .updates
                .iter()
                .map(|u| u.component.as_str())
                .collect();
            return Err(ProvisionerError::new(
                ErrorKind::Unsupported,
                format!(
                    "the ironic provisioner does not flash firmware yet (host {}: {}); \
                     the redfish provisioner does",
                    host.key,
                    components.join(", ")
                ),
            )
            .into());
        }
        if changes.settings.is_empty() {
            return Ok(Step::Done(()));
        }
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.require(host, &mut memo).await? else {
            return self.wait("node registered again in Ironic");
        };
        let state = provision_state(&node);
        let since = str_of(&node, "provision_updated_at").to_string();
        // Asked for these settings: (whether the node moved on since).
        let asked = memo
            .firmware_since
            .as_ref()
            .filter(|(_, settings)| *settings == changes.settings)
            .map(|(before, _)| *before != since);
        let moved = asked == Some(true);
        match state {
            // The step's boot left the node on, in whatever it boots without an image: off
            // again, hard (as Ironic's own cleaning ends), before the host goes on preparing.
            "manageable" if moved && power_of(&node) != PowerState::Off => {
                if str_of(&node, "target_power_state").is_empty() {
                    self.power_action(host, &node, "power off").await?;
                }
                self.wait("node powered off after its BIOS step")
            }
            "manageable" | "active" if moved => {
                memo.firmware_since = None;
                Ok(Step::Done(()))
            }
            "available" => {
                self.provision_action(host, &node, "manage", None).await?;
                // Kept manageable until the step ran (not made available again meanwhile).
                memo.phase = Phase::Manageable;
                self.wait("node made manageable for its BIOS settings")
            }
            "manageable" | "active" if asked == Some(false) => {
                self.wait("Ironic takes the BIOS step")
            }
            "manageable" => {
                let body = json!({"clean_steps": bios_steps(changes), "disable_ramdisk": true});
                self.provision_action(host, &node, "clean", Some(body))
                    .await?;
                memo.firmware_since = Some((since, changes.settings.clone()));
                self.wait("Ironic applies the BIOS settings (manual cleaning)")
            }
            "active" => {
                self.service(host, &mut memo, &node, changes).await?;
                self.wait("Ironic applies the BIOS settings (servicing)")
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
                    format!("Ironic did not apply the BIOS settings: {why}"),
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
        let body = json!({"target": "service", "service_steps": bios_steps(changes)});
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
            changes.settings.clone(),
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_become_one_apply_configuration_step() {
        let changes = FirmwareChanges {
            settings: [("ProcTurboMode", "Disabled"), ("NumCores", "8")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            updates: Vec::new(),
        };
        assert_eq!(
            bios_steps(&changes),
            json!([{"interface": "bios", "step": "apply_configuration", "args": {"settings": [
                {"name": "NumCores", "value": "8"},
                {"name": "ProcTurboMode", "value": "Disabled"},
            ]}}])
        );
    }
}
