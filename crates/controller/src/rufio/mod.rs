//! Tinkerbell Rufio's API (`bmc.tinkerbell.org`) served with Rufio's semantics: Machines report
//! power and whether their BMC answers; a Job creates its Tasks `<job>-task-<n>` one after the
//! other; a Task sends one action (once: it is marked sent before it is sent) and, for power
//! actions, completes when the BMC shows the state. Nothing is restored afterwards.

pub mod connection;
pub mod context;
pub mod reconcile;
pub mod task;

pub use context::RufioContext;

use std::future::Future;
use std::sync::Arc;

use ferrometal_api::rufio::{Job, Machine, Task};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

/// Runs the Machine, Job and Task controllers until `shutdown` resolves.
pub async fn run(
    ctx: Arc<RufioContext>,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let config = Config::default().concurrency(concurrency);
    let machines = Controller::new(
        Api::<Machine>::all(client.clone()),
        watcher::Config::default(),
    )
    // A Job's progress (a Task done) may have changed the Machine's power: read it now
    // rather than at the next poll (POWER said `off` for minutes after a Job powered it on).
    .watches(
        Api::<Job>::all(client.clone()),
        watcher::Config::default(),
        |j: Job| {
            let ns = j.namespace()?;
            Some(ObjectRef::new(&j.spec.machine_ref.name).within(&ns))
        },
    )
    .with_config(config.clone())
    .graceful_shutdown_on(shutdown.clone())
    .run(reconcile::machine, reconcile::error_policy, ctx.clone())
    .for_each(|_| async {});
    let jobs = Controller::new(Api::<Job>::all(client.clone()), watcher::Config::default())
        .owns(Api::<Task>::all(client.clone()), watcher::Config::default())
        .with_config(config.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile::job, reconcile::error_policy, ctx.clone())
        .for_each(|_| async {});
    let tasks = Controller::new(Api::<Task>::all(client), watcher::Config::default())
        .with_config(config)
        .graceful_shutdown_on(shutdown)
        .run(reconcile::task, reconcile::error_policy, ctx)
        .for_each(|_| async {});
    tracing::info!("rufio machine, job and task controllers starting");
    tokio::join!(machines, jobs, tasks);
}
