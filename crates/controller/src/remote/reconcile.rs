//! One reconcile of one remote claim: pass its data and wishes to its mirror in the other
//! cluster, bring the mirror's status and HardwareData back; once deleted, delete the mirror
//! (which releases the host there) and its data, then let the claim go.

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::claim::conditions as c;
use ferrometal_api::claim::{
    HOSTCLAIM_FINALIZER, REMOTE_ID, REMOTE_KUBECONFIG, REMOTE_MIRROR_LABEL,
};
use ferrometal_api::{HardwareData, HostClaim, NamespacedRef};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::RemoteContext;
use super::decide::{self, Remote};
use super::link::Link;
use crate::conditions::now;
use crate::error::{Error, conflict, jitter, not_found};
use crate::events::{HostEvent, announce, event};
use crate::forwarding::{DataKind, is_paused};
use crate::hardware_data::{FIELD_MANAGER, write_hardware_copy};
use crate::metrics::metrics;

/// A settled claim is looked at again this often without any event (the remote watch wakes
/// it on every change of its mirror).
const RESYNC: Duration = Duration::from_secs(120);
/// While the remote cluster cannot be reached.
const RETRY: Duration = Duration::from_secs(5);
/// Everything one reconcile asks of the remote cluster ends within this.
const REMOTE_DEADLINE: Duration = Duration::from_secs(30);

pub fn error_policy(claim: Arc<HostClaim>, error: &Error, _ctx: Arc<RemoteContext>) -> Action {
    metrics().error("remote_claim");
    tracing::warn!(claim = %claim.name_any(), error = %error, "remote claim reconcile failed");
    Action::requeue(Duration::from_secs(1) + jitter())
}

/// The reason kube-rs gives an error answer that was not a Kubernetes Status.
const NOT_A_STATUS: &str = "Failed to parse error data";

/// A failure talking to the remote cluster: (condition reason, message).
///
/// A transport failure says no more than "cannot reach": whether a port refused, timed out
/// or spoke something else would make claims a port scanner for whoever writes the
/// kubeconfig. The detail goes to this process's log, for the cluster's administrators.
fn remote_failure(link: &Link, e: &kube::Error) -> (&'static str, String) {
    tracing::debug!(server = %link.server, error = %e, "remote cluster request failed");
    match e {
        // Only a Kubernetes Status is quoted: kube-rs turns any other error body into a
        // message, and that would let a kubeconfig read what an internal service answers.
        kube::Error::Api(s)
            if (400..500).contains(&s.code) && s.code != 429 && s.reason != NOT_A_STATUS =>
        {
            (
                c::REMOTE_REFUSED,
                format!(
                    "the remote cluster {} refused: {}",
                    link.server,
                    s.message.chars().take(300).collect::<String>()
                ),
            )
        }
        _ => (
            c::REMOTE_UNREACHABLE,
            format!("cannot reach the remote cluster {}", link.server),
        ),
    }
}

