//! `scale --hosts N`: N hosts on the built-in emulator through `ferrometal serve` (a child
//! process, so its memory and CPU are its own): apply → available (fast inspection) →
//! provisioned (live ISO), the BMC requests of each phase, the steady-state power poll, and
//! the latency from an operation annotation to the BMC call.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ferrometal_emulator::{Emulator, EmulatorConfig};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{
    NAMESPACE, Scratch, ServeChild, bmh_api, create_bmc_secret, create_emulated_hosts,
    ferrometal_binary, finish, for_each_concurrent, free_port, metric_sum, say, unix_micros,
    wait_all, wait_for_crd, watch_states,
};
use crate::emucap;
use crate::procfs;
use crate::stats::{Row, mib, ratio, secs, summarize};
use crate::writes::{EventWrites, resource_version};

pub struct Opts {
    pub hosts: usize,
    pub poll_interval: u64,
    pub steady_intervals: u64,
    pub latency_samples: usize,
    pub create_concurrency: usize,
    pub timeout: u64,
    pub capacity_seconds: u64,
    pub serve_args: Vec<String>,
    pub ferrometal: Option<PathBuf>,
    pub keep: bool,
    /// Provision through one HostClaim per host from a tenant namespace instead of patching the
    /// hosts (claims must add no BMC request).
    pub via_claims: bool,
}

const TENANT: &str = "bench-tenant";

fn claim_resource() -> kube::discovery::ApiResource {
    kube::discovery::ApiResource {
        group: "metal3.io".into(),
        version: "v1alpha1".into(),
        api_version: "metal3.io/v1alpha1".into(),
        kind: "HostClaim".into(),
        plural: "hostclaims".into(),
    }
}

/// A tenant namespace, a policy lending it the hosts, and one claim per host.
async fn create_claims(client: &kube::Client, o: &Opts) -> anyhow::Result<()> {
    let ns: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    );
    let namespace = DynamicObject::new(
        TENANT,
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    );
    ns.create(&PostParams::default(), &namespace).await?;
    let policy_ar = kube::discovery::ApiResource {
        kind: "HostDeployPolicy".into(),
        plural: "hostdeploypolicies".into(),
        ..claim_resource()
    };
    let policies: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &policy_ar);
    let policy = DynamicObject::new("bench", &policy_ar)
        .within(NAMESPACE)
        .data(json!({"spec": {"hostClaimNamespaces": {"names": [TENANT]}}}));
    policies.create(&PostParams::default(), &policy).await?;
    let ar = claim_resource();
    let claims: Api<DynamicObject> = Api::namespaced_with(client.clone(), TENANT, &ar);
    for_each_concurrent(o.hosts, o.create_concurrency, |i| {
        let claims = claims.clone();
        let ar = ar.clone();
        async move {
            let claim = DynamicObject::new(&format!("claim-{i:05}"), &ar)
                .within(TENANT)
                .data(json!({"spec": {"poweredOn": true, "image": {
                    "url": "http://127.0.0.1:1/live.iso", "format": "live-iso"}}}));
            claims
                .create(&PostParams::default(), &claim)
                .await
                .with_context(|| format!("creating claim {i}"))?;
            Ok(())
        }
    })
    .await
}

fn host_name(i: usize) -> String {
    format!("host-{i:05}")
}

/// Emulator counters: total requests and the count for each system.
fn bmc_totals(emu: &Emulator) -> (u64, Vec<u64>) {
    let c = emu.counters();
    (c.total, c.systems.iter().map(|m| m.total()).collect())
}

/// `GET 3.0 POST 1.0 PATCH 0.5` per host, from the emulator's method counters.
fn by_method(emu: &Emulator, hosts: usize) -> String {
    let m = emu.counters().by_method;
    let per = |v: u64| v as f64 / hosts.max(1) as f64;
    format!(
        "GET {:.2} POST {:.2} PATCH {:.2} DELETE {:.2} other {:.2}",
        per(m.get),
        per(m.post),
        per(m.patch),
        per(m.delete),
        per(m.other)
    )
}

