//! `ferrometal move --claims`: HostClaims move, their hosts stay.
//!
//! A claim served by another cluster already (a remote claim) moves with its kubeconfig Secret
//! and data Secrets; at the target it adopts the same mirror (they share
//! `hostclaim.ferrometal.io/remote-id`), so its host is never released. A claim served by the
//! source's own hosts (a local claim) stays at the source as the mirror, and the target's copy
//! reaches it through `--remote-kubeconfig` (a tenant identity at the source), stored in the
//! Secret `ferrometal-remote-kubeconfig` of the claim's namespace.
//!
//! Phases, each done for every claim before the next (`FERROMETAL_MOVE_CRASH_AFTER` as for
//! hosts):
//!
//! 1. `pause` — remote claims at the source get `baremetalhost.metal3.io/paused:
//!    ferrometal.io/move` (their controller then passes the pause on and nothing else).
//! 2. `copy` — Secrets, then the claim (still paused) at the target; a local claim first gets
//!    its remote id and mirror label at the source.
//! 3. `unpause` — the target's copy is unpaused: its controller takes over the mirror.
//! 4. `remove` — remote claims leave the source (finalizers off first, so nothing is released),
//!    with the Secrets no claim left there uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ferrometal_api::HostClaim;
use ferrometal_api::annotations::PAUSED;
use ferrometal_api::claim::{REMOTE_ID, REMOTE_KUBECONFIG, REMOTE_MIRROR_LABEL, conditions as c};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::args::Args;
use super::common::{Cluster, CrashHook, MOVE_PAUSE, ensure_namespace, progress, table};
use super::objects::{Key, copy_secret, delete_without_finalizers, show};

const PHASES: [&str; 4] = ["pause", "copy", "unpause", "remove"];
/// The Secret a local claim's copy reaches the source with.
pub(crate) const REMOTE_SECRET: &str = "ferrometal-remote-kubeconfig";
/// How long the summary waits for each moved claim to report its host at the target.
const TARGET_WAIT: Duration = Duration::from_secs(120);

struct Item {
    claim: HostClaim,
    key: Key,
    /// Served by another cluster already (else by the source's hosts).
    remote: bool,
    secrets: Vec<Key>,
    error: Option<String>,
    at_target: String,
}

fn claims_api(cluster: &Cluster, ns: &str) -> Api<HostClaim> {
    Api::namespaced(cluster.client.clone(), ns)
}

/// The Secrets a claim needs wherever it is: data, and the kubeconfig of a remote claim.
fn secret_refs(claim: &HostClaim) -> Vec<Key> {
    let ns = claim.namespace().unwrap_or_default();
    let mut out: Vec<Key> = [
        &claim.spec.user_data,
        &claim.spec.network_data,
        &claim.spec.meta_data,
    ]
    .into_iter()
    .flatten()
    .filter_map(|r| r.name.clone())
    .map(|n| (ns.clone(), n))
    .collect();
    if let Some(s) = claim.annotations().get(REMOTE_KUBECONFIG) {
        out.push((ns.clone(), s.clone()));
    }
    out.sort();
    out.dedup();
    out
}

