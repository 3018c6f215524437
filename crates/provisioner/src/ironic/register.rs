//! Registration: the node created with its boot-MAC port, driver_info kept in step with the
//! host, and the enroll → manageable verification that proves Ironic can reach the BMC.

use std::hash::{Hash, Hasher};

use reqwest::Method;
use serde_json::{Value, json};

use super::client::ApiError;
use super::errors::{Fail, Inner, registration_error};
use super::memo::{Memo, Pending, Phase};
use super::node::{self, DeploySpec, last_error, provision_state, str_of, uuid};
use super::provisioner::IronicProvisioner;
use crate::{ErrorKind, HostInfo, ProvisionerError, Registration, Step};

impl IronicProvisioner {
    /// Creates the node (with its boot MAC as a port) and asks Ironic to verify BMC access.
    pub(super) async fn create(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        deploy: Option<&DeploySpec>,
    ) -> Inner<Value> {
        let mut body = node::create_body(host, &self.driver_opts());
        if let Some(spec) = deploy {
            body["instance_info"] = spec.instance_info.clone();
            if !spec.deploy_interface.is_empty() {
                body["deploy_interface"] = json!(spec.deploy_interface);
            }
            if !spec.boot_interface.is_empty() {
                body["boot_interface"] = json!(spec.boot_interface);
            }
        }
        let created = match self
            .client
            .call(Method::POST, "/v1/nodes", Some(&body))
            .await
        {
            Ok(n) => n.unwrap_or(Value::Null),
            // Another call created it meanwhile: use that one.
            Err(ApiError::Status { status: 409, .. }) => self
                .get_node(host)
                .await?
                .ok_or_else(|| ProvisionerError::new(ErrorKind::Failed, "node vanished"))?,
            Err(e) => return Err(Fail::Api(e, format!("creating node {}", host.key))),
        };
        memo.written = Some(fingerprint(&node::driver_info(host, &self.driver_opts())));
        memo.pending = None;
        if let Some(mac) = &host.boot_mac_address {
            let port = json!({"node_uuid": uuid(&created), "address": mac.to_ascii_lowercase(), "pxe_enabled": true});
            match self
                .client
                .call(Method::POST, "/v1/ports", Some(&port))
                .await
            {
                Ok(_) => {}
                Err(ApiError::Status {
                    status: 409,
                    message,
                }) => {
                    tracing::warn!(host = %host.key, %message, "boot MAC already a port in Ironic");
                }
                Err(e) => {
                    return Err(Fail::Api(
                        e,
                        format!("adding the boot MAC port of {}", host.key),
                    ));
                }
            }
        }
        tracing::info!(host = %host.key, uuid = uuid(&created), "ironic node created");
        Ok(created)
    }

    /// Writes driver_info (and the driver/interfaces) when they differ from what the host says
    /// or when the credentials changed. Ironic masks passwords, so the process remembers a hash
    /// of what it wrote; without that memory it writes once.
    async fn sync_driver_info(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        node: Value,
        credentials_changed: bool,
    ) -> Inner<Value> {
        let wanted = node::driver_info(host, &self.driver_opts());
        let print = fingerprint(&wanted);
        let shown_differs = node.get("driver_info") != Some(&node::masked(&wanted));
        if !credentials_changed && memo.written == Some(print) && !shown_differs {
            return Ok(node);
        }
        let d = node::driver_for(host.bmc.flavour);
        let mut ops = vec![json!({"op": "add", "path": "/driver_info", "value": wanted})];
        let state = provision_state(&node);
        if str_of(&node, "driver") != d.driver && matches!(state, "enroll" | "manageable") {
            for (path, value) in [
                ("/driver", d.driver),
                ("/boot_interface", d.boot),
                ("/power_interface", d.power),
                ("/management_interface", d.management),
                ("/inspect_interface", d.inspect),
            ] {
                ops.push(json!({"op": "add", "path": path, "value": value}));
            }
        }
        let node = self.patch(host, &node, ops).await?;
        memo.written = Some(print);
        Ok(node)
    }

    /// One step from enroll towards manageable; `None` once the node is past it.
    pub(super) async fn ensure_managed(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        node: &Value,
    ) -> Inner<Option<Step<()>>> {
        match provision_state(node) {
            "enroll" => {
                if memo.pending == Some(Pending::Manage) {
                    memo.pending = None;
                    if let Some(err) = last_error(node) {
                        return Err(registration_error(host, &err).into());
                    }
                }
                self.provision_action(host, node, "manage", None).await?;
                memo.pending = Some(Pending::Manage);
                Ok(Some(Step::waiting(
                    self.options.poll_interval,
                    "Ironic is verifying BMC access",
                )))
            }
            "verifying" => Ok(Some(Step::waiting(
                self.options.poll_interval,
                "Ironic is verifying BMC access",
            ))),
            _ => {
                if memo.pending == Some(Pending::Manage) {
                    memo.pending = None;
                }
                Ok(None)
            }
        }
    }

    pub(super) async fn do_register(
        &self,
        host: &HostInfo,
        credentials_changed: bool,
    ) -> Inner<Step<Registration>> {
        let mut memo = self.memo(&host.key).await;
        let node = match self.get_node(host).await? {
            None => self.create(host, &mut memo, None).await?,
            Some(node) => {
                self.sync_driver_info(host, &mut memo, node, credentials_changed)
                    .await?
            }
        };
        if let Some(Step::Waiting {
            requeue_after,
            reason,
        }) = self.ensure_managed(host, &mut memo, &node).await?
        {
            return Ok(Step::Waiting {
                requeue_after,
                reason,
            });
        }
        if memo.phase == Phase::Unknown {
            memo.phase = Phase::Manageable;
        }
        Ok(Step::Done(Registration {
            provisioner_id: uuid(&node).to_string(),
            power: node::power_of(&node),
        }))
    }
}

fn fingerprint(v: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}
