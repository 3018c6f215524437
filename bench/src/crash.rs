//! Crash under load: N hosts on the built-in emulator go register -> inspect -> provision while
//! `serve` is killed with SIGKILL at K random moments and restarted on the same data directory
//! and port. At the end every host must be provisioned, no BMC may have seen a destructive
//! action (media insert, power off, reset) twice, the revision must never have gone backwards
//! across a restart, and a watcher connected through every restart (relisting after 410 as
//! client-go does) must have seen each revision at most once and in order. Any violation fails
//! the scenario.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use ferrometal_emulator::{Emulator, EmulatorConfig};
use futures::StreamExt;
use kube::api::ListParams;
use serde_json::json;

use crate::common::*;
use crate::stats::{Row, secs};

pub struct Opts {
    pub hosts: usize,
    pub kills: usize,
    pub concurrency: usize,
    pub timeout: u64,
    pub serve_args: Vec<String>,
    pub ferrometal: Option<std::path::PathBuf>,
    pub keep: bool,
}

const NAMESPACE: &str = "default";
/// Actions a repeat of which would hurt a real machine.
const DESTRUCTIVE: &[&str] = &[
    "InsertMedia",
    "ForceOff",
    "GracefulShutdown",
    "ForceRestart",
    "GracefulRestart",
    "PowerCycle",
];

fn host_name(i: usize) -> String {
    format!("crash-{i:05}")
}

/// What the watcher saw: revisions of watch events (not relists) in arrival order, relists.
#[derive(Default)]
struct Seen {
    revisions: Vec<u64>,
    relists: usize,
    out_of_order: Vec<(u64, u64)>,
}

fn watch_revisions(client: &kube::Client) -> (Arc<Mutex<Seen>>, tokio::task::JoinHandle<()>) {
    use kube::runtime::watcher::{self, Event};
    let seen: Arc<Mutex<Seen>> = Default::default();
    let api = bmh_api(client);
    let task = tokio::spawn({
        let seen = seen.clone();
        async move {
            // The default backoff retries through the restarts; a 410 relists.
            let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let mut s = seen.lock().unwrap();
                let rv = |o: &kube::api::DynamicObject| {
                    o.metadata
                        .resource_version
                        .as_deref()
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                match event {
                    Ok(Event::Apply(o) | Event::Delete(o)) => {
                        let rv = rv(&o);
                        if let Some(&last) = s.revisions.last()
                            && rv <= last
                        {
                            s.out_of_order.push((last, rv));
                        }
                        s.revisions.push(rv);
                    }
                    Ok(Event::Init) => s.relists += 1,
                    _ => {}
                }
            }
        }
    });
    (seen, task)
}

/// A small xorshift: random kill moments without a dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

