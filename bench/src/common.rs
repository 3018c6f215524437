//! Shared plumbing: the `ferrometal serve` child, the kube client, progress lines, results.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject};

use crate::stats::{Row, table};

pub const NAMESPACE: &str = "default";

pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The workspace root (the bench crate sits one level below it).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `ferrometal` next to this binary (both live in the same target profile directory).
pub fn ferrometal_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let me = std::env::current_exe()?;
    let candidate = me.parent().context("binary directory")?.join("ferrometal");
    if !candidate.exists() {
        bail!(
            "{} not found: build it first with `cargo build --release -p ferrometal` or pass --ferrometal",
            candidate.display()
        );
    }
    Ok(candidate)
}

/// A fresh, empty scratch directory; removed on drop unless kept.
pub struct Scratch {
    pub path: PathBuf,
    pub keep: bool,
}

impl Scratch {
    pub fn new(name: &str, keep: bool) -> anyhow::Result<Scratch> {
        let path = std::env::temp_dir().join(format!(
            "ferrometal-bench-{name}-{}-{}",
            std::process::id(),
            unix_micros()
        ));
        if path.exists() {
            std::fs::remove_dir_all(&path)?;
        }
        std::fs::create_dir_all(&path)?;
        Ok(Scratch { path, keep })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.keep {
            say(&format!("kept {}", self.path.display()));
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Total size of the regular files under `dir`.
pub fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => total += dir_size(&e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                _ => {}
            }
        }
    }
    total
}

/// `ferrometal serve` as a child process, killed (and reaped) on drop.
pub struct ServeChild {
    child: Child,
    pub kubeconfig: PathBuf,
    pub url: String,
    pub data_dir: PathBuf,
    pub log: PathBuf,
}

impl ServeChild {
    pub fn start(binary: &Path, dir: &Path, extra: &[String]) -> anyhow::Result<ServeChild> {
        Self::start_on(binary, dir, extra, free_port()?)
    }

