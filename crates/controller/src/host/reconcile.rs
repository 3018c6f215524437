//! One reconcile of one host: read the host's Secrets, decide, then write what changed, or
//! hand the one provisioner call it needs to a task off the worker, which decides again with
//! the call's outcome and writes what changed there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrometal_api::BareMetalHost;
use ferrometal_api::annotations as ann;
use ferrometal_api::media::SecretStatus;
use ferrometal_api::spec_fault::{DataField, SpecFault};
use ferrometal_bmc::Credentials;
use ferrometal_provisioner::{Deployment, ErrorKind, ProvisionerError, Step};
use k8s_openapi::api::core::v1::{Secret, SecretReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::Instrument;

use super::boot_media;
use super::capacity;
use super::chain::{Chain, Next};
use super::companions::{
    data_image_work, ensure_firmware_objects, firmware_work, record_data_image, record_updates,
    settings_to_read_again,
};
use super::context::HostContext;
use super::decide::{Call, Decision, FinalizerChange, MemoChange, Outcome};
use crate::detached::{Found, Settled};
use crate::error::{Error, ignore_not_found};
use crate::events::HostEvent;
use crate::host_info::{host_info, host_key};
use crate::merge_patch::merge_diff;
use crate::metrics::metrics;
use crate::secrets::read_credentials;

pub async fn reconcile(host: Arc<BareMetalHost>, ctx: Arc<HostContext>) -> Result<Action, Error> {
    let span = tracing::info_span!(
        "reconcile",
        namespace = %host.namespace_or_default(),
        name = %host.name_any()
    );
    async move {
        let started = Instant::now();
        metrics().reconciles.inc();
        let result = reconcile_host(&host, &ctx).await;
        metrics()
            .reconcile_duration
            .observe(started.elapsed().as_secs_f64());
        if result.is_ok() {
            ctx.api_succeeded(&host_key(&host));
        }
        result
    }
    .instrument(span)
    .await
}

pub fn error_policy(host: Arc<BareMetalHost>, error: &Error, ctx: Arc<HostContext>) -> Action {
    Action::requeue(api_backoff(&host, error, &ctx))
}

/// Counts a failed API write for the host and says when to try again: exponential, jittered.
fn api_backoff(host: &BareMetalHost, error: &Error, ctx: &HostContext) -> Duration {
    metrics().error(error.category());
    let n = ctx.api_failed(&host_key(host));
    tracing::warn!(
        namespace = %host.namespace_or_default(),
        name = %host.name_any(),
        error = %error,
        failures = n,
        "reconcile failed"
    );
    let exp = (n.max(1) - 1).min(10);
    let after = ctx
        .config
        .api_error_backoff
        .saturating_mul(1 << exp)
        .min(Duration::from_secs(300));
    after.mul_f64(0.9 + 0.2 * rand::random::<f64>())
}

async fn reconcile_host(
    host: &Arc<BareMetalHost>,
    ctx: &Arc<HostContext>,
) -> Result<Action, Error> {
    let key = host_key(host);
    if host.annotations().contains_key(ann::PAUSED) {
        // A call that ended meanwhile is dropped: unpausing acts on the host as found then.
        let _ = ctx.detached.take(&key);
        return Ok(Action::await_change());
    }
    // The one BMC call of a reconcile runs off the worker; its end wakes the host.
    let mut chain = match ctx.detached.take(&key) {
        Found::Running => return Ok(Action::requeue(DETACHED_BACKSTOP)),
        Found::Finished { state, deferred } if state.uid == host.metadata.uid => {
            // Decided where the call ran: only the writes are left.
            let action = apply(ctx, host, &key, state.total).await?;
            // Reconciles that came while the call ran were only noted: look at the host again.
            return Ok(if deferred {
                Action::requeue(Duration::ZERO)
            } else {
                action
            });
        }
        Found::Finished { .. } | Found::Idle => {
            if ctx.is_stale(&key, host.meta().resource_version.as_deref()) {
                // The cache has not caught up with our own last write yet; acting on it would
                // repeat the last step.
                return Ok(Action::requeue(Duration::from_millis(50)));
            }
            if !ctx.provisioner.is_ready().await {
                return Ok(Action::requeue(ctx.config.not_ready_retry));
            }
            let (observation, credentials) =
                read_credentials(&ctx.client, &ctx.secrets, host).await?;
            let firmware = firmware_work(host, &ctx.firmware);
            let data_image = data_image_work(host, &ctx.firmware);
            Chain::new(
                host,
                observation,
                credentials,
                ctx.memo(&key),
                firmware,
                data_image,
                ctx.provisioner.builds_software_raid(),
            )
        }
    };
    if let Some(call) = decide_until_a_call(ctx, &mut chain, None).await {
        tracing::debug!(?call, "provisioner call");
        let task_ctx = ctx.clone();
        let object = ObjectRef::from_obj(host.as_ref());
        let task_key = key.clone();
        ctx.detached.spawn_settling(
            key,
            object.clone(),
            {
                let hosts = ctx.hosts.clone();
                move |object| hosts.get(object).is_some()
            },
            async move {
                let outcome = execute(
                    &task_ctx,
                    &chain.current,
                    &call,
                    chain.credentials.as_ref(),
                )
                .await;
                if let Outcome::Failed(e) = &outcome {
                    tracing::info!(?call, kind = e.kind.as_str(), error = %e.message, "provisioner call failed");
                }
                // Boxed: the task is sized for its largest step, and a thousand calls
                // wait at once on their BMCs with settling's writes not yet begun.
                Box::pin(settle(&task_ctx, object, &task_key, chain, call, outcome))
                    .await
            }
            .instrument(tracing::Span::current()),
        );
        return Ok(Action::requeue(DETACHED_BACKSTOP));
    }
    apply(ctx, host, &key, chain.total).await
}

/// Advances the chain (capacity checks included) until everything is decided (`None`) or a BMC
/// call is needed; `last` is the outcome of the call the chain stopped for.
async fn decide_until_a_call(
    ctx: &HostContext,
    chain: &mut Chain,
    mut last: Option<(Call, Outcome)>,
) -> Option<Call> {
    let now = Timestamp::now();
    loop {
        match chain.advance(&ctx.timing, now, last.take()) {
            Next::Apply => return None,
            Next::Call(Call::HasCapacity) => {
                let granted = ctx.capacity.request(ctx, &chain.current).await;
                last = Some((Call::HasCapacity, Outcome::Capacity(granted)));
            }
            Next::Call(call) => return Some(call),
        }
    }
}

/// Decides on with a call's outcome where the call ran, and writes what it decided there: a
/// status, HardwareData, Events and the memo need no second reconcile (the next one is the
/// host's next step, when the decision asks for it; adding the finalizer wakes it by itself).
/// Removing the finalizer, annotation changes, a decision that waits for a change, a host
/// paused or replaced meanwhile, are left to the next reconcile, on the host as the cache has
/// it then.
async fn settle(
    ctx: &HostContext,
    object: ObjectRef<BareMetalHost>,
    key: &str,
    mut chain: Chain,
    call: Call,
    outcome: Outcome,
) -> Settled<Chain> {
    // `advance` ends a chain before its second BMC call; should it not, the next reconcile
    // makes the call.
    if decide_until_a_call(ctx, &mut chain, Some((call, outcome)))
        .await
        .is_some()
    {
        chain.total.requeue = Some(Duration::ZERO);
    }
    // A decision that waits for a change of the host goes through a reconcile, whose
    // `await_change` replaces the backstop requeue the call's reconcile left: settled here,
    // the backstop would come back to the host for nothing.
    if chain.total.finalizer == Some(FinalizerChange::Remove)
        || !chain.total.remove_annotations.is_empty()
        || chain.total.requeue.is_none()
    {
        return Settled::Apply(chain);
    }
    let host = match ctx.hosts.get(&object) {
        Some(h) if h.metadata.uid == chain.uid && !h.annotations().contains_key(ann::PAUSED) => h,
        _ => return Settled::Apply(chain),
    };
    let mut requeue = chain.total.requeue;
    if chain.total.finalizer == Some(FinalizerChange::Add) {
        if has_finalizer(&host) {
            chain.total.finalizer = None;
        } else {
            // The finalizer's write (the last of `apply`) is a change the host is watched for:
            // its event is the wake-up, and a second one would be a second reconcile.
            requeue = None;
        }
    }
    match apply(ctx, &host, key, chain.total).await {
        Ok(_) => {
            ctx.api_succeeded(key);
            Settled::Quiet(requeue)
        }
        // The outcome is lost, as when a reconcile's writes fail: the host is decided afresh.
        Err(e) => Settled::Quiet(Some(api_backoff(&host, &e, ctx))),
    }
}

fn has_finalizer(host: &BareMetalHost) -> bool {
    host.finalizers().iter().any(|f| f == ann::FINALIZER)
}

/// Looks again after this long should a finished call's wake-up be lost (it is not: this only
/// bounds the damage of a bug).
const DETACHED_BACKSTOP: Duration = Duration::from_secs(300);

/// Reads a data Secret's content; the key is the field's own name or `value`.
async fn data_secret(
    ctx: &HostContext,
    host: &BareMetalHost,
    kind: DataField,
    reference: &Option<SecretReference>,
) -> Result<Option<String>, ProvisionerError> {
    let Some(name) = reference.as_ref().and_then(|r| r.name.clone()) else {
        return Ok(None);
    };
    let field = kind.field();
    let label = format!("spec.{field}");
    secret_value(ctx, host, &name, &label, &[field, "value"], Some(kind))
        .await
        .map(Some)
}

/// The `networkData` key of the Secret `spec.preprovisioningNetworkDataName` names (metal3's
/// key), if the host names one.
async fn preprovisioning_network_data(
    ctx: &HostContext,
    host: &BareMetalHost,
) -> Result<Option<(String, SecretStatus)>, ProvisionerError> {
    let Some(name) = host
        .spec
        .preprovisioning_network_data_name
        .as_deref()
        .filter(|n| !n.is_empty())
    else {
        return Ok(None);
    };
    let label = "spec.preprovisioningNetworkDataName";
    let (text, version) = secret_entry(ctx, host, name, label, &["networkData"], None).await?;
    Ok(Some((
        text,
        SecretStatus {
            name: name.to_string(),
            version,
        },
    )))
}

/// The first of `keys` in the host's Secret `name`, for the spec field `label`; errors name
/// both, and a data Secret's (`kind`) missing Secret or key is the spec's fault.
async fn secret_value(
    ctx: &HostContext,
    host: &BareMetalHost,
    name: &str,
    label: &str,
    keys: &[&str],
    kind: Option<DataField>,
) -> Result<String, ProvisionerError> {
    Ok(secret_entry(ctx, host, name, label, keys, kind).await?.0)
}

/// [`secret_value`] and the Secret's resourceVersion.
async fn secret_entry(
    ctx: &HostContext,
    host: &BareMetalHost,
    name: &str,
    label: &str,
    keys: &[&str],
    kind: Option<DataField>,
) -> Result<(String, String), ProvisionerError> {
    let ns = host.namespace_or_default();
    let fault = |e: ProvisionerError, f: fn(DataField) -> SpecFault| match kind {
        Some(k) => e.in_spec(f(k)),
        None => e,
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let secret = api.get_opt(name).await.map_err(|e| {
        ProvisionerError::new(
            ErrorKind::Unreachable,
            format!("{label}: reading Secret {ns}/{name}: {e}"),
        )
    })?;
    let secret = secret.ok_or_else(|| {
        fault(
            ProvisionerError::new(
                ErrorKind::InvalidInput,
                format!("{label}: Secret {ns}/{name} not found"),
            ),
            SpecFault::DataSecretMissing,
        )
    })?;
    let version = secret.metadata.resource_version.clone().unwrap_or_default();
    let data = secret.data.unwrap_or_default();
    let value = keys.iter().find_map(|k| data.get(*k)).ok_or_else(|| {
        let wanted: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
        fault(
            ProvisionerError::new(
                ErrorKind::InvalidInput,
                format!(
                    "{label}: Secret {ns}/{name} has no {} key",
                    wanted.join(" or ")
                ),
            ),
            SpecFault::DataSecretKeyMissing,
        )
    })?;
    Ok((String::from_utf8_lossy(&value.0).into_owned(), version))
}

async fn deployment(
    ctx: &HostContext,
    host: &BareMetalHost,
) -> Result<Deployment, ProvisionerError> {
    Ok(Deployment {
        image: host.spec.image.clone(),
        custom_deploy: host.spec.custom_deploy.clone(),
        user_data: data_secret(ctx, host, DataField::UserData, &host.spec.user_data).await?,
        network_data: data_secret(ctx, host, DataField::NetworkData, &host.spec.network_data)
            .await?,
        meta_data: data_secret(ctx, host, DataField::MetaData, &host.spec.meta_data).await?,
        // What preparing checked and recorded (as metal3 builds RAID there): a later change of
        // spec.raid waits for the next preparing.
        software_raid: host
            .status
            .as_ref()
            .and_then(|st| st.provisioning.raid.as_ref())
            .and_then(|r| r.software_raid_volumes.clone())
            .unwrap_or_default(),
    })
}

fn step<T>(s: Step<T>, done: impl FnOnce(T) -> Outcome) -> Outcome {
    match s {
        Step::Done(t) => done(t),
        Step::Waiting {
            requeue_after,
            reason,
        } => Outcome::Waiting {
            requeue_after,
            reason,
        },
    }
}

fn done(_: ()) -> Outcome {
    Outcome::Done
}

async fn execute(
    ctx: &HostContext,
    host: &BareMetalHost,
    call: &Call,
    credentials: Option<&Credentials>,
) -> Outcome {
    let mut info = match host_info(host, credentials) {
        Ok(i) => i,
        Err(e) => return Outcome::Failed(e),
    };
    // What a deploy agent's ramdisk boots with; only work that may boot one reads it.
    let may_boot_agent = matches!(
        call,
        Call::Inspect { .. } | Call::Prepare | Call::Provision | Call::Deprovision
    );
    let mut network_data = None;
    if may_boot_agent {
        match preprovisioning_network_data(ctx, host).await {
            Ok(data) => {
                let (text, version) = data.unzip();
                info.preprovisioning_network_data = text;
                network_data = version;
            }
            Err(e) => return Outcome::Failed(e),
        }
    }
    // Data Secrets are read before the BMC's turn: an API hiccup is not the BMC's failure.
    let deployment = match call {
        Call::Provision | Call::Adopt => match deployment(ctx, host).await {
            Ok(d) => Some(d),
            Err(e) => return Outcome::Failed(e),
        },
        _ => None,
    };
    let p = &ctx.provisioner;
    let run = async {
        match (call, &deployment) {
            (
                Call::Register {
                    credentials_changed,
                },
                _,
            ) => p
                .register(&info, *credentials_changed)
                .await
                .map(|s| step(s, Outcome::Registered)),
            (Call::Inspect { refresh }, _) => p
                .inspect(&info, *refresh)
                .await
                .map(|s| step(s, Outcome::Inspected)),
            (Call::Prepare, _) => p.prepare(&info).await.map(|s| step(s, done)),
            (Call::DataImage(url), _) => p
                .data_image(&info, url.as_deref())
                .await
                .map(|s| step(s, done)),
            (Call::ConfigureRaid(volumes), _) => p
                .configure_raid(&info, volumes)
                .await
                .map(|s| step(s, done)),
            (Call::ChangeFirmware(changes), _) => p
                .change_firmware(&info, changes)
                .await
                .map(|s| step(s, done)),
            (Call::Provision, Some(d)) => p.provision(&info, d).await.map(|s| step(s, done)),
            (Call::Adopt, Some(d)) => p.adopt(&info, d).await.map(|s| step(s, done)),
            (Call::Deprovision, _) => p.deprovision(&info).await.map(|s| step(s, done)),
            (Call::PowerState, _) => p.power_state(&info).await.map(Outcome::Power),
            (Call::PowerOn, _) => p.power_on(&info).await.map(|s| step(s, done)),
            (Call::PowerOff(mode), _) => p.power_off(&info, *mode).await.map(|s| step(s, done)),
            (Call::Operation(op), _) => p.operation(&info, *op).await.map(|s| step(s, done)),
            (Call::Detach, _) => p.detach(&info).await.map(|s| step(s, done)),
            (Call::Delete, _) => p.delete(&info).await.map(|s| step(s, done)),
            (Call::HasCapacity | Call::Provision | Call::Adopt, _) => {
                unreachable!("the capacity check runs inline; deployments are read above")
            }
        }
    };
    let outcome = ctx.bmc(&info, run).await.unwrap_or_else(Outcome::Failed);
    let work = match call {
        Call::Inspect { .. } => Some("inspect"),
        Call::Provision => Some("provision"),
        Call::Deprovision => Some("deprovision"),
        _ => None,
    };
    // Hosts of a backend without an agent of its own have no PreprovisioningImage to keep;
    // otherwise the first report of each host in this process reads the stored one.
    if may_boot_agent && p.boots_agent() {
        let media = p.agent_boot_media(&info.key);
        if let Err(e) = boot_media::record(
            &ctx.client,
            &ctx.boot_media,
            host,
            &info.key,
            media,
            network_data,
        )
        .await
        {
            // Only the report is lost: the next call of the work records it again.
            tracing::warn!(host = %host.name_any(), error = %e, "recording the agent boot media failed");
        }
    }
    if let Some(work) = work {
        let phases = p.take_phase_timings(&info.key);
        if !phases.is_empty() {
            record_phases(ctx, host, work, &phases).await;
        }
    }
    outcome
}

/// A finished piece of agent work: an Event per phase, the phase histogram, and the phases in
/// one annotation (`ferrometal.io/<work>-phases`) that `kubectl describe` shows after the
/// Events are gone.
async fn record_phases(
    ctx: &HostContext,
    host: &BareMetalHost,
    work: &str,
    phases: &[ferrometal_provisioner::PhaseTiming],
) {
    let provisioner = ctx.provisioner.name().to_string();
    let mut events = Vec::new();
    let mut summary = Vec::new();
    for p in phases {
        metrics()
            .provision_phase_seconds
            .get_or_create(&crate::metrics::PhaseLabels {
                phase: p.phase.clone(),
                provisioner: provisioner.clone(),
            })
            .observe(p.seconds);
        let note = p
            .note
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        let text = format!("{} {:.1}s{note}", p.phase, p.seconds);
        events.push(HostEvent {
            warning: false,
            reason: "PhaseTiming".to_string(),
            note: format!("{work}: {text}"),
        });
        summary.push(text);
    }
    ctx.events.publish(host, &events).await;
    let api: Api<BareMetalHost> = Api::namespaced(ctx.client.clone(), host.namespace_or_default());
    let patch = json!({"metadata": {"annotations": {
        format!("ferrometal.io/{work}-phases"): summary.join(", ")
    }}});
    if let Err(e) = api
        .patch(
            &host.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        tracing::warn!(host = %host.name_any(), error = %e, "recording the phase timings failed");
    }
}

async fn apply(
    ctx: &HostContext,
    host: &BareMetalHost,
    key: &str,
    d: Decision,
) -> Result<Action, Error> {
    let name = host.name_any();
    let api: Api<BareMetalHost> = Api::namespaced(ctx.client.clone(), host.namespace_or_default());
    if let Some(category) = d.error_category {
        metrics().error(category);
    }
    // HardwareData before the status that records the inspection: if it cannot be written,
    // the inspection result is not marked done and the step runs again.
    if let Some(details) = &d.hardware_data {
        crate::hardware_data::apply(&ctx.client, host, details).await?;
    }
    // Status next: a status restored from the annotation must be stored before the
    // annotation goes.
    if let Some(new) = &d.status {
        let old = serde_json::to_value(&host.status)?;
        let new = serde_json::to_value(new)?;
        if let Some(diff) = merge_diff(&old, &new) {
            let written = api
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": diff })),
                )
                .await;
            if let Some(h) = ignore_not_found(written)? {
                ctx.wrote(key, h.meta().resource_version.as_deref());
            }
        }
    }
    // A slot this decision gives back (its operation ended, or the host goes) is the next
    // delayed host's.
    let holds = capacity::holds_slot(host.status.as_ref());
    if holds
        && (d.finalizer == Some(FinalizerChange::Remove)
            || d.status
                .as_ref()
                .is_some_and(|s| !capacity::holds_slot(Some(s))))
    {
        ctx.capacity.released(ctx, key, &ctx.detached.waker()).await;
    }
    // Before the metadata patch: removing the finalizer makes the host vanish.
    ctx.events.publish(host, &d.events).await;
    match d.memo {
        MemoChange::Keep => {}
        MemoChange::Set(m) => ctx.set_memo(key, Some(m)),
        MemoChange::Forget => ctx.set_memo(key, None),
    }
    // After the memo, which keeps the updates from being made again while this is retried.
    if !d.updates_done.is_empty() {
        record_updates(&ctx.client, host, &ctx.firmware, &d.updates_done).await?;
        settings_to_read_again(&ctx.client, host).await?;
    }
    if let Some(result) = &d.data_image {
        record_data_image(&ctx.client, host, &ctx.firmware, result).await?;
    }
    if d.finalizer == Some(FinalizerChange::Remove) {
        ctx.set_state(key, None);
        ctx.boot_media.forget(key);
    } else {
        let status = d.status.as_ref().or(host.status.as_ref());
        ctx.set_state(key, Some(super::context::state_label(status)));
        let state = status.map(|s| s.provisioning.state).unwrap_or_default();
        // Only the objects are missing: the next reconcile of the host tries again.
        if let Err(e) = ensure_firmware_objects(&ctx.client, host, state, &ctx.firmware).await {
            tracing::warn!(host = %name, error = %e, "creating the host's firmware objects failed");
        }
    }
    // Last: a finalizer or annotation change wakes the host, which should find every other
    // write of this decision done.
    let mut meta = serde_json::Map::new();
    if !d.remove_annotations.is_empty() {
        let removals: serde_json::Map<String, Value> = d
            .remove_annotations
            .iter()
            .map(|k| (k.clone(), Value::Null))
            .collect();
        meta.insert("annotations".into(), Value::Object(removals));
    }
    if let Some(change) = d.finalizer {
        let mut finalizers: Vec<String> = host.finalizers().to_vec();
        match change {
            FinalizerChange::Add => finalizers.push(ann::FINALIZER.to_string()),
            FinalizerChange::Remove => finalizers.retain(|f| f != ann::FINALIZER),
        }
        // A finalizer added meanwhile (a settled call applies to the host as it is now).
        if (change == FinalizerChange::Add) != has_finalizer(host) {
            meta.insert("finalizers".into(), json!(finalizers));
        }
    }
    if !meta.is_empty() {
        let patched = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": meta })),
            )
            .await;
        if let Some(h) = ignore_not_found(patched)? {
            ctx.wrote(key, h.meta().resource_version.as_deref());
        }
    }
    Ok(match d.requeue {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}
