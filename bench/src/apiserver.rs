//! `apiserver`: the embedded API server alone (`serve --no-controllers`): creates per second,
//! list latency at N objects, watch fan-out latency, store size on disk.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::common::{
    Scratch, ServeChild, dir_size, ferrometal_binary, finish, for_each_concurrent, say, unix_micros,
};
use crate::procfs;
use crate::stats::{Row, mib, ratio, secs, summarize};

pub struct Opts {
    pub objects: usize,
    pub concurrency: usize,
    pub lists: usize,
    pub changes: usize,
    pub watchers: usize,
    pub ferrometal: Option<PathBuf>,
    pub keep: bool,
    /// Act as an RBAC-bound user among this many other bindings (see the CLI help).
    pub rbac_user: Option<usize>,
}

/// Binds `edit` in `NS` to user `bench` among `others` unrelated bindings, and returns a client
/// for `bench` with a client certificate from `ferrometal kubeconfig`.
async fn rbac_user_client(
    binary: &std::path::Path,
    serve: &ServeChild,
    admin: &kube::Client,
    others: usize,
) -> anyhow::Result<kube::Client> {
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
    let pp = PostParams::default();
    let rbs: Api<RoleBinding> = Api::namespaced(admin.clone(), NS);
    let crbs: Api<ClusterRoleBinding> = Api::all(admin.clone());
    for i in 0..others {
        let subject = json!([{"kind": "User", "name": format!("someone-{i}")}]);
        if i % 2 == 0 {
            let rb: RoleBinding = serde_json::from_value(json!({
                "metadata": {"name": format!("other-{i}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": subject,
            }))?;
            rbs.create(&pp, &rb).await?;
        } else {
            let crb: ClusterRoleBinding = serde_json::from_value(json!({
                "metadata": {"name": format!("other-{i}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": subject,
            }))?;
            crbs.create(&pp, &crb).await?;
        }
    }
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "bench-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "User", "name": "bench"}],
    }))?;
    rbs.create(&pp, &rb).await?;
    let out = std::process::Command::new(binary)
        .args(["kubeconfig", "--data-dir"])
        .arg(&serve.data_dir)
        .args(["--user", "bench", "--namespace", NS])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "ferrometal kubeconfig: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kc = kube::config::Kubeconfig::from_yaml(std::str::from_utf8(&out.stdout)?)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

const NS: &str = "default";

fn name(i: usize) -> String {
    format!("cm-{i:05}")
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let scratch = Scratch::new("apiserver", o.keep)?;
    let serve = ServeChild::start(&binary, &scratch.path, &["--no-controllers".to_string()])?;
    let pid = serve.pid();
    let mut client = serve.client().await?;
    if let Some(others) = o.rbac_user {
        client = rbac_user_client(&binary, &serve, &client, others).await?;
        say(&format!(
            "acting as user bench (edit in {NS}) among {others} other bindings"
        ));
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    say(&format!(
        "serve --no-controllers pid {pid}; creating {} ConfigMaps, {} at once",
        o.objects, o.concurrency
    ));
    let idle = procfs::read(pid).unwrap_or_default();

    // Creates.
    let payload = "x".repeat(256);
    let started = Instant::now();
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(o.objects)));
    for_each_concurrent(o.objects, o.concurrency, |i| {
        let api = api.clone();
        let latencies = latencies.clone();
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name(i), "labels": {"bench": "apiserver"}},
            "data": {"payload": payload, "i": i.to_string()},
        }))
        .expect("valid ConfigMap");
        async move {
            let t = Instant::now();
            api.create(&PostParams::default(), &cm)
                .await
                .with_context(|| format!("creating {}", name(i)))?;
            latencies
                .lock()
                .unwrap()
                .push(t.elapsed().as_secs_f64() * 1000.0);
            if (i + 1) % 2000 == 0 {
                say(&format!("  {} created", i + 1));
            }
            Ok(())
        }
    })
    .await?;
    let create_wall = started.elapsed().as_secs_f64();
    let creates_per_sec = ratio(o.objects as f64, create_wall);
    let create_latency = summarize(&latencies.lock().unwrap());
    let after_create = procfs::read(pid).unwrap_or_default();
    say(&format!(
        "{creates_per_sec:.0} creates/s ({} in {})",
        o.objects,
        secs(create_wall)
    ));

    // Lists of every object.
    let mut list_ms = Vec::new();
    let mut listed = 0;
    for _ in 0..o.lists {
        let t = Instant::now();
        let l = api.list(&ListParams::default()).await?;
        list_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        listed = l.items.len();
    }
    let list_latency = summarize(&list_ms);
    say(&format!(
        "list of {listed}: p50 {:.1} ms, p99 {:.1} ms",
        list_latency.p50_ms, list_latency.p99_ms
    ));

    // Watch fan-out: W watchers from the current resourceVersion, C objects change once each;
    // the latency of each delivery is measured from the send time written into the object.
    let rv = api
        .list_metadata(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let deliveries = Arc::new(Mutex::new(Vec::new()));
    let mut watchers = Vec::new();
    let changes = o.changes.min(o.objects);
    for _ in 0..o.watchers {
        let api = api.clone();
        let deliveries = deliveries.clone();
        let rv = rv.clone();
        let mut stream = api
            .watch(&WatchParams::default().timeout(290), &rv)
            .await?
            .boxed();
        watchers.push(tokio::spawn(async move {
            let mut seen = 0;
            while let Some(ev) = stream.next().await {
                if let Ok(WatchEvent::Modified(cm)) = ev {
                    let now = unix_micros();
                    if let Some(sent) = cm
                        .data
                        .as_ref()
                        .and_then(|d| d.get("sent_us"))
                        .and_then(|s| s.parse::<u64>().ok())
                    {
                        deliveries
                            .lock()
                            .unwrap()
                            .push(now.saturating_sub(sent) as f64 / 1000.0);
                        seen += 1;
                        if seen >= changes {
                            break;
                        }
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    for_each_concurrent(changes, o.concurrency, |i| {
        let api = api.clone();
        async move {
            let patch = json!({"data": {"sent_us": unix_micros().to_string()}});
            api.patch(
                &name(i),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    let update_wall = started.elapsed().as_secs_f64();
    let wait_until = Instant::now() + Duration::from_secs(60);
    for w in watchers {
        let left = wait_until.saturating_duration_since(Instant::now());
        let _ = tokio::time::timeout(left, w).await;
    }
    let fanout = summarize(&deliveries.lock().unwrap());
    let expected = changes * o.watchers;
    say(&format!(
        "watch fan-out: {} of {expected} deliveries, p50 {:.1} ms, p99 {:.1} ms",
        fanout.samples, fanout.p50_ms, fanout.p99_ms
    ));
    let end = procfs::read(pid).unwrap_or_default();
    drop(client);
    drop(serve);
    let store = dir_size(&scratch.path.join("data"));

    let rows = vec![
        Row::new(
            "creates/s",
            format!("{creates_per_sec:.0}"),
            format!(
                "{} ConfigMaps, {} at once; latency p50 {:.1} ms p99 {:.1} ms",
                o.objects, o.concurrency, create_latency.p50_ms, create_latency.p99_ms
            ),
        ),
        Row::new(
            format!("list {listed} p50"),
            format!("{:.1} ms", list_latency.p50_ms),
            format!("{} lists", list_latency.samples),
        ),
        Row::new(
            format!("list {listed} p99"),
            format!("{:.1} ms", list_latency.p99_ms),
            "",
        ),
        Row::new(
            "watch fan-out p50",
            format!("{:.1} ms", fanout.p50_ms),
            format!(
                "{} changes x {} watchers: {} of {expected} delivered; updates {:.0}/s",
                changes,
                o.watchers,
                fanout.samples,
                ratio(changes as f64, update_wall)
            ),
        ),
        Row::new(
            "watch fan-out p99",
            format!("{:.1} ms", fanout.p99_ms),
            format!("max {:.1} ms", fanout.max_ms),
        ),
        Row::new(
            "store on disk",
            mib(store),
            format!(
                "{:.0} bytes per object",
                ratio(store as f64, o.objects as f64)
            ),
        ),
        Row::new(
            "serve peak RSS (VmHWM)",
            mib(end.hwm),
            format!(
                "idle {}; after creates {}",
                mib(idle.rss),
                mib(after_create.rss)
            ),
        ),
        Row::new("serve CPU total", format!("{:.1} s", end.cpu_secs), ""),
    ];
    finish(
        "apiserver",
        o.objects,
        &rows,
        json!({
            "objects": o.objects,
            "concurrency": o.concurrency,
            "creates_per_sec": creates_per_sec,
            "create_latency": create_latency,
            "list_latency": list_latency,
            "listed": listed,
            "watch": {"changes": changes, "watchers": o.watchers, "expected": expected,
                      "latency": fanout, "update_wall_secs": update_wall},
            "store_bytes": store,
            "serve_peak_rss_bytes": end.hwm,
            "serve_cpu_secs": end.cpu_secs,
        }),
    )
}
