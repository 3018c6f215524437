//! Inspection: Ironic inspects a manageable node and the inventory it recorded becomes
//! `status.hardware`.

use ferrometal_api::{HardwareDetails, InspectionMode};
use ferrometal_bmc::Protocol;
use serde_json::Value;

use super::client::ApiError;
use super::errors::{Fail, Inner};
use super::memo::{Pending, Phase};
use super::node::{self, provision_state, uuid};
use super::provisioner::IronicProvisioner;
use crate::{ErrorKind, HostInfo, ProvisionerError, Step};

impl IronicProvisioner {
    pub(super) async fn do_inspect(&self, host: &HostInfo) -> Inner<Step<Option<HardwareDetails>>> {
        if host.inspection_mode == InspectionMode::Disabled {
            return Ok(Step::Done(None));
        }
        if host.bmc.protocol() == Protocol::Ipmi {
            // IPMI has no inventory to read out of band (the agent would need a PXE network).
            tracing::info!(host = %host.key, "IPMI BMC: no out-of-band inspection");
            return Ok(Step::Done(None));
        }
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.require(host, &mut memo).await? else {
            return self.wait("node registered again in Ironic");
        };
        if let Some(step) = self.ensure_managed(host, &mut memo, &node).await? {
            return Ok(step.map_done());
        }
        match provision_state(&node) {
            "manageable" if memo.pending == Some(Pending::Inspect) => {
                memo.pending = None;
                let inventory = match self
                    .client
                    .get(&format!("/v1/nodes/{}/inventory", uuid(&node)))
                    .await
                {
                    Ok(v) => v.get("inventory").cloned().unwrap_or(Value::Null),
                    Err(ApiError::NotFound) => Value::Null,
                    Err(e) => {
                        return Err(Fail::Api(
                            e,
                            format!("reading the inventory of {}", host.key),
                        ));
                    }
                };
                let properties = node.get("properties").cloned().unwrap_or(Value::Null);
                let details = node::hardware_details(
                    &inventory,
                    &properties,
                    host.boot_mac_address.as_deref(),
                )?;
                Ok(Step::Done(Some(details)))
            }
            _ if memo.pending.is_some() && node::settling(&node) => {
                self.wait("Ironic is still handling the failure (its last_error follows)")
            }
            "inspect failed" if memo.pending == Some(Pending::Inspect) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("inspection failed: {}", self.failure(&node).await),
                )
                .into())
            }
            "manageable" | "inspect failed" => {
                // A node registered before the ramdisk was configured (or after it went)
                // inspects the way the options say now.
                let want = node::inspect_interface(host.bmc.flavour, &self.driver_opts());
                if node.get("inspect_interface").and_then(Value::as_str) != Some(want) {
                    self.patch(
                        host,
                        &node,
                        vec![serde_json::json!({"op": "add", "path": "/inspect_interface", "value": want})],
                    )
                    .await?;
                }
                self.provision_action(host, &node, "inspect", None).await?;
                memo.pending = Some(Pending::Inspect);
                self.wait("Ironic inspection started")
            }
            "available" => {
                // Inspection runs from manageable only. The phase goes back too, so a power
                // call meanwhile does not take the node to available again.
                self.provision_action(host, &node, "manage", None).await?;
                memo.phase = Phase::Manageable;
                self.wait("node back to manageable for inspection")
            }
            "inspecting" | "inspect wait" => self.wait("Ironic is inspecting"),
            other => Err(ProvisionerError::new(
                ErrorKind::Failed,
                format!("cannot inspect node {} in Ironic state {other:?}", host.key),
            )
            .into()),
        }
    }
}

impl<T> Step<T> {
    fn map_done<U>(self) -> Step<U> {
        match self {
            Step::Waiting {
                requeue_after,
                reason,
            } => Step::Waiting {
                requeue_after,
                reason,
            },
            Step::Done(_) => unreachable!("only waiting steps are mapped"),
        }
    }
}
