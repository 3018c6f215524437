//! A claim served by a BareMetalHost: find or bind its host, copy its data next to the host,
//! bring the host in line with the claim, and report the host's progress back.

use std::time::Duration;

use ferrometal_api::HostClaim;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::bind::{Bind, Found, bind, find_host};
use super::context::{ClaimContext, claims, hosts, key};
use super::copies::{copy_data, copy_hardware_data, delete_stale_copies};
use super::decide::{self, Binding, DataSync, StatusInput};
use super::status::write_status;
use crate::conditions::now;
use crate::error::{Error, jitter, not_found};
use crate::events::event;
use crate::forwarding::is_paused;

/// How often a settled claim is looked at again without any event (metal3 requeues unbound
/// claims every 30 s).
const RESYNC: Duration = Duration::from_secs(300);
const UNBOUND_RETRY: Duration = Duration::from_secs(30);

/// A claim served by a BareMetalHost: bind one (or find the one bound), pass the claim's
/// data and wishes on to it, and report its progress.
pub(super) async fn bare_metal(claim: &HostClaim, ctx: &ClaimContext) -> Result<Action, Error> {
    let (binding, no_host) = match find_host(claim, ctx) {
        Found::Bound(h) => (Some(*h), String::new()),
        Found::Missing { detached } => {
            let data = DataSync::default();
            return write_status(
                claim,
                ctx,
                StatusInput {
                    claim,
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
        Found::Nothing => match bind(claim, ctx).await? {
            Bind::Bound(h) => (Some(*h), String::new()),
            Bind::Retry => return Ok(Action::requeue(jitter())),
            Bind::NoHost(why) => (None, why),
        },
    };
    let Some(host) = binding else {
        let data = DataSync::default();
        return write_status(
            claim,
            ctx,
            StatusInput {
                claim,
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
    let data = if is_paused(claim) {
        DataSync::default()
    } else {
        copy_data(claim, &host, ctx).await?
    };
    let k = key(claim);
    let sync = decide::host_sync(claim, &host, &data, ctx.forwarded(&k).as_deref());
    let mut sync_error = None;
    let mut host_now = host.clone();
    if let Some(patch) = &sync.patch {
        match hosts(ctx, &host)
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
                tracing::warn!(claim = %key(claim), error = %e, "updating the claimed host failed");
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
        claims(ctx, claim)
            .patch(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        ctx.events
            .publish_about(
                claim,
                &[event(
                    "ActionForwarded",
                    format!("{} passed to the host", sync.remove_from_claim.join(", ")),
                )],
            )
            .await;
    }
    if !is_paused(claim) {
        delete_stale_copies(claim, &host_now, &data, ctx).await?;
    }
    let hardware_data = copy_hardware_data(claim, &host_now, ctx).await?;
    write_status(
        claim,
        ctx,
        StatusInput {
            claim,
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
