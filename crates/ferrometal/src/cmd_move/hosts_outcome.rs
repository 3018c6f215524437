//! The end of the host move: waiting (bounded) until the moved hosts show at the target the
//! state they had at the source, then the table and the closing line.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::ListParams;

use super::common::{self, Cluster, or_dash, progress};
use super::host_parts::{hosts_api, state};
use super::hosts_item::Item;
use super::objects::{Key, show};
use super::phase::some_of;

/// How long to wait for the moved hosts to show their state at the target.
const TARGET_WAIT: Duration = Duration::from_secs(120);
/// How often the target is looked at meanwhile (one list per namespace).
const TARGET_POLL: Duration = Duration::from_millis(500);
/// ...and how often the wait says how far it is.
const TARGET_PROGRESS: Duration = Duration::from_secs(5);

/// Waits (bounded) until every moved host shows at the target the state it had at the source;
/// one list per namespace and round, not one read per host.
pub(super) async fn observe_target(items: &mut [Item], to: &Cluster) {
    let started = Instant::now();
    let deadline = started + TARGET_WAIT;
    let mut reported = started;
    let total = items.iter().filter(|i| i.alive()).count();
    progress(
        "target",
        &format!("waiting for {total} hosts to show their source state at the target"),
        "",
    );
    let namespaces: BTreeSet<String> = items.iter().map(|i| i.key.0.clone()).collect();
    loop {
        let mut current: BTreeMap<Key, String> = BTreeMap::new();
        for ns in &namespaces {
            if let Ok(list) = hosts_api(to, ns).list(&ListParams::default()).await {
                current.extend(
                    list.items
                        .iter()
                        .map(|h| ((ns.clone(), h.name_any()), state(h))),
                );
            }
        }
        let mut pending = Vec::new();
        for item in items.iter_mut().filter(|i| i.alive()) {
            if let Some(s) = current.remove(&item.key) {
                item.target_state = Some(s);
            }
            if item.target_state.as_deref() != Some(item.source_state.as_str()) {
                pending.push(show(&item.key));
            }
        }
        let took = started.elapsed().as_secs_f64();
        if pending.is_empty() {
            progress(
                "target",
                &format!("{total} of {total} in their source state after {took:.1}s"),
                "",
            );
            return;
        }
        if Instant::now() >= deadline {
            progress(
                "target",
                &format!(
                    "{} of {total} in their source state after {took:.1}s; not yet: {}",
                    total - pending.len(),
                    some_of(&pending, 10)
                ),
                "",
            );
            return;
        }
        if reported.elapsed() >= TARGET_PROGRESS {
            reported = Instant::now();
            progress(
                "target",
                &format!(
                    "{} of {total} in their source state after {took:.1}s",
                    total - pending.len()
                ),
                "",
            );
        }
        tokio::time::sleep(TARGET_POLL).await;
    }
}

pub(super) fn summary(items: &[Item], from: &Cluster, to: &Cluster, took: Duration) -> ExitCode {
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
