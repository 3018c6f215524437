//! Moving BareMetalHosts with their Secrets and HardwareData (metal3's pivot); the phases are
//! described in the module above.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ferrometal_api::annotations as ann;
use ferrometal_api::{BareMetalHost, BareMetalHostStatus, HardwareData, ProvisioningState};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::args::Args;
use super::common::{self, Cluster, CrashHook, MOVE_PAUSE, or_dash, progress};
use super::host_parts::{bmc_address, carried_status, hosts_api, secret_refs, state};
use super::hosts_guard;
use super::objects::{Key, copy_secret, delete_without_finalizers, show};

const PHASES: [&str; 4] = ["pause", "copy", "unpause", "remove"];
/// A host is quiet once its resourceVersion has not changed for this long...
const QUIET_FOR: Duration = Duration::from_secs(1);
/// ...and the wait for quiet ends after this long whatever happens.
const QUIET_MAX: Duration = Duration::from_secs(10);
/// How long to wait for the moved hosts to show their state at the target.
const TARGET_WAIT: Duration = Duration::from_secs(120);

/// One host being moved.
struct Item {
    key: Key,
    /// The paused value the copy at the target carries: ours, or the one someone else paused
    /// the host with (then it stays paused at the target too).
    pause: String,
    source_state: String,
    source_power: bool,
    secrets: Vec<Key>,
    hardware_data: bool,
    /// Set once a phase failed for this host; later phases skip it.
    error: Option<String>,
    target_state: Option<String>,
}

impl Item {
    fn alive(&self) -> bool {
        self.error.is_none()
    }
    fn fail(&mut self, phase: &str, e: anyhow::Error) {
        let message = format!("{phase}: {e:#}");
        progress("failed", &show(&self.key), &message);
        self.error = Some(message);
    }
}

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
        return super::hosts_dry_run::dry_run(&hosts, &policies, from, to).await;
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

    pause(&mut items, from, &crash).await;
    wait_quiet(&mut items, from).await;
    copy(&mut items, from, to, &crash).await;
    unpause(&mut items, to, &crash).await;
    remove(&mut items, from, to, &crash).await;
    observe_target(&mut items, to).await;
    Ok(summary(&items, from, to, started.elapsed()))
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

async fn pause(items: &mut [Item], from: &Cluster, crash: &Option<CrashHook>) {
    for (n, item) in items.iter_mut().enumerate() {
        match pause_one(item, from).await {
            Ok(note) => progress("paused", &show(&item.key), &note),
            Err(e) => item.fail("pause", e),
        }
        CrashHook::object_done(crash, "pause", n + 1);
    }
    CrashHook::phase_done(crash, "pause");
}

async fn pause_one(item: &mut Item, from: &Cluster) -> anyhow::Result<String> {
    let api = hosts_api(from, &item.key.0);
    let host = api.get(&item.key.1).await.context("reading the host")?;
    if let Some(value) = host.annotations().get(ann::PAUSED) {
        item.pause = value.clone();
        return Ok(if value == MOVE_PAUSE {
            "already".into()
        } else {
            format!("already paused by {value:?}; stays paused at the target")
        });
    }
    let patch = json!({"metadata": {"annotations": {ann::PAUSED: MOVE_PAUSE}}});
    api.patch(&item.key.1, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("setting the paused annotation")?;
    Ok(String::new())
}

/// Waits (bounded) until no controller writes the paused hosts any more: a reconcile that was
/// under way when the pause landed may still write its status once.
async fn wait_quiet(items: &mut [Item], from: &Cluster) {
    let deadline = Instant::now() + QUIET_MAX;
    let mut seen: BTreeMap<Key, (String, Instant)> = BTreeMap::new();
    let namespaces: BTreeSet<String> = items.iter().map(|i| i.key.0.clone()).collect();
    loop {
        // One list per namespace and round, not one read per host.
        let mut quiet = true;
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
                }
            }
        }
        if quiet || Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

// ---- phase 2: copy ----

async fn copy(items: &mut [Item], from: &Cluster, to: &Cluster, crash: &Option<CrashHook>) {
    let mut n = 0;
    for item in items.iter_mut().filter(|i| i.alive()) {
        match copy_one(item, from, to).await {
            Ok(note) => progress("copied", &show(&item.key), &note),
            Err(e) => {
                item.fail("copy", e);
                roll_back(item, from, to).await;
            }
        }
        n += 1;
        CrashHook::object_done(crash, "copy", n);
    }
    CrashHook::phase_done(crash, "copy");
}

