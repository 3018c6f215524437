//! Pivot: N hosts on the built-in emulator are enrolled in serve A (two thirds provisioned with
//! a live ISO, one third available), then `ferrometal move` carries them to serve B. Measured:
//! the move's wall time per phase and in all, until every host at B reports the state it had,
//! and what the BMCs saw meanwhile. Any power, boot or media action during the move, a host
//! left at A, or a host at B in another state fails the scenario.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ferrometal_emulator::{Emulator, EmulatorConfig};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::common::*;
use crate::stats::{Row, secs};

pub struct Opts {
    pub hosts: usize,
    pub concurrency: usize,
    pub timeout: u64,
    pub serve_args: Vec<String>,
    pub ferrometal: Option<std::path::PathBuf>,
    pub keep: bool,
    /// `ferrometal move --concurrency` (the move's default when unset).
    pub move_concurrency: Option<usize>,
}

/// The first word of the move's progress lines, per phase: `pause`, `quiet`, `copy`, `unpause`,
/// `detach`, `remove`, `target` (a line when each starts, then every few seconds, then its
/// counts); a binary from before `--concurrency` printed one line per host and phase instead
/// (`paused`, `copied`, `unpaused`, `detached`, `removed`), kept for `--ferrometal OLD`.
const PHASE_WORDS: [&str; 12] = [
    "pause", "quiet", "copy", "unpause", "detach", "remove", "target", "paused", "copied",
    "unpaused", "detached", "removed",
];

fn host_name(i: usize) -> String {
    format!("pivot-{i:05}")
}

/// Every third host stays available; the others are provisioned.
fn provisioned(i: usize) -> bool {
    !i.is_multiple_of(3)
}

