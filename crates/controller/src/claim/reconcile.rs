//! One reconcile of one claim: find or bind its host, copy its data, bring the host in line,
//! report back; or, once deleted, release the host step by step.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::claim::HOSTCLAIM_FINALIZER;
use ferrometal_api::{BareMetalHost, HostClaim, NamespacedRef};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::ClaimContext;
use crate::claim::decide::{
    self, Binding, COPY_LABEL, COPY_NAME_LABEL, DataSync, Release, StatusInput,
};
use crate::claim::select;
use crate::conditions::now;
use crate::error::{Error, conflict, jitter, not_found};
use crate::events::{announce, event};
use crate::forwarding::{DataKind, is_paused};
use crate::hardware_data::{FIELD_MANAGER, write_hardware_copy};
use crate::metrics::metrics;

/// How often a settled claim is looked at again without any event (metal3 requeues unbound
/// claims every 30 s).
const RESYNC: Duration = Duration::from_secs(300);
const UNBOUND_RETRY: Duration = Duration::from_secs(30);
/// Releasing waits on the host's deprovisioning; its events wake the claim too.
const RELEASE_POLL: Duration = Duration::from_secs(5);

fn key(claim: &HostClaim) -> String {
    format!(
        "{}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    )
}

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
    if claim.meta().deletion_timestamp.is_some() {
        return release(&claim, &ctx).await;
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
    let (binding, no_host) = match find_host(&claim, &ctx) {
        Found::Bound(h) => (Some(*h), String::new()),
        Found::Missing { detached } => {
            let data = DataSync::default();
            return write_status(
                &claim,
                &ctx,
                StatusInput {
                    claim: &claim,
                    binding: Binding::Missing { detached },
                    no_host: "",
                    data: &data,
                    sync_error: None,
                    deleting: None,
                    hardware_data: claim.status.as_ref().and_then(|s| s.hardware_data.clone()),
                    now: &now(),
                },
                RESYNC,
            )
            .await;
        }
        Found::Pending => return Ok(Action::requeue(Duration::from_millis(100))),
        Found::Nothing => match bind(&claim, &ctx).await? {
            Bind::Bound(h) => (Some(*h), String::new()),
            Bind::Retry => return Ok(Action::requeue(jitter())),
            Bind::NoHost(why) => (None, why),
        },
    };
    let Some(host) = binding else {
        let data = DataSync::default();
        return write_status(
            &claim,
            &ctx,
            StatusInput {
                claim: &claim,
                binding: Binding::None,
                no_host: &no_host,
                data: &data,
                sync_error: None,
                deleting: None,
                hardware_data: None,
                now: &now(),
            },
            UNBOUND_RETRY,
        )
        .await;
    };
    let data = if is_paused(&claim) {
        DataSync::default()
    } else {
        copy_data(&claim, &host, &ctx).await?
    };
    let k = key(&claim);
    let sync = decide::host_sync(&claim, &host, &data, ctx.forwarded(&k).as_deref());
    let mut sync_error = None;
    let mut host_now = host.clone();
    if let Some(patch) = &sync.patch {
        match hosts(&ctx, &host)
            .patch(
                &host.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(h) => {
                if let Some(t) = patch.pointer(&format!(
                    "/metadata/annotations/{}",
                    decide::FORWARDED.replace('/', "~1")
                )) {
                    ctx.set_forwarded(&k, t.as_str().map(str::to_string));
                }
                host_now = h;
                let notes = describe_sync(patch);
                if !notes.is_empty() {
                    ctx.events
                        .publish_about(&host, &[event("ClaimSynchronized", notes)])
                        .await;
                }
            }
            Err(e) if not_found(&e) => return Ok(Action::requeue(jitter())),
            Err(e) => {
                tracing::warn!(claim = %key(&claim), error = %e, "updating the claimed host failed");
                sync_error = Some("the host could not be updated; retrying".to_string());
            }
        }
    }
    if sync_error.is_none() && !sync.remove_from_claim.is_empty() {
        let removals: serde_json::Map<String, Value> = sync
            .remove_from_claim
            .iter()
            .map(|k| (k.clone(), Value::Null))
            .collect();
        let patch = json!({"metadata": {"annotations": removals}});
        claims(&ctx, &claim)
            .patch(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        ctx.events
            .publish_about(
                claim.as_ref(),
                &[event(
                    "ActionForwarded",
                    format!("{} passed to the host", sync.remove_from_claim.join(", ")),
                )],
            )
            .await;
    }
    if !is_paused(&claim) {
        delete_stale_copies(&claim, &host_now, &data, &ctx).await?;
    }
    let hardware_data = copy_hardware_data(&claim, &host_now, &ctx).await?;
    write_status(
        &claim,
        &ctx,
        StatusInput {
            claim: &claim,
            binding: Binding::Bound(&host_now),
            no_host: "",
            data: &data,
            sync_error: sync_error.as_deref(),
            deleting: None,
            hardware_data,
            now: &now(),
        },
        if sync_error.is_some() {
            Duration::from_secs(2)
        } else {
            RESYNC
        },
    )
    .await
}

fn claims(ctx: &ClaimContext, claim: &HostClaim) -> Api<HostClaim> {
    Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default())
}

fn hosts(ctx: &ClaimContext, host: &BareMetalHost) -> Api<BareMetalHost> {
    Api::namespaced(ctx.client.clone(), &host.namespace().unwrap_or_default())
}

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

/// What an Event on the host says about a sync (keys only: values may be tenant data).
fn describe_sync(patch: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(spec) = patch.get("spec").and_then(Value::as_object) {
        for (k, v) in spec {
            match k.as_str() {
                "online" => parts.push(format!("online={v}")),
                "image" if v.is_null() => parts.push("image removed".into()),
                "image" => parts.push(format!(
                    "image {}",
                    v.get("url").and_then(Value::as_str).unwrap_or("")
                )),
                other => parts.push(format!("{other} updated")),
            }
        }
    }
    if let Some(a) = patch
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for (k, v) in a {
            if k == decide::FORWARDED || k == decide::MIRRORED_REBOOTS {
                continue;
            }
            parts.push(if v.is_null() {
                format!("{k} removed")
            } else {
                format!("{k} set")
            });
        }
    }
    parts.join(", ")
}

