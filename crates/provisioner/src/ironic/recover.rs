//! Bringing back a node Ironic no longer has (it lost its database, or someone deleted the
//! node): registered again and taken back to the phase this process knew.

use serde_json::Value;

use super::errors::Inner;
use super::memo::{Memo, Pending, Phase};
use super::node::{is_busy, provision_state};
use super::provisioner::IronicProvisioner;
use crate::HostInfo;

impl IronicProvisioner {
    /// Brings a vanished node back (Ironic lost its database, or someone deleted it): created
    /// again, verified, then taken to the phase this process knew, an active one by adoption.
    /// `Some(node)` once the node is usable for power calls.
    async fn heal(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        node: Option<Value>,
    ) -> Inner<Option<Value>> {
        let active = match &memo.phase {
            Phase::Active(spec) => Some(spec.clone()),
            _ => None,
        };
        let Some(node) = node else {
            tracing::warn!(host = %host.key, "node missing from Ironic; registering it again");
            self.create(host, memo, active.as_ref()).await?;
            return Ok(None);
        };
        if self.ensure_managed(host, memo, &node).await?.is_some() {
            return Ok(None);
        }
        let state = provision_state(&node);
        match (&memo.phase, state) {
            (Phase::Active(spec), "manageable") => {
                let node = self.apply_deploy(host, &node, spec).await?;
                self.provision_action(host, &node, "adopt", None).await?;
                memo.pending = Some(Pending::Adopt);
                Ok(None)
            }
            (Phase::Active(_), "adopting") => Ok(None),
            (Phase::Available, "manageable") => {
                self.provide(host, memo, &node).await?;
                Ok(None)
            }
            (Phase::Available, "cleaning" | "clean wait") => Ok(None),
            _ => {
                if matches!(memo.pending, Some(Pending::Adopt | Pending::Provide))
                    && !is_busy(state)
                {
                    memo.pending = None;
                }
                Ok(Some(node))
            }
        }
    }

    /// The node for a power call, healing it first when it vanished.
    pub(super) async fn steady(&self, host: &HostInfo, memo: &mut Memo) -> Inner<Option<Value>> {
        let node = self.get_node(host).await?;
        self.heal(host, memo, node).await
    }

    /// The node for a lifecycle call; a vanished one is created again (`None` this time).
    pub(super) async fn require(&self, host: &HostInfo, memo: &mut Memo) -> Inner<Option<Value>> {
        match self.get_node(host).await? {
            Some(n) => Ok(Some(n)),
            None => {
                tracing::warn!(host = %host.key, "node missing from Ironic; registering it again");
                let active = match &memo.phase {
                    Phase::Active(spec) => Some(spec.clone()),
                    _ => None,
                };
                self.create(host, memo, active.as_ref()).await?;
                Ok(None)
            }
        }
    }
}
