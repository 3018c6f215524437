//! One reconcile of one claim: its finalizer first, then the provider that serves it (a
//! BareMetalHost, or a VM of a libvirt class) brings it in line, or takes down what served it
//! once the claim is deleted.

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::HostClaim;
use ferrometal_api::claim::HOSTCLAIM_FINALIZER;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::{ClaimContext, claims, key};
use super::provider;
use crate::error::{Error, conflict, jitter, not_found};
use crate::metrics::metrics;

pub fn error_policy(claim: Arc<HostClaim>, error: &Error, _ctx: Arc<ClaimContext>) -> Action {
    metrics().error("claim");
    tracing::warn!(claim = %key(&claim), error = %error, "claim reconcile failed");
    Action::requeue(Duration::from_secs(1) + jitter())
}

pub async fn reconcile(claim: Arc<HostClaim>, ctx: Arc<ClaimContext>) -> Result<Action, Error> {
    // Served by another cluster: the remote claim controller mirrors it there.
    if ferrometal_api::claim::is_remote(&claim) {
        return Ok(Action::await_change());
    }
    metrics().claim_reconciles.inc();
    let provider = provider::for_claim(&claim, &ctx);
    if claim.meta().deletion_timestamp.is_some() {
        return provider.release(&claim, &ctx).await;
    }
    if !claim.finalizers().iter().any(|f| f == HOSTCLAIM_FINALIZER) {
        let mut finalizers = claim.finalizers().to_vec();
        finalizers.push(HOSTCLAIM_FINALIZER.into());
        let patch = json!({"metadata": {"finalizers": finalizers,
            "resourceVersion": claim.resource_version()}});
        return match claims(&ctx, &claim)
            .patch(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            // The write wakes the claim again with the finalizer in place.
            Ok(_) => Ok(Action::await_change()),
            Err(e) if conflict(&e) => Ok(Action::requeue(jitter())),
            Err(e) if not_found(&e) => Ok(Action::await_change()),
            Err(e) => Err(e.into()),
        };
    }
    provider.reconcile(&claim, &ctx).await
}