enum Found {
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
fn find_host(claim: &HostClaim, ctx: &ClaimContext) -> Found {
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

enum Bind {
    Bound(Box<BareMetalHost>),
    Retry,
    NoHost(String),
}

/// Chooses an available host and sets its consumerRef, guarded by its resourceVersion: of two
/// claims racing for one host, one gets a conflict and chooses again.
async fn bind(claim: &HostClaim, ctx: &ClaimContext) -> Result<Bind, Error> {
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
            ctx.events
                .publish_about(&h, &[event("Claimed", format!("bound to HostClaim {k}"))])
                .await;
            ctx.events
                .publish_about(
                    claim,
                    &[event(
                        "BareMetalHostAssociated",
                        format!("bound to host {}", h.name_any()),
                    )],
                )
                .await;
            Ok(Bind::Bound(Box::new(h)))
        }
        // Another claim got it first (or the cache was stale): choose again.
        Err(e) if conflict(&e) || not_found(&e) => Ok(Bind::Retry),
        Err(e) => Err(e.into()),
    }
}

/// Copies the claim's data Secrets into the host's namespace as `<host>-userdata` etc.
async fn copy_data(
    claim: &HostClaim,
    host: &BareMetalHost,
    ctx: &ClaimContext,
) -> Result<DataSync, Error> {
    let claim_ns = claim.namespace().unwrap_or_default();
    let host_ns = host.namespace().unwrap_or_default();
    let mut out = DataSync::default();
    for kind in DataKind::ALL {
        let Some((src_ns, src_name)) = kind.source(claim) else {
            continue;
        };
        if src_ns != claim_ns {
            // The controller can read every Secret; a claim must never make it copy one from
            // another namespace (say, BMC credentials) onto a tenant's disk.
            out.failed = Some((
                kind,
                format!(
                    "spec.{}.namespace {src_ns:?} must be the claim's namespace {claim_ns:?}",
                    kind.field()
                ),
            ));
            break;
        }
        let source = match Api::<Secret>::namespaced(ctx.client.clone(), &claim_ns)
            .get_opt(&src_name)
            .await?
        {
            Some(s) => s,
            None => {
                out.failed = Some((
                    kind,
                    format!("spec.{}: Secret {src_name:?} not found", kind.field()),
                ));
                break;
            }
        };
        let copy_name = kind.copy_name(&host.name_any());
        let copies: Api<Secret> = Api::namespaced(ctx.client.clone(), &host_ns);
        let existing = copies.get_opt(&copy_name).await?;
        if let Some(e) = &existing
            && !is_copy_of(e, claim)
        {
            out.failed = Some((
                kind,
                format!(
                    "spec.{}: the host's {} Secret is not managed by this claim",
                    kind.field(),
                    kind.field()
                ),
            ));
            break;
        }
        let same = existing.as_ref().is_some_and(|e| {
            e.data == source.data && e.string_data.is_none() && e.type_ == source.type_
        });
        if !same {
            let mut labels = BTreeMap::new();
            labels.insert(COPY_LABEL.to_string(), claim_ns.clone());
            labels.insert(COPY_NAME_LABEL.to_string(), claim.name_any());
            let copy = json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": copy_name, "namespace": host_ns, "labels": labels},
                "type": source.type_,
                "data": source.data.clone().unwrap_or_default(),
            });
            copies
                .patch(
                    &copy_name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&copy),
                )
                .await?;
        }
        out.copied.push(kind);
    }
    Ok(out)
}

