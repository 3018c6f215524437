//! Adoption: a node that already runs its image is taken to active without deploying, and
//! what it carries is remembered to adopt it again after Ironic loses it.

use serde_json::json;

use super::errors::Inner;
use super::memo::{Pending, Phase};
use super::node::{self, DeploySpec, provision_state, str_of};
use super::provisioner::IronicProvisioner;
use crate::{Deployment, ErrorKind, HostInfo, ProvisionerError, Step};

impl IronicProvisioner {
    pub(super) async fn do_adopt(&self, host: &HostInfo, deployment: &Deployment) -> Inner<Step> {
        let spec = if deployment.image.is_some() || deployment.custom_deploy.is_some() {
            Some(node::deploy_spec(host, deployment)?)
        } else {
            None
        };
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.get_node(host).await? else {
            self.create(host, &mut memo, spec.as_ref()).await?;
            return self.wait("node created in Ironic for adoption");
        };
        if let Some(step) = self.ensure_managed(host, &mut memo, &node).await? {
            return Ok(step);
        }
        match provision_state(&node) {
            "active" => {
                memo.pending = None;
                // Without a deployment, what the node carries is what to adopt again later.
                let spec = spec.unwrap_or_else(|| DeploySpec {
                    deploy_interface: str_of(&node, "deploy_interface").to_string(),
                    boot_interface: str_of(&node, "boot_interface").to_string(),
                    instance_info: node.get("instance_info").cloned().unwrap_or(json!({})),
                    deploy_step: None,
                    identity: String::new(),
                });
                memo.phase = Phase::Active(spec);
                Ok(Step::Done(()))
            }
            "adopt failed" if memo.pending == Some(Pending::Adopt) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("adoption failed: {}", self.failure(&node).await),
                )
                .into())
            }
            "manageable" | "adopt failed" => {
                let node = match &spec {
                    Some(spec) => self.apply_deploy(host, &node, spec).await?,
                    None => node,
                };
                self.provision_action(host, &node, "adopt", None).await?;
                memo.pending = Some(Pending::Adopt);
                self.wait("Ironic adoption started")
            }
            "available" => {
                // Adoption starts from manageable.
                self.provision_action(host, &node, "manage", None).await?;
                memo.phase = Phase::Manageable;
                self.wait("node back to manageable for adoption")
            }
            "deploy failed" => Err(ProvisionerError::new(
                ErrorKind::Failed,
                format!("cannot adopt: deploy failed: {}", self.failure(&node).await),
            )
            .into()),
            state => self.wait(format!("Ironic state {state}")),
        }
    }
}
