//! Removing a node (detach and delete) without any tear-down.

use reqwest::Method;
use serde_json::{Value, json};

use super::client::ApiError;
use super::errors::{Context, Fail, Inner};
use super::node::uuid;
use super::provisioner::IronicProvisioner;
use crate::{HostInfo, Step};

impl IronicProvisioner {
    /// Removes the node without any tear-down: maintenance first, so Ironic neither cleans nor
    /// touches power, then delete.
    pub(super) async fn do_remove(&self, host: &HostInfo) -> Inner<Step> {
        let memo = self.memo(&host.key).await;
        let Some(node) = self.get_node(host).await? else {
            drop(memo);
            self.forget(&host.key);
            return Ok(Step::Done(()));
        };
        if node.get("maintenance").and_then(Value::as_bool) != Some(true) {
            self.client
                .call(
                    Method::PUT,
                    &format!("/v1/nodes/{}/maintenance", uuid(&node)),
                    Some(&json!({"reason": "removed from ferrometal"})),
                )
                .await
                .ctx(|| format!("maintenance on node {}", host.key))?;
        }
        match self
            .client
            .call(Method::DELETE, &format!("/v1/nodes/{}", uuid(&node)), None)
            .await
        {
            Ok(_) | Err(ApiError::NotFound) => {}
            Err(e) => return Err(Fail::Api(e, format!("deleting node {}", host.key))),
        }
        tracing::info!(host = %host.key, "ironic node deleted");
        drop(memo);
        self.forget(&host.key);
        Ok(Step::Done(()))
    }
}
