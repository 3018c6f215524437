//! `isolation --hosts 1000 --broken 200`: what a rack of silent BMCs costs the healthy hosts.
//! Healthy hosts on one emulator, the rack on another; all available and on. Then two windows
//! of the same length: first with the rack answering, then with every one of its BMCs hanging
//! (each request held until the client's timeout). In each window: operation annotations on
//! healthy hosts spread over the window (annotation -> the BMC receiving the PowerCycle) and
//! the healthy hosts' power polls per interval.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use ferrometal_emulator::{Emulator, EmulatorConfig, Fault};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::common::*;
use crate::stats::{Row, Summary, ratio, secs, summarize};

pub struct Opts {
    pub hosts: usize,
    pub broken: usize,
    pub poll_interval: u64,
    pub bmc_timeout: u64,
    /// Length of each window, in poll intervals.
    pub intervals: u64,
    /// Annotation samples per window.
    pub samples: usize,
    pub concurrency: usize,
    pub timeout: u64,
    pub serve_args: Vec<String>,
    pub ferrometal: Option<std::path::PathBuf>,
    pub keep: bool,
}

fn healthy(i: usize) -> String {
    format!("iso-ok-{i:05}")
}

fn broken(i: usize) -> String {
    format!("iso-rack-{i:05}")
}

/// One window's figures.
struct Window {
    name: &'static str,
    latency: Summary,
    missed: usize,
    /// Healthy hosts' GETs per host per poll interval (one GET is one power poll).
    polls_per_interval: f64,
    /// Healthy hosts with fewer polls than whole intervals in the window.
    starved: usize,
    peak_in_flight: f64,
    circuits_opened: f64,
    refused: f64,
}