    /// On a given port: a restart keeps the address its clients know.
    pub fn start_on(
        binary: &Path,
        dir: &Path,
        extra: &[String],
        port: u16,
    ) -> anyhow::Result<ServeChild> {
        let data_dir = dir.join("data");
        let log = dir.join("serve.log");
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut child = Command::new(binary)
            .arg("serve")
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            // serve.log (kept with --keep) at another level, e.g. to see why each reconcile
            // ran: FERROMETAL_BENCH_SERVE_LOG=warn,ferrometal_controller=info,kube_runtime=info
            .env(
                "FERROMETAL_LOG",
                std::env::var("FERROMETAL_BENCH_SERVE_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        let (tx, rx) = std::sync::mpsc::channel();
        // Keep draining stdout so the server never writes into a closed pipe.
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut kubeconfig = None;
        let mut guard = ServeChild {
            child,
            kubeconfig: PathBuf::new(),
            url: String::new(),
            data_dir,
            log,
        };
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
            if let Some(p) = line.strip_prefix("kubeconfig: ") {
                kubeconfig = Some(PathBuf::from(p));
            }
            if let Some(u) = line.strip_prefix("url: ") {
                guard.url = u.to_string();
                break;
            }
        }
        match kubeconfig {
            Some(k) if !guard.url.is_empty() => {
                guard.kubeconfig = k;
                Ok(guard)
            }
            _ => bail!(
                "ferrometal serve did not start: {}",
                std::fs::read_to_string(&guard.log).unwrap_or_default()
            ),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reap it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn bmh_resource() -> ApiResource {
    ApiResource {
        group: "metal3.io".into(),
        version: "v1alpha1".into(),
        api_version: "metal3.io/v1alpha1".into(),
        kind: "BareMetalHost".into(),
        plural: "baremetalhosts".into(),
    }
}

pub fn bmh_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NAMESPACE, &bmh_resource())
}

pub fn host_state(obj: &DynamicObject) -> String {
    obj.data["status"]["provisioning"]["state"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Waits until the BareMetalHost CRD is served (serve installs it before its controllers run).
pub async fn wait_for_crd(client: &kube::Client) -> anyhow::Result<()> {
    let api = bmh_api(client);
    for _ in 0..300 {
        if api.list(&Default::default()).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the BareMetalHost resource never became available")
}

/// Host name → provisioning state, kept current by a watch.
pub type States = Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>;

pub fn watch_states(client: &kube::Client) -> (States, tokio::task::JoinHandle<()>) {
    use kube::runtime::watcher::{self, Event};
    let states: States = Default::default();
    let api = bmh_api(client);
    let task = tokio::spawn({
        let states = states.clone();
        async move {
            let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let mut map = states.lock().unwrap();
                match event {
                    Ok(Event::Apply(o) | Event::InitApply(o)) => {
                        if let Some(name) = o.metadata.name.clone() {
                            map.insert(name, host_state(&o));
                        }
                    }
                    Ok(Event::Delete(o)) => {
                        if let Some(name) = &o.metadata.name {
                            map.remove(name);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("watch error: {e}"),
                }
            }
        }
    });
    (states, task)
}

/// Counts per state, sorted by name, e.g. `available 10 | registering 2`.
pub fn state_line(states: &States) -> (String, std::collections::BTreeMap<String, usize>) {
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for s in states.lock().unwrap().values() {
        let label = if s.is_empty() { "new" } else { s.as_str() };
        *by.entry(label.to_string()).or_default() += 1;
    }
    let line = by
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(" | ");
    (line, by)
}

/// Waits until `count` hosts are in `state`, printing progress at most every 2 s.
pub async fn wait_all(
    states: &States,
    count: usize,
    state: &str,
    started: Instant,
    deadline: Instant,
) -> anyhow::Result<Duration> {
    let mut last_print = Instant::now() - Duration::from_secs(10);
    let mut last_line = String::new();
    loop {
        let (line, by) = state_line(states);
        if by.get(state).copied().unwrap_or(0) >= count {
            say(&format!(
                "[{:>7.1}s] {line}",
                started.elapsed().as_secs_f64()
            ));
            return Ok(started.elapsed());
        }
        if line != last_line && last_print.elapsed() >= Duration::from_secs(2) {
            say(&format!(
                "[{:>7.1}s] {line}",
                started.elapsed().as_secs_f64()
            ));
            last_print = Instant::now();
            last_line = line.clone();
        }
        if Instant::now() > deadline {
            bail!("timed out waiting for {count} hosts {state}: {line}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `f(i)` for i in 0..n with at most `concurrency` in flight; fails on the first error.
pub async fn for_each_concurrent<F, Fut>(n: usize, concurrency: usize, f: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut stream = futures::stream::iter(0..n)
        .map(f)
        .buffer_unordered(concurrency.max(1));
    while let Some(r) = stream.next().await {
        r?;
    }
    Ok(())
}

/// The `bmc` credentials Secret every scenario's hosts use.
pub async fn create_bmc_secret(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Secret;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "bmc", "namespace": namespace},
        "stringData": {"username": "admin", "password": "password"},
    }))?;
    secrets
        .create(&kube::api::PostParams::default(), &secret)
        .await?;
    Ok(())
}

/// `n` BareMetalHosts named `name(i)` on the emulator's systems `sys-i` under `base` (a
/// `redfish-virtualmedia+http://` URL), with `spec` (online, inspectionMode...) besides the BMC.
pub async fn create_emulated_hosts(
    api: &Api<DynamicObject>,
    namespace: &str,
    base: &str,
    n: usize,
    concurrency: usize,
    name: fn(usize) -> String,
    spec: serde_json::Value,
) -> anyhow::Result<()> {
    let ar = bmh_resource();
    for_each_concurrent(n, concurrency, |i| {
        let api = api.clone();
        let ar = ar.clone();
        let mut spec = spec.clone();
        spec["bmc"] = serde_json::json!({
            "address": format!("{base}/redfish/v1/Systems/sys-{i}"),
            "credentialsName": "bmc",
        });
        async move {
            let host = DynamicObject::new(&name(i), &ar)
                .within(namespace)
                .data(serde_json::json!({ "spec": spec }));
            api.create(&kube::api::PostParams::default(), &host)
                .await
                .with_context(|| format!("creating {}", name(i)))?;
            Ok(())
        }
    })
    .await
}

/// Scrapes a Prometheus counter family (summing every label set) from /metrics.
pub async fn metric_sum(http: &reqwest::Client, url: &str, family: &str) -> Option<f64> {
    let text = http.get(url).send().await.ok()?.text().await.ok()?;
    Some(sum_metric(&text, family))
}

pub fn sum_metric(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

pub fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Appended to result file names (`--tag`), so variants do not overwrite the default run.
pub static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Prints the table and writes `bench/results/{scenario}-{n}[-{tag}].json`.
pub fn finish(
    scenario: &str,
    n: usize,
    rows: &[Row],
    json: serde_json::Value,
) -> anyhow::Result<()> {
    println!();
    print!("{}", table(rows));
    let dir = workspace_root().join("bench").join("results");
    std::fs::create_dir_all(&dir)?;
    let file = match TAG.get().filter(|t| !t.is_empty()) {
        Some(tag) => format!("{scenario}-{n}-{tag}.json"),
        None => format!("{scenario}-{n}.json"),
    };
    let path = dir.join(&file);
    let doc = serde_json::json!({
        "scenario": scenario,
        "n": n,
        "finished_unix": unix_micros() / 1_000_000,
        "machine": machine(),
        "rows": rows,
        "results": json,
    });
    std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
    say(&format!("wrote bench/results/{file}"));
    Ok(())
}

pub fn machine() -> serde_json::Value {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| crate::procfs::status_kb(&m, "MemTotal"))
        .unwrap_or(0);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    serde_json::json!({
        "cpus": cpus,
        "memory_gib": (mem as f64 / (1u64 << 30) as f64 * 10.0).round() / 10.0,
        "cpu_model": model,
        "loadavg_at_end": load.trim(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_a_counter_family() {
        let text = "# TYPE ferrometal_host_reconciles counter\n\
            ferrometal_host_reconciles_total{result=\"ok\"} 10\n\
            ferrometal_host_reconciles_total{result=\"error\"} 2.5\n\
            ferrometal_host_reconciles_total_other 99\n\
            ferrometal_hosts{state=\"available\"} 3\n";
        assert_eq!(sum_metric(text, "ferrometal_host_reconciles_total"), 12.5);
        assert_eq!(sum_metric(text, "missing"), 0.0);
    }
}
