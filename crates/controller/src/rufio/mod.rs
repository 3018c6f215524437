//! Tinkerbell Rufio's API (`bmc.tinkerbell.org`) served with Rufio's semantics: Machines report
//! power and whether their BMC answers; a Job creates its Tasks `<job>-task-<n>` one after the
//! other; a Task sends one action (once: it is marked sent before it is sent) and, for power
//! actions, completes when the BMC shows the state. Nothing is restored afterwards. Every BMC
//! call runs off the workers (`detached`): a BMC that hangs holds only its own object.

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
use tokio::sync::mpsc::UnboundedReceiver;

use crate::detached::Detached;

/// The ends of the BMC calls: each wakes its Machine or Task.
pub struct Woken {
    pub machines: UnboundedReceiver<ObjectRef<Machine>>,
    pub tasks: UnboundedReceiver<ObjectRef<Task>>,
}

/// A context with its call registries, and the streams their ends wake.
pub fn context(
    client: kube::Client,
    task_timeout: std::time::Duration,
    machine_poll: std::time::Duration,
    bmc_timeout: std::time::Duration,
    gate: Arc<crate::bmc_gate::BmcGate>,
) -> (Arc<RufioContext>, Woken) {
    let (reads, machines) = Detached::new();
    let (calls, tasks) = Detached::new();
    (
        Arc::new(RufioContext {
            client,
            task_timeout,
            machine_poll,
            bmc_timeout,
            gate,
            reads,
            calls,
        }),
        Woken { machines, tasks },
    )
}

/// Runs the Machine, Job and Task controllers until `shutdown` resolves.
pub async fn run(
    ctx: Arc<RufioContext>,
    woken: Woken,
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
    // A power read ended.
    .reconcile_on(futures::stream::unfold(
        woken.machines,
        |mut rx| async move { rx.recv().await.map(|object| (object, rx)) },
    ))
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
        // A BMC call ended.
        .reconcile_on(futures::stream::unfold(woken.tasks, |mut rx| async move {
            rx.recv().await.map(|object| (object, rx))
        }))
        .with_config(config)
        .graceful_shutdown_on(shutdown)
        .run(reconcile::task, reconcile::error_policy, ctx)
        .for_each(|_| async {});
    tracing::info!("rufio machine, job and task controllers starting");
    tokio::join!(machines, jobs, tasks);
}