fn is_copy_of(secret: &Secret, claim: &HostClaim) -> bool {
    let l = secret.labels();
    l.get(COPY_LABEL) == claim.namespace().as_ref()
        && l.get(COPY_NAME_LABEL) == Some(&claim.name_any())
}

/// Deletes this claim's copies the host no longer uses (all of them when `keep` is empty).
async fn delete_copies(
    claim: &HostClaim,
    host_ns: &str,
    host_name: &str,
    keep: &[DataKind],
    ctx: &ClaimContext,
) -> Result<(), Error> {
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), host_ns);
    for kind in DataKind::ALL {
        if keep.contains(&kind) {
            continue;
        }
        let name = kind.copy_name(host_name);
        if let Some(s) = api.get_opt(&name).await?
            && is_copy_of(&s, claim)
        {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: s.uid(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &dp).await {
                Ok(_) => {}
                Err(e) if not_found(&e) || conflict(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

async fn delete_stale_copies(
    claim: &HostClaim,
    host: &BareMetalHost,
    data: &DataSync,
    ctx: &ClaimContext,
) -> Result<(), Error> {
    if data.failed.is_some() {
        return Ok(());
    }
    // Only kinds neither copied now nor still referenced by the host can go.
    let referenced: Vec<DataKind> = DataKind::ALL
        .into_iter()
        .filter(|k| {
            data.copied.contains(k)
                || match k {
                    DataKind::UserData => host.spec.user_data.is_some(),
                    DataKind::NetworkData => host.spec.network_data.is_some(),
                    DataKind::MetaData => host.spec.meta_data.is_some(),
                }
        })
        .collect();
    if referenced.len() == DataKind::ALL.len() {
        return Ok(());
    }
    delete_copies(
        claim,
        &host.namespace().unwrap_or_default(),
        &host.name_any(),
        &referenced,
        ctx,
    )
    .await
}

/// Copies the host's HardwareData into the claim's namespace, named after the claim and owned
/// by it, so the tenant reads inspection data without access to the hosts' namespace.
async fn copy_hardware_data(
    claim: &HostClaim,
    host: &BareMetalHost,
    ctx: &ClaimContext,
) -> Result<Option<NamespacedRef>, Error> {
    let claim_ns = claim.namespace().unwrap_or_default();
    let source = ctx
        .hardware
        .get(&ObjectRef::new(&host.name_any()).within(&host.namespace().unwrap_or_default()));
    let Some(source) = source else {
        return Ok(claim.status.as_ref().and_then(|s| s.hardware_data.clone()));
    };
    let existing = ctx
        .hardware
        .get(&ObjectRef::new(&claim.name_any()).within(&claim_ns));
    if existing.as_ref().map(|e| &e.spec) != Some(&source.spec) {
        write_hardware_copy(&ctx.client, claim, &source.spec).await?;
    }
    Ok(Some(NamespacedRef {
        namespace: claim_ns,
        name: claim.name_any(),
    }))
}

async fn write_status(
    claim: &HostClaim,
    ctx: &ClaimContext,
    input: StatusInput<'_>,
    requeue: Duration,
) -> Result<Action, Error> {
    let old = claim.status.clone().unwrap_or_default();
    let new = decide::status(input);
    if new != old {
        announce(claim, &old, &new, &ctx.events).await;
        // A merge patch: fields the new status leaves out must be cleared explicitly.
        let mut body = serde_json::to_value(&new)?;
        if let Some(m) = body.as_object_mut() {
            for field in ["bareMetalHost", "hardwareData", "conditions"] {
                m.entry(field).or_insert(Value::Null);
            }
            m.insert("poweredOn".into(), new.powered_on.into());
        }
        let patch = json!({ "status": body });
        match claims(ctx, claim)
            .patch_status(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Action::requeue(requeue))
}

/// Deleted claim: take the workload off the host, delete the copies, free the host once it is
/// available again, then let the claim go.
async fn release(claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
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