fn conditions(claim: &HostClaim) -> String {
    let s = claim.status.clone().unwrap_or_default();
    [c::ASSOCIATED, c::PROVISIONED, c::SYNCHRONIZED]
        .iter()
        .map(|t| {
            format!(
                "{t}={}",
                s.condition(t).map(|c| c.status.as_str()).unwrap_or("-")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) async fn run(args: &Args, from: &Cluster, to: &Cluster) -> anyhow::Result<ExitCode> {
    let crash = CrashHook::from_env(&PHASES)?;
    let started = Instant::now();
    let mut items = discover(args, from).await?;
    let locals: Vec<String> = items
        .iter()
        .filter(|i| !i.remote)
        .map(|i| show(&i.key))
        .collect();
    let remote_kubeconfig = match (&args.remote_kubeconfig, locals.is_empty()) {
        (Some(path), _) => Some(read_remote_kubeconfig(path, &items).await?),
        (None, true) => None,
        (None, false) => bail!(
            "{} served by the source's own hosts: give --remote-kubeconfig, a kubeconfig for \
             the source that the target will reach them with",
            locals.join(", ")
        ),
    };
    if args.dry_run {
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|i| {
                vec![
                    i.key.0.clone(),
                    i.key.1.clone(),
                    if i.remote { "remote" } else { "local" }.into(),
                    conditions(&i.claim),
                    if i.remote {
                        "moves".into()
                    } else {
                        "stays as the mirror".into()
                    },
                    i.secrets
                        .iter()
                        .map(|k| k.1.clone())
                        .collect::<Vec<_>>()
                        .join(","),
                ]
            })
            .collect();
        table(
            &[
                "NAMESPACE",
                "CLAIM",
                "SERVED",
                "STATUS",
                "AT THE SOURCE",
                "SECRETS",
            ],
            &rows,
        );
        println!(
            "dry run: {} claim(s) would move; nothing was changed",
            items.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let namespaces: BTreeSet<String> = items.iter().map(|i| i.key.0.clone()).collect();
    for ns in &namespaces {
        ensure_namespace(to, ns).await?;
    }
    // 1. pause
    for (n, item) in items.iter_mut().enumerate() {
        if item.remote {
            match pause_one(item, from).await {
                Ok(note) => progress("paused", &show(&item.key), note),
                Err(e) => item.error = Some(format!("pause: {e:#}")),
            }
        }
        CrashHook::object_done(&crash, "pause", n + 1);
    }
    CrashHook::phase_done(&crash, "pause");
    // A reconcile in flight at the source may still write once.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // 2. copy
    for (n, item) in items.iter_mut().enumerate() {
        if item.error.is_none() {
            match copy_one(item, from, to, remote_kubeconfig.as_deref()).await {
                Ok(note) => progress("copied", &show(&item.key), &note),
                Err(e) => item.error = Some(format!("copy: {e:#}")),
            }
        }
        CrashHook::object_done(&crash, "copy", n + 1);
    }
    CrashHook::phase_done(&crash, "copy");
    // 3. unpause
    for (n, item) in items.iter_mut().enumerate() {
        if item.error.is_none() {
            match unpause_one(item, to).await {
                Ok(note) => progress("unpaused", &show(&item.key), note),
                Err(e) => item.error = Some(format!("unpause: {e:#}")),
            }
        }
        CrashHook::object_done(&crash, "unpause", n + 1);
    }
    CrashHook::phase_done(&crash, "unpause");
    // 4. remove
    let staying: Vec<HostClaim> = items
        .iter()
        .filter(|i| !i.remote || i.error.is_some())
        .map(|i| i.claim.clone())
        .collect();
    for (n, item) in items.iter_mut().enumerate() {
        if item.error.is_none() && item.remote {
            match remove_one(item, from, &staying).await {
                Ok(note) => progress("removed", &show(&item.key), &note),
                Err(e) => item.error = Some(format!("remove: {e:#}")),
            }
        } else if item.error.is_none() {
            progress("kept", &show(&item.key), "at the source as the mirror");
        }
        CrashHook::object_done(&crash, "remove", n + 1);
    }
    CrashHook::phase_done(&crash, "remove");
    observe(&mut items, to).await;
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|i| {
            vec![
                i.key.0.clone(),
                i.key.1.clone(),
                if i.remote { "remote" } else { "local" }.into(),
                conditions(&i.claim),
                i.error.clone().unwrap_or_else(|| i.at_target.clone()),
            ]
        })
        .collect();
    println!();
    table(
        &[
            "NAMESPACE",
            "CLAIM",
            "SERVED",
            "AT THE SOURCE",
            "AT THE TARGET",
        ],
        &rows,
    );
    let failed = items.iter().filter(|i| i.error.is_some()).count();
    println!(
        "{} claim(s) moved from {} to {}, {failed} failed, in {:.1} s",
        items.len() - failed,
        from.url,
        to.url,
        started.elapsed().as_secs_f64()
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn discover(args: &Args, from: &Cluster) -> anyhow::Result<Vec<Item>> {
    let api: Api<HostClaim> = match &args.namespace {
        Some(ns) => Api::namespaced(from.client.clone(), ns),
        None => Api::all(from.client.clone()),
    };
    let list = api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("{}: listing HostClaims", from.flag))?;
    Ok(list
        .items
        .into_iter()
        .filter(|c| c.meta().deletion_timestamp.is_none())
        .map(|claim| Item {
            key: (claim.namespace().unwrap_or_default(), claim.name_any()),
            remote: ferrometal_api::claim::is_remote(&claim),
            secrets: secret_refs(&claim),
            claim,
            error: None,
            at_target: String::new(),
        })
        .collect())
}

/// Reads `--remote-kubeconfig` and checks it puts mirrors where the local claims are.
async fn read_remote_kubeconfig(path: &Path, items: &[Item]) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--remote-kubeconfig {}: cannot read it", path.display()))?;
    for item in items.iter().filter(|i| !i.remote) {
        let (_, ns) =
            ferrometal_controller::remote::link::client_config(&text, REMOTE_SECRET, &item.key.0)
                .await
                .map_err(|e| anyhow::anyhow!("--remote-kubeconfig {}: {e}", path.display()))?;
        if ns != item.key.0 {
            bail!(
                "--remote-kubeconfig {}: its context's namespace is {ns:?}, but claim {} is in \
                 {:?}; the mirror must be the claim itself",
                path.display(),
                show(&item.key),
                item.key.0
            );
        }
    }
    Ok(text)
}

async fn pause_one(item: &mut Item, from: &Cluster) -> anyhow::Result<&'static str> {
    let api = claims_api(from, &item.key.0);
    let Some(claim) = api.get_opt(&item.key.1).await? else {
        return Ok("already gone from the source");
    };
    if claim.annotations().contains_key(PAUSED) {
        item.claim = claim;
        return Ok("already paused");
    }
    let patch = json!({"metadata": {"annotations": {PAUSED: MOVE_PAUSE}}});
    item.claim = api
        .patch(&item.key.1, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok("")
}

async fn copy_one(
    item: &mut Item,
    from: &Cluster,
    to: &Cluster,
    remote_kubeconfig: Option<&str>,
) -> anyhow::Result<String> {
    let (ns, name) = item.key.clone();
    let source = claims_api(from, &ns).get_opt(&name).await?;
    let target_api = claims_api(to, &ns);
    let existing = target_api.get_opt(&name).await?;
    if let Some(t) = &existing
        && t.annotations().get(PAUSED).map(String::as_str) != Some(MOVE_PAUSE)
    {
        return Ok("already at the target".into());
    }
    let Some(mut source) = source else {
        if existing.is_some() {
            return Ok("already at the target".into());
        }
        bail!("HostClaim {ns}/{name} exists neither at the source nor at the target");
    };
    let mut notes = Vec::new();
    for key in &item.secrets {
        if item.remote || source.annotations().get(REMOTE_KUBECONFIG) != Some(&key.1) {
            let what = copy_secret(key, from, to).await?;
            notes.push(format!("Secret {} {what}", key.1));
        }
    }
    if !item.remote {
        // The source's claim becomes the mirror: same identity on both sides.
        let id = source
            .annotations()
            .get(REMOTE_ID)
            .cloned()
            .unwrap_or_else(|| source.uid().unwrap_or_default());
        if source.annotations().get(REMOTE_ID) != Some(&id)
            || source.labels().get(REMOTE_MIRROR_LABEL) != Some(&name)
        {
            let patch = json!({"metadata": {"annotations": {REMOTE_ID: id},
                "labels": {REMOTE_MIRROR_LABEL: name}}});
            source = claims_api(from, &ns)
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let kubeconfig = remote_kubeconfig.context("--remote-kubeconfig is needed")?;
        let mut secret = Secret::default();
        secret.metadata.name = Some(REMOTE_SECRET.into());
        secret.metadata.namespace = Some(ns.clone());
        secret.string_data = Some(BTreeMap::from([(
            "kubeconfig".to_string(),
            kubeconfig.to_string(),
        )]));
        let secrets: Api<Secret> = Api::namespaced(to.client.clone(), &ns);
        secrets
            .patch(
                REMOTE_SECRET,
                &PatchParams::apply("ferrometal-move").force(),
                &Patch::Apply(&secret),
            )
            .await
            .with_context(|| format!("writing Secret {ns}/{REMOTE_SECRET} at the target"))?;
        notes.push(format!("Secret {REMOTE_SECRET} written"));
    }
    let mut annotations = source.annotations().clone();
    annotations.insert(PAUSED.into(), MOVE_PAUSE.into());
    if !item.remote {
        annotations.insert(REMOTE_KUBECONFIG.into(), REMOTE_SECRET.into());
    }
    let mut copy = HostClaim::new(&name, source.spec.clone());
    copy.metadata.namespace = Some(ns.clone());
    copy.metadata.labels = Some(source.labels().clone()).filter(|l| !l.is_empty());
    if let Some(l) = copy.metadata.labels.as_mut() {
        l.remove(REMOTE_MIRROR_LABEL);
    }
    copy.metadata.annotations = Some(annotations);
    match existing {
        None => {
            target_api.create(&PostParams::default(), &copy).await?;
            notes.push("claim created, paused".into());
        }
        Some(t) => {
            copy.metadata.resource_version = t.resource_version();
            copy.metadata.finalizers = t.metadata.finalizers.clone();
            target_api
                .replace(&name, &PostParams::default(), &copy)
                .await?;
            notes.push("claim updated, paused".into());
        }
    }
    item.claim = source;
    Ok(notes.join(", "))
}

async fn unpause_one(item: &Item, to: &Cluster) -> anyhow::Result<&'static str> {
    let api = claims_api(to, &item.key.0);
    let Some(claim) = api.get_opt(&item.key.1).await? else {
        bail!("HostClaim {} is not at the target", show(&item.key));
    };
    if claim.annotations().get(PAUSED).map(String::as_str) != Some(MOVE_PAUSE) {
        return Ok("already unpaused");
    }
    let patch = json!({"metadata": {"annotations": {PAUSED: null}}});
    api.patch(&item.key.1, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok("")
}

async fn remove_one(item: &Item, from: &Cluster, staying: &[HostClaim]) -> anyhow::Result<String> {
    let mut notes = Vec::new();
    let api = claims_api(from, &item.key.0);
    if delete_without_finalizers(&api, &item.key.1).await? {
        notes.push("claim deleted".to_string());
    }
    let still_used: BTreeSet<Key> = staying.iter().flat_map(secret_refs).collect();
    for key in &item.secrets {
        if still_used.contains(key) {
            continue;
        }
        let secrets: Api<Secret> = Api::namespaced(from.client.clone(), &key.0);
        if delete_without_finalizers(&secrets, &key.1).await? {
            notes.push(format!("Secret {} deleted", key.1));
        }
    }
    Ok(notes.join(", "))
}

/// Waits (bounded) until each moved claim reports its host at the target.
async fn observe(items: &mut [Item], to: &Cluster) {
    let deadline = Instant::now() + TARGET_WAIT;
    for item in items.iter_mut().filter(|i| i.error.is_none()) {
        let api = claims_api(to, &item.key.0);
        loop {
            let now = api.get_opt(&item.key.1).await.ok().flatten();
            let synced = now
                .as_ref()
                .and_then(|c| c.status.clone())
                .is_some_and(|s| {
                    s.is_true(c::ASSOCIATED)
                        && s.condition(c::SYNCHRONIZED)
                            .is_some_and(|x| x.reason != c::REMOTE_UNREACHABLE)
                });
            if synced || Instant::now() > deadline {
                item.at_target = now.as_ref().map(conditions).unwrap_or_else(|| "-".into());
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
