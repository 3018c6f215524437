//! Finding the claim's host, or binding one: the host named in its status, the one whose
//! consumerRef names it, the one this process just bound, or else an available host its
//! namespace may use (HostDeployPolicy, hostSelector, failure domain).

use std::collections::{BTreeMap, BTreeSet};

use ferrometal_api::{BareMetalHost, HostClaim};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use super::context::{ClaimContext, hosts, key};
use super::decide::{self, DataSync};
use super::select;
use crate::error::{Error, conflict, not_found};
use crate::events::event;
use crate::forwarding::{DataKind, is_paused};
use crate::metrics::metrics;

pub(super) enum Found {
    Bound(Box<BareMetalHost>),
    /// Bound by this process; the host cache has not shown it yet.
    Pending,
    Missing {
        detached: bool,
    },
    Nothing,
}

fn host_key(ns: &str, name: &str) -> ObjectRef<BareMetalHost> {
    ObjectRef::new(name).within(ns)
}

/// The host bound to the claim: the one named in its status, or (after a crash between binding
/// and writing status) the one whose consumerRef names it, or the one this process just bound.
pub(super) fn find_host(claim: &HostClaim, ctx: &ClaimContext) -> Found {
    let ns = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let k = key(claim);
    let bound = |h: &BareMetalHost| select::consumed_by(h, &ns, &name);
    if let Some(r) = claim
        .status
        .as_ref()
        .and_then(|s| s.bare_metal_host.as_ref())
    {
        match ctx.hosts.get(&host_key(&r.namespace, &r.name)) {
            Some(h) if bound(&h) => {
                ctx.set_pending(&k, None);
                if select::is_detached(&h) {
                    return Found::Missing { detached: true };
                }
                return Found::Bound(Box::new((*h).clone()));
            }
            // Bound by this process a moment ago: the cache has not caught up.
            Some(_) | None if ctx.pending(&k) == Some((r.namespace.clone(), r.name.clone())) => {
                return Found::Pending;
            }
            _ => return Found::Missing { detached: false },
        }
    }
    if let Some(h) = ctx.hosts.state().into_iter().find(|h| bound(h)) {
        ctx.set_pending(&k, None);
        return Found::Bound(Box::new((*h).clone()));
    }
    if ctx.pending(&k).is_some() {
        return Found::Pending;
    }
    Found::Nothing
}

pub(super) enum Bind {
    Bound(Box<BareMetalHost>),
    Retry,
    NoHost(String),
}

/// Chooses an available host and sets its consumerRef, guarded by its resourceVersion: of two
/// claims racing for one host, one gets a conflict and chooses again.
pub(super) async fn bind(claim: &HostClaim, ctx: &ClaimContext) -> Result<Bind, Error> {
    let k = key(claim);
    let claim_ns = claim.namespace().unwrap_or_default();
    let ns_labels: BTreeMap<String, String> = ctx
        .namespaces
        .get(&ObjectRef::new(&claim_ns))
        .map(|n| n.labels().clone())
        .unwrap_or_default();
    let mut admitted = BTreeSet::new();
    let mut policy_errors = Vec::new();
    for policy in ctx.policies.state() {
        let pns = policy.namespace().unwrap_or_default();
        match select::policy_admits(
            policy.spec.host_claim_namespaces.as_ref(),
            &claim_ns,
            &ns_labels,
        ) {
            Ok(true) => {
                admitted.insert(pns);
            }
            Ok(false) => {}
            Err(e) => policy_errors.push(format!("{pns}/{}: {e}", policy.name_any())),
        }
    }
    for e in &policy_errors {
        tracing::warn!(policy = %e, "HostDeployPolicy ignored");
    }
    if admitted.is_empty() {
        return Ok(Bind::NoHost(format!(
            "no HostDeployPolicy admits claims from namespace {claim_ns}"
        )));
    }
    let selector = match select::host_selector(&claim.spec.host_selector) {
        Ok(s) => s,
        Err(e) => return Ok(Bind::NoHost(e)),
    };
    let all = ctx.hosts.state();
    let candidates =
        select::candidates(all.iter().map(|h| h.as_ref()), &admitted, claim, &selector);
    let Some(host) = select::choose(&candidates, &claim.spec.failure_domain, |n| {
        (rand::random::<u64>() % n as u64) as usize
    }) else {
        return Ok(Bind::NoHost(
            "no available host matches the claim's hostSelector; waiting for one".into(),
        ));
    };
    let mut patch = json!({
        "metadata": {"resourceVersion": host.resource_version()},
        "spec": {"consumerRef": select::consumer_ref(claim)},
    });
    // Without data Secrets to copy first, the workload goes on in the same write: the host
    // controller then acts once, as for a host patched directly (no extra BMC request).
    let needs_copies = DataKind::ALL.iter().any(|k| k.source(claim).is_some());
    if !needs_copies
        && !is_paused(claim)
        && let Some(Value::Object(sync)) =
            decide::host_sync(claim, host, &DataSync::default(), None).patch
        && let Some(Value::Object(spec)) = sync.get("spec")
    {
        for (k, v) in spec {
            patch["spec"][k] = v.clone();
        }
    }
    match hosts(ctx, host)
        .patch(
            &host.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(h) => {
            ctx.set_pending(&k, Some((h.namespace().unwrap_or_default(), h.name_any())));
            metrics().claims_bound.inc();
            // The claim's own Event ("bound to host …") comes with its status write.
            ctx.events
                .publish_about(&h, &[event("Claimed", format!("bound to HostClaim {k}"))])
                .await;
            Ok(Bind::Bound(Box::new(h)))
        }
        // Another claim got it first (or the cache was stale): choose again.
        Err(e) if conflict(&e) || not_found(&e) => Ok(Bind::Retry),
        Err(e) => Err(e.into()),
    }
}
