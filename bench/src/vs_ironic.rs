//! `vs-ironic --hosts N`: the same sushy-tools emulator (power delay removed), one side after the
//! other with fresh state each: Ironic (redfish driver, enroll → manage → provide, no
//! inspection) versus ferrometal redfish-direct (apply → available, inspection disabled).
//! Wall time, peak RSS of each process tree, and BMC requests per host from sushy-tools' log.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::common::{
    NAMESPACE, Scratch, ServeChild, bmh_api, bmh_resource, ferrometal_binary, finish,
    for_each_concurrent, say, wait_all, wait_for_crd, watch_states, workspace_root,
};
use crate::procfs::{self, PeakSampler};
use crate::stats::{Row, mib, ratio, secs};

pub struct Opts {
    pub hosts: usize,
    pub concurrency: usize,
    pub ironic_concurrency: usize,
    pub timeout: u64,
    /// Leave Ironic out (when it cannot finish in the time available).
    pub skip_ironic: bool,
    pub ferrometal: Option<PathBuf>,
    pub keep: bool,
}

/// Requests in a werkzeug access log (`... "GET /redfish/v1/Systems HTTP/1.1" 200 -`).
pub fn count_requests(log: &str) -> u64 {
    const METHODS: [&str; 6] = [
        "\"GET /",
        "\"POST /",
        "\"PATCH /",
        "\"PUT /",
        "\"DELETE /",
        "\"HEAD /",
    ];
    log.lines()
        .filter(|l| l.contains(" HTTP/1.") && METHODS.iter().any(|m| l.contains(m)))
        .count() as u64
}

