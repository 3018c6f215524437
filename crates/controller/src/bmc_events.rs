//! BMCEventSubscriptions, as metal3 has them: the BMC of the host `spec.hostName` (in the
//! subscription's namespace) sends its events to `spec.destination`, with `spec.context` and
//! the keys of the `httpHeadersRef` Secret as HTTP headers. The subscription is made once on the
//! BMC's EventService and its ID kept in `status.subscriptionID`; deleting the object deletes it
//! from the BMC (finalizer `bmceventsubscription.metal3.io`). What went wrong is in
//! `status.error` (the column `kubectl get bes` shows), never with a header's value.
//!
//! Observed first: a subscription the BMC already has for the same destination and context is
//! taken as this one's (a restart between making it and recording it does not make two).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::BareMetalHost;
use ferrometal_api::annotations as ann;
use ferrometal_api::bmc_events::BMCEventSubscription;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use crate::error::{Error, ignore_not_found};
use crate::host_bmc::{self, ReadContext, ReadError};
use crate::merge_patch::patch_metadata;
use crate::shared_watch::{Watched, changed_or_gone};

pub const FINALIZER: &str = "bmceventsubscription.metal3.io";
const BMC_TIMEOUT: Duration = Duration::from_secs(20);
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

async fn reconcile(
    bes: Arc<BMCEventSubscription>,
    ctx: Arc<ReadContext>,
) -> Result<Action, EventsError> {
    let ns = bes.namespace().unwrap_or_default();
    let host = ctx
        .hosts
        .get(&ObjectRef::new(&bes.spec.host_name).within(&ns))
        .filter(|h| !h.annotations().contains_key(ann::DETACHED));
    let finalizers = bes.finalizers().to_vec();
    let has_finalizer = finalizers.iter().any(|f| f == FINALIZER);
    let id = bes
        .status
        .as_ref()
        .map(|s| s.subscription_id.clone())
        .unwrap_or_default();
    if bes.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        if let (false, Some(host)) = (id.is_empty(), host.as_deref()) {
            let found = host_bmc::read(&ctx, host, BMC_TIMEOUT, |bmc| {
                let id = id.clone();
                async move {
                    let subs = bmc.subscriptions().await?;
                    if let Some(s) = subs.iter().find(|s| s.id == id) {
                        bmc.unsubscribe(&s.path).await?;
                    }
                    Ok(())
                }
            })
            .await?;
            if let Err(why) = found {
                let message = format!("failed to delete a subscription: {why}");
                set_status(&ctx, &bes, None, Some(&message)).await?;
                return Ok(Action::requeue(RETRY));
            }
        }
        // Gone from the BMC (or nothing left to reach it through): let the object go.
        let rest = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
        set_finalizers(&ctx, &bes, rest).await?;
        return Ok(Action::await_change());
    }
    if !has_finalizer {
        let mut with = finalizers;
        with.push(FINALIZER.to_string());
        set_finalizers(&ctx, &bes, with).await?;
        return Ok(Action::await_change());
    }
    if !id.is_empty() {
        return Ok(Action::await_change());
    }
    let Some(host) = host else {
        let message = format!("baremetal host {:?} not found", bes.spec.host_name);
        set_status(&ctx, &bes, None, Some(&message)).await?;
        return Ok(Action::requeue(RETRY));
    };
    let headers = match headers(&ctx, &bes).await? {
        Ok(h) => h,
        Err(message) => {
            set_status(&ctx, &bes, None, Some(&message)).await?;
            return Ok(Action::requeue(RETRY));
        }
    };
    let (destination, context) = (bes.spec.destination.clone(), bes.spec.context.clone());
    let made = host_bmc::read(&ctx, &host, BMC_TIMEOUT, |bmc| async move {
        let subs = bmc.subscriptions().await?;
        if let Some(s) = subs
            .into_iter()
            .find(|s| s.destination == destination && s.context == context)
        {
            return Ok(s);
        }
        bmc.subscribe(&destination, &context, &headers).await
    })
    .await?;
    match made {
        Ok(sub) => {
            set_status(&ctx, &bes, Some(&sub.id), None).await?;
            Ok(Action::await_change())
        }
        Err(why) => {
            let message = format!("failed to create a subscription: {why}");
            set_status(&ctx, &bes, None, Some(&message)).await?;
            Ok(Action::requeue(RETRY))
        }
    }
}

fn error_policy(
    _bes: Arc<BMCEventSubscription>,
    error: &EventsError,
    _ctx: Arc<ReadContext>,
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
    Controller::for_stream(subscriptions.events.applied_objects(), subscriptions.store)
        .watches_stream(
            changed_or_gone(hosts.events, host_bmc::read_trigger),
            move |host: BareMetalHost| {
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
        .with_config(Config::default().concurrency(4))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}