enum Step {
    Done(Action),
    Failed(&'static str, String),
}

pub async fn reconcile(claim: Arc<HostClaim>, ctx: Arc<RemoteContext>) -> Result<Action, Error> {
    if !ferrometal_api::claim::is_remote(&claim) {
        return Ok(Action::await_change());
    }
    metrics().claim_reconciles.inc();
    let ns = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let local: Api<HostClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let deleting = claim.meta().deletion_timestamp.is_some();
    let paused = is_paused(&claim);
    let held = claim.finalizers().iter().any(|f| f == HOSTCLAIM_FINALIZER);
    // A paused claim is hands off, as a paused host: deleting it touches nothing remote until
    // it is unpaused (a move takes its finalizer off and deletes it).
    if deleting && (!held || paused) {
        return Ok(Action::await_change());
    }
    if !deleting {
        // The finalizer and the shared identity first, in one write.
        let mut meta = serde_json::Map::new();
        if !held && !paused {
            let mut finalizers = claim.finalizers().to_vec();
            finalizers.push(HOSTCLAIM_FINALIZER.into());
            meta.insert("finalizers".into(), json!(finalizers));
        }
        if decide::remote_id(&claim).is_none() {
            meta.insert(
                "annotations".into(),
                json!({REMOTE_ID: claim.uid().unwrap_or_default()}),
            );
        }
        if !meta.is_empty() {
            meta.insert("resourceVersion".into(), json!(claim.resource_version()));
            return match local
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"metadata": meta})),
                )
                .await
            {
                Ok(_) => Ok(Action::await_change()),
                Err(e) if conflict(&e) => Ok(Action::requeue(jitter())),
                Err(e) if not_found(&e) => Ok(Action::await_change()),
                Err(e) => Err(e.into()),
            };
        }
    }
    let secret = claim.annotations()[REMOTE_KUBECONFIG].clone();
    let link = match ctx.links.get(&ctx.client, &ns, &secret, &ns).await {
        Ok(l) => l,
        // Deleting never depends on a broken remote: with nothing that can reach the other
        // cluster (the Secret gone, or a kubeconfig that cannot work until somebody changes
        // it), the claim is let go here, saying what may be left there.
        Err(e) if deleting => return abandon(&claim, &ctx, &e.to_string()).await,
        Err(e) => {
            return write_status(
                &claim,
                &ctx,
                Remote::Failed(c::REMOTE_KUBECONFIG_INVALID, e.to_string()),
                None,
                claim.status.as_ref().and_then(|s| s.hardware_data.clone()),
                Duration::from_secs(60),
            )
            .await;
        }
    };
    if deleting && deleting_for(&claim) > ABANDON_AFTER {
        // Unreachable or refusing for this long: released here, reported.
        let why = claim
            .status
            .as_ref()
            .and_then(|s| s.condition(c::SYNCHRONIZED))
            .map(|c| c.message.clone())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| format!("the remote cluster {} did not release it", link.server));
        return abandon(&claim, &ctx, &why).await;
    }
    let step = if deleting {
        tokio::time::timeout(REMOTE_DEADLINE, release(&claim, &ctx, &link)).await
    } else {
        tokio::time::timeout(REMOTE_DEADLINE, sync(&claim, &ctx, &link)).await
    };
    match step {
        Ok(Ok(Step::Done(a))) => Ok(a),
        Ok(Ok(Step::Failed(reason, msg))) => {
            // A link that is down is tried again soon; a refusal or a name clash needs
            // somebody to act, and any change of the claim or its Secrets wakes it.
            let again = if reason == c::REMOTE_UNREACHABLE {
                RETRY
            } else {
                Duration::from_secs(60)
            };
            write_status(
                &claim,
                &ctx,
                Remote::Failed(reason, msg),
                None,
                claim.status.as_ref().and_then(|s| s.hardware_data.clone()),
                again,
            )
            .await
        }
        Ok(Err(e)) => Err(e),
        Err(_) => {
            write_status(
                &claim,
                &ctx,
                Remote::Failed(
                    c::REMOTE_UNREACHABLE,
                    format!(
                        "the remote cluster {} did not answer within {} s",
                        link.server,
                        REMOTE_DEADLINE.as_secs()
                    ),
                ),
                None,
                claim.status.as_ref().and_then(|s| s.hardware_data.clone()),
                RETRY,
            )
            .await
        }
    }
}

/// How long a deleted claim waits for a remote cluster that cannot release its mirror
/// (unreachable, refusing) before it is let go here anyway.
const ABANDON_AFTER: Duration = Duration::from_secs(300);

fn deleting_for(claim: &HostClaim) -> Duration {
    claim
        .meta()
        .deletion_timestamp
        .as_ref()
        .map(|t| {
            let secs = jiff::Timestamp::now().as_second() - t.0.as_second();
            Duration::from_secs(secs.max(0) as u64)
        })
        .unwrap_or_default()
}

/// Lets a deleted claim go without the remote cluster, with a Warning naming why and what
/// may be left there.
async fn abandon(claim: &HostClaim, ctx: &RemoteContext, why: &str) -> Result<Action, Error> {
    let note = format!(
        "{why}: released here without the remote cluster; its mirror there, if any, was not deleted"
    );
    ctx.events
        .publish_about(claim, &[warning("RemoteClaimAbandoned", note)])
        .await;
    finalize(claim, ctx).await
}

