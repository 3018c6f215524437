//! BMCJob: ordered one-off BMC tasks on one host, then back to its desired state.

pub mod reconcile;
pub mod step;

#[cfg(test)]
mod step_tests;

use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::BareMetalHost;
use ferrometal_api::job::BMCJob;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{PredicateConfig, WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};

use crate::context::Context;
use crate::shared_watch::{Events, touched};
use reconcile::JobContext;

/// What should wake a job: spec, finalizers, deletion. Our own status writes do not (each
/// reconcile asks for its own requeue).
fn job_trigger(job: &BMCJob) -> Option<u64> {
    let mut h = DefaultHasher::new();
    job.meta().uid.hash(&mut h);
    job.meta().generation.hash(&mut h);
    job.finalizers().hash(&mut h);
    job.meta().deletion_timestamp.is_some().hash(&mut h);
    Some(h.finish())
}

/// The jobs of a host, to wake them when it changes (becomes ready, is paused, is deleted).
/// Runs for every host change over every job: compares in place, copying nothing per job.
fn jobs_of(jobs: &Store<BMCJob>, host: &BareMetalHost) -> Vec<ObjectRef<BMCJob>> {
    let ns = host.metadata.namespace.as_deref();
    let name = host.metadata.name.as_deref().unwrap_or_default();
    jobs.state()
        .iter()
        .filter(|j| j.spec.host_ref.name == name && j.metadata.namespace.as_deref() == ns)
        .map(|j| ObjectRef::from_obj(j.as_ref()))
        .collect()
}

/// Runs the BMCJob controller with the host controller's context (provisioner, credentials)
/// until `shutdown` resolves.
pub async fn run(
    ctx: Arc<Context>,
    host_events: Events<BareMetalHost>,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    // Jobs judge their hosts from the host controller's cache: wait until it is filled.
    tokio::select! {
        ready = ctx.hosts.wait_until_ready() => if ready.is_err() { return },
        () = shutdown.clone() => return,
    }
    let client = ctx.client.clone();
    let (reader, writer) = reflector::store();
    let trigger = watcher(
        Api::<BMCJob>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .applied_objects()
    .predicate_filter(job_trigger, PredicateConfig::default());
    let for_hosts = reader.clone();
    let jc = Arc::new(JobContext {
        ctx,
        jobs: reader.clone(),
        timeout: Duration::from_secs(120),
    });
    tracing::info!("bmcjob controller starting");
    Controller::for_stream(trigger, reader)
        .watches_shared_stream(touched(host_events), move |host| jobs_of(&for_hosts, &host))
        .with_config(Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, jc)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "bmcjob controller");
            }
        })
        .await;
    tracing::info!("bmcjob controller stopped");
}
