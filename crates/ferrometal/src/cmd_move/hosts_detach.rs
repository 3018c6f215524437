//! Before the hosts leave the source, its own provisioner lets go of them: metal3's
//! `baremetalhost.metal3.io/detached` annotation (no deprovisioning, no power change). A source
//! that keeps running afterwards then never acts on a machine the target manages; an Ironic in
//! particular would otherwise keep syncing the power state it last knew (it does so with
//! `force_power_state_during_sync`, Ironic's default), undoing the target's power changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferrometal_api::annotations as ann;
use ferrometal_api::{BareMetalHost, OperationalStatus};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use super::common::{Cluster, MOVE_PAUSE, progress};
use super::host_parts::{bmc_address, hosts_api};
use super::objects::{Key, show};
use super::phase::{self, Outcome, some_of};

/// How long the source's controller gets to detach the hosts.
const DETACH_WAIT: Duration = Duration::from_secs(30);
/// The annotation's value: any state (the host is paused mid-whatever), deletion at once.
const DETACH_VALUE: &str = r#"{"deleteAction":"delete","force":true}"#;

pub(super) fn is_detached(host: &BareMetalHost) -> bool {
    host.status
        .as_ref()
        .is_some_and(|s| s.operational_status == OperationalStatus::Detached)
}

/// How often the wait for the source says how far it is.
const DETACH_PROGRESS: Duration = Duration::from_secs(2);

/// Detaches the hosts (paused by the move, held by the target) at the source, `limit` at a
/// time: the move's pause is replaced by the detached annotation in one write, so the source's
/// controller does nothing but detach. Waits (bounded) until each reports `operationalStatus:
/// detached`; a source without a controller that does so gets a warning, and the hosts are
/// removed all the same.
pub(super) async fn detach(keys: &[(Key, String)], from: &Cluster, to: &Cluster, limit: usize) {
    let namespaces: BTreeSet<String> = keys.iter().map(|(k, _)| k.0.clone()).collect();
    // Both sides read once for the phase (two lists instead of two GETs per host).
    let (at_source, at_target) = (
        &Listed::read(from, &namespaces).await,
        &Listed::read(to, &namespaces).await,
    );
    let requested: Mutex<BTreeSet<Key>> = Mutex::default();
    let requested_ref = &requested;
    phase::run(
        "detach",
        keys.iter().collect(),
        limit,
        &None,
        |(key, pause)| async move {
            match detach_one(key, pause, (from, at_source), (to, at_target)).await {
                Ok(Some(label)) => Outcome::done(label),
                Ok(None) => {
                    requested_ref
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key.clone());
                    Outcome::done("requested")
                }
                Err(e) => {
                    // Not fatal: the host is removed all the same (as when the source never
                    // reports it detached).
                    progress("warning", &show(key), &format!("not detached: {e}"));
                    Outcome::done("not requested (warned)")
                }
            }
        },
    )
    .await;
    let mut waiting = requested.into_inner().unwrap_or_else(|e| e.into_inner());
    let total = waiting.len();
    if total == 0 {
        return;
    }
    let started = Instant::now();
    let deadline = started + DETACH_WAIT;
    let report = |left: usize| {
        progress(
            "detach",
            &format!(
                "{} of {total} detached at the source after {:.1}s",
                total - left,
                started.elapsed().as_secs_f64()
            ),
            "",
        );
    };
    let mut reported = started;
    while !waiting.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let namespaces: BTreeSet<String> = waiting.iter().map(|k| k.0.clone()).collect();
        let current = Listed::read(from, &namespaces).await.hosts;
        waiting.retain(|k| !current.get(k).is_none_or(is_detached));
        if !waiting.is_empty() && reported.elapsed() >= DETACH_PROGRESS {
            reported = Instant::now();
            report(waiting.len());
        }
    }
    report(waiting.len());
    if !waiting.is_empty() {
        let keys: Vec<String> = waiting.iter().map(show).collect();
        progress(
            "warning",
            &format!(
                "not detached in {}s: {}",
                DETACH_WAIT.as_secs(),
                some_of(&keys, 10)
            ),
            "removed anyway (the source's provisioner may still hold them)",
        );
    }
}

/// Asks the source to detach one host. `Ok(None)` once asked; `Ok(Some(why not))` when there
/// is nothing to ask.
async fn detach_one(
    key: &Key,
    pause: &str,
    (from, at_source): (&Cluster, &Listed),
    (to, at_target): (&Cluster, &Listed),
) -> Result<Option<&'static str>, kube::Error> {
    // A host paused by someone else stays paused: unpausing it is not the move's call.
    if pause != MOVE_PAUSE {
        return Ok(Some("paused by someone else, left paused"));
    }
    let (ns, name) = key;
    let source = hosts_api(from, ns);
    let Some(host) = at_source.get(from, key).await else {
        return Ok(Some("gone or unreadable at the source"));
    };
    if is_detached(&host) {
        return Ok(Some("already detached"));
    }
    // Only a host the target holds is let go of here.
    match at_target.get(to, key).await {
        Some(t) if bmc_address(&t) == bmc_address(&host) => {}
        _ => return Ok(Some("not at the target, left")),
    }
    let patch = json!({"metadata": {"annotations": {
        ann::DETACHED: DETACH_VALUE,
        ann::PAUSED: null,
    }}});
    source
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(None)
}

/// The hosts of some namespaces as one list each read them; a namespace whose list failed is
/// not in `listed`, and its hosts are read one at a time.
struct Listed {
    hosts: BTreeMap<Key, BareMetalHost>,
    listed: BTreeSet<String>,
}

impl Listed {
    async fn read(cluster: &Cluster, namespaces: &BTreeSet<String>) -> Listed {
        let mut hosts = BTreeMap::new();
        let mut listed = BTreeSet::new();
        for ns in namespaces {
            if let Ok(list) = hosts_api(cluster, ns).list(&ListParams::default()).await {
                hosts.extend(
                    list.items
                        .into_iter()
                        .map(|h| ((ns.clone(), h.name_any()), h)),
                );
                listed.insert(ns.clone());
            }
        }
        Listed { hosts, listed }
    }

    async fn get(&self, cluster: &Cluster, key: &Key) -> Option<BareMetalHost> {
        let (ns, name) = key;
        if self.listed.contains(ns) {
            return self.hosts.get(key).cloned();
        }
        hosts_api(cluster, ns).get_opt(name).await.ok().flatten()
    }
}