fn warning(reason: &str, note: String) -> HostEvent {
    HostEvent {
        warning: true,
        reason: reason.into(),
        note,
    }
}

/// Runs `$call` against the remote cluster; a failure there ends the step with its reason.
macro_rules! remote {
    ($link:expr, $call:expr) => {
        match $call.await {
            Ok(v) => v,
            Err(e) => {
                let (reason, msg) = remote_failure($link, &e);
                return Ok(Step::Failed(reason, msg));
            }
        }
    };
}

/// The mirror, when it is this claim's; a mirror with another identity is a conflict.
async fn read_mirror(
    claim: &HostClaim,
    link: &Link,
) -> Result<Result<Option<HostClaim>, (&'static str, String)>, kube::Error> {
    let mirrors: Api<HostClaim> = Api::namespaced(link.client.clone(), &link.namespace);
    let m = mirrors.get_opt(&claim.name_any()).await?;
    if let Some(m) = &m
        && m.annotations().get(REMOTE_ID) != decide::remote_id(claim)
    {
        return Ok(Err((
            c::REMOTE_CLAIM_CONFLICT,
            format!(
                "the remote cluster {} has a HostClaim {:?} in namespace {:?} that is not this claim's mirror; rename one of them",
                link.server,
                claim.name_any(),
                link.namespace
            ),
        )));
    }
    Ok(Ok(m))
}

