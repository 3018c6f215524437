//! BMCJobs at scale: N hosts on the built-in emulator, all available and on, then one
//! three-task job per host created at once (power off, PXE once, power on). Wall time until
//! every job ended, BMC requests per job (tasks and restore), and job latency from the
//! client's create to the moment its watch saw the job end, and serve's CPU in that window.
//!
//! The jobs start once the fleet has settled: every host's HostFirmwareSettings and
//! HostFirmwareComponents read (their first reads come after registration and, at 1,000
//! hosts, run several seconds past "available"). `--unsettled` starts them as soon as the
//! hosts are available and on, the way this scenario measured before, so the two can be
//! compared: the figure then includes the fleet's enrollment tail.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ferrometal_api::job::{BMCJob, JobPhase};
use ferrometal_emulator::{Emulator, EmulatorConfig};
use futures::StreamExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::*;
use crate::procfs;
use crate::stats::{Row, ratio, secs, summarize};
use crate::writes::{EventWrites, resource_version};

pub struct Opts {
    pub hosts: usize,
    pub concurrency: usize,
    pub timeout: u64,
    pub serve_args: Vec<String>,
    pub ferrometal: Option<std::path::PathBuf>,
    pub keep: bool,
    pub unsettled: bool,
}

const NAMESPACE: &str = "default";

fn host_name(i: usize) -> String {
    format!("job-host-{i:05}")
}

/// When the watch saw each job end, and whether it completed.
type Ends = Arc<Mutex<HashMap<String, (Instant, bool)>>>;

