//! Moving BareMetalHosts with their Secrets and HardwareData (metal3's pivot); the phases are
//! described in the module above.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ferrometal_api::annotations as ann;
use ferrometal_api::{BareMetalHost, BareMetalHostStatus, HardwareData, ProvisioningState};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::args::Args;
use super::common::{self, Cluster, CrashHook, MOVE_PAUSE, progress};
use super::host_parts::{bmc_address, carried_status, hosts_api, secret_refs, state};
use super::hosts_item::{Item, alive};
use super::objects::{Key, copy_secret, delete_without_finalizers, show};
use super::phase::{self, Outcome};
use super::{hosts_guard, hosts_outcome, hosts_remove};

const PHASES: [&str; 4] = ["pause", "copy", "unpause", "remove"];
/// A host is quiet once its resourceVersion has not changed for this long...
const QUIET_FOR: Duration = Duration::from_secs(1);
/// ...and the wait for quiet ends after this long whatever happens.
const QUIET_MAX: Duration = Duration::from_secs(10);

/// The controller's own test for a host that never had a status (see the host controller).
fn status_is_empty(status: Option<&BareMetalHostStatus>) -> bool {
    status
        .is_none_or(|s| s.provisioning.state == ProvisioningState::None && s.last_updated.is_none())
}

pub(crate) async fn run(args: &Args, from: &Cluster, to: &Cluster) -> anyhow::Result<ExitCode> {
    let crash = CrashHook::from_env(&PHASES)?;
    let hosts = discover(args, from).await?;
    if hosts.is_empty() {
        match &args.namespace {
            Some(ns) => println!("no BareMetalHosts in namespace {ns} at {}", from.url),
            None => println!("no BareMetalHosts at {}", from.url),
        }
        return Ok(ExitCode::SUCCESS);
    }
    hosts_guard::preflight(to).await?;
    let host_namespaces: BTreeSet<String> = hosts
        .iter()
        .map(|h| h.namespace().unwrap_or_default())
        .collect();
    let policies = hosts_guard::policies(from, &host_namespaces).await?;
    if args.dry_run {
        return super::hosts_dry_run::dry_run(&hosts, &policies, from, to, args.concurrency).await;
    }
    hosts_guard::refuse_claimed(&hosts)?;
    let started = Instant::now();
    let mut items: Vec<Item> = hosts
        .iter()
        .map(|h| Item {
            key: (h.namespace().unwrap_or_default(), h.name_any()),
            pause: MOVE_PAUSE.to_string(),
            source_state: state(h),
            source_power: h.status.as_ref().is_some_and(|s| s.powered_on),
            secrets: secret_refs(h),
            hardware_data: false,
            error: None,
            target_state: None,
        })
        .collect();
    // Every namespace the hosts and their Secrets live in exists at the target before anything
    // at the source changes.
    let namespaces: BTreeSet<&str> = items
        .iter()
        .flat_map(|i| std::iter::once(&i.key).chain(i.secrets.iter()))
        .map(|k| k.0.as_str())
        .collect();
    for ns in namespaces {
        common::ensure_namespace(to, ns).await?;
    }
    hosts_guard::copy_policies(&policies, to).await?;

    let limit = args.concurrency;
    pause(&mut items, from, limit, &crash).await;
    wait_quiet(&mut items, from).await;
    copy(&mut items, from, to, limit, &crash).await;
    unpause(&mut items, to, limit, &crash).await;
    hosts_remove::remove(&mut items, from, to, limit, &crash).await;
    hosts_outcome::observe_target(&mut items, to).await;
    Ok(hosts_outcome::summary(&items, from, to, started.elapsed()))
}

async fn discover(args: &Args, from: &Cluster) -> anyhow::Result<Vec<BareMetalHost>> {
    let api: Api<BareMetalHost> = match &args.namespace {
        Some(ns) => hosts_api(from, ns),
        None => Api::all(from.client.clone()),
    };
    let mut hosts = api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("--from: listing BareMetalHosts at {}", from.url))?
        .items;
    hosts.sort_by_key(|h| (h.namespace(), h.name_any()));
    Ok(hosts)
}

// ---- phase 1: pause ----

async fn pause(items: &mut [Item], from: &Cluster, limit: usize, crash: &Option<CrashHook>) {
    phase::run("pause", alive(items), limit, crash, |item| async move {
        match pause_one(item, from).await {
            Ok(label) => Outcome::done(label),
            Err(e) => item.fail("pause", e),
        }
    })
    .await;
}

