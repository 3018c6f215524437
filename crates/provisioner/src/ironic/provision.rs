//! Preparing (making the node available, cleaning it when asked) and provisioning (writing the
//! deployment and deploying it), refused up front when Ironic's agent would be needed and no
//! agent ramdisk is configured.

use ferrometal_api::AutomatedCleaningMode;
use ferrometal_api::spec_fault::SpecFault;
use serde_json::{Value, json};

use super::errors::Inner;
use super::memo::{Pending, Phase};
use super::node::{self, provision_state, uuid};
use super::provisioner::IronicProvisioner;
use crate::{Deployment, ErrorKind, HostInfo, ProvisionerError, Step};

impl IronicProvisioner {
    /// Refuses `what` (cleaning, disk-image and custom deploys all run inside Ironic's agent)
    /// when no agent ramdisk is configured for this host's boot interface, naming the flags to
    /// set: Ironic would otherwise fail each attempt with "Missing are: deploy_kernel...".
    pub(super) fn need_agent(
        &self,
        host: &HostInfo,
        what: &str,
        alternative: &str,
    ) -> Result<(), ProvisionerError> {
        let o = &self.options;
        let network = o.deploy_kernel.is_some() && o.deploy_ramdisk.is_some();
        let d = node::driver_for(host.bmc.flavour);
        let iso = o.deploy_iso.is_some() && d.virtual_media_boot == Some(d.boot);
        if network || iso {
            return Ok(());
        }
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "{what} runs Ironic's agent ramdisk, and none is configured: start ferrometal with \
                 --deploy-kernel-url and --deploy-ramdisk-url (or --deploy-iso-url for a virtual-media BMC; \
                 environment DEPLOY_KERNEL_URL, DEPLOY_RAMDISK_URL, DEPLOY_ISO_URL), {alternative}"
            ),
        ))
    }

    pub(super) async fn do_prepare(&self, host: &HostInfo) -> Inner<Step> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.require(host, &mut memo).await? else {
            return self.wait("node registered again in Ironic");
        };
        if let Some(step) = self.ensure_managed(host, &mut memo, &node).await? {
            return Ok(step);
        }
        match provision_state(&node) {
            "available" => {
                memo.pending = None;
                memo.phase = Phase::Available;
                Ok(Step::Done(()))
            }
            "active" => Ok(Step::Done(())),
            "manageable" => {
                if host.automated_cleaning_mode != AutomatedCleaningMode::Disabled {
                    self.need_agent(
                        host,
                        "automated cleaning (spec.automatedCleaningMode: metadata)",
                        "or set spec.automatedCleaningMode: disabled",
                    )?;
                }
                self.provide(host, &mut memo, &node).await?;
                self.wait("Ironic is making the node available")
            }
            _ if memo.pending.is_some() && node::settling(&node) => {
                self.wait("Ironic is still handling the failure (its last_error follows)")
            }
            "clean failed" if memo.pending == Some(Pending::Provide) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("cleaning failed: {}", self.failure(&node).await),
                )
                .into())
            }
            "clean failed" | "inspect failed" | "adopt failed" => {
                self.provision_action(host, &node, "manage", None).await?;
                self.wait("node back to manageable")
            }
            state => self.wait(format!("Ironic state {state}")),
        }
    }

    pub(super) async fn do_provision(
        &self,
        host: &HostInfo,
        deployment: &Deployment,
    ) -> Inner<Step> {
        let spec = node::deploy_spec(host, deployment)?;
        if spec.deploy_interface != "ramdisk" {
            // Without an agent only live-iso images deploy here: the spec asks for what this
            // installation cannot do, which whoever wrote the spec may be told.
            let (what, fault) = if spec.deploy_step.is_some() {
                ("a custom deploy", SpecFault::CustomDeployNotSupported)
            } else {
                ("writing a disk image", SpecFault::ImageFormatNotSupported)
            };
            self.need_agent(host, what, "or deploy a live-iso image")
                .map_err(|e| e.in_spec(fault))?;
        }
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.require(host, &mut memo).await? else {
            return self.wait("node registered again in Ironic");
        };
        if let Some(step) = self.ensure_managed(host, &mut memo, &node).await? {
            return Ok(step);
        }
        if let Some(step) = self
            .software_raid(host, &mut memo, &node, &deployment.software_raid)
            .await?
        {
            return Ok(step);
        }
        let state = provision_state(&node);
        match state {
            "active" => {
                if !node::instance_matches(node.get("instance_info").unwrap_or(&Value::Null), &spec)
                {
                    return Err(ProvisionerError::new(
                        ErrorKind::Failed,
                        format!(
                            "node {} is active with another image; deprovision it first",
                            host.key
                        ),
                    )
                    .into());
                }
                memo.pending = None;
                memo.phase = Phase::Active(spec);
                Ok(Step::Done(()))
            }
            _ if memo.pending.is_some() && node::settling(&node) => {
                self.wait("Ironic is still handling the failure (its last_error follows)")
            }
            "deploy failed" if memo.pending == Some(Pending::Deploy) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("deploy failed: {}", self.failure(&node).await),
                )
                .into())
            }
            "available" | "deploy failed" if node::stale_fast_track(&node) => {
                if node.get("target_power_state").is_some_and(|t| !t.is_null()) {
                    return self.wait("Ironic is changing power before the deploy");
                }
                self.power_action(host, &node, "power off").await?;
                self.wait(
                    "powering off first: the node is on with no agent running, and Ironic's fast track would wait for one",
                )
            }
            "available" | "deploy failed" => {
                let node = self.apply_deploy(host, &node, &spec).await?;
                let mut extra = json!({});
                if let Some(drive) = node::configdrive(host, uuid(&node), deployment) {
                    extra["configdrive"] = drive;
                }
                if let Some(step) = &spec.deploy_step {
                    extra["deploy_steps"] =
                        json!([{"interface": "deploy", "step": step, "args": {}, "priority": 80}]);
                }
                self.provision_action(host, &node, "active", Some(extra))
                    .await?;
                memo.pending = Some(Pending::Deploy);
                self.wait("Ironic deploy started")
            }
            "manageable" => {
                self.provide(host, &mut memo, &node).await?;
                self.wait("Ironic is making the node available")
            }
            "clean failed" | "inspect failed" | "adopt failed" => {
                self.provision_action(host, &node, "manage", None).await?;
                self.wait("node back to manageable")
            }
            state => self.wait(format!("Ironic state {state}")),
        }
    }
}