/// Actions a BMC saw, per system.
fn actions(emu: &Emulator, n: usize) -> Vec<usize> {
    (0..n).map(|i| emu.state(i).actions.len()).collect()
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let scratch = Scratch::new(&format!("pivot-{}", o.hosts), o.keep)?;
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
    let (dir_a, dir_b) = (scratch.path.join("a"), scratch.path.join("b"));
    std::fs::create_dir_all(&dir_a)?;
    std::fs::create_dir_all(&dir_b)?;
    let a = ServeChild::start(&binary, &dir_a, &o.serve_args)?;
    let b = ServeChild::start(&binary, &dir_b, &o.serve_args)?;
    let (ca, cb) = (a.client().await?, b.client().await?);
    wait_for_crd(&ca).await?;
    wait_for_crd(&cb).await?;
    create_bmc_secret(&ca, NAMESPACE).await?;
    let (states_a, watch_a) = watch_states(&ca);
    let base = emu
        .base_url()
        .replace("http://", "redfish-virtualmedia+http://");
    let started = Instant::now();
    create_emulated_hosts(
        &bmh_api(&ca),
        NAMESPACE,
        &base,
        o.hosts,
        o.concurrency,
        host_name,
        json!({"online": true}),
    )
    .await?;
    wait_all(&states_a, o.hosts, "available", started, deadline).await?;
    let image =
        json!({"spec": {"image": {"url": "http://127.0.0.1:1/live.iso", "format": "live-iso"}}});
    let api_a = bmh_api(&ca);
    for_each_concurrent(o.hosts, o.concurrency, |i| {
        let api = api_a.clone();
        let image = image.clone();
        async move {
            if provisioned(i) {
                api.patch(
                    &host_name(i),
                    &PatchParams::default(),
                    &Patch::Merge(&image),
                )
                .await
                .with_context(|| format!("provisioning {}", host_name(i)))?;
            }
            Ok(())
        }
    })
    .await?;
    let want_provisioned = (0..o.hosts).filter(|i| provisioned(*i)).count();
    wait_all(
        &states_a,
        want_provisioned,
        "provisioned",
        started,
        deadline,
    )
    .await?;
    watch_a.abort();
    say(&format!(
        "serve A: {want_provisioned} provisioned, {} available after {}",
        o.hosts - want_provisioned,
        secs(started.elapsed().as_secs_f64())
    ));

    // The move, as a user runs it; its progress lines are timed as they arrive.
    let before = actions(&emu, o.hosts);
    let requests_before = emu.counters().total;
    let (states_b, watch_b) = watch_states(&cb);
    let t = Instant::now();
    let mut command = tokio::process::Command::new(&binary);
    command
        .args(["move", "--namespace", NAMESPACE, "--from"])
        .arg(&a.kubeconfig)
        .arg("--to")
        .arg(&b.kubeconfig);
    if let Some(n) = o.move_concurrency {
        command.arg("--concurrency").arg(n.to_string());
    }
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("starting ferrometal move")?;
    let stdout = child.stdout.take().context("move stdout")?;
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    // The moment each phase was first and last seen; the move's lines are kept for the log.
    let mut phases: Vec<(String, f64, f64)> = Vec::new();
    let mut log = Vec::new();
    while let Some(line) = lines.next_line().await? {
        let word = line.split_whitespace().next().unwrap_or("").to_string();
        let at = t.elapsed().as_secs_f64();
        log.push((at, line.clone()));
        if PHASE_WORDS.contains(&word.as_str()) {
            match phases.last_mut() {
                Some(p) if p.0 == word => p.2 = at,
                _ => phases.push((word, at, at)),
            }
        }
    }
    let status = child.wait().await?;
    let moved_in = t.elapsed();
    let timed: Vec<String> = log.iter().map(|(at, l)| format!("{at:8.3} {l}")).collect();
    std::fs::write(scratch.path.join("move.log"), timed.join("\n") + "\n")?;
    // The phase lines of a move that prints them (not per-host lines, not the closing table).
    for (at, line) in &log {
        let word = line.split_whitespace().next().unwrap_or("");
        if PHASE_WORDS[..7].contains(&word) {
            say(&format!("  move at {at:7.3}s: {line}"));
        }
    }
    if !status.success() {
        bail!("ferrometal move failed: {status}");
    }
    say(&format!("move done in {}", secs(moved_in.as_secs_f64())));
    // Every host at B in the state it had at A.
    wait_all(&states_b, want_provisioned, "provisioned", t, deadline).await?;
    wait_all(
        &states_b,
        o.hosts - want_provisioned,
        "available",
        t,
        deadline,
    )
    .await?;
    let settled = t.elapsed();
    watch_b.abort();
    // A few power polls at B: any correction they made would show as an action.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = actions(&emu, o.hosts);
    let during: usize = after.iter().zip(&before).map(|(a, b)| a - b).sum();
    let hosts_with_actions: Vec<String> = (0..o.hosts)
        .filter(|i| after[*i] != before[*i])
        .map(host_name)
        .take(10)
        .collect();
    let requests = emu.counters().total - requests_before;
    let left_at_a = bmh_api(&ca).list(&ListParams::default()).await?.items.len();
    let at_b = bmh_api(&cb).list(&ListParams::default()).await?.items.len();
    let mut rows = vec![
        Row::new(
            "hosts moved",
            at_b.to_string(),
            format!(
                "{want_provisioned} provisioned, {} available",
                o.hosts - want_provisioned
            ),
        ),
        Row::new(
            "move wall time",
            secs(moved_in.as_secs_f64()),
            format!(
                "{:.0} hosts/s",
                o.hosts as f64 / moved_in.as_secs_f64().max(1e-9)
            ),
        ),
    ];
    for (phase, first, last) in &phases {
        rows.push(Row::new(
            format!("  {phase}"),
            secs(last - first),
            format!("from {} to {}", secs(*first), secs(*last)),
        ));
    }
    rows.extend([
        Row::new(
            "all in their state at B",
            secs(settled.as_secs_f64()),
            "from the start of the move",
        ),
        Row::new(
            "BMC actions during the move",
            during.to_string(),
            "power, boot, media (the emulator's log)",
        ),
        Row::new(
            "BMC requests meanwhile",
            requests.to_string(),
            format!(
                "{:.2} per host (reads: registration and power polls at B)",
                requests as f64 / o.hosts as f64
            ),
        ),
        Row::new("hosts left at A", left_at_a.to_string(), ""),
    ]);
    finish(
        "pivot",
        o.hosts,
        &rows,
        json!({
            "hosts": o.hosts,
            "provisioned": want_provisioned,
            "move_s": moved_in.as_secs_f64(),
            "phases": phases.iter().map(|(p, f, l)| json!({"phase": p, "first_s": f, "last_s": l})).collect::<Vec<_>>(),
            "settled_s": settled.as_secs_f64(),
            "bmc_actions_during_move": during,
            "bmc_requests_during_move": requests,
            "left_at_source": left_at_a,
            "at_target": at_b,
            "serve_args": o.serve_args,
            "move_concurrency": o.move_concurrency,
        }),
    )?;
    if during > 0 || left_at_a > 0 || at_b != o.hosts {
        bail!(
            "pivot failed: {during} BMC actions (e.g. {hosts_with_actions:?}), {left_at_a} hosts left at A, {at_b} at B"
        );
    }
    Ok(())
}