fn watch_jobs(client: &kube::Client) -> (Ends, tokio::task::JoinHandle<()>) {
    use kube::runtime::watcher::{self, Event};
    let ends: Ends = Default::default();
    let api: Api<BMCJob> = Api::namespaced(client.clone(), NAMESPACE);
    let task = tokio::spawn({
        let ends = ends.clone();
        async move {
            let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                if let Ok(Event::Apply(j) | Event::InitApply(j)) = event {
                    let phase = j.status.as_ref().map(|s| s.phase).unwrap_or_default();
                    if matches!(phase, JobPhase::Completed | JobPhase::Failed) {
                        let name = j.metadata.name.clone().unwrap_or_default();
                        ends.lock()
                            .unwrap()
                            .entry(name)
                            .or_insert((Instant::now(), phase == JobPhase::Completed));
                    }
                }
            }
        }
    });
    (ends, task)
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let scratch = Scratch::new(&format!("jobs-{}", o.hosts), o.keep)?;
    let deadline = Instant::now() + Duration::from_secs(o.timeout);
    let emu = Emulator::start(
        EmulatorConfig {
            systems: o.hosts,
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let serve = ServeChild::start(&binary, &scratch.path, &o.serve_args)?;
    say(&format!(
        "emulator: {} systems; serve pid {} ({})",
        o.hosts,
        serve.pid(),
        o.serve_args.join(" ")
    ));
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    create_bmc_secret(&client, NAMESPACE).await?;
    let api = bmh_api(&client);
    let (states, watch) = watch_states(&client);
    let base = emu
        .base_url()
        .replace("http://", "redfish-virtualmedia+http://");
    let started = Instant::now();
    create_emulated_hosts(
        &api,
        NAMESPACE,
        &base,
        o.hosts,
        o.concurrency,
        host_name,
        json!({"online": true, "inspectionMode": "disabled"}),
    )
    .await?;
    wait_all(&states, o.hosts, "available", started, deadline).await?;
    // Available first, then on: wait until every system reports On.
    while (0..o.hosts).any(|i| emu.state(i).power_state.as_str() != "On") {
        if Instant::now() > deadline {
            bail!("hosts never all powered on");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    say(&format!(
        "{} hosts available and on after {}",
        o.hosts,
        secs(started.elapsed().as_secs_f64())
    ));

    if !o.unsettled {
        wait_settled(&client, o.hosts, deadline).await?;
        say(&format!(
            "firmware objects of {} hosts read after {}",
            o.hosts,
            secs(started.elapsed().as_secs_f64())
        ));
    }

    // The jobs, all at once.
    let cpu_before = procfs::read(serve.pid()).unwrap_or_default().cpu_secs;
    let any: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::erase::<BMCJob>(&()),
    );
    let rv_before = resource_version(&any).await;
    let event_writes = EventWrites::start(&client, rv_before);
    let (ends, jobs_watch) = watch_jobs(&client);
    emu.reset_counters();
    let jobs: Api<BMCJob> = Api::namespaced(client.clone(), NAMESPACE);
    let created: Arc<Mutex<HashMap<String, Instant>>> = Default::default();
    let t0 = Instant::now();
    for_each_concurrent(o.hosts, o.concurrency, |i| {
        let jobs = jobs.clone();
        let created = created.clone();
        async move {
            let name = format!("job-{i:05}");
            let job: BMCJob = serde_json::from_value(json!({
                "apiVersion": "ferrometal.io/v1alpha1", "kind": "BMCJob",
                "metadata": {"name": name},
                "spec": {"hostRef": {"name": host_name(i)}, "tasks": [
                    {"powerAction": "off"},
                    {"oneTimeBootDeviceAction": {"device": ["pxe"], "efiBoot": true}},
                    {"powerAction": "on"},
                ]},
            }))?;
            created.lock().unwrap().insert(name.clone(), Instant::now());
            jobs.create(&PostParams::default(), &job)
                .await
                .with_context(|| format!("creating {name}"))?;
            Ok(())
        }
    })
    .await?;
    let creating = t0.elapsed();
    let mut last = Instant::now();
    loop {
        let done = ends.lock().unwrap().len();
        if done >= o.hosts {
            break;
        }
        if last.elapsed() >= Duration::from_secs(2) {
            say(&format!(
                "[{:>7.1}s] {done}/{} jobs ended",
                t0.elapsed().as_secs_f64(),
                o.hosts
            ));
            last = Instant::now();
        }
        if Instant::now() > deadline {
            bail!("timed out: {done}/{} jobs ended", o.hosts);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let wall = t0.elapsed();
    let cpu = procfs::read(serve.pid()).unwrap_or_default().cpu_secs - cpu_before;
    let rv_after = resource_version(&any).await;
    let writes = rv_after.saturating_sub(rv_before);
    let events = event_writes.between(rv_before, rv_after).await;
    if events.is_none() {
        say("the Event watch lost its place: Events are counted as durable writes");
    }
    let events = events.unwrap_or(0);
    watch.abort();
    jobs_watch.abort();
    let counters = emu.counters();
    let ends = ends.lock().unwrap().clone();
    let created = created.lock().unwrap().clone();
    let latencies: Vec<f64> = ends
        .iter()
        .filter_map(|(name, (end, _))| {
            created
                .get(name)
                .map(|c| end.saturating_duration_since(*c).as_secs_f64() * 1000.0)
        })
        .collect();
    let completed = ends.values().filter(|(_, ok)| *ok).count();
    let lat = summarize(&latencies);
    let per_job = ratio(counters.total as f64, o.hosts as f64);
    let m = counters.by_method;
    let per = |v: u64| ratio(v as f64, o.hosts as f64);
    let rows = vec![
        Row::new(
            "jobs (3 tasks each)",
            o.hosts.to_string(),
            format!("{completed} completed"),
        ),
        Row::new("create all jobs", secs(creating.as_secs_f64()), ""),
        Row::new(
            "wall time, first create -> last end",
            secs(wall.as_secs_f64()),
            "",
        ),
        Row::new(
            "BMC requests per job",
            format!("{per_job:.2}"),
            format!(
                "GET {:.2} POST {:.2} PATCH {:.2} (tasks, observation, restore)",
                per(m.get),
                per(m.post),
                per(m.patch)
            ),
        ),
        Row::new(
            "job latency p50",
            secs(lat.p50_ms / 1000.0),
            "create -> ended",
        ),
        Row::new("job latency p99", secs(lat.p99_ms / 1000.0), ""),
        Row::new("job latency max", secs(lat.max_ms / 1000.0), ""),
        Row::new(
            "serve CPU, first create -> last end",
            secs(cpu),
            format!("{:.1} ms per job", cpu * 1000.0 / o.hosts as f64),
        ),
        Row::new(
            "API writes per job",
            format!("{:.2}", ratio(writes as f64, o.hosts as f64)),
            format!(
                "{:.2} durable (the bench's creates included), {:.2} Events",
                ratio(writes.saturating_sub(events) as f64, o.hosts as f64),
                ratio(events as f64, o.hosts as f64)
            ),
        ),
        Row::new(
            "started",
            if o.unsettled { "unsettled" } else { "settled" },
            if o.unsettled {
                "hosts available and on, firmware reads may still run"
            } else {
                "every host's firmware objects read"
            },
        ),
    ];
    finish(
        "jobs",
        o.hosts,
        &rows,
        json!({
            "jobs": o.hosts,
            "completed": completed,
            "create_s": creating.as_secs_f64(),
            "wall_s": wall.as_secs_f64(),
            "bmc_requests_per_job": per_job,
            "latency_ms": lat,
            "serve_cpu_s": cpu,
            "api_writes": writes,
            "event_writes": events,
            "settled": !o.unsettled,
            "serve_args": o.serve_args,
        }),
    )
}

/// Waits until `n` HostFirmwareSettings and `n` HostFirmwareComponents report their first read
/// (their read condition True): the BMC reads every registered host gets, which would otherwise
/// share the BMCs and serve's CPU with the jobs.
async fn wait_settled(client: &kube::Client, n: usize, deadline: Instant) -> anyhow::Result<()> {
    use ferrometal_api::firmware::{
        HostFirmwareComponents, HostFirmwareSettings, SETTINGS_READ, VERSIONS_READ,
    };
    fn read(conditions: &[ferrometal_api::Condition], kind: &str) -> bool {
        conditions
            .iter()
            .any(|c| c.type_ == kind && c.status == "True")
    }
    let settings: Api<HostFirmwareSettings> = Api::namespaced(client.clone(), NAMESPACE);
    let components: Api<HostFirmwareComponents> = Api::namespaced(client.clone(), NAMESPACE);
    loop {
        let s = settings.list(&Default::default()).await?;
        let c = components.list(&Default::default()).await?;
        let done_s = s
            .items
            .iter()
            .filter(|o| {
                o.status
                    .as_ref()
                    .is_some_and(|st| read(&st.conditions, SETTINGS_READ))
            })
            .count();
        let done_c = c
            .items
            .iter()
            .filter(|o| {
                o.status
                    .as_ref()
                    .is_some_and(|st| read(&st.conditions, VERSIONS_READ))
            })
            .count();
        if done_s >= n && done_c >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "firmware objects never all read: settings {done_s}/{n}, components {done_c}/{n}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