struct Phase {
    name: &'static str,
    wall: Duration,
    requests: u64,
    max_per_host: u64,
    methods: String,
    /// The BMC actions (POST/PATCH) host 0 received in this phase.
    actions_host0: Vec<String>,
    cpu_secs: f64,
    store_writes: u64,
    /// Of `store_writes`, the Events (kept in memory, not in the durable store).
    event_writes: u64,
    reconciles: f64,
}

/// (objects, JSON bytes) of a full list, as the API server serves it.
async fn list_size(client: &kube::Client, path: &str) -> (usize, usize) {
    let Ok(req) = http::Request::get(path).body(Vec::new()) else {
        return (0, 0);
    };
    match client.request_text(req).await {
        Ok(text) => {
            let items = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["items"].as_array().map(Vec::len))
                .unwrap_or(0);
            (items, text.len())
        }
        Err(_) => (0, 0),
    }
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let scratch = Scratch::new(&format!("scale-{}", o.hosts), o.keep)?;
    let deadline = Instant::now() + Duration::from_secs(o.timeout);

    // The fleet, in this process; its capacity first, measured in the same run.
    let emu = Emulator::start(
        EmulatorConfig {
            systems: o.hosts,
            // The image URL is served by nothing: what is measured is the controller, and
            // a fetch per URL (cached) would be noise.
            fetch_media: false,
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    say(&format!(
        "emulator: {} systems at {}; measuring its capacity for {} s",
        o.hosts,
        emu.base_url(),
        o.capacity_seconds
    ));
    let capacity =
        emucap::measure(&emu.base_url(), o.hosts, o.capacity_seconds, &scratch.path).await?;
    say(&format!(
        "emulator capacity: {:.0} GET/s ({})",
        capacity.requests_per_sec, capacity.tool
    ));
    emu.reset_counters();

    // The server with its controllers.
    let metrics_addr = format!("127.0.0.1:{}", free_port()?);
    let mut serve_args = vec![
        "--power-poll-interval".to_string(),
        o.poll_interval.to_string(),
        "--metrics-listen".into(),
        metrics_addr.clone(),
    ];
    serve_args.extend(o.serve_args.iter().cloned());
    let serve = ServeChild::start(&binary, &scratch.path, &serve_args)?;
    let pid = serve.pid();
    say(&format!(
        "serve pid {pid} at {} ({})",
        serve.url,
        serve_args.join(" ")
    ));
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    let metrics_url = format!("http://{metrics_addr}/metrics");
    let http = reqwest::Client::new();
    let reconciles = || metric_sum(&http, &metrics_url, "ferrometal_host_reconciles_total");
    let api = bmh_api(&client);
    let (states, watch) = watch_states(&client);
    let base_cpu = procfs::read(pid).map_or(0.0, |r| r.cpu_secs);
    let idle_rss = procfs::read(pid).map_or(0, |r| r.rss);

    // Phase 1: create → available.
    let started = Instant::now();
    let rv0 = resource_version(&api).await;
    let events = EventWrites::start(&client, rv0);
    let rec0 = reconciles().await.unwrap_or(0.0);
    create_bmc_secret(&client, NAMESPACE).await?;
    let base = emu
        .base_url()
        .replace("http://", "redfish-virtualmedia+http://");
    create_emulated_hosts(
        &api,
        NAMESPACE,
        &base,
        o.hosts,
        o.create_concurrency,
        host_name,
        json!({"online": false, "inspectionMode": "fast"}),
    )
    .await?;
    let created = started.elapsed();
    say(&format!(
        "created {} hosts in {}",
        o.hosts,
        secs(created.as_secs_f64())
    ));
    // On a time-out the figures so far are still reported, with the reason.
    let mut incomplete: Option<String> = None;
    let to_available = match wait_all(&states, o.hosts, "available", started, deadline).await {
        Ok(d) => d,
        Err(e) => {
            incomplete = Some(format!("{e:#}"));
            started.elapsed()
        }
    };
    let after_available = procfs::read(pid).unwrap_or_default();
    let (req1, per1) = bmc_totals(&emu);
    let rv1 = resource_version(&api).await;
    let rec1 = reconciles().await.unwrap_or(rec0);
    let mut phases = vec![Phase {
        name: "apply -> available",
        wall: to_available,
        requests: req1,
        max_per_host: per1.iter().copied().max().unwrap_or(0),
        methods: by_method(&emu, o.hosts),
        actions_host0: emu.state(0).actions,
        cpu_secs: after_available.cpu_secs - base_cpu,
        store_writes: rv1.saturating_sub(rv0),
        event_writes: events.between(rv0, rv1).await.unwrap_or(0),
        reconciles: rec1 - rec0,
    }];
    say(&format!(
        "{} available after {}; {:.2} BMC requests per host",
        states
            .lock()
            .unwrap()
            .values()
            .filter(|s| *s == "available")
            .count(),
        secs(to_available.as_secs_f64()),
        ratio(req1 as f64, o.hosts as f64)
    ));

    // Phase 2: available → provisioned (live ISO through virtual media).
    if incomplete.is_none() {
        emu.reset_counters();
        let actions0 = emu.state(0).actions.len();
        let started2 = Instant::now();
        let patch = json!({"spec": {"online": true, "image": {
        "url": "http://127.0.0.1:1/live.iso", "format": "live-iso"}}});
        if o.via_claims {
            create_claims(&client, &o).await?;
        } else {
            for_each_concurrent(o.hosts, o.create_concurrency, |i| {
                let api = api.clone();
                let patch = patch.clone();
                async move {
                    api.patch(
                        &host_name(i),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .with_context(|| format!("patching {}", host_name(i)))?;
                    Ok(())
                }
            })
            .await?;
        }
        let to_provisioned =
            match wait_all(&states, o.hosts, "provisioned", started2, deadline).await {
                Ok(d) => d,
                Err(e) => {
                    incomplete = Some(format!("{e:#}"));
                    started2.elapsed()
                }
            };
        let after_provisioned = procfs::read(pid).unwrap_or_default();
        let (req2, per2) = bmc_totals(&emu);
        let rv2 = resource_version(&api).await;
        let rec2 = reconciles().await.unwrap_or(rec1);
        phases.push(Phase {
            name: if o.via_claims {
                "available -> provisioned (HostClaims)"
            } else {
                "available -> provisioned"
            },
            wall: to_provisioned,
            requests: req2,
            max_per_host: per2.iter().copied().max().unwrap_or(0),
            methods: by_method(&emu, o.hosts),
            actions_host0: emu.state(0).actions[actions0..].to_vec(),
            cpu_secs: after_provisioned.cpu_secs - after_available.cpu_secs,
            store_writes: rv2.saturating_sub(rv1),
            event_writes: events.between(rv1, rv2).await.unwrap_or(0),
            reconciles: rec2 - rec1,
        });
        say(&format!(
            "{} provisioned after {}; {:.2} BMC requests per host",
            states
                .lock()
                .unwrap()
                .values()
                .filter(|s| *s == "provisioned")
                .count(),
            secs(to_provisioned.as_secs_f64()),
            ratio(req2 as f64, o.hosts as f64)
        ));
    }

    // Phase 3: steady state, a fixed window of whole poll intervals.
    let window = Duration::from_secs(o.poll_interval * o.steady_intervals);
    let (mut req3, mut steady_max, mut steady_cpu, mut steady_writes, mut steady_reconciles) =
        (0, 0, 0.0, 0, 0.0);
    let mut steady_events = 0;
    if incomplete.is_none() {
        tokio::time::sleep(Duration::from_secs(2)).await;
        emu.reset_counters();
        let cpu_before = procfs::read(pid).map_or(0.0, |r| r.cpu_secs);
        let rv_before = resource_version(&api).await;
        let rec_before = reconciles().await.unwrap_or(0.0);
        say(&format!(
            "steady state: counting BMC requests over {} s ({} poll intervals of {} s)",
            window.as_secs(),
            o.steady_intervals,
            o.poll_interval
        ));
        tokio::time::sleep(window).await;
        let per3;
        (req3, per3) = bmc_totals(&emu);
        steady_cpu = procfs::read(pid).map_or(0.0, |r| r.cpu_secs) - cpu_before;
        let rv_after = resource_version(&api).await;
        steady_writes = rv_after.saturating_sub(rv_before);
        steady_events = events.between(rv_before, rv_after).await.unwrap_or(0);
        steady_reconciles = reconciles().await.unwrap_or(rec_before) - rec_before;
        steady_max = per3.iter().copied().max().unwrap_or(0);
        say(&format!(
            "steady state: {req3} BMC requests = {:.2} per host per interval",
            ratio(req3 as f64, (o.hosts as u64 * o.steady_intervals) as f64)
        ));
    }
    if events.lost() {
        say("the Event watch lost its place: Events after that are counted as durable writes");
    }
    let per_host_interval = ratio(req3 as f64, (o.hosts as u64 * o.steady_intervals) as f64);

    // Phase 4: operation annotation → BMC action, one sample at a time on distinct hosts.
    let samples = if incomplete.is_none() {
        o.latency_samples.min(o.hosts)
    } else {
        0
    };
    let stride = (o.hosts / samples.max(1)).max(1);
    let mut latencies = Vec::new();
    let mut missed = 0;
    say(&format!("annotation latency: {samples} samples"));
    for s in 0..samples {
        if Instant::now() > deadline {
            break;
        }
        let i = (s * stride) % o.hosts;
        let t0 = unix_micros();
        let patch = json!({"metadata": {"annotations": {"ferrometal.io/operation": "PowerCycle"}}});
        api.patch(
            &host_name(i),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        let wait_until = Instant::now() + Duration::from_secs(10);
        let mut seen = None;
        while Instant::now() < wait_until {
            let snap = emu.state(i);
            if let Some(t) = snap.action_times_us.iter().copied().find(|t| *t >= t0) {
                seen = Some(t);
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        match seen {
            Some(t) => latencies.push((t - t0) as f64 / 1000.0),
            None => missed += 1,
        }
        if (s + 1) % 50 == 0 {
            say(&format!("  {} samples", s + 1));
        }
    }
    let latency = summarize(&latencies);
    // What the API server holds, by kind, as served JSON.
    let mut objects = Vec::new();
    for (kind, path) in [
        ("BareMetalHost", "/apis/metal3.io/v1alpha1/baremetalhosts"),
        ("HardwareData", "/apis/metal3.io/v1alpha1/hardwaredata"),
        ("Event", "/api/v1/events"),
        ("Secret", "/api/v1/secrets"),
    ] {
        let (count, bytes) = list_size(&client, path).await;
        objects.push((kind, count, bytes));
    }
    let end = procfs::read(pid).unwrap_or_default();
    let store_bytes = crate::common::dir_size(&serve.data_dir);
    watch.abort();
    drop(client);
    drop(serve);
    emu.shutdown().await;

    // Report.
    let n = o.hosts as f64;
    let rps = capacity.requests_per_sec;
    let mut rows = vec![
        Row::new("hosts", o.hosts.to_string(), serve_args.join(" ")),
        Row::new(
            "completed",
            if incomplete.is_none() { "yes" } else { "NO" },
            incomplete.clone().unwrap_or_default(),
        ),
        Row::new(
            "emulator capacity",
            format!("{rps:.0} GET/s"),
            capacity.tool.clone(),
        ),
        Row::new(
            "create requests",
            secs(created.as_secs_f64()),
            format!("{} hosts, {} at once", o.hosts, o.create_concurrency),
        ),
    ];
    for p in &phases {
        let limit = ratio(p.requests as f64, rps);
        rows.push(Row::new(
            format!("{}: wall", p.name),
            secs(p.wall.as_secs_f64()),
            format!(
                "{:.0}x the emulator-only limit ({})",
                ratio(p.wall.as_secs_f64(), limit),
                secs(limit)
            ),
        ));
        rows.push(Row::new(
            format!("{}: BMC req/host", p.name),
            format!("{:.2}", ratio(p.requests as f64, n)),
            format!("max {} on one host; {}", p.max_per_host, p.methods),
        ));
        rows.push(Row::new(
            format!("{}: serve CPU", p.name),
            format!("{:.1} s", p.cpu_secs),
            format!(
                "{:.1} ms per host; {:.1} store writes ({:.1} durable, {:.1} Events), {:.1} reconciles per host",
                p.cpu_secs * 1000.0 / n,
                ratio(p.store_writes as f64, n),
                ratio(p.store_writes.saturating_sub(p.event_writes) as f64, n),
                ratio(p.event_writes as f64, n),
                ratio(p.reconciles, n)
            ),
        ));
    }
    rows.push(Row::new(
        "steady: BMC req/host/interval",
        format!("{per_host_interval:.2}"),
        format!(
            "{} s window, poll {} s, max {} on one host; CPU {:.2} s, {} store writes ({} Events), {:.0} reconciles",
            window.as_secs(),
            o.poll_interval,
            steady_max,
            steady_cpu,
            steady_writes,
            steady_events,
            steady_reconciles
        ),
    ));
    rows.push(Row::new(
        "annotation -> BMC p50",
        format!("{:.1} ms", latency.p50_ms),
        format!("{} samples, {missed} missed", latency.samples),
    ));
    rows.push(Row::new(
        "annotation -> BMC p99",
        format!("{:.1} ms", latency.p99_ms),
        format!("max {:.1} ms", latency.max_ms),
    ));
    rows.push(Row::new(
        "serve peak RSS (VmHWM)",
        mib(end.hwm),
        format!(
            "idle before hosts {}; at end {} ({} anonymous, {} file-backed)",
            mib(idle_rss),
            mib(end.rss),
            mib(end.rss_anon),
            mib(end.rss_file)
        ),
    ));
    rows.push(Row::new(
        "serve CPU total",
        format!("{:.1} s", end.cpu_secs),
        "",
    ));
    rows.push(Row::new("store on disk", mib(store_bytes), ""));
    for (kind, count, bytes) in &objects {
        rows.push(Row::new(
            format!("objects: {kind}"),
            count.to_string(),
            format!(
                "{} as JSON, {:.1} KiB each",
                mib(*bytes as u64),
                ratio(*bytes as f64, *count as f64) / 1024.0
            ),
        ));
    }
    let phase_json: Vec<_> = phases
        .iter()
        .map(|p| {
            json!({
                "phase": p.name,
                "wall_secs": p.wall.as_secs_f64(),
                "bmc_requests": p.requests,
                "bmc_requests_per_host": ratio(p.requests as f64, n),
                "bmc_requests_max_one_host": p.max_per_host,
                "bmc_requests_per_host_by_method": p.methods,
                "bmc_actions_host0": p.actions_host0,
                "emulator_only_limit_secs": ratio(p.requests as f64, rps),
                "ratio_to_emulator_limit": ratio(p.wall.as_secs_f64(), ratio(p.requests as f64, rps)),
                "serve_cpu_secs": p.cpu_secs,
                "store_writes": p.store_writes,
                "event_writes": p.event_writes,
                "durable_writes": p.store_writes.saturating_sub(p.event_writes),
                "reconciles": p.reconciles,
            })
        })
        .collect();
    finish(
        "scale",
        o.hosts,
        &rows,
        json!({
            "hosts": o.hosts,
            "incomplete": incomplete,
            "serve_args": serve_args,
            "emulator_capacity": capacity,
            "create_secs": created.as_secs_f64(),
            "phases": phase_json,
            "steady": {
                "window_secs": window.as_secs(),
                "poll_interval_secs": o.poll_interval,
                "bmc_requests": req3,
                "per_host_per_interval": per_host_interval,
                "max_one_host": steady_max,
                "serve_cpu_secs": steady_cpu,
                "store_writes": steady_writes,
                "event_writes": steady_events,
                "reconciles": steady_reconciles,
            },
            "annotation_latency": latency,
            "annotation_missed": missed,
            "serve_peak_rss_bytes": end.hwm,
            "serve_idle_rss_bytes": idle_rss,
            "serve_end_rss_bytes": end.rss,
            "serve_end_rss_anon_bytes": end.rss_anon,
            "serve_end_rss_file_bytes": end.rss_file,
            "serve_cpu_secs_total": end.cpu_secs,
            "store_bytes": store_bytes,
            "event_watch_lost": events.lost(),
            "objects": objects.iter().map(|(k, c, b)| json!({"kind": k, "count": c, "json_bytes": b})).collect::<Vec<_>>(),
        }),
    )
}