async fn copy_one(item: &mut Item, from: &Cluster, to: &Cluster) -> anyhow::Result<String> {
    let host = hosts_api(from, &item.key.0)
        .get(&item.key.1)
        .await
        .context("reading the host at the source")?;
    if !host.annotations().contains_key(ann::PAUSED) {
        bail!("the host is no longer paused at the source");
    }
    item.secrets = secret_refs(&host);
    // The Secrets first: the host never exists at the target without its credentials.
    let mut notes = Vec::new();
    for key in item.secrets.clone() {
        let what = copy_secret(&key, from, to).await?;
        notes.push(format!("secret {} {what}", key.1));
    }
    let status = carried_status(&host, from, to).await?;
    let (target, taken_over) = copy_host(&host, status.as_ref(), &item.pause, to).await?;
    notes.push(if taken_over {
        "host already at the target".to_string()
    } else {
        "host".to_string()
    });
    if copy_hardware_data(&host, &target, taken_over, from, to).await? {
        item.hardware_data = true;
        notes.push("hardware data".into());
    }
    Ok(notes.join(", "))
}

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
/// host and whether it had been taken over already (unpaused, or with a status).
async fn copy_host(
    host: &BareMetalHost,
    status: Option<&BareMetalHostStatus>,
    pause: &str,
    to: &Cluster,
) -> anyhow::Result<(BareMetalHost, bool)> {
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
        return Ok((created, false));
    };
    if bmc_address(&existing) != bmc_address(host) {
        bail!("another BareMetalHost {ns}/{name} (with another BMC address) exists at the target");
    }
    if !existing.annotations().contains_key(ann::PAUSED)
        || !status_is_empty(existing.status.as_ref())
    {
        // Unpaused there by an earlier run: the target manages it now.
        return Ok((existing, true));
    }
    // Still the move's paused copy: bring it up to date with the (paused) source.
    if existing.metadata.labels == want.metadata.labels
        && existing.metadata.annotations == want.metadata.annotations
        && existing.spec == want.spec
    {
        return Ok((existing, false));
    }
    want.metadata.resource_version = existing.metadata.resource_version.clone();
    want.metadata.finalizers = existing.metadata.finalizers.clone();
    let updated = api
        .replace(&name, &PostParams::default(), &want)
        .await
        .context("updating the paused copy at the target")?;
    Ok((updated, false))
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

async fn unpause(items: &mut [Item], to: &Cluster, crash: &Option<CrashHook>) {
    let mut n = 0;
    for item in items.iter_mut().filter(|i| i.alive()) {
        match unpause_one(item, to).await {
            Ok(note) => progress("unpaused", &show(&item.key), &note),
            Err(e) => item.fail("unpause", e),
        }
        n += 1;
        CrashHook::object_done(crash, "unpause", n);
    }
    CrashHook::phase_done(crash, "unpause");
}

async fn unpause_one(item: &Item, to: &Cluster) -> anyhow::Result<String> {
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
            Ok(String::new())
        }
        Some(v) => Ok(format!("stays paused by {v:?}")),
        None => Ok("already".into()),
    }
}

// ---- phase 4: remove ----

async fn remove(items: &mut [Item], from: &Cluster, to: &Cluster, crash: &Option<CrashHook>) {
    let leaving: Vec<(Key, String)> = items
        .iter()
        .filter(|i| i.alive())
        .map(|i| (i.key.clone(), i.pause.clone()))
        .collect();
    super::hosts_detach::detach(&leaving, from, to).await;
    // Who refers to each Secret at the source: a Secret is deleted with the last host leaving.
    let mut users: BTreeMap<Key, BTreeSet<Key>> = BTreeMap::new();
    let everyone = match Api::<BareMetalHost>::all(from.client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(e) => {
            // Without the full list no Secret can be known to be unused: keep them all.
            progress(
                "warning",
                "secrets",
                &format!("listing hosts at the source: {e}; Secrets stay at the source"),
            );
            Vec::new()
        }
    };
    let listed = !everyone.is_empty();
    for h in &everyone {
        let key = (h.namespace().unwrap_or_default(), h.name_any());
        for s in secret_refs(h) {
            users.entry(s).or_default().insert(key.clone());
        }
    }
    let mut n = 0;
    for item in items.iter_mut().filter(|i| i.alive()) {
        match remove_one(item, from, to, listed, &mut users).await {
            Ok(note) => progress("removed", &show(&item.key), &note),
            Err(e) => item.fail("remove", e),
        }
        n += 1;
        CrashHook::object_done(crash, "remove", n);
    }
    CrashHook::phase_done(crash, "remove");
}

