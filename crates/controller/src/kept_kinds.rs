//! metal3 kinds ferrometal serves and stores but does not act on yet (switches and their
//! attachments, and preprovisioning images other than the ones the host controller keeps for
//! the hosts it boots the deploy agent on). metal3 users' YAML applies unchanged; rather than let such
//! an object sit as if something were happening, this controller says in its status that
//! nothing will: condition `ferrometal.io/NotActedOn` (True, at the object's generation).
//!
//! One small controller per kind over `DynamicObject`: the reconcile only reads the object and,
//! when the condition is missing or stale, applies it to the status subresource with its own
//! field manager, so whatever else writes the status keeps its fields.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::{media, switching};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::conditions;

/// ferrometal's condition on a kept object: True while it is stored and not acted on.
pub const NOT_ACTED_ON: &str = "ferrometal.io/NotActedOn";
const FIELD_MANAGER: &str = "ferrometal-kept-kinds";

/// One kind kept: how to reach it and what to tell its owner.
pub struct KeptKind {
    pub resource: ApiResource,
    pub message: &'static str,
}

/// The kinds this controller marks, each with the reason it is not acted on.
pub fn kept_kinds() -> Vec<KeptKind> {
    fn kind<K: Resource<DynamicType = ()>>(message: &'static str) -> KeptKind {
        KeptKind {
            resource: ApiResource::erase::<K>(&()),
            message,
        }
    }
    vec![
        kind::<media::PreprovisioningImage>(
            "ferrometal builds its deploy agent's boot media itself and reports them in the \
             PreprovisioningImage it keeps for each host it boots the agent on (named after and \
             owned by the host); nothing is built for this one",
        ),
        kind::<switching::BareMetalSwitch>(
            "ferrometal stores BareMetalSwitches but does not configure switches",
        ),
        kind::<switching::HostNetworkAttachment>(
            "ferrometal stores HostNetworkAttachments but does not configure switch ports",
        ),
    ]
}

#[derive(Debug, thiserror::Error)]
#[error("marking {kind} {name} as not acted on: {source}")]
pub struct KeptError {
    kind: String,
    name: String,
    source: kube::Error,
}

struct KindContext {
    client: kube::Client,
    kind: KeptKind,
}

/// Whether the object already says, at its generation, what `kind` would write.
fn is_marked(obj: &DynamicObject, kind: &KeptKind) -> bool {
    obj.data
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == NOT_ACTED_ON
                    && c["status"] == "True"
                    && c["message"] == kind.message
                    && c["observedGeneration"].as_i64() == obj.metadata.generation
            })
        })
}

/// The status apply: this manager's condition, nothing else.
fn status_patch(obj: &DynamicObject, kind: &KeptKind, now: &str) -> Value {
    let status = json!({
        "conditions": [{
            "type": NOT_ACTED_ON,
            "status": "True",
            "reason": "NotActedOn",
            "message": kind.message,
            "lastTransitionTime": now,
            "observedGeneration": obj.metadata.generation,
        }],
    });
    json!({
        "apiVersion": kind.resource.api_version,
        "kind": kind.resource.kind,
        "status": status,
    })
}

/// An object a host controls is the host controller's to report on (its PreprovisioningImage).
fn host_owned(obj: &DynamicObject) -> bool {
    obj.owner_references()
        .iter()
        .any(|o| o.kind == "BareMetalHost" && o.controller == Some(true))
}

async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<KindContext>) -> Result<Action, KeptError> {
    if obj.metadata.deletion_timestamp.is_some() || is_marked(&obj, &ctx.kind) || host_owned(&obj) {
        return Ok(Action::await_change());
    }
    let api: Api<DynamicObject> = match obj.namespace() {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), &ns, &ctx.kind.resource),
        None => Api::all_with(ctx.client.clone(), &ctx.kind.resource),
    };
    // A transition time that moved on every generation would say the object changed state;
    // keep the first one.
    let now = obj
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == NOT_ACTED_ON))
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(conditions::now);
    let patch = status_patch(&obj, &ctx.kind, &now);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(&obj.name_any(), &params, &Patch::Apply(&patch))
        .await
        .map_err(|source| KeptError {
            kind: ctx.kind.resource.kind.clone(),
            name: obj.name_any(),
            source,
        })?;
    Ok(Action::await_change())
}

fn error_policy(_obj: Arc<DynamicObject>, error: &KeptError, _ctx: Arc<KindContext>) -> Action {
    tracing::debug!(%error, "kept kind");
    Action::requeue(Duration::from_secs(5))
}

/// Runs one controller per kept kind until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let controllers = kept_kinds().into_iter().map(|kind| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource);
        let resource = kind.resource.clone();
        let ctx = Arc::new(KindContext {
            client: client.clone(),
            kind,
        });
        Controller::new_with(api, watcher::Config::default(), resource)
            .with_config(Config::default().concurrency(4))
            .graceful_shutdown_on(shutdown.clone())
            .run(reconcile, error_policy, ctx)
            .for_each(|_| async {})
    });
    futures::future::join_all(controllers).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(status: Value, generation: i64) -> DynamicObject {
        let mut obj = DynamicObject::new("x", &kept_kinds()[0].resource).within("ns");
        obj.metadata.generation = Some(generation);
        obj.data = json!({ "status": status });
        obj
    }

    #[test]
    fn an_object_is_marked_once_per_generation() {
        let kind = &kept_kinds()[0];
        let unmarked = object(json!({}), 1);
        assert!(!is_marked(&unmarked, kind));
        let patch = status_patch(&unmarked, kind, "2026-11-27T00:00:00Z");
        let marked = object(patch["status"].clone(), 1);
        assert!(is_marked(&marked, kind));
        // A new generation (the user changed the spec) is marked again.
        let changed = object(patch["status"].clone(), 2);
        assert!(!is_marked(&changed, kind));
    }
}
