//! Requests about nodes that several verbs share: read a node, patch it, move its provision
//! state, make it available, write a deployment into it, count the busy ones.

use ferrometal_api::AutomatedCleaningMode;
use reqwest::Method;
use serde_json::{Value, json};

use super::client::ApiError;
use super::errors::{Context, Fail, Inner};
use super::memo::{Memo, Pending};
use super::node::{self, DeploySpec, is_busy, provision_state, str_of, uuid};
use super::provisioner::IronicProvisioner;
use crate::HostInfo;

impl IronicProvisioner {
    /// The node, or `None` when Ironic does not know it.
    pub(super) async fn get_node(&self, host: &HostInfo) -> Inner<Option<Value>> {
        match self.client.get(&Self::path(host)).await {
            Ok(node) => Ok(Some(node)),
            Err(ApiError::NotFound) => Ok(None),
            Err(e) => Err(Fail::Api(e, format!("reading node {}", host.key))),
        }
    }

    pub(super) async fn provision_action(
        &self,
        host: &HostInfo,
        node: &Value,
        target: &str,
        extra: Option<Value>,
    ) -> Inner<()> {
        let mut body = extra.unwrap_or_else(|| json!({}));
        body["target"] = json!(target);
        self.client
            .call(
                Method::PUT,
                &format!("/v1/nodes/{}/states/provision", uuid(node)),
                Some(&body),
            )
            .await
            .ctx(|| format!("{target} on node {}", host.key))?;
        tracing::debug!(host = %host.key, target, "ironic provision action issued");
        Ok(())
    }

    /// Asks Ironic to move the node's power to `target` ("power on", "power off", "soft power
    /// off", "rebooting", ...); Ironic carries it out in the background.
    pub(super) async fn power_action(
        &self,
        host: &HostInfo,
        node: &Value,
        target: &str,
    ) -> Inner<()> {
        self.client
            .call(
                Method::PUT,
                &format!("/v1/nodes/{}/states/power", uuid(node)),
                Some(&json!({"target": target})),
            )
            .await
            .ctx(|| format!("{target} on node {}", host.key))?;
        Ok(())
    }

    pub(super) async fn patch(
        &self,
        host: &HostInfo,
        node: &Value,
        ops: Vec<Value>,
    ) -> Inner<Value> {
        if ops.is_empty() {
            return Ok(node.clone());
        }
        let fields: Vec<String> = ops
            .iter()
            .filter_map(|o| o.get("path").and_then(Value::as_str).map(String::from))
            .collect();
        let answer = self
            .client
            .call(
                Method::PATCH,
                &format!("/v1/nodes/{}", uuid(node)),
                Some(&Value::Array(ops)),
            )
            .await
            .ctx(|| format!("updating {} of node {}", fields.join(", "), host.key))?;
        Ok(answer.unwrap_or_else(|| node.clone()))
    }

    pub(super) async fn provide(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        node: &Value,
    ) -> Inner<()> {
        let clean = host.automated_cleaning_mode != AutomatedCleaningMode::Disabled;
        if node.get("automated_clean").and_then(Value::as_bool) != Some(clean) {
            self.patch(
                host,
                node,
                vec![json!({"op": "add", "path": "/automated_clean", "value": clean})],
            )
            .await?;
        }
        self.provision_action(host, node, "provide", None).await?;
        memo.pending = Some(Pending::Provide);
        Ok(())
    }

    /// Writes instance_info and the deploy/boot interfaces a deployment needs.
    pub(super) async fn apply_deploy(
        &self,
        host: &HostInfo,
        node: &Value,
        spec: &DeploySpec,
    ) -> Inner<Value> {
        let mut ops =
            vec![json!({"op": "add", "path": "/instance_info", "value": spec.instance_info})];
        if !spec.deploy_interface.is_empty()
            && str_of(node, "deploy_interface") != spec.deploy_interface
        {
            ops.push(
                json!({"op": "add", "path": "/deploy_interface", "value": spec.deploy_interface}),
            );
        }
        if !spec.boot_interface.is_empty() && str_of(node, "boot_interface") != spec.boot_interface
        {
            ops.push(json!({"op": "add", "path": "/boot_interface", "value": spec.boot_interface}));
        }
        if let Some(hints) = &host.root_device_hints {
            ops.push(json!({"op": "add", "path": "/properties/root_device", "value": node::root_device(hints)}));
        }
        if let Some(caps) = node::boot_mode_capability(host.boot_mode) {
            ops.push(json!({"op": "add", "path": "/properties/capabilities", "value": caps}));
        }
        self.patch(host, node, ops).await
    }

    /// Nodes Ironic is busy with, counted over all pages.
    pub(super) async fn busy_nodes(&self) -> std::result::Result<usize, ApiError> {
        let nodes = self
            .client
            .list(
                "/v1/nodes?fields=uuid,provision_state",
                "nodes",
                self.options.page_size,
            )
            .await?;
        Ok(nodes.iter().filter(|n| is_busy(provision_state(n))).count())
    }
}
