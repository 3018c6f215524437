//! Reconcilers for BareMetalHost (with its HardwareData) and HostClaim.
//!
//! [`run`] starts the host controller against any Kubernetes API (the embedded server or a
//! cluster) and returns once its shutdown future resolves:
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use ferrometal_provisioner::fixture::FixtureProvisioner;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let controller = tokio::spawn(ferrometal_controller::run(
//!     client,
//!     Arc::new(FixtureProvisioner::new()),
//!     ferrometal_controller::ControllerConfig::default(),
//!     async move { let _ = stopped.await; },
//! ));
//! // ... later
//! let _ = stop.send(());
//! controller.await??;
//! # Ok(()) }
//! ```
//!
//! The layout follows the reconcile: [`host::reconcile`] reads the host and its credentials
//! Secret, asks the pure state machine [`host::decide::decide`] what to do, makes at most one
//! BMC call through the [`ferrometal_provisioner::Provisioner`], and writes back only what
//! changed (status merge patch, annotation removals, finalizer, Events, HardwareData).
//! [`metrics_text`] renders the Prometheus metrics for a `/metrics` endpoint.
//!
//! The controllers — [`host`] (BareMetalHost and its HardwareData), [`job`] (BMCJob),
//! [`claim`] (HostClaim), [`remote`] (HostClaims served by another cluster), [`rufio`]
//! (Tinkerbell Rufio's Machine, Job and Task), [`firmware_settings`] (HostFirmwareSettings:
//! the BIOS read and the wanted settings validated), [`data_images`] (DataImage: tied to its
//! host, let go once detached), [`bmc_events`] (BMCEventSubscription: a subscription on the
//! host's BMC), [`firmware_components`]
//! (HostFirmwareComponents: the firmware versions read, the wanted updates validated) and [`kept_kinds`] (the metal3 kinds stored
//! but not acted on, which it says in their status) — never import one another, so each can be read,
//! tested and changed on its own. What two of them share lives below them: [`error`],
//! [`events`], [`config`], [`context`] (what hosts and BMCJobs share), [`conditions`],
//! [`secrets`], [`host_info`] and [`host_bmc`] (reaching a host's BMC), [`forwarding`] (what a claim passes
//! on), [`hardware_data`], [`merge_patch`], [`metrics`](mod@metrics), [`bmc_gate`], [`detached`],
//! [`remote_servers`] and [`shared_watch`] (one watch per kind, which [`run`] opens and hands to
//! every controller).

pub mod bmc_events;
pub mod bmc_gate;
pub mod claim;
pub mod conditions;
pub mod config;
pub mod context;
pub mod data_images;
pub mod detached;
pub mod error;
pub mod events;
pub mod firmware_components;
pub mod firmware_settings;
pub mod forwarding;
pub mod hardware_data;
pub mod host;
pub mod host_bmc;
pub mod host_info;
pub mod job;
pub mod kept_kinds;
pub mod leader;
pub mod merge_patch;
pub mod metrics;
pub mod remote;
pub mod remote_servers;
pub mod rufio;
pub mod secrets;
pub mod shared_watch;
pub mod vm_pass;

use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::bmc_events::BMCEventSubscription;
use ferrometal_api::firmware::{HostFirmwareComponents, HostFirmwareSettings, HostUpdatePolicy};
use ferrometal_api::media::DataImage;
use ferrometal_api::{BareMetalHost, HardwareData, HostClaim};
use ferrometal_provisioner::Provisioner;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

pub use config::ControllerConfig;
pub use context::Context;
pub use metrics::{metrics, metrics_text};
use shared_watch::{Events, SharedWatch, Watched, without_managed_fields};

/// Hash of what should wake the host controller: spec (generation), finalizers, annotations,
/// labels and deletion. Status-only updates (our own writes) do not, so they cause no storms.
fn host_trigger(host: &BareMetalHost) -> Option<u64> {
    let mut h = DefaultHasher::new();
    host.meta().uid.hash(&mut h);
    host.meta().generation.hash(&mut h);
    host.finalizers().hash(&mut h);
    host.annotations().hash(&mut h);
    host.labels().hash(&mut h);
    host.meta().deletion_timestamp.is_some().hash(&mut h);
    Some(h.finish())
}

/// The hosts in the Secret's namespace that use it as their BMC credentials.
fn hosts_using(hosts: &Store<BareMetalHost>, secret: &Secret) -> Vec<ObjectRef<BareMetalHost>> {
    let ns = secret.namespace();
    let name = secret.name_any();
    hosts
        .state()
        .iter()
        .filter(|h| h.namespace() == ns)
        .filter(|h| {
            h.spec
                .bmc
                .as_ref()
                .is_some_and(|b| b.credentials_name == name)
        })
        .map(|h| ObjectRef::from_obj(h.as_ref()))
        .collect()
}

/// Runs the host and claim controllers until `shutdown` resolves, then finishes the
/// reconciles in flight and returns.
pub async fn run(
    client: kube::Client,
    provisioner: Arc<dyn Provisioner>,
    config: ControllerConfig,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    use futures::FutureExt;
    let shutdown = shutdown.shared();
    // One watch per kind for all the controllers (shared_watch), subscribed before any runs.
    let mut host_watch = SharedWatch::<BareMetalHost>::cached();
    // A shard (a label selector) runs its own hosts, but its claims may bind any host.
    let mut all_host_watch = config
        .label_selector
        .is_some()
        .then(SharedWatch::<BareMetalHost>::cached);
    let mut secret_watch = SharedWatch::<Secret>::uncached();
    let mut hardware_watch = SharedWatch::<HardwareData>::cached();
    let mut claim_watch = SharedWatch::<HostClaim>::cached();
    let mut settings_watch = SharedWatch::<HostFirmwareSettings>::cached();
    let mut components_watch = SharedWatch::<HostFirmwareComponents>::cached();
    let mut policy_watch = SharedWatch::<HostUpdatePolicy>::cached();
    let mut image_watch = SharedWatch::<DataImage>::cached();
    let mut subscription_watch = SharedWatch::<BMCEventSubscription>::cached();
    let host_watches = HostWatches {
        hosts: host_watch.subscribe(),
        hosts_for_jobs: host_watch.events(),
        secrets: secret_watch.events(),
        firmware_settings: settings_watch.subscribe(),
        firmware_components: components_watch.subscribe(),
        update_policies: policy_watch.subscribe(),
        data_images: image_watch.subscribe(),
    };
    let data_images_watched = image_watch.subscribe();
    let data_image_hosts = host_watch.subscribe();
    let subscription_hosts = host_watch.subscribe();
    let subscriptions_watched = subscription_watch.subscribe();
    let firmware_settings_watched = settings_watch.subscribe();
    let firmware_components_watched = components_watch.subscribe();
    let claim_watches = claim::Watches {
        hosts: all_host_watch
            .as_mut()
            .unwrap_or(&mut host_watch)
            .subscribe(),
        secrets: secret_watch.events(),
        hardware: hardware_watch.subscribe(),
        claims: claim_watch.subscribe(),
    };
    let firmware_hosts = host_watch.subscribe();
    let component_hosts = host_watch.subscribe();
    let remote_watches = remote::Watches {
        claims: claim_watch.subscribe(),
        secrets: secret_watch.events(),
    };
    let mut host_config = watcher::Config::default();
    if let Some(selector) = &config.label_selector {
        host_config = host_config.labels(selector);
    }
    let watches = async {
        let all_hosts = async {
            if let Some(w) = all_host_watch {
                w.run(
                    Api::all(client.clone()),
                    watcher::Config::default(),
                    without_managed_fields,
                    shutdown.clone(),
                )
                .await;
            }
        };
        tokio::join!(
            host_watch.run(
                Api::all(client.clone()),
                host_config,
                without_managed_fields,
                shutdown.clone()
            ),
            all_hosts,
            secret_watch.run(
                Api::all(client.clone()),
                watcher::Config::default(),
                |_| {},
                shutdown.clone()
            ),
            hardware_watch.run(
                Api::all(client.clone()),
                watcher::Config::default(),
                without_managed_fields,
                shutdown.clone()
            ),
            claim_watch.run(
                Api::all(client.clone()),
                watcher::Config::default(),
                without_managed_fields,
                shutdown.clone()
            ),
            settings_watch.run(
                Api::all(client.clone()),
                watcher::Config::default(),
                without_managed_fields,
                shutdown.clone()
            ),
            components_watch.run(
                Api::all(client.clone()),
                watcher::Config::default(),
                without_managed_fields,
                shutdown.clone()
            ),
            image_watch.run(
                Api::all(client.clone()),
                watcher::Config::default(),
                without_managed_fields,
                shutdown.clone()
            ),
            policy_watch.run(
                Api::all(client.clone()),
                watcher::Config::default(),
                without_managed_fields,
                shutdown.clone()
            ),
            subscription_watch.run(
                Api::all(client.clone()),
                watcher::Config::default(),
                without_managed_fields,
                shutdown.clone()
            ),
        );
    };
    let claims = claim::run(
        client.clone(),
        config.clone(),
        claim_watches,
        shutdown.clone(),
    );
    let remote_claims = remote::run(
        client.clone(),
        config.clone(),
        remote_watches,
        shutdown.clone(),
    );
    // One gate for every caller of a BMC in this process.
    let gate = config.bmc_gate();
    let rufio = async {
        if config.rufio {
            let (ctx, woken) = rufio::context(
                client.clone(),
                std::time::Duration::from_secs(600),
                config
                    .power_poll_interval
                    .max(std::time::Duration::from_secs(1)),
                std::time::Duration::from_secs(20),
                gate.clone(),
            );
            rufio::run(ctx, woken, config.concurrency, shutdown.clone()).await;
        }
    };
    // One credentials cache for every controller that reaches a host's BMC.
    let secrets = Arc::new(secrets::SecretCache::default());
    let hosts = run_hosts(
        client.clone(),
        provisioner,
        config.clone(),
        gate.clone(),
        secrets.clone(),
        host_watches,
        shutdown.clone(),
    );
    let kept = kept_kinds::run(client.clone(), shutdown.clone());
    let firmware = firmware_settings::run(
        Arc::new(host_bmc::ReadContext {
            client: client.clone(),
            gate: gate.clone(),
            secrets: secrets.clone(),
            hosts: firmware_hosts.store.clone(),
            timeout: config.bmc_timeout,
        }),
        firmware_hosts,
        firmware_settings_watched,
        config.firmware_schema_sweep,
        shutdown.clone(),
    );
    let components = firmware_components::run(
        Arc::new(host_bmc::ReadContext {
            client: client.clone(),
            gate: gate.clone(),
            secrets: secrets.clone(),
            hosts: component_hosts.store.clone(),
            timeout: config.bmc_timeout,
        }),
        component_hosts,
        firmware_components_watched,
        shutdown.clone(),
    );
    let data_images = data_images::run(
        Arc::new(data_images::DataImageContext {
            client: client.clone(),
            hosts: data_image_hosts.store.clone(),
        }),
        data_image_hosts,
        data_images_watched,
        shutdown.clone(),
    );
    let subscriptions = bmc_events::run(
        Arc::new(host_bmc::ReadContext {
            client: client.clone(),
            gate: gate.clone(),
            secrets: secrets.clone(),
            hosts: subscription_hosts.store.clone(),
            timeout: config.bmc_timeout,
        }),
        subscription_hosts,
        subscriptions_watched,
        shutdown.clone(),
    );
    let (hosts, claims, remote_claims, (), (), (), (), (), (), ()) = tokio::join!(
        hosts,
        claims,
        remote_claims,
        rufio,
        kept,
        firmware,
        components,
        data_images,
        subscriptions,
        watches
    );
    hosts.and(claims).and(remote_claims)
}

/// What the host and BMCJob controllers watch (shared with the other controllers).
pub struct HostWatches {
    /// The hosts this process runs (a shard's, with a label selector).
    pub hosts: Watched<BareMetalHost>,
    pub hosts_for_jobs: Events<BareMetalHost>,
    pub secrets: Events<Secret>,
    /// The hosts' firmware objects: a change wakes the host of the same name.
    pub firmware_settings: Watched<HostFirmwareSettings>,
    pub firmware_components: Watched<HostFirmwareComponents>,
    pub update_policies: Watched<HostUpdatePolicy>,
    pub data_images: Watched<DataImage>,
}

/// Runs the host controller (and BMCJobs) until `shutdown` resolves; `gate` limits the calls
/// to each BMC; `credentials` is the credentials cache it keeps current (shared with the read
/// controllers).
pub async fn run_hosts(
    client: kube::Client,
    provisioner: Arc<dyn Provisioner>,
    config: ControllerConfig,
    gate: Arc<bmc_gate::BmcGate>,
    credentials: Arc<secrets::SecretCache>,
    watches: HostWatches,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let HostWatches {
        hosts: Watched {
            store: reader,
            events: host_events,
        },
        hosts_for_jobs,
        secrets,
        firmware_settings,
        firmware_components,
        update_policies,
        data_images,
    } = watches;
    let trigger = shared_watch::applied_changed(host_events, host_trigger);
    let concurrency = config.concurrency;
    let shared = Arc::new(Context::new(
        client.clone(),
        provisioner,
        config,
        reader.clone(),
        credentials,
        gate,
    ));
    let (ctx, woken) = host::context::HostContext::new(
        shared.clone(),
        host::companions::CompanionStores {
            settings: firmware_settings.store,
            components: firmware_components.store,
            policies: update_policies.store,
            data_images: data_images.store,
        },
    );
    let ctx = Arc::new(ctx);
    let for_secrets = reader.clone();
    let for_cache = reader.clone();
    let cache = ctx.secrets.clone();
    // Secret events update the credentials cache before they trigger the hosts using them.
    let secret_events = shared_watch::touched(
        secrets
            .map(move |event| {
                cache.observe(&event, |s| !hosts_using(&for_cache, s).is_empty());
                event
            })
            .boxed(),
    );
    tracing::info!(
        provisioner = ctx.provisioner.name(),
        "host controller starting"
    );
    let shutdown = futures::FutureExt::shared(shutdown);
    let jobs = job::run(shared, hosts_for_jobs, concurrency, shutdown.clone());
    // Not its HardwareData: the host writes it and no decision reads it, so its changes (the
    // host's own inspection, most of all) would wake the host for nothing.
    let hosts = Controller::for_shared_stream(trigger, reader)
        .watches_shared_stream(
            shared_watch::ask_changed(firmware_settings.events, host::companions::settings_ask),
            host_bmc::named_after,
        )
        .watches_shared_stream(
            shared_watch::ask_changed(firmware_components.events, host::companions::components_ask),
            host_bmc::named_after,
        )
        .watches_shared_stream(
            shared_watch::touched(update_policies.events),
            host_bmc::named_after,
        )
        .watches_shared_stream(secret_events, move |secret| {
            hosts_using(&for_secrets, &secret)
        })
        .reconcile_on(futures::stream::unfold(woken, |mut rx| async move {
            rx.recv().await.map(|object| (object, rx))
        }))
        .with_config(Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(
            host::reconcile::reconcile,
            host::reconcile::error_policy,
            ctx.clone(),
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller");
            }
        });
    tokio::join!(hosts, jobs);
    // BMC calls still running are let finish (each is bounded by the BMC timeout), so none is
    // cut off halfway; their results are for whoever runs the hosts next.
    if ctx.detached.running() > 0 {
        tracing::info!(
            calls = ctx.detached.running(),
            "waiting for BMC calls in flight"
        );
        let _ = tokio::time::timeout(Duration::from_secs(30), ctx.detached.drained()).await;
    }
    tracing::info!("host controller stopped");
    Ok(())
}
