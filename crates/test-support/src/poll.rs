//! Bounded polling of hosts and their Events through the API, shared by the controller's fixture
//! harness (tests/common) and real-backend stack (tests/stack), which differ only in patience.

use std::time::Duration;

use ferrometal_api::BareMetalHost;
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;

/// How long to keep polling: `tries` reads, `every` apart.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    pub tries: u32,
    pub every: Duration,
}

/// Polls until `ok` holds for the object; panics with the last one seen.
pub async fn object<K>(
    api: &Api<K>,
    patience: Patience,
    name: &str,
    what: &str,
    ok: impl Fn(&K) -> bool,
) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut last = None;
    for _ in 0..patience.tries {
        if let Ok(o) = api.get(name).await {
            if ok(&o) {
                return o;
            }
            last = Some(o);
        }
        tokio::time::sleep(patience.every).await;
    }
    panic!("{name} never became {what}; last seen: {last:#?}");
}

/// Polls until `ok` holds for the host; panics with its last annotations, finalizers and status.
pub async fn host(
    hosts: &Api<BareMetalHost>,
    patience: Patience,
    name: &str,
    what: &str,
    ok: impl Fn(&BareMetalHost) -> bool,
) -> BareMetalHost {
    let mut last = None;
    for _ in 0..patience.tries {
        if let Ok(h) = hosts.get(name).await {
            if ok(&h) {
                return h;
            }
            last = Some(h);
        }
        tokio::time::sleep(patience.every).await;
    }
    panic!(
        "host {name} never became {what}; last seen: {:#?}",
        last.map(|h| (h.metadata.annotations, h.metadata.finalizers, h.status))
    );
}

/// Polls until the object is gone (404).
pub async fn gone<K>(api: &Api<K>, patience: Patience, name: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    for _ in 0..patience.tries {
        if api.get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(patience.every).await;
    }
    panic!(
        "{name} was never deleted: {:#?}",
        api.get_opt(name).await.ok().flatten()
    );
}

/// Polls until the host is gone (404).
pub async fn host_gone(hosts: &Api<BareMetalHost>, patience: Patience, name: &str) {
    gone(hosts, patience, name).await
}

/// The Events about host `name`, oldest first.
pub async fn host_events(events: &Api<Event>, name: &str) -> Vec<Event> {
    let mut found: Vec<Event> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect();
    found.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    found
}

/// Polls until an Event with `reason` about host `name` exists, and returns it.
pub async fn host_event(
    events: &Api<Event>,
    patience: Patience,
    name: &str,
    reason: &str,
) -> Event {
    for _ in 0..patience.tries {
        if let Some(e) = host_events(events, name)
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason))
        {
            return e;
        }
        tokio::time::sleep(patience.every).await;
    }
    let reasons: Vec<_> = host_events(events, name)
        .await
        .into_iter()
        .map(|e| e.reason.unwrap_or_default())
        .collect();
    panic!("no {reason} Event for {name}: {reasons:?}");
}