fn uuid(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

fn script(name: &str, args: &[&str]) -> anyhow::Result<String> {
    let path = workspace_root().join("scripts").join(name);
    let out = Command::new("bash")
        .arg(&path)
        .args(args)
        .output()
        .with_context(|| format!("running {}", path.display()))?;
    if !out.status.success() {
        bail!(
            "scripts/{name} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn last_line_port(out: &str) -> anyhow::Result<u16> {
    out.lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("no port in {out:?}"))
}

struct Log {
    path: PathBuf,
    offset: usize,
}

impl Log {
    fn mark(path: &Path) -> Log {
        let offset = std::fs::read(path).map_or(0, |b| b.len());
        Log {
            path: path.to_path_buf(),
            offset,
        }
    }
    fn requests_since(&self) -> u64 {
        let bytes = std::fs::read(&self.path).unwrap_or_default();
        count_requests(&String::from_utf8_lossy(
            bytes.get(self.offset..).unwrap_or_default(),
        ))
    }
}

#[derive(Default)]
struct Side {
    wall: Duration,
    phases: Vec<(String, Duration)>,
    requests: u64,
    peak_rss: u64,
    cpu_secs: f64,
    error: Option<String>,
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let scratch = Scratch::new(&format!("vs-ironic-{}", o.hosts), o.keep)?;
    say("installing peers (quick when present): sushy-tools, Ironic");
    script("setup-python.sh", &[])?;
    script("setup-ironic.sh", &[])?;
    let sushy_dir = scratch.path.join("sushy");
    let sushy_dir_s = sushy_dir.to_string_lossy().to_string();
    let port = last_line_port(&script(
        "sushy.sh",
        &["start", &sushy_dir_s, "--systems", &o.hosts.to_string()],
    )?)?;
    let sushy_url = format!("http://127.0.0.1:{port}");
    let sushy_log = sushy_dir.join("sushy.log");
    let sushy_pid: u32 = std::fs::read_to_string(sushy_dir.join("pid"))?
        .trim()
        .parse()?;
    say(&format!(
        "sushy-tools: {} systems at {sushy_url} (pid {sushy_pid})",
        o.hosts
    ));
    let result = async {
        let fm = ferrometal_side(&o, &binary, &scratch.path, &sushy_url, &sushy_log).await;
        let fm = fm.unwrap_or_else(|e| Side {
            error: Some(format!("{e:#}")),
            ..Side::default()
        });
        let ir = if o.skip_ironic {
            Err(anyhow::anyhow!("not run (--skip-ironic)"))
        } else {
            ironic_side(&o, &scratch.path, &sushy_url, &sushy_log).await
        };
        let ir = ir.unwrap_or_else(|e| Side {
            error: Some(format!("{e:#}")),
            ..Side::default()
        });
        anyhow::Ok((fm, ir))
    }
    .await;
    let sushy_cpu = procfs::read(sushy_pid).map_or(0.0, |r| r.cpu_secs);
    let _ = script("sushy.sh", &["stop", &sushy_dir_s]);
    let (fm, ir) = result?;

    let n = o.hosts as f64;
    let mut rows = vec![Row::new(
        "hosts",
        o.hosts.to_string(),
        format!("sushy-tools, no power delay; its CPU over the run {sushy_cpu:.0} s"),
    )];
    for (label, side) in [("ferrometal", &fm), ("ironic", &ir)] {
        if let Some(e) = &side.error {
            rows.push(Row::new(format!("{label}: error"), "-", e.clone()));
            continue;
        }
        rows.push(Row::new(
            format!("{label}: enroll -> available"),
            secs(side.wall.as_secs_f64()),
            side.phases
                .iter()
                .map(|(p, d)| format!("{p} {}", secs(d.as_secs_f64())))
                .collect::<Vec<_>>()
                .join(", "),
        ));
        rows.push(Row::new(
            format!("{label}: peak RSS (tree)"),
            mib(side.peak_rss),
            format!("CPU {:.1} s", side.cpu_secs),
        ));
        rows.push(Row::new(
            format!("{label}: BMC req/host"),
            format!("{:.2}", ratio(side.requests as f64, n)),
            format!("{} requests", side.requests),
        ));
    }
    if fm.error.is_none() && ir.error.is_none() {
        rows.push(Row::new(
            "ironic / ferrometal: wall",
            format!(
                "{:.1}x",
                ratio(ir.wall.as_secs_f64(), fm.wall.as_secs_f64())
            ),
            "",
        ));
        rows.push(Row::new(
            "ironic / ferrometal: RSS",
            format!("{:.1}x", ratio(ir.peak_rss as f64, fm.peak_rss as f64)),
            "",
        ));
        rows.push(Row::new(
            "ironic / ferrometal: BMC req",
            format!("{:.1}x", ratio(ir.requests as f64, fm.requests as f64)),
            "",
        ));
    }
    let side_json = |s: &Side| {
        json!({
            "wall_secs": s.wall.as_secs_f64(),
            "phases": s.phases.iter().map(|(p, d)| json!({"phase": p, "secs": d.as_secs_f64()})).collect::<Vec<_>>(),
            "bmc_requests": s.requests,
            "bmc_requests_per_host": ratio(s.requests as f64, n),
            "peak_rss_bytes": s.peak_rss,
            "cpu_secs": s.cpu_secs,
            "error": s.error,
        })
    };
    finish(
        "vs-ironic",
        o.hosts,
        &rows,
        json!({
            "hosts": o.hosts,
            "ferrometal": side_json(&fm),
            "ironic": side_json(&ir),
            "sushy_cpu_secs": sushy_cpu,
        }),
    )
}

async fn ferrometal_side(
    o: &Opts,
    binary: &Path,
    dir: &Path,
    sushy_url: &str,
    sushy_log: &Path,
) -> anyhow::Result<Side> {
    say("== ferrometal (redfish-direct, inspectionMode: disabled)");
    let dir = dir.join("ferrometal");
    std::fs::create_dir_all(&dir)?;
    let deadline = Instant::now() + Duration::from_secs(o.timeout);
    let serve = ServeChild::start(binary, &dir, &[])?;
    let pid = serve.pid();
    let sampler = PeakSampler::start(pid, Duration::from_millis(200));
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    let (states, watch) = watch_states(&client);
    let api = bmh_api(&client);
    let log = Log::mark(sushy_log);
    let cpu0 = procfs::read(pid).map_or(0.0, |r| r.cpu_secs);
    let started = Instant::now();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "bmc", "namespace": NAMESPACE},
        "stringData": {"username": "admin", "password": "password"},
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;
    let ar = bmh_resource();
    let base = sushy_url.replace("http://", "redfish+http://");
    for_each_concurrent(o.hosts, o.concurrency, |i| {
        let (api, ar) = (api.clone(), ar.clone());
        let address = format!("{base}/redfish/v1/Systems/{}", uuid(i));
        async move {
            let host = DynamicObject::new(&format!("node-{i}"), &ar)
                .within(NAMESPACE)
                .data(json!({"spec": {
                    "online": false,
                    "bmc": {"address": address, "credentialsName": "bmc"},
                    "inspectionMode": "disabled",
                }}));
            api.create(&PostParams::default(), &host).await?;
            Ok(())
        }
    })
    .await?;
    let created = started.elapsed();
    let wall = wait_all(&states, o.hosts, "available", started, deadline).await?;
    let requests = log.requests_since();
    let end = procfs::read(pid).unwrap_or_default();
    watch.abort();
    let peak = sampler.peak().max(end.hwm);
    drop(sampler);
    drop(serve);
    say(&format!(
        "ferrometal: {} available in {}, {requests} BMC requests",
        o.hosts,
        secs(wall.as_secs_f64())
    ));
    Ok(Side {
        wall,
        phases: vec![("create".into(), created)],
        requests,
        peak_rss: peak,
        cpu_secs: end.cpu_secs - cpu0,
        error: None,
    })
}

struct Ironic {
    http: reqwest::Client,
    base: String,
}

impl Ironic {
    fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .header("X-OpenStack-Ironic-API-Version", "latest")
    }

    /// Sends until the answer is not 409 (node locked) or 503; returns the body. A request
    /// that times out is retried when `accepted` (checked first) says it did not land.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Value,
        deadline: Instant,
        accepted: Option<(&str, &str)>,
    ) -> anyhow::Result<Value> {
        loop {
            let r = match self.req(method.clone(), path).json(body).send().await {
                Ok(r) => r,
                // Timeouts and connections Ironic closed under load: retry, unless it landed.
                Err(_) if accepted.is_some() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if let Some((node, from)) = accepted
                        && self.provision_state(node).await.is_some_and(|s| s != from)
                    {
                        return Ok(Value::Null);
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let status = r.status();
            if (status.as_u16() == 409 || status.as_u16() == 503) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            let text = r.text().await?;
            // A retried state change whose first attempt did land is answered 400.
            if status.as_u16() == 400
                && let Some((node, from)) = accepted
                && self.provision_state(node).await.is_some_and(|s| s != from)
            {
                return Ok(Value::Null);
            }
            if !status.is_success() {
                bail!("{method} {path}: {status}: {text}");
            }
            return Ok(serde_json::from_str(&text).unwrap_or(Value::Null));
        }
    }

    async fn provision_state(&self, node: &str) -> Option<String> {
        let v: Value = self
            .req(
                reqwest::Method::GET,
                &format!("/v1/nodes/{node}?fields=provision_state"),
            )
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        v["provision_state"].as_str().map(str::to_string)
    }

    /// uuid → (provision_state, last_error) of every node, paging by 1000.
    async fn states(&self) -> anyhow::Result<Vec<(String, String, String)>> {
        let mut out = Vec::new();
        let mut path = "/v1/nodes?fields=uuid,provision_state,last_error&limit=1000".to_string();
        loop {
            let v: Value = self
                .req(reqwest::Method::GET, &path)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
            for n in &nodes {
                out.push((
                    n["uuid"].as_str().unwrap_or("").to_string(),
                    n["provision_state"].as_str().unwrap_or("").to_string(),
                    n["last_error"].as_str().unwrap_or("").to_string(),
                ));
            }
            match v["next"].as_str() {
                Some(next) if !nodes.is_empty() => {
                    path = match next.find("/v1/") {
                        Some(i) => next[i..].to_string(),
                        None => break,
                    }
                }
                _ => break,
            }
        }
        Ok(out)
    }

    async fn wait_state(
        &self,
        target: &str,
        count: usize,
        started: Instant,
        deadline: Instant,
    ) -> anyhow::Result<()> {
        let mut last = Instant::now() - Duration::from_secs(10);
        loop {
            let nodes = self.states().await?;
            let done = nodes.iter().filter(|(_, s, _)| s == target).count();
            if done >= count {
                say(&format!(
                    "[{:>7.1}s] {done} {target}",
                    started.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
            if last.elapsed() >= Duration::from_secs(2) {
                let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
                for (_, s, _) in &nodes {
                    *by.entry(s.as_str()).or_default() += 1;
                }
                say(&format!(
                    "[{:>7.1}s] {}",
                    started.elapsed().as_secs_f64(),
                    by.iter()
                        .map(|(s, n)| format!("{s} {n}"))
                        .collect::<Vec<_>>()
                        .join(" | ")
                ));
                last = Instant::now();
            }
            if Instant::now() > deadline {
                let errors: Vec<_> = nodes
                    .iter()
                    .filter(|(_, _, e)| !e.is_empty())
                    .take(3)
                    .map(|(u, s, e)| format!("{u} {s}: {e}"))
                    .collect();
                bail!("timed out waiting for {count} nodes {target}: {errors:?}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

async fn ironic_side(
    o: &Opts,
    dir: &Path,
    sushy_url: &str,
    sushy_log: &Path,
) -> anyhow::Result<Side> {
    say("== Ironic (redfish driver, enroll -> manage -> provide, no inspection)");
    let dir = dir.join("ironic");
    let dir_s = dir.to_string_lossy().to_string();
    let port = last_line_port(&script("ironic.sh", &["start", &dir_s])?)?;
    let stop = scopeguard(dir_s.clone());
    let pid: u32 = std::fs::read_to_string(dir.join("pid"))?.trim().parse()?;
    let sampler = PeakSampler::start(pid, Duration::from_millis(200));
    let ironic = Ironic {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            // Ironic's API server drops idle keep-alive connections: a fresh one per request.
            .pool_max_idle_per_host(0)
            .build()?,
        base: format!("http://127.0.0.1:{port}"),
    };
    say(&format!("ironic pid {pid} on port {port}"));
    let deadline = Instant::now() + Duration::from_secs(o.timeout);
    let cpu0 = procfs::read_tree(pid).cpu_secs;
    let log = Log::mark(sushy_log);
    let started = Instant::now();
    let uuids = std::sync::Arc::new(std::sync::Mutex::new(vec![String::new(); o.hosts]));
    for_each_concurrent(o.hosts, o.ironic_concurrency, |i| {
        let ironic = &ironic;
        let uuids = uuids.clone();
        async move {
            let body = json!({
                "name": format!("node-{i}"),
                "driver": "redfish",
                "inspect_interface": "no-inspect",
                "driver_info": {
                    "redfish_address": sushy_url,
                    "redfish_system_id": format!("/redfish/v1/Systems/{}", uuid(i)),
                    "redfish_username": "admin",
                    "redfish_password": "password",
                },
            });
            let v = ironic
                .send(reqwest::Method::POST, "/v1/nodes", &body, deadline, None)
                .await?;
            uuids.lock().unwrap()[i] = v["uuid"].as_str().unwrap_or_default().to_string();
            Ok(())
        }
    })
    .await?;
    let created = started.elapsed();
    say(&format!(
        "[{:>7.1}s] {} nodes enrolled",
        created.as_secs_f64(),
        o.hosts
    ));
    let uuids = uuids.lock().unwrap().clone();
    let mut phases = vec![("enroll".to_string(), created)];
    for (target, from, state) in [
        ("manage", "enroll", "manageable"),
        ("provide", "manageable", "available"),
    ] {
        let t = Instant::now();
        for_each_concurrent(o.hosts, o.ironic_concurrency, |i| {
            let ironic = &ironic;
            let node = uuids[i].clone();
            let path = format!("/v1/nodes/{node}/states/provision");
            async move {
                ironic
                    .send(
                        reqwest::Method::PUT,
                        &path,
                        &json!({"target": target}),
                        deadline,
                        Some((&node, from)),
                    )
                    .await?;
                Ok(())
            }
        })
        .await?;
        ironic.wait_state(state, o.hosts, started, deadline).await?;
        phases.push((target.to_string(), t.elapsed()));
    }
    let wall = started.elapsed();
    let requests = log.requests_since();
    let end = procfs::read_tree(pid);
    let peak = sampler.peak();
    drop(sampler);
    drop(stop);
    say(&format!(
        "ironic: {} available in {}, {requests} BMC requests",
        o.hosts,
        secs(wall.as_secs_f64())
    ));
    Ok(Side {
        wall,
        phases,
        requests,
        peak_rss: peak,
        cpu_secs: end.cpu_secs - cpu0,
        error: None,
    })
}

/// Stops Ironic (through its script) when dropped.
struct StopIronic(String);

fn scopeguard(dir: String) -> StopIronic {
    StopIronic(dir)
}

impl Drop for StopIronic {
    fn drop(&mut self) {
        let _ = script("ironic.sh", &["stop", &self.0]);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_access_log_requests() {
        let log = "127.0.0.1 - - [22/Nov/2026 03:00:00] \"GET /redfish/v1/Systems/x HTTP/1.1\" 200 -\n\
                   * Running on http://127.0.0.1:8000\n\
                   127.0.0.1 - - [22/Nov/2026 03:00:01] \"POST /redfish/v1/Systems/x/Actions/ComputerSystem.Reset HTTP/1.1\" 204 -\n\
                   127.0.0.1 - - [22/Nov/2026 03:00:01] \"PATCH /redfish/v1/Systems/x HTTP/1.1\" 204 -\n";
        assert_eq!(super::count_requests(log), 3);
        assert_eq!(super::last_line_port("installing\n8123\n").unwrap(), 8123);
    }
}