async fn list_revision(client: &kube::Client) -> anyhow::Result<u64> {
    let list = bmh_api(client)
        .list(&ListParams::default().limit(1))
        .await?;
    Ok(list
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let scratch = Scratch::new(&format!("crash-{}", o.hosts), o.keep)?;
    let deadline = Instant::now() + Duration::from_secs(o.timeout);
    let emu = Emulator::start(
        EmulatorConfig {
            systems: o.hosts,
            power_delay: Duration::from_millis(200),
            // The image URL is served by nothing: what is measured is the controller, and
            // a fetch per URL (cached) would be noise.
            fetch_media: false,
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let port = free_port()?;
    let mut serve = ServeChild::start_on(&binary, &scratch.path, &o.serve_args, port)?;
    say(&format!(
        "emulator: {} systems; serve pid {} on port {port}",
        o.hosts,
        serve.pid()
    ));
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    create_bmc_secret(&client, NAMESPACE).await?;
    let (states, states_watch) = watch_states(&client);
    let (seen, revisions_watch) = watch_revisions(&client);
    let base = emu
        .base_url()
        .replace("http://", "redfish-virtualmedia+http://");
    let started = Instant::now();
    create_emulated_hosts(
        &bmh_api(&client),
        NAMESPACE,
        &base,
        o.hosts,
        o.concurrency,
        host_name,
        json!({"online": true,
               "image": {"url": "http://127.0.0.1:1/live.iso", "format": "live-iso"}}),
    )
    .await?;
    say(&format!(
        "{} hosts created after {}",
        o.hosts,
        secs(started.elapsed().as_secs_f64())
    ));

    // The kills, at random moments 1-6 s apart, while the hosts move through their states.
    let mut random = (unix_micros() | 1) ^ 0x9e37_79b9_7f4a_7c15;
    let mut backwards = Vec::new();
    let mut restart_times = Vec::new();
    let mut states_at_kill = Vec::new();
    for kill in 1..=o.kills {
        let wait = 1000 + next_random(&mut random) % 5000;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let before = list_revision(&client).await.unwrap_or(0);
        let (line, _) = state_line(&states);
        serve.kill();
        let t = Instant::now();
        serve = ServeChild::start_on(&binary, &scratch.path, &o.serve_args, port)?;
        let after = loop {
            match list_revision(&client).await {
                Ok(rv) => break rv,
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => return Err(e),
            }
        };
        restart_times.push(t.elapsed().as_secs_f64());
        if after < before {
            backwards.push((before, after));
        }
        say(&format!(
            "kill {kill}/{} at {:.1}s (revision {before}, after restart {after}, {}): {line}",
            o.kills,
            started.elapsed().as_secs_f64(),
            secs(t.elapsed().as_secs_f64())
        ));
        states_at_kill.push(line);
    }
    let provisioned = wait_all(&states, o.hosts, "provisioned", started, deadline).await;
    // Let the watcher take in the last events.
    tokio::time::sleep(Duration::from_secs(2)).await;
    states_watch.abort();
    revisions_watch.abort();
    let provisioned = provisioned?;

    let mut repeated = Vec::new();
    let mut destructive_total = 0usize;
    for i in 0..o.hosts {
        let actions = emu.state(i).actions;
        for kind in DESTRUCTIVE {
            let n = actions.iter().filter(|a| a.contains(kind)).count();
            destructive_total += n;
            if n > 1 {
                repeated.push(format!("{} {kind} x{n}", host_name(i)));
            }
        }
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let mut sorted = seen.revisions.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let duplicates = seen.revisions.len() - sorted.len();
    let restart_max = restart_times.iter().copied().fold(0.0, f64::max);
    let restart_mean = restart_times.iter().sum::<f64>() / restart_times.len().max(1) as f64;
    let rows = vec![
        Row::new(
            "hosts",
            o.hosts.to_string(),
            "register -> inspect -> provision",
        ),
        Row::new(
            "SIGKILLs of serve",
            o.kills.to_string(),
            "1-6 s apart, restarted at once",
        ),
        Row::new(
            "all provisioned after",
            secs(provisioned.as_secs_f64()),
            "from the first create",
        ),
        Row::new(
            "restart to first answer",
            secs(restart_mean),
            format!("mean; max {}", secs(restart_max)),
        ),
        Row::new(
            "destructive BMC actions",
            destructive_total.to_string(),
            format!("{} repeated", repeated.len()),
        ),
        Row::new(
            "revision went backwards",
            backwards.len().to_string(),
            "across restarts",
        ),
        Row::new(
            "watch events seen",
            seen.revisions.len().to_string(),
            format!(
                "{} relists, {} out of order, {duplicates} seen twice",
                seen.relists,
                seen.out_of_order.len()
            ),
        ),
    ];
    finish(
        "crash",
        o.hosts,
        &rows,
        json!({
            "hosts": o.hosts,
            "kills": o.kills,
            "provisioned_s": provisioned.as_secs_f64(),
            "restart_s": restart_times,
            "states_at_kill": states_at_kill,
            "destructive_actions": destructive_total,
            "repeated": repeated,
            "revision_backwards": backwards,
            "watch_events": seen.revisions.len(),
            "watch_relists": seen.relists,
            "watch_out_of_order": seen.out_of_order,
            "watch_duplicates": duplicates,
            "serve_args": o.serve_args,
        }),
    )?;
    if !repeated.is_empty()
        || !backwards.is_empty()
        || !seen.out_of_order.is_empty()
        || duplicates > 0
    {
        bail!("crash scenario failed: see the table");
    }
    Ok(())
}