async fn remove_one(
    item: &Item,
    from: &Cluster,
    to: &Cluster,
    listed: bool,
    users: &mut BTreeMap<Key, BTreeSet<Key>>,
) -> anyhow::Result<String> {
    let (ns, name) = &item.key;
    let api = hosts_api(from, ns);
    let Some(host) = api
        .get_opt(name)
        .await
        .context("reading the host at the source")?
    else {
        return Ok("already gone".into());
    };
    let detaching = host.annotations().contains_key(ann::DETACHED);
    if !host.annotations().contains_key(ann::PAUSED) && !detaching {
        bail!("the host is no longer paused at the source; left there");
    }
    // Never delete what the target does not hold.
    let target = hosts_api(to, ns)
        .get_opt(name)
        .await
        .context("reading the host at the target")?;
    if target.as_ref().map(bmc_address) != Some(bmc_address(&host)) {
        bail!("the host is not at the target; left at the source");
    }
    if !host.annotations().contains_key(ann::PAUSED) {
        // Detached above: paused again, so that nothing at the source acts on it any more.
        let patch = json!({"metadata": {"annotations": {ann::PAUSED: MOVE_PAUSE}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("pausing the detached host at the source")?;
    }
    let mut notes = Vec::new();
    // Secrets before the host: if this stops midway, the host is still here to be removed again.
    for key in secret_refs(&host) {
        let others = users.get_mut(&key).map(|u| {
            u.remove(&item.key);
            u.len()
        });
        if !listed || others.unwrap_or(0) > 0 {
            continue;
        }
        let secrets = Api::<Secret>::namespaced(from.client.clone(), &key.0);
        match secrets.delete(&key.1, &DeleteParams::default()).await {
            Ok(_) => notes.push(format!("secret {}", key.1)),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e).with_context(|| format!("deleting Secret {}", show(&key))),
        }
    }
    if delete_without_finalizers(
        &Api::<HardwareData>::namespaced(from.client.clone(), ns),
        name,
    )
    .await
    .context("deleting the HardwareData at the source")?
    {
        notes.push("hardware data".into());
    }
    delete_without_finalizers(&api, name)
        .await
        .context("deleting the host at the source")?;
    notes.push("host".into());
    Ok(notes.join(", "))
}

// ---- the outcome ----

/// Waits (bounded) until every moved host shows at the target the state it had at the source.
async fn observe_target(items: &mut [Item], to: &Cluster) {
    let deadline = Instant::now() + TARGET_WAIT;
    loop {
        let mut pending = false;
        for item in items.iter_mut().filter(|i| i.alive()) {
            if item.target_state.as_deref() == Some(item.source_state.as_str()) {
                continue;
            }
            if let Ok(Some(h)) = hosts_api(to, &item.key.0).get_opt(&item.key.1).await {
                item.target_state = Some(state(&h));
            }
            if item.target_state.as_deref() != Some(item.source_state.as_str()) {
                pending = true;
            }
        }
        if !pending || Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn summary(items: &[Item], from: &Cluster, to: &Cluster, took: Duration) -> ExitCode {
    println!();
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|i| {
            let result = match &i.error {
                Some(_) => "FAILED".to_string(),
                None if i.target_state.as_deref() == Some(i.source_state.as_str()) => {
                    "moved".to_string()
                }
                None => "moved, state differs".to_string(),
            };
            vec![
                i.key.0.clone(),
                i.key.1.clone(),
                or_dash(&i.source_state),
                if i.source_power { "on" } else { "off" }.to_string(),
                or_dash(i.target_state.as_deref().unwrap_or("")),
                result,
            ]
        })
        .collect();
    common::table(
        &[
            "NAMESPACE",
            "HOST",
            "SOURCE STATE",
            "POWER",
            "TARGET STATE",
            "RESULT",
        ],
        &rows,
    );
    for i in items {
        if let Some(e) = &i.error {
            println!("{}: {e}", show(&i.key));
        }
    }
    let moved: Vec<&Item> = items.iter().filter(|i| i.alive()).collect();
    let failed = items.len() - moved.len();
    let differ = moved
        .iter()
        .filter(|i| i.target_state.as_deref() != Some(i.source_state.as_str()))
        .count();
    let mut by_state: BTreeMap<&str, usize> = BTreeMap::new();
    for i in &moved {
        *by_state.entry(i.source_state.as_str()).or_default() += 1;
    }
    let states: Vec<String> = by_state
        .iter()
        .map(|(s, n)| format!("{n} {}", if s.is_empty() { "without state" } else { s }))
        .collect();
    let secrets: BTreeSet<&Key> = moved.iter().flat_map(|i| i.secrets.iter()).collect();
    let hardware = moved.iter().filter(|i| i.hardware_data).count();
    println!(
        "moved {} of {} hosts ({}) with {} Secrets and {} HardwareData from {} to {} in {:.1}s; {} failed{}",
        moved.len(),
        items.len(),
        states.join(", "),
        secrets.len(),
        hardware,
        from.url,
        to.url,
        took.as_secs_f64(),
        failed,
        if differ > 0 {
            format!("; {differ} not yet in their source state at the target")
        } else {
            String::new()
        }
    );
    if failed > 0 {
        println!("run the same command again to complete the move of the failed hosts");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
