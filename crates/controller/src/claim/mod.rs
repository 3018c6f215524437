//! The HostClaim reconciler: read → decide (pure: [`select`], [`decide`], [`vm::status`]) →
//! apply ([`reconcile`], through the claim's provider: bare metal or a libvirt VM).
//!
//! A claim binds one available host its namespace may use (HostDeployPolicy), copies its data
//! Secrets next to the host, drives the host's image, power, reboots and operations, reports
//! the host's progress back without naming any infrastructure, and releases the host when it
//! is deleted. Every wake-up is watch-driven: hosts, policies, namespaces, Secrets and
//! HardwareData map to the claims they concern.

mod bare_metal;
mod bind;
pub mod context;
mod copies;
pub mod decide;
mod host_error;
mod provider;
pub mod reconcile;
mod release;
pub mod select;
mod status;
pub mod vm;

pub use context::ClaimContext;

use std::future::Future;
use std::sync::{Arc, Mutex};

use ferrometal_api::host_class::{HOST_CLASS, HostClass};
use ferrometal_api::{BareMetalHost, HardwareData, HostClaim, HostDeployPolicy};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::Api;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};

use crate::config::ControllerConfig;
use crate::events::EventPublisher;
use crate::forwarding::DataKind;
use crate::shared_watch::{Events, Watched, touched};

/// Claims not bound to any host (they may bind when hosts, policies or namespaces change).
fn waiting(claims: &Store<HostClaim>, namespace: Option<&str>) -> Vec<ObjectRef<HostClaim>> {
    claims
        .state()
        .iter()
        .filter(|c| c.meta().deletion_timestamp.is_none())
        .filter(|c| {
            c.status
                .as_ref()
                .is_none_or(|s| s.bare_metal_host.is_none())
        })
        .filter(|c| namespace.is_none_or(|ns| c.namespace().as_deref() == Some(ns)))
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

fn claim_ref(namespace: &str, name: &str) -> ObjectRef<HostClaim> {
    ObjectRef::new(name).within(namespace)
}

/// What the claim controller watches (shared with the other controllers).
pub struct Watches {
    /// Every host (not only a shard's): a claim may bind any.
    pub hosts: Watched<BareMetalHost>,
    pub secrets: Events<Secret>,
    /// Cached: every bound claim compares its copy with its host's on each reconcile.
    pub hardware: Watched<HardwareData>,
    pub claims: Watched<HostClaim>,
}

/// Runs the claim controller until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    config: ControllerConfig,
    watches: Watches,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let Watches {
        hosts: Watched {
            store: hosts,
            events: host_events,
        },
        secrets,
        hardware: Watched {
            store: hardware,
            events: hd_events,
        },
        claims: Watched {
            store: claims,
            events: claim_events,
        },
    } = watches;
    let host_stream = touched(host_events);
    let secret_stream = touched(secrets);
    let hd_stream = touched(hd_events);
    let claim_stream = touched(claim_events);
    // Policies and namespaces are the claim controller's alone.
    let (policies, policy_writer) = reflector::store();
    let policy_stream = watcher(
        Api::<HostDeployPolicy>::all(client.clone()),
        Default::default(),
    )
    .default_backoff()
    .reflect(policy_writer)
    .touched_objects();
    let (namespaces, ns_writer) = reflector::store();
    let ns_stream = watcher(Api::<Namespace>::all(client.clone()), Default::default())
        .default_backoff()
        .modify(|n: &mut Namespace| n.managed_fields_mut().clear())
        .reflect(ns_writer)
        .touched_objects();

    // HostClasses: which provider serves a claim; a class that changes wakes its claims.
    let (classes, class_writer) = reflector::store();
    let class_stream = watcher(Api::<HostClass>::all(client.clone()), Default::default())
        .default_backoff()
        .reflect(class_writer)
        .touched_objects();
    let (vms, vm_woken) = crate::detached::Detached::new();
    let ctx = Arc::new(ClaimContext {
        events: EventPublisher::new(client.clone(), config.reporter.clone()),
        client,
        config: config.clone(),
        hosts: hosts.clone(),
        claims: claims.clone(),
        policies,
        namespaces,
        hardware,
        pending: Mutex::default(),
        forwarded: Mutex::default(),
        classes,
        vms,
        vm_seen: Mutex::default(),
    });
    let (c1, c2, c3, c4, c5) = (
        claims.clone(),
        claims.clone(),
        claims.clone(),
        claims.clone(),
        claims.clone(),
    );
    let hosts_for_hd = hosts.clone();
    tracing::info!("claim controller starting");
    Controller::for_shared_stream(claim_stream, claims)
        .watches_shared_stream(host_stream, move |host: Arc<BareMetalHost>| {
            tracing::debug!(host = %host.name_any(), claim = ?select::claim_of(&host), "host event");
            if let Some((ns, name)) = select::claim_of(&host) {
                return vec![claim_ref(ns, name)];
            }
            if select::unavailable(&host).is_none() {
                return waiting(&c1, None);
            }
            Vec::new()
        })
        .watches_stream(policy_stream, move |_p: HostDeployPolicy| {
            waiting(&c2, None)
        })
        .watches_stream(ns_stream, move |ns: Namespace| {
            waiting(&c3, Some(&ns.name_any()))
        })
        .watches_shared_stream(secret_stream, move |s: Arc<Secret>| {
            let ns = s.namespace().unwrap_or_default();
            let name = s.name_any();
            c4.state()
                .iter()
                .filter(|c| {
                    DataKind::ALL
                        .iter()
                        .any(|k| k.source(c) == Some((ns.clone(), name.clone())))
                })
                .map(|c| ObjectRef::from_obj(c.as_ref()))
                .collect::<Vec<_>>()
        })
        .watches_shared_stream(hd_stream, move |hd: Arc<HardwareData>| {
            // The host's own HardwareData: its claim copies it.
            let key = ObjectRef::<BareMetalHost>::new(&hd.name_any())
                .within(&hd.namespace().unwrap_or_default());
            hosts_for_hd
                .get(&key)
                .and_then(|h| select::claim_of(&h).map(|(ns, name)| vec![claim_ref(ns, name)]))
                .unwrap_or_default()
        })
        .watches_stream(class_stream, move |class: HostClass| {
            let name = class.name_any();
            c5.state()
                .iter()
                .filter(|c| {
                    c.annotations().get(HOST_CLASS) == Some(&name)
                        || (!c.annotations().contains_key(HOST_CLASS)
                            && c.status.as_ref().is_none_or(|s| s.bare_metal_host.is_none()))
                })
                .map(|c| ObjectRef::from_obj(c.as_ref()))
                .collect::<Vec<_>>()
        })
        // A pass over a claim's VM ended.
        .reconcile_on(futures::stream::unfold(vm_woken, |mut rx| async move {
            rx.recv().await.map(|object| (object, rx))
        }))
        .with_config(Config::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "claim controller");
            }
        })
        .await;
    tracing::info!("claim controller stopped");
    Ok(())
}