async fn window(
    name: &'static str,
    o: &Opts,
    emu: &Arc<Emulator>,
    api: &Api<DynamicObject>,
    metrics_url: &str,
    first_sample: usize,
) -> anyhow::Result<Window> {
    let http = reqwest::Client::new();
    let length = Duration::from_secs(o.poll_interval * o.intervals);
    let gap = length / (o.samples.max(1) as u32);
    emu.reset_counters();
    let opened0 = metric_sum(&http, metrics_url, "ferrometal_bmc_circuits_opened_total")
        .await
        .unwrap_or(0.0);
    let refused0 = metric_sum(&http, metrics_url, "ferrometal_bmc_calls_refused_total")
        .await
        .unwrap_or(0.0);
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut peak_in_flight: f64 = 0.0;
    let mut sampled = std::collections::HashSet::new();
    for s in 0..o.samples {
        // Distinct hosts in both windows: no host sees two operations.
        let i = (first_sample + s) * (o.hosts / (2 * o.samples).max(1)).max(1) % o.hosts;
        sampled.insert(i);
        let (api, emu) = (api.clone(), emu.clone());
        samples.push(tokio::spawn(async move {
            let t0 = unix_micros();
            let patch =
                json!({"metadata": {"annotations": {"ferrometal.io/operation": "PowerCycle"}}});
            api.patch(&healthy(i), &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let until = Instant::now() + Duration::from_secs(60);
            while Instant::now() < until {
                if let Some(t) = emu.state(i).action_times_us.into_iter().find(|t| *t >= t0) {
                    return Ok::<_, anyhow::Error>(Some((t - t0) as f64 / 1000.0));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Ok(None)
        }));
        if let Some(v) = metric_sum(&http, metrics_url, "ferrometal_bmc_calls_in_flight").await {
            peak_in_flight = peak_in_flight.max(v);
        }
        let next = started + gap * (s as u32 + 1);
        tokio::time::sleep_until(next.into()).await;
    }
    tokio::time::sleep_until((started + length).into()).await;
    let all = emu.counters();
    // Hosts given an operation make extra requests for it: polls are counted on the others.
    let counters: Vec<u64> = (0..o.hosts)
        .filter(|i| !sampled.contains(i))
        .map(|i| all.system(i).get)
        .collect();
    let mut latencies = Vec::new();
    let mut missed = 0;
    for s in samples {
        match s.await?? {
            Some(ms) => latencies.push(ms),
            None => missed += 1,
        }
    }
    let polls: u64 = counters.iter().sum();
    Ok(Window {
        name,
        latency: summarize(&latencies),
        missed,
        polls_per_interval: ratio(polls as f64, (counters.len() as u64 * o.intervals) as f64),
        starved: counters.iter().filter(|c| **c + 1 < o.intervals).count(),
        peak_in_flight,
        circuits_opened: metric_sum(&http, metrics_url, "ferrometal_bmc_circuits_opened_total")
            .await
            .unwrap_or(0.0)
            - opened0,
        refused: metric_sum(&http, metrics_url, "ferrometal_bmc_calls_refused_total")
            .await
            .unwrap_or(0.0)
            - refused0,
    })
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let scratch = Scratch::new(&format!("isolation-{}", o.hosts), o.keep)?;
    let deadline = Instant::now() + Duration::from_secs(o.timeout);
    let start = |systems| {
        Emulator::start(
            EmulatorConfig {
                systems,
                ..EmulatorConfig::default()
            },
            "127.0.0.1:0".parse().expect("an address"),
        )
    };
    let emu = Arc::new(start(o.hosts).await?);
    let rack = start(o.broken.max(1)).await?;
    let metrics_addr = format!("127.0.0.1:{}", free_port()?);
    let mut serve_args = vec![
        "--power-poll-interval".to_string(),
        o.poll_interval.to_string(),
        "--bmc-timeout".into(),
        o.bmc_timeout.to_string(),
        "--metrics-listen".into(),
        metrics_addr.clone(),
    ];
    serve_args.extend(o.serve_args.iter().cloned());
    let serve = ServeChild::start(&binary, &scratch.path, &serve_args)?;
    say(&format!(
        "healthy: {} systems at {}; rack: {} systems at {}; serve pid {} ({})",
        o.hosts,
        emu.base_url(),
        o.broken,
        rack.base_url(),
        serve.pid(),
        serve_args.join(" ")
    ));
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    create_bmc_secret(&client, NAMESPACE).await?;
    let api = bmh_api(&client);
    let (states, watch) = watch_states(&client);
    let started = Instant::now();
    let spec = json!({"online": true, "inspectionMode": "disabled"});
    let base = |e: &Emulator| {
        e.base_url()
            .replace("http://", "redfish-virtualmedia+http://")
    };
    create_emulated_hosts(
        &api,
        NAMESPACE,
        &base(&emu),
        o.hosts,
        o.concurrency,
        healthy,
        spec.clone(),
    )
    .await?;
    create_emulated_hosts(
        &api,
        NAMESPACE,
        &base(&rack),
        o.broken,
        o.concurrency,
        broken,
        spec,
    )
    .await?;
    wait_all(&states, o.hosts + o.broken, "available", started, deadline).await?;
    let all_on = |e: &Emulator, n: usize| (0..n).all(|i| e.state(i).power_state.as_str() == "On");
    while !(all_on(&emu, o.hosts) && all_on(&rack, o.broken)) {
        if Instant::now() > deadline {
            bail!("hosts never all powered on");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    say(&format!(
        "{} hosts available and on after {}",
        o.hosts + o.broken,
        secs(started.elapsed().as_secs_f64())
    ));
    // Let the polls settle into their steady rhythm.
    tokio::time::sleep(Duration::from_secs(o.poll_interval)).await;
    let metrics_url = format!("http://{metrics_addr}/metrics");

    say(&format!(
        "window 1: the rack answers ({} s, {} samples)",
        o.poll_interval * o.intervals,
        o.samples
    ));
    let answering = window("rack answering", &o, &emu, &api, &metrics_url, 0).await?;
    rack.reset_counters();
    for i in 0..o.broken {
        rack.set_fault(i, Some(Fault::Hang));
    }
    say(&format!(
        "window 2: all {} rack BMCs hang (timeout {} s)",
        o.broken, o.bmc_timeout
    ));
    let silent = window("rack silent", &o, &emu, &api, &metrics_url, o.samples).await?;
    let rack_gets = rack.counters().total;
    watch.abort();
    drop(client);
    drop(serve);
    if let Some(emu) = Arc::into_inner(emu) {
        emu.shutdown().await;
    }
    rack.shutdown().await;

    let mut rows = vec![Row::new(
        "fleet",
        format!("{} + {}", o.hosts, o.broken),
        format!(
            "healthy + rack; poll {} s, BMC timeout {} s; {}",
            o.poll_interval,
            o.bmc_timeout,
            serve_args.join(" ")
        ),
    )];
    for w in [&answering, &silent] {
        rows.push(Row::new(
            format!("{}: annotation -> BMC p50", w.name),
            format!("{:.1} ms", w.latency.p50_ms),
            format!("{} samples, {} missed", w.latency.samples, w.missed),
        ));
        rows.push(Row::new(
            format!("{}: annotation -> BMC p99", w.name),
            format!("{:.1} ms", w.latency.p99_ms),
            format!("max {:.1} ms", w.latency.max_ms),
        ));
        rows.push(Row::new(
            format!("{}: healthy polls/host/interval", w.name),
            format!("{:.2}", w.polls_per_interval),
            format!(
                "{} hosts polled less than once per interval; peak BMC calls in flight {:.0}; \
                 breakers opened {:.0}, calls refused {:.0}",
                w.starved, w.peak_in_flight, w.circuits_opened, w.refused
            ),
        ));
    }
    rows.push(Row::new(
        "requests the silent rack received",
        rack_gets.to_string(),
        format!("over {} s", o.poll_interval * o.intervals),
    ));
    let json_window = |w: &Window| {
        json!({
            "name": w.name,
            "annotation_latency": w.latency,
            "missed": w.missed,
            "healthy_polls_per_host_per_interval": w.polls_per_interval,
            "healthy_hosts_starved": w.starved,
            "peak_bmc_calls_in_flight": w.peak_in_flight,
            "circuits_opened": w.circuits_opened,
            "calls_refused": w.refused,
        })
    };
    finish(
        "isolation",
        o.hosts,
        &rows,
        json!({
            "hosts": o.hosts,
            "broken": o.broken,
            "poll_interval_secs": o.poll_interval,
            "bmc_timeout_secs": o.bmc_timeout,
            "window_secs": o.poll_interval * o.intervals,
            "serve_args": serve_args,
            "windows": [json_window(&answering), json_window(&silent)],
            "rack_requests_while_silent": rack_gets,
        }),
    )
}