async fn pause_one(item: &mut Item, from: &Cluster) -> anyhow::Result<&'static str> {
    let api = hosts_api(from, &item.key.0);
    let host = api.get(&item.key.1).await.context("reading the host")?;
    if let Some(value) = host.annotations().get(ann::PAUSED) {
        item.pause = value.clone();
        if value == MOVE_PAUSE {
            return Ok("already paused");
        }
        progress(
            "note",
            &show(&item.key),
            &format!("already paused by {value:?}; stays paused at the target"),
        );
        return Ok("paused by someone else");
    }
    let patch = json!({"metadata": {"annotations": {ann::PAUSED: MOVE_PAUSE}}});
    api.patch(&item.key.1, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("setting the paused annotation")?;
    Ok("paused")
}

/// Waits (bounded) until no controller writes the paused hosts any more: a reconcile that was
/// under way when the pause landed may still write its status once.
async fn wait_quiet(items: &mut [Item], from: &Cluster) {
    let started = Instant::now();
    let deadline = started + QUIET_MAX;
    progress(
        "quiet",
        &format!(
            "until nothing at the source writes the paused hosts (each unchanged for {}s, at most {}s)",
            QUIET_FOR.as_secs(),
            QUIET_MAX.as_secs()
        ),
        "",
    );
    let mut seen: BTreeMap<Key, (String, Instant)> = BTreeMap::new();
    let namespaces: BTreeSet<String> = items.iter().map(|i| i.key.0.clone()).collect();
    loop {
        // One list per namespace and round, not one read per host.
        let mut quiet = true;
        let mut changing = 0;
        let mut current: BTreeMap<Key, BareMetalHost> = BTreeMap::new();
        for ns in &namespaces {
            match hosts_api(from, ns).list(&ListParams::default()).await {
                Ok(list) => current.extend(
                    list.items
                        .into_iter()
                        .map(|h| ((ns.clone(), h.name_any()), h)),
                ),
                Err(_) => quiet = false,
            }
        }
        for item in items.iter_mut().filter(|i| i.alive()) {
            let Some(host) = current.get(&item.key) else {
                quiet = false;
                changing += 1;
                continue;
            };
            item.source_state = state(host);
            item.source_power = host.status.as_ref().is_some_and(|s| s.powered_on);
            let rv = host.resource_version().unwrap_or_default();
            let now = Instant::now();
            match seen.get(&item.key) {
                Some((last, since)) if *last == rv => {
                    if now.duration_since(*since) < QUIET_FOR {
                        quiet = false;
                    }
                }
                _ => {
                    seen.insert(item.key.clone(), (rv, now));
                    quiet = false;
                    changing += 1;
                }
            }
        }
        let took = started.elapsed().as_secs_f64();
        if quiet {
            progress("quiet", &format!("after {took:.1}s"), "");
            return;
        }
        if Instant::now() >= deadline {
            progress(
                "quiet",
                &format!(
                    "not after {took:.1}s: {changing} hosts changed in the last round; copied as they are"
                ),
                "",
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

// ---- phase 2: copy ----

async fn copy(
    items: &mut [Item],
    from: &Cluster,
    to: &Cluster,
    limit: usize,
    crash: &Option<CrashHook>,
) {
    let secrets = SecretCopies::default();
    let secrets = &secrets;
    phase::run("copy", alive(items), limit, crash, |item| async move {
        match copy_one(item, from, to, secrets).await {
            Ok(labels) => Outcome::Done(labels),
            Err(e) => {
                let failed = item.fail("copy", e);
                roll_back(item, from, to).await;
                failed
            }
        }
    })
    .await;
}

/// Each Secret is copied once per run however many hosts refer to it (a fleet often shares one
/// credentials Secret): hosts copied at the same time wait for that one copy, so that no host
/// is created at the target before its Secrets. A copy that failed is tried again by the next
/// host that needs it.
#[derive(Default)]
struct SecretCopies(Mutex<BTreeMap<Key, Arc<tokio::sync::OnceCell<()>>>>);

impl SecretCopies {
    /// Copies the Secret unless this run did already; returns what was done if this call did it.
    async fn copy(
        &self,
        key: &Key,
        from: &Cluster,
        to: &Cluster,
    ) -> anyhow::Result<Option<&'static str>> {
        let cell = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_default()
            .clone();
        let mut did = None;
        let slot = &mut did;
        cell.get_or_try_init(move || async move {
            *slot = Some(copy_secret(key, from, to).await?);
            anyhow::Ok(())
        })
        .await?;
        Ok(did)
    }
}

/// The host's Secrets, the host and its HardwareData at the target. Returns the labels the
/// phase counts.
async fn copy_one(
    item: &mut Item,
    from: &Cluster,
    to: &Cluster,
    secrets: &SecretCopies,
) -> anyhow::Result<Vec<String>> {
    let host = hosts_api(from, &item.key.0)
        .get(&item.key.1)
        .await
        .context("reading the host at the source")?;
    if !host.annotations().contains_key(ann::PAUSED) {
        bail!("the host is no longer paused at the source");
    }
    item.secrets = secret_refs(&host);
    // The Secrets first: the host never exists at the target without its credentials.
    let mut labels = Vec::new();
    for key in &item.secrets {
        if let Some(what) = secrets.copy(key, from, to).await? {
            labels.push(format!("Secret{{s}} {what}"));
        }
    }
    let status = carried_status(&host, from, to).await?;
    let (target, what) = copy_host(&host, status.as_ref(), &item.pause, to).await?;
    labels.insert(0, what.to_string());
    if copy_hardware_data(&host, &target, what == TAKEN_OVER, from, to).await? {
        item.hardware_data = true;
        labels.push("with HardwareData".into());
    }
    Ok(labels)
}

/// What `copy_host` says of a host an earlier run had unpaused at the target already.
const TAKEN_OVER: &str = "already managed by the target";

/// The host as it is created at the target: metadata and spec, paused, with the source's status
/// in the status annotation; no status, finalizers or owners.
fn host_copy(
    host: &BareMetalHost,
    status: Option<&BareMetalHostStatus>,
    pause: &str,
) -> anyhow::Result<BareMetalHost> {
    let mut annotations = host.annotations().clone();
    annotations.insert(ann::PAUSED.into(), pause.into());
    if let Some(status) = status
        && !status_is_empty(Some(status))
    {
        annotations.insert(
            ann::STATUS.into(),
            serde_json::to_string(status).context("encoding the status")?,
        );
    }
    let mut copy = BareMetalHost::new(&host.name_any(), host.spec.clone());
    copy.metadata.namespace = host.namespace();
    copy.metadata.labels = host.metadata.labels.clone();
    copy.metadata.annotations = Some(annotations);
    Ok(copy)
}

/// Creates the host at the target or refreshes a copy still paused there. Returns the target's
/// host and what was done: created, updated, unchanged, or [`TAKEN_OVER`] (unpaused, or with a
/// status).
async fn copy_host(
    host: &BareMetalHost,
    status: Option<&BareMetalHostStatus>,
    pause: &str,
    to: &Cluster,
) -> anyhow::Result<(BareMetalHost, &'static str)> {
    let ns = host.namespace().unwrap_or_default();
    let name = host.name_any();
    let api = hosts_api(to, &ns);
    let mut want = host_copy(host, status, pause)?;
    let Some(existing) = api
        .get_opt(&name)
        .await
        .context("reading the host at the target")?
    else {
        let created = api
            .create(&PostParams::default(), &want)
            .await
            .context("creating the host at the target")?;
        return Ok((created, "created"));
    };
    if bmc_address(&existing) != bmc_address(host) {
        bail!("another BareMetalHost {ns}/{name} (with another BMC address) exists at the target");
    }
    if !existing.annotations().contains_key(ann::PAUSED)
        || !status_is_empty(existing.status.as_ref())
    {
        // Unpaused there by an earlier run: the target manages it now.
        return Ok((existing, TAKEN_OVER));
    }
    // Still the move's paused copy: bring it up to date with the (paused) source.
    if existing.metadata.labels == want.metadata.labels
        && existing.metadata.annotations == want.metadata.annotations
        && existing.spec == want.spec
    {
        return Ok((existing, "unchanged"));
    }
    want.metadata.resource_version = existing.metadata.resource_version.clone();
    want.metadata.finalizers = existing.metadata.finalizers.clone();
    let updated = api
        .replace(&name, &PostParams::default(), &want)
        .await
        .context("updating the paused copy at the target")?;
    Ok((updated, "updated"))
}

/// Copies the host's HardwareData (if any), owned by the target's host. Returns whether there
/// is one.
async fn copy_hardware_data(
    host: &BareMetalHost,
    target: &BareMetalHost,
    taken_over: bool,
    from: &Cluster,
    to: &Cluster,
) -> anyhow::Result<bool> {
    let ns = host.namespace().unwrap_or_default();
    let name = host.name_any();
    let Some(source) = Api::<HardwareData>::namespaced(from.client.clone(), &ns)
        .get_opt(&name)
        .await
        .context("reading the HardwareData at the source")?
    else {
        return Ok(false);
    };
    let owner = target.uid().map(|uid| OwnerReference {
        api_version: BareMetalHost::api_version(&()).into(),
        kind: BareMetalHost::kind(&()).into(),
        name: name.clone(),
        uid,
        controller: Some(true),
        block_owner_deletion: None,
    });
    let mut want = HardwareData::new(&name, source.spec.clone());
    want.metadata.namespace = Some(ns.clone());
    want.metadata.labels = source.metadata.labels.clone();
    want.metadata.annotations = source.metadata.annotations.clone();
    want.metadata.owner_references = owner.map(|o| vec![o]);
    let api = Api::<HardwareData>::namespaced(to.client.clone(), &ns);
    match api
        .get_opt(&name)
        .await
        .context("reading the HardwareData at the target")?
    {
        None => match api.create(&PostParams::default(), &want).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context("creating the HardwareData at the target"),
        },
        // Once the target manages the host, its HardwareData is the target's business.
        Some(_) if taken_over => {}
        Some(t)
            if t.spec == want.spec
                && t.metadata.owner_references == want.metadata.owner_references => {}
        Some(t) => {
            want.metadata.resource_version = t.metadata.resource_version.clone();
            want.metadata.finalizers = t.metadata.finalizers.clone();
            api.replace(&name, &PostParams::default(), &want)
                .await
                .context("updating the HardwareData at the target")?;
        }
    }
    Ok(true)
}

/// A host that could not be copied stays at the source: its paused copy at the target (if the
/// move made one) is deleted and the move's pause at the source removed.
async fn roll_back(item: &Item, from: &Cluster, to: &Cluster) {
    let (ns, name) = &item.key;
    let target = hosts_api(to, ns);
    if let Ok(Some(t)) = target.get_opt(name).await
        && t.annotations().get(ann::PAUSED) == Some(&item.pause)
        && status_is_empty(t.status.as_ref())
    {
        let _ = delete_without_finalizers(&target, name).await;
        let _ = delete_without_finalizers(
            &Api::<HardwareData>::namespaced(to.client.clone(), ns),
            name,
        )
        .await;
    }
    let source = hosts_api(from, ns);
    if let Ok(h) = source.get(name).await
        && h.annotations().get(ann::PAUSED).map(String::as_str) == Some(MOVE_PAUSE)
    {
        let patch = json!({"metadata": {"annotations": {ann::PAUSED: null}}});
        if source
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            progress("resumed", &show(&item.key), "left at the source, unpaused");
        }
    }
}

// ---- phase 3: unpause ----

async fn unpause(items: &mut [Item], to: &Cluster, limit: usize, crash: &Option<CrashHook>) {
    phase::run("unpause", alive(items), limit, crash, |item| async move {
        match unpause_one(item, to).await {
            Ok(label) => Outcome::done(label),
            Err(e) => item.fail("unpause", e),
        }
    })
    .await;
}

async fn unpause_one(item: &Item, to: &Cluster) -> anyhow::Result<&'static str> {
    let api = hosts_api(to, &item.key.0);
    let host = api
        .get(&item.key.1)
        .await
        .context("reading the host at the target")?;
    match host.annotations().get(ann::PAUSED) {
        Some(v) if v == MOVE_PAUSE => {
            let patch = json!({"metadata": {"annotations": {ann::PAUSED: null}}});
            api.patch(&item.key.1, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .context("removing the paused annotation at the target")?;
            Ok("unpaused")
        }
        Some(v) => {
            progress("note", &show(&item.key), &format!("stays paused by {v:?}"));
            Ok("paused by someone else")
        }
        None => Ok("already unpaused"),
    }
}
