//! Power: moving a node towards on or off (a soft power-off forced after its grace period),
//! one-shot operations, and one-time boot devices.

use std::time::{Duration, Instant};

use ferrometal_api::annotations::Operation;
use ferrometal_bmc::PowerState;
use reqwest::Method;
use serde_json::json;

use super::errors::{Context, Inner};
use super::memo::PowerRequest;
use super::node::{self, last_error, uuid};
use super::provisioner::IronicProvisioner;
use crate::{ErrorKind, HostInfo, ProvisionerError, Step};

/// A power change Ironic still has not made after this long is issued again.
const POWER_ACTION_TIMEOUT: Duration = Duration::from_secs(120);

impl IronicProvisioner {
    /// Moves power towards `target` ("power on", "power off", "soft power off").
    pub(super) async fn do_power(&self, host: &HostInfo, target: &'static str) -> Inner<Step> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.steady(host, &mut memo).await? else {
            return self.wait("node being registered again in Ironic");
        };
        let want = if target == "power on" {
            PowerState::On
        } else {
            PowerState::Off
        };
        let now = node::power_of(&node);
        if now == want {
            memo.power = None;
            return Ok(Step::Done(()));
        }
        if node.get("target_power_state").is_some_and(|t| !t.is_null()) {
            return self.wait(format!("Ironic is changing power ({now})"));
        }
        let mut issue = target;
        if let Some(req) = memo
            .power
            .clone()
            .filter(|r| same_direction(r.target, target))
        {
            let age = req.issued.elapsed();
            let err = last_error(&node);
            if err.is_some() && err != req.error_before {
                memo.power = None;
                return Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("{} failed: {}", req.target, err.unwrap_or_default()),
                )
                .into());
            }
            let soft = req.target == "soft power off";
            if soft && (target == "power off" || age >= self.options.soft_power_off_grace) {
                // A hard request does not wait out a soft one; a soft one that outlasts its
                // grace period is forced.
                issue = "power off";
            } else if age < POWER_ACTION_TIMEOUT.max(self.options.soft_power_off_grace) {
                return self.wait(format!(
                    "{} issued {}s ago; Ironic reports {now}",
                    req.target,
                    age.as_secs()
                ));
            }
        }
        self.power_action(host, &node, issue).await?;
        memo.power = Some(PowerRequest {
            target: issue,
            issued: Instant::now(),
            error_before: last_error(&node),
        });
        self.wait(format!("{issue} issued; Ironic reported {now}"))
    }

    pub(super) async fn do_operation(&self, host: &HostInfo, op: Operation) -> Inner<Step> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.steady(host, &mut memo).await? else {
            return self.wait("node being registered again in Ironic");
        };
        let target = match op {
            Operation::PowerCycle | Operation::ForceRestart => "rebooting",
            Operation::GracefulRestart => "soft rebooting",
            Operation::ForceOff => "power off",
            Operation::ForceOn => "power on",
            Operation::GracefulShutdown => "soft power off",
            Operation::PxeOnce => {
                self.client
                    .call(
                        Method::PUT,
                        &format!("/v1/nodes/{}/management/boot_device", uuid(&node)),
                        Some(&json!({"boot_device": "pxe", "persistent": false})),
                    )
                    .await
                    .ctx(|| format!("one-time PXE boot on node {}", host.key))?;
                return Ok(Step::Done(()));
            }
        };
        self.power_action(host, &node, target).await?;
        memo.power = None;
        Ok(Step::Done(()))
    }

    pub(super) async fn do_boot_device(&self, host: &HostInfo, device: &str) -> Inner<()> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.steady(host, &mut memo).await? else {
            return Err(ProvisionerError::new(
                ErrorKind::Unreachable,
                format!("node {} is being registered again in Ironic", host.key),
            )
            .into());
        };
        self.client
            .call(
                Method::PUT,
                &format!("/v1/nodes/{}/management/boot_device", uuid(&node)),
                Some(&json!({"boot_device": device, "persistent": false})),
            )
            .await
            .ctx(|| format!("one-time {device} boot on node {}", host.key))?;
        Ok(())
    }
}

fn same_direction(a: &str, b: &str) -> bool {
    (a == "power on") == (b == "power on")
}
