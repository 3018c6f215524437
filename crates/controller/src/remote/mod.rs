//! Remote claims: a HostClaim annotated `ferrometal.io/remote-kubeconfig: SECRET` is served by
//! another cluster's hosts. This controller mirrors it there (same name, in the namespace of
//! the kubeconfig's context) with its data Secrets, passes on its power, image, pause, reboots
//! and operations, and brings the mirror's status and HardwareData back. The other cluster's
//! credentials stay in the Secret; its BMCs and hosts are never seen here. Read → decide (pure:
//! [`decide`]) → apply ([`reconcile`]); changes in the other cluster arrive through a watch per
//! link ([`link`]).

pub mod context;
pub mod decide;
pub mod link;
pub mod reconcile;

// The policy is a setting (ControllerConfig holds it), so it lives below the configuration;
// this keeps its old path.
pub use crate::remote_servers as servers;

pub use context::RemoteContext;

use std::future::Future;
use std::sync::Arc;

use ferrometal_api::HostClaim;
use ferrometal_api::claim::REMOTE_KUBECONFIG;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::ObjectRef;

use crate::config::ControllerConfig;
use crate::events::EventPublisher;
use crate::forwarding::DataKind;
use crate::shared_watch::{Events, Watched, applied, touched};

/// What the remote claim controller watches (shared with the other controllers).
pub struct Watches {
    pub claims: Watched<HostClaim>,
    /// The kubeconfig and data Secrets of remote claims.
    pub secrets: Events<Secret>,
}

/// Runs the remote claim controller until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    config: ControllerConfig,
    watches: Watches,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let Watches {
        claims: Watched {
            store: claims,
            events: claim_events,
        },
        secrets,
    } = watches;
    let (wake, woken) = tokio::sync::mpsc::unbounded_channel();
    let controller = Controller::for_shared_stream(applied(claim_events), claims.clone());
    let ctx = Arc::new(RemoteContext {
        events: EventPublisher::new(client.clone(), config.reporter.clone()),
        client: client.clone(),
        links: link::Links::new(wake, claims.clone(), config.remote_servers.clone()),
    });
    let woken = futures::stream::unfold(
        woken,
        |mut rx| async move { rx.recv().await.map(|r| (r, rx)) },
    );
    tracing::info!("remote claim controller starting");
    controller
        // The kubeconfig and data Secrets of remote claims.
        .watches_shared_stream(touched(secrets), move |s: Arc<Secret>| {
            let ns = s.namespace().unwrap_or_default();
            let name = s.name_any();
            claims
                .state()
                .iter()
                .filter(|c| ferrometal_api::claim::is_remote(c))
                .filter(|c| {
                    c.namespace().as_deref() == Some(ns.as_str())
                        && (c.annotations().get(REMOTE_KUBECONFIG) == Some(&name)
                            || DataKind::ALL
                                .iter()
                                .any(|k| k.source(c) == Some((ns.clone(), name.clone()))))
                })
                .map(|c| ObjectRef::from_obj(c.as_ref()))
                .collect::<Vec<_>>()
        })
        .reconcile_on(woken)
        .with_config(Config::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "remote claim controller");
            }
        })
        .await;
    tracing::info!("remote claim controller stopped");
    Ok(())
}
