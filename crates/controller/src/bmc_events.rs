//! BMCEventSubscriptions, as metal3 has them: the BMC of the host `spec.hostName` (in the
//! subscription's namespace) sends its events to `spec.destination`, with `spec.context` and
//! the keys of the `httpHeadersRef` Secret as HTTP headers. The subscription is made once on the
//! BMC's EventService and its ID kept in `status.subscriptionID`; deleting the object deletes it
//! from the BMC (finalizer `bmceventsubscription.metal3.io`). What went wrong is in
//! `status.error` (the column `kubectl get bes` shows), never with a header's value.
//!
//! Observed first: a subscription the BMC already has for the same destination and context is
//! taken as this one's (a restart between making it and recording it does not make two). The
//! BMC calls run on tasks of their own ([`Reads`]), not on the controller's workers.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::BareMetalHost;
use ferrometal_api::annotations as ann;
use ferrometal_api::bmc_events::BMCEventSubscription;
use ferrometal_bmc::EventSubscription;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use crate::error::{Error, ignore_not_found};
use crate::host_bmc::{self, ReadContext, ReadError, Reads, Taken};
use crate::merge_patch::patch_metadata;
use crate::shared_watch::{Watched, applied, changed_or_gone};

pub const FINALIZER: &str = "bmceventsubscription.metal3.io";
const RETRY: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error(transparent)]
    Api(#[from] Error),
    #[error(transparent)]
    Read(#[from] ReadError),
}

impl From<kube::Error> for EventsError {
    fn from(e: kube::Error) -> Self {
        EventsError::Api(e.into())
    }
}

fn api(ctx: &ReadContext, bes: &BMCEventSubscription) -> Api<BMCEventSubscription> {
    Api::namespaced(ctx.client.clone(), &bes.namespace().unwrap_or_default())
}

async fn set_status(
    ctx: &ReadContext,
    bes: &BMCEventSubscription,
    subscription_id: Option<&str>,
    error: Option<&str>,
) -> Result<(), EventsError> {
    let status = bes.status.clone().unwrap_or_default();
    let same_id = subscription_id.is_none_or(|id| id == status.subscription_id);
    if same_id && error.unwrap_or_default() == status.error {
        return Ok(());
    }
    let mut body = serde_json::Map::new();
    if let Some(id) = subscription_id {
        body.insert("subscriptionID".into(), json!(id));
    }
    body.insert(
        "error".into(),
        error.map_or(Value::Null, |e| Value::String(e.to_string())),
    );
    ignore_not_found(
        api(ctx, bes)
            .patch_status(
                &bes.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": body })),
            )
            .await,
    )?;
    Ok(())
}

async fn set_finalizers(
    ctx: &ReadContext,
    bes: &BMCEventSubscription,
    finalizers: Vec<String>,
) -> Result<(), EventsError> {
    let mut meta = serde_json::Map::new();
    meta.insert("finalizers".into(), json!(finalizers));
    patch_metadata(&api(ctx, bes), bes, meta).await?;
    Ok(())
}

/// The headers Secret's keys and values; the error is metal3's words, never a value.
async fn headers(
    ctx: &ReadContext,
    bes: &BMCEventSubscription,
) -> Result<Result<BTreeMap<String, String>, String>, EventsError> {
    let Some(r) = bes.spec.http_headers_ref.as_ref() else {
        return Ok(Ok(BTreeMap::new()));
    };
    let ns = bes.namespace().unwrap_or_default();
    if !r.namespace.is_empty() && r.namespace != ns {
        return Ok(Err(
            "httpHeadersRef secret must be in the same namespace as the BMCEventSubscription"
                .into(),
        ));
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(secret) = secrets.get_opt(&r.name).await? else {
        return Ok(Err(format!(
            "failed to retrieve HTTP headers secret {}",
            r.name
        )));
    };
    Ok(Ok(secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
        .collect()))
}

/// What a BMC call of this controller did.
pub enum Called {
    /// The subscription the BMC has for this object (found or made).
    Made(EventSubscription),
    /// The object's subscription is gone from the BMC.
    Removed,
}

/// The controller's context: what the read controllers share, and its BMC calls in flight.
pub struct EventsContext {
    read: Arc<ReadContext>,
    calls: Reads<BMCEventSubscription, Called>,
}

async fn reconcile(
    bes: Arc<BMCEventSubscription>,
    ctx: Arc<EventsContext>,
) -> Result<Action, EventsError> {
    let ns = bes.namespace().unwrap_or_default();
    let host = ctx
        .read
        .hosts
        .get(&ObjectRef::new(&bes.spec.host_name).within(&ns))
        .filter(|h| !h.annotations().contains_key(ann::DETACHED));
    let finalizers = bes.finalizers().to_vec();
    let has_finalizer = finalizers.iter().any(|f| f == FINALIZER);
    let mut id = bes
        .status
        .as_ref()
        .map(|s| s.subscription_id.clone())
        .unwrap_or_default();
    let ended = match ctx.calls.take(&bes) {
        Taken::Running => return Ok(Action::requeue(host_bmc::READ_BACKSTOP)),
        Taken::Done { read, .. } => Some(read?),
        Taken::Idle => None,
    };
    if bes.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        // Made while the object was being deleted: its ID never reached the status.
        if let (Some(Ok(Called::Made(sub))), true) = (&ended, id.is_empty()) {
            id = sub.id.clone();
        }
        let removed = matches!(ended, Some(Ok(Called::Removed)));
        if let (false, false, Some(host)) = (removed, id.is_empty(), host) {
            // With an ID known, the call that failed was a removal (a subscription is only
            // made while there is none).
            if let Some(Err(why)) = &ended {
                let message = format!("failed to delete a subscription: {why}");
                set_status(&ctx.read, &bes, None, Some(&message)).await?;
                return Ok(Action::requeue(RETRY));
            }
            return Ok(ctx
                .calls
                .start(&ctx.read, host, &bes, move |bmc| async move {
                    let subs = bmc.subscriptions().await?;
                    if let Some(s) = subs.iter().find(|s| s.id == id) {
                        bmc.unsubscribe(&s.path).await?;
                    }
                    Ok(Called::Removed)
                }));
        }
        // Gone from the BMC (or nothing left to reach it through): let the object go.
        let rest = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
        set_finalizers(&ctx.read, &bes, rest).await?;
        return Ok(Action::await_change());
    }
    match ended {
        Some(Ok(Called::Made(sub))) => {
            set_status(&ctx.read, &bes, Some(&sub.id), None).await?;
            return Ok(Action::await_change());
        }
        Some(Err(why)) => {
            let message = format!("failed to create a subscription: {why}");
            set_status(&ctx.read, &bes, None, Some(&message)).await?;
            return Ok(Action::requeue(RETRY));
        }
        Some(Ok(Called::Removed)) | None => {}
    }
    if !has_finalizer {
        let mut with = finalizers;
        with.push(FINALIZER.to_string());
        set_finalizers(&ctx.read, &bes, with).await?;
        return Ok(Action::await_change());
    }
    if !id.is_empty() {
        return Ok(Action::await_change());
    }
    let Some(host) = host else {
        let message = format!("baremetal host {:?} not found", bes.spec.host_name);
        set_status(&ctx.read, &bes, None, Some(&message)).await?;
        return Ok(Action::requeue(RETRY));
    };
    let headers = match headers(&ctx.read, &bes).await? {
        Ok(h) => h,
        Err(message) => {
            set_status(&ctx.read, &bes, None, Some(&message)).await?;
            return Ok(Action::requeue(RETRY));
        }
    };
    let (destination, context) = (bes.spec.destination.clone(), bes.spec.context.clone());
    Ok(ctx
        .calls
        .start(&ctx.read, host, &bes, move |bmc| async move {
            let subs = bmc.subscriptions().await?;
            if let Some(s) = subs
                .into_iter()
                .find(|s| s.destination == destination && s.context == context)
            {
                return Ok(Called::Made(s));
            }
            bmc.subscribe(&destination, &context, &headers)
                .await
                .map(Called::Made)
        }))
}

fn error_policy(
    _bes: Arc<BMCEventSubscription>,
    error: &EventsError,
    _ctx: Arc<EventsContext>,
) -> Action {
    tracing::debug!(%error, "BMC event subscription");
    Action::requeue(Duration::from_secs(10))
}

/// Runs the BMCEventSubscription controller until `shutdown` resolves; a change to a host
/// wakes the subscriptions that name it.
pub async fn run(
    ctx: Arc<ReadContext>,
    hosts: Watched<BareMetalHost>,
    subscriptions: Watched<BMCEventSubscription>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let by_host = subscriptions.store.clone();
    let (calls, woken) = Reads::new(subscriptions.store.clone());
    let ctx = Arc::new(EventsContext { read: ctx, calls });
    Controller::for_shared_stream(applied(subscriptions.events), subscriptions.store)
        .watches_shared_stream(
            changed_or_gone(hosts.events, host_bmc::read_trigger),
            move |host: Arc<BareMetalHost>| {
                let ns = host.namespace();
                let name = host.name_any();
                by_host
                    .state()
                    .iter()
                    .filter(|b| b.namespace() == ns && b.spec.host_name == name)
                    .map(|b| ObjectRef::from_obj(b.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .reconcile_on(woken)
        .with_config(Config::default().concurrency(4))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}
