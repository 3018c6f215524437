//! Releasing the host of a deleted claim, step by step: take the workload off, wait for
//! deprovisioning, delete the data copies, free the host, then let the claim go.

use std::time::Duration;

use ferrometal_api::claim::HOSTCLAIM_FINALIZER;
use ferrometal_api::{BareMetalHost, HostClaim};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::context::{ClaimContext, claims, hosts, key};
use super::copies::delete_copies;
use super::decide::{self, Binding, DataSync, Release, StatusInput};
use super::select;
use super::status::write_status;
use crate::conditions::now;
use crate::error::{Error, conflict, jitter, not_found};
use crate::events::event;

/// Releasing waits on the host's deprovisioning; its events wake the claim too.
const RELEASE_POLL: Duration = Duration::from_secs(5);

/// A merge patch to a host; `None` when the host is gone.
async fn patch_host(
    ctx: &ClaimContext,
    host: &BareMetalHost,
    patch: &Value,
) -> Result<Option<BareMetalHost>, Error> {
    match hosts(ctx, host)
        .patch(
            &host.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(h) => Ok(Some(h)),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Deleted claim: take the workload off the host, delete the copies, free the host once it is
/// available again, then let the claim go.
pub(super) async fn release(claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
    if !claim.finalizers().iter().any(|f| f == HOSTCLAIM_FINALIZER) {
        return Ok(Action::await_change());
    }
    let k = key(claim);
    let ns = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    // Every host this claim holds (normally one), from the cache; the writes below are guarded.
    let held: Vec<BareMetalHost> = ctx
        .hosts
        .state()
        .iter()
        .filter(|h| select::consumed_by(h, &ns, &name))
        .map(|h| (**h).clone())
        .collect();
    if held.is_empty() && ctx.pending(&k).is_some() {
        // Bound a moment ago and not in the cache yet: release it once it shows.
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    for host in &held {
        let step = decide::release(host);
        if let Release::Deprovision(patch) | Release::Free(patch) = &step {
            patch_host(ctx, host, patch).await?;
        }
        // Once the host no longer references them (the patch above), at every step.
        delete_copies(
            claim,
            &host.namespace().unwrap_or_default(),
            &host.name_any(),
            &[],
            ctx,
        )
        .await?;
        match step {
            Release::Deprovision(_) => {
                let note = format!("HostClaim {k} deleted: deprovisioning");
                ctx.events
                    .publish_about(host, &[event("ClaimReleasing", note)])
                    .await;
                return deleting_status(claim, ctx, host, "deprovisioning the host").await;
            }
            Release::Wait(msg) => return deleting_status(claim, ctx, host, &msg).await,
            Release::Free(_) => {
                let note = format!("HostClaim {k} released the host");
                ctx.events
                    .publish_about(host, &[event("Released", note)])
                    .await;
            }
            Release::Done => {}
        }
    }
    // The host named in status may be gone: its copies still go.
    if let Some(r) = claim
        .status
        .as_ref()
        .and_then(|s| s.bare_metal_host.as_ref())
    {
        delete_copies(claim, &r.namespace, &r.name, &[], ctx).await?;
    }
    let_go(claim, ctx).await
}

/// Nothing of the claim is left anywhere: its finalizer goes, and with it the claim.
pub(super) async fn let_go(claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
    let k = key(claim);
    let name = claim.name_any();
    let finalizers: Vec<_> = claim
        .finalizers()
        .iter()
        .filter(|f| *f != HOSTCLAIM_FINALIZER)
        .cloned()
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers,
        "resourceVersion": claim.resource_version()}});
    match claims(ctx, claim)
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(e) if not_found(&e) => {}
        Err(e) if conflict(&e) => return Ok(Action::requeue(jitter())),
        Err(e) => return Err(e.into()),
    }
    ctx.set_pending(&k, None);
    ctx.set_forwarded(&k, None);
    Ok(Action::await_change())
}

async fn deleting_status(
    claim: &HostClaim,
    ctx: &ClaimContext,
    host: &BareMetalHost,
    msg: &str,
) -> Result<Action, Error> {
    let data = DataSync::default();
    write_status(
        claim,
        ctx,
        StatusInput {
            claim,
            binding: Binding::Bound(host),
            no_host: "",
            data: &data,
            sync_error: None,
            deleting: Some(msg),
            hardware_data: claim.status.as_ref().and_then(|s| s.hardware_data.clone()),
            now: &now(),
        },
        RELEASE_POLL,
    )
    .await
}