async fn sync(claim: &HostClaim, ctx: &RemoteContext, link: &Link) -> Result<Step, Error> {
    let name = claim.name_any();
    let ns = claim.namespace().unwrap_or_default();
    let mirrors: Api<HostClaim> = Api::namespaced(link.client.clone(), &link.namespace);
    let mirror = match remote!(link, read_mirror(claim, link)) {
        Ok(m) => m,
        Err((reason, msg)) => return Ok(Step::Failed(reason, msg)),
    };
    let paused = is_paused(claim);
    // Data first, so the mirror never names a Secret that is not there yet.
    let mut data_error = None;
    let mut copied = Vec::new();
    if !paused {
        let remote_secrets: Api<Secret> = Api::namespaced(link.client.clone(), &link.namespace);
        for kind in DataKind::ALL {
            let Some((src_ns, src_name)) = kind.source(claim) else {
                continue;
            };
            if src_ns != ns {
                data_error = Some((
                    kind,
                    format!(
                        "spec.{}.namespace {src_ns:?} must be the claim's namespace {ns:?}",
                        kind.field()
                    ),
                ));
                break;
            }
            let Some(source) = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
                .get_opt(&src_name)
                .await?
            else {
                data_error = Some((
                    kind,
                    format!("spec.{}: Secret {src_name:?} not found", kind.field()),
                ));
                break;
            };
            let copy_name = decide::data_copy_name(&name, kind);
            let existing = remote!(link, remote_secrets.get_opt(&copy_name));
            if let Some(e) = &existing
                && e.labels().get(REMOTE_MIRROR_LABEL) != Some(&name)
            {
                data_error = Some((
                    kind,
                    format!(
                        "spec.{}: the remote cluster has a Secret {copy_name:?} this claim does not manage",
                        kind.field()
                    ),
                ));
                break;
            }
            let same = existing
                .as_ref()
                .is_some_and(|e| e.data == source.data && e.type_ == source.type_);
            if !same {
                let copy = json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": copy_name, "namespace": link.namespace,
                        "labels": {REMOTE_MIRROR_LABEL: name}},
                    "type": source.type_,
                    "data": source.data.clone().unwrap_or_default(),
                });
                remote!(
                    link,
                    remote_secrets.patch(
                        &copy_name,
                        &PatchParams::apply(FIELD_MANAGER).force(),
                        &Patch::Apply(&copy),
                    )
                );
            }
            copied.push(kind);
        }
    }
    if paused {
        // A paused claim passes on its pause and nothing else (a pivot pauses it).
        let want = claim.annotations().get(ferrometal_api::annotations::PAUSED);
        if let Some(m) = &mirror
            && m.annotations().get(ferrometal_api::annotations::PAUSED) != want
        {
            let patch = json!({"metadata": {"annotations": {
                ferrometal_api::annotations::PAUSED: want}}});
            remote!(
                link,
                mirrors.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            );
        }
        let action = write_status(
            claim,
            ctx,
            Remote::Reached(mirror.as_ref()),
            None,
            claim.status.as_ref().and_then(|s| s.hardware_data.clone()),
            RESYNC,
        )
        .await?;
        return Ok(Step::Done(action));
    }
    // Data not yet passed on holds the spec back (the mirror keeps the last complete one).
    let mut want = claim.clone();
    if data_error.is_some()
        && let Some(m) = &mirror
    {
        want.spec = m.spec.clone();
    }
    if decide::mirror_gone(claim, mirror.as_ref()) {
        let msg = format!(
            "the claim's mirror in the remote cluster {} is gone, and with it the host; \
             delete this claim and create it again to claim another",
            link.server
        );
        let action = write_status(claim, ctx, Remote::MirrorGone(msg), None, None, RESYNC).await?;
        return Ok(Step::Done(action));
    }
    let plan = decide::mirror_sync(&want, mirror.as_ref(), &link.namespace);
    let mut mirror_now = mirror.clone();
    if data_error.is_some() && mirror.is_none() {
        // Nothing to create from yet.
    } else if let Some(body) = &plan.create {
        let m: HostClaim = serde_json::from_value(body.clone())?;
        let created = remote!(link, mirrors.create(&PostParams::default(), &m));
        ctx.events
            .publish_about(
                claim,
                &[event(
                    "RemoteClaimCreated",
                    format!("mirrored to {} namespace {}", link.server, link.namespace),
                )],
            )
            .await;
        mirror_now = Some(created);
    } else if let Some(patch) = &plan.patch {
        let patched = remote!(
            link,
            mirrors.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        );
        mirror_now = Some(patched);
    }
    if data_error.is_none() && !plan.remove_from_claim.is_empty() {
        let removals: serde_json::Map<String, Value> = plan
            .remove_from_claim
            .iter()
            .map(|k| (k.clone(), Value::Null))
            .collect();
        Api::<HostClaim>::namespaced(ctx.client.clone(), &ns)
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"annotations": removals}})),
            )
            .await?;
        ctx.events
            .publish_about(
                claim,
                &[event(
                    "ActionForwarded",
                    format!(
                        "{} passed to the remote cluster",
                        plan.remove_from_claim.join(", ")
                    ),
                )],
            )
            .await;
    }
    if data_error.is_none() {
        // The mirror no longer names the copies of kinds the claim dropped.
        let remote_secrets: Api<Secret> = Api::namespaced(link.client.clone(), &link.namespace);
        let listed = remote!(
            link,
            remote_secrets
                .list(&ListParams::default().labels(&format!("{REMOTE_MIRROR_LABEL}={name}")))
        );
        for s in listed {
            let keep = copied
                .iter()
                .any(|k| decide::data_copy_name(&name, *k) == s.name_any());
            if !keep {
                remote!(link, delete_secret(&remote_secrets, &s));
            }
        }
    }
    let hardware_data = match &mirror_now {
        Some(m) => remote!(link, copy_hardware_data(claim, m, ctx, link)),
        None => None,
    };
    let step = write_status(
        claim,
        ctx,
        Remote::Reached(mirror_now.as_ref()),
        data_error,
        hardware_data,
        RESYNC,
    )
    .await?;
    Ok(Step::Done(step))
}

