//! Deprovisioning: Ironic tears the deployment down (and cleans) back to available.

use super::errors::Inner;
use super::memo::{Pending, Phase};
use super::node::{self, provision_state};
use super::provisioner::IronicProvisioner;
use crate::{ErrorKind, HostInfo, ProvisionerError, Step};

impl IronicProvisioner {
    pub(super) async fn do_deprovision(&self, host: &HostInfo) -> Inner<Step> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.get_node(host).await? else {
            // Nothing is deployed through Ironic any more.
            memo.phase = Phase::Unknown;
            return Ok(Step::Done(()));
        };
        match provision_state(&node) {
            "available" | "manageable" | "enroll" | "inspect failed" => {
                memo.pending = None;
                memo.phase = if provision_state(&node) == "available" {
                    Phase::Available
                } else {
                    Phase::Manageable
                };
                Ok(Step::Done(()))
            }
            _ if memo.pending.is_some() && node::settling(&node) => {
                self.wait("Ironic is still handling the failure (its last_error follows)")
            }
            "error" | "clean failed" if memo.pending == Some(Pending::Undeploy) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("deprovisioning failed: {}", self.failure(&node).await),
                )
                .into())
            }
            "active" | "deploy failed" | "error" | "wait call-back" => {
                self.provision_action(host, &node, "deleted", None).await?;
                memo.pending = Some(Pending::Undeploy);
                self.wait("Ironic tear-down started")
            }
            "clean failed" | "adopt failed" => {
                self.provision_action(host, &node, "manage", None).await?;
                self.wait("node back to manageable")
            }
            state => self.wait(format!("Ironic state {state}")),
        }
    }
}
