//! Before the hosts leave the source, its own provisioner lets go of them: metal3's
//! `baremetalhost.metal3.io/detached` annotation (no deprovisioning, no power change). A source
//! that keeps running afterwards then never acts on a machine the target manages; an Ironic in
//! particular would otherwise keep syncing the power state it last knew (it does so with
//! `force_power_state_during_sync`, Ironic's default), undoing the target's power changes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferrometal_api::annotations as ann;
use ferrometal_api::{BareMetalHost, OperationalStatus};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use super::common::{Cluster, MOVE_PAUSE, progress};
use super::host_parts::{bmc_address, hosts_api};
use super::objects::{Key, show};

/// How long the source's controller gets to detach the hosts.
const DETACH_WAIT: Duration = Duration::from_secs(30);
/// The annotation's value: any state (the host is paused mid-whatever), deletion at once.
const DETACH_VALUE: &str = r#"{"deleteAction":"delete","force":true}"#;

pub(super) fn is_detached(host: &BareMetalHost) -> bool {
    host.status
        .as_ref()
        .is_some_and(|s| s.operational_status == OperationalStatus::Detached)
}

/// Detaches the hosts (paused by the move, held by the target) at the source: the move's pause
/// is replaced by the detached annotation in one write, so the source's controller does nothing
/// but detach. Waits (bounded) until each reports `operationalStatus: detached`; a source without
/// a controller that does so gets a warning, and the hosts are removed all the same.
pub(super) async fn detach(keys: &[(Key, String)], from: &Cluster, to: &Cluster) {
    let mut waiting: BTreeSet<Key> = BTreeSet::new();
    for (key, pause) in keys {
        // A host paused by someone else stays paused: unpausing it is not the move's call.
        if pause != MOVE_PAUSE {
            continue;
        }
        let (ns, name) = key;
        let source = hosts_api(from, ns);
        let Ok(Some(host)) = source.get_opt(name).await else {
            continue;
        };
        if is_detached(&host) {
            continue;
        }
        // Only a host the target holds is let go of here.
        match hosts_api(to, ns).get_opt(name).await {
            Ok(Some(t)) if bmc_address(&t) == bmc_address(&host) => {}
            _ => continue,
        }
        let patch = json!({"metadata": {"annotations": {
            ann::DETACHED: DETACH_VALUE,
            ann::PAUSED: null,
        }}});
        match source
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                waiting.insert(key.clone());
            }
            Err(e) => progress("warning", &show(key), &format!("not detached: {e}")),
        }
    }
    let deadline = Instant::now() + DETACH_WAIT;
    while !waiting.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let namespaces: BTreeSet<String> = waiting.iter().map(|k| k.0.clone()).collect();
        let mut current: BTreeMap<Key, BareMetalHost> = BTreeMap::new();
        for ns in namespaces {
            if let Ok(list) = hosts_api(from, &ns).list(&ListParams::default()).await {
                current.extend(
                    list.items
                        .into_iter()
                        .map(|h| ((ns.clone(), h.name_any()), h)),
                );
            }
        }
        waiting.retain(|k| {
            let done = current.get(k).is_none_or(is_detached);
            if done {
                progress("detached", &show(k), "at the source");
            }
            !done
        });
    }
    for key in waiting {
        progress(
            "warning",
            &show(&key),
            "the source did not detach it in time; removed anyway (its provisioner may still hold it)",
        );
    }
}