async fn delete_secret(api: &Api<Secret>, s: &Secret) -> Result<(), kube::Error> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: s.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&s.name_any(), &dp).await {
        Ok(_) => Ok(()),
        Err(e) if not_found(&e) || conflict(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Copies the mirror's HardwareData into the claim's namespace, named after the claim and
/// owned by it, as for a local claim.
async fn copy_hardware_data(
    claim: &HostClaim,
    mirror: &HostClaim,
    ctx: &RemoteContext,
    link: &Link,
) -> Result<Option<NamespacedRef>, kube::Error> {
    let ns = claim.namespace().unwrap_or_default();
    let Some(r) = mirror.status.as_ref().and_then(|s| s.hardware_data.clone()) else {
        return Ok(claim.status.as_ref().and_then(|s| s.hardware_data.clone()));
    };
    let Some(source) = Api::<HardwareData>::namespaced(link.client.clone(), &link.namespace)
        .get_opt(&r.name)
        .await?
    else {
        return Ok(claim.status.as_ref().and_then(|s| s.hardware_data.clone()));
    };
    let existing = Api::<HardwareData>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&claim.name_any())
        .await?;
    if existing.as_ref().map(|e| &e.spec) != Some(&source.spec) {
        write_hardware_copy(&ctx.client, claim, &source.spec).await?;
    }
    Ok(Some(NamespacedRef {
        namespace: ns,
        name: claim.name_any(),
    }))
}

/// Deleted claim: delete the mirror (the remote cluster releases its host), wait until it is
/// gone, delete the data copies there, then let the claim go.
async fn release(claim: &HostClaim, ctx: &RemoteContext, link: &Link) -> Result<Step, Error> {
    let mirrors: Api<HostClaim> = Api::namespaced(link.client.clone(), &link.namespace);
    // Somebody else's claim of that name is never ours to delete.
    let mirror = remote!(link, read_mirror(claim, link)).unwrap_or_default();
    if let Some(m) = &mirror {
        if m.meta().deletion_timestamp.is_none() {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: m.uid(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match mirrors.delete(&m.name_any(), &dp).await {
                Ok(_) => {}
                Err(e) if not_found(&e) || conflict(&e) => {}
                Err(e) => {
                    let (reason, msg) = remote_failure(link, &e);
                    return Ok(Step::Failed(reason, msg));
                }
            }
        }
        let action = write_status(
            claim,
            ctx,
            Remote::Reached(Some(m)),
            None,
            claim.status.as_ref().and_then(|s| s.hardware_data.clone()),
            Duration::from_secs(2),
        )
        .await?;
        return Ok(Step::Done(action));
    }
    let remote_secrets: Api<Secret> = Api::namespaced(link.client.clone(), &link.namespace);
    let listed = remote!(
        link,
        remote_secrets.list(
            &ListParams::default().labels(&format!("{REMOTE_MIRROR_LABEL}={}", claim.name_any()))
        )
    );
    for s in listed {
        remote!(link, delete_secret(&remote_secrets, &s));
    }
    ctx.events
        .publish_about(
            claim,
            &[event(
                "RemoteClaimReleased",
                "the mirror in the remote cluster is gone",
            )],
        )
        .await;
    Ok(Step::Done(finalize(claim, ctx).await?))
}

async fn finalize(claim: &HostClaim, ctx: &RemoteContext) -> Result<Action, Error> {
    let finalizers: Vec<_> = claim
        .finalizers()
        .iter()
        .filter(|f| *f != HOSTCLAIM_FINALIZER)
        .cloned()
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers,
        "resourceVersion": claim.resource_version()}});
    match Api::<HostClaim>::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default())
        .patch(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if not_found(&e) => Ok(Action::await_change()),
        Err(e) if conflict(&e) => Ok(Action::requeue(jitter())),
        Err(e) => Err(e.into()),
    }
}

async fn write_status(
    claim: &HostClaim,
    ctx: &RemoteContext,
    remote: Remote<'_>,
    data_error: Option<(DataKind, String)>,
    hardware_data: Option<NamespacedRef>,
    requeue: Duration,
) -> Result<Action, Error> {
    let old = claim.status.clone().unwrap_or_default();
    let new = decide::status(claim, remote, data_error, hardware_data, &now());
    if new != old {
        announce(claim, &old, &new, &ctx.events).await;
        let mut body = serde_json::to_value(&new)?;
        if let Some(m) = body.as_object_mut() {
            for field in ["bareMetalHost", "hardwareData", "conditions", "lastUpdated"] {
                m.entry(field).or_insert(Value::Null);
            }
            m.insert("poweredOn".into(), new.powered_on.into());
        }
        match Api::<HostClaim>::namespaced(
            ctx.client.clone(),
            &claim.namespace().unwrap_or_default(),
        )
        .patch_status(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": body })),
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
