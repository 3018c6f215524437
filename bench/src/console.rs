//! The web console with a large fleet, in headless Chromium (the tests' browser,
//! `scripts/browser.sh`): how long the fleet page takes to show every host, how long a host's
//! change takes to reach its tile, and a burst of changes at once. `serve --no-controllers`
//! holds the hosts, their statuses written directly (assorted states, some in error), so the
//! figures are the API server's list and watch and the page's own work, nothing else.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use ferrometal_test_support::browser::Browser;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::*;
use crate::stats::{Row, secs, summarize};

pub struct Opts {
    pub hosts: usize,
    pub samples: usize,
    pub burst: usize,
    pub ferrometal: Option<std::path::PathBuf>,
    pub keep: bool,
}

fn name(i: usize) -> String {
    format!("h-{i:05}")
}

fn state(i: usize, round: usize) -> &'static str {
    const STATES: [&str; 5] = [
        "provisioned",
        "available",
        "provisioned",
        "provisioning",
        "provisioned",
    ];
    STATES[(i + round) % STATES.len()]
}

async fn set_state(
    api: &kube::Api<DynamicObject>,
    i: usize,
    st: &str,
    error: bool,
) -> anyhow::Result<()> {
    let mut status = json!({"status": {"provisioning": {"state": st},
        "poweredOn": st == "provisioned", "operationalStatus": "OK"}});
    if error {
        status["status"]["errorType"] = json!("power management error");
        status["status"]["errorMessage"] = json!("the BMC did not answer");
        status["status"]["operationalStatus"] = json!("error");
    }
    api.patch_status(&name(i), &PatchParams::default(), &Patch::Merge(&status))
        .await
        .with_context(|| format!("status of {}", name(i)))?;
    Ok(())
}

/// Polls `script` (returns a number once the page shows what is waited for, else null)
/// every 10 ms; returns the number.
async fn poll(b: &Browser, script: &str, limit: Duration) -> anyhow::Result<f64> {
    let start = Instant::now();
    loop {
        if let Some(v) = b.eval(script).await.as_f64() {
            return Ok(v);
        }
        if start.elapsed() > limit {
            anyhow::bail!("not within {limit:?}: {script}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let scratch = Scratch::new(&format!("console-{}", o.hosts), o.keep)?;
    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let console_port = free_port()?;
    let console = format!("http://127.0.0.1:{console_port}/");
    let serve = ServeChild::start(
        &binary,
        &scratch.path,
        &[
            "--no-controllers".into(),
            "--console-listen".into(),
            format!("127.0.0.1:{console_port}"),
        ],
    )?;
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    let api = bmh_api(&client);
    say(&format!("creating {} hosts in 40-host racks", o.hosts));
    let ar = bmh_resource();
    let t = Instant::now();
    for_each_concurrent(o.hosts, 16, |i| {
        let api = api.clone();
        let ar = ar.clone();
        async move {
            let mut host = DynamicObject::new(&name(i), &ar)
                .within("default")
                .data(json!({
                    "spec": {"online": false, "bmc": {
                        "address": format!("redfish+http://192.0.2.1/redfish/v1/Systems/{i}"),
                        "credentialsName": "bmc"}},
                }));
            host.metadata.labels = Some(
                [("rack".to_string(), format!("r{:03}", i / 40))]
                    .into_iter()
                    .collect(),
            );
            api.create(&PostParams::default(), &host).await?;
            set_state(&api, i, state(i, 0), i.is_multiple_of(97)).await
        }
    })
    .await?;
    say(&format!(
        "hosts and statuses written in {:.1}s",
        t.elapsed().as_secs_f64()
    ));

    let token = std::fs::read_to_string(serve.data_dir.join("token"))?;
    let b = Browser::start().await;
    b.goto(&console).await;
    b.text("#signin", Duration::from_secs(30)).await;
    b.fill("#token", token.trim()).await;
    b.click("#signin-submit").await;
    let n = o.hosts;
    let painted = format!(
        "return document.querySelectorAll('.tile').length === {n} ? performance.now() : null"
    );
    poll(&b, &painted, Duration::from_secs(120)).await?;

    // First paint: the fleet page loaded afresh, from navigation to every tile on screen.
    let mut paints = Vec::new();
    for _ in 0..5 {
        b.client.refresh().await?;
        paints.push(poll(&b, &painted, Duration::from_secs(120)).await?);
    }
    let paint = summarize(&paints);
    say(&format!("first paint: {paints:?} ms"));

    // One host changes: from the status write to its tile showing the new state.
    let mut lat = Vec::new();
    for k in 0..o.samples {
        let i = (k * 7919) % n;
        let st = if state(i, 0) == "provisioning" {
            "provisioned"
        } else {
            "provisioning"
        };
        let check = format!(
            "const t = document.querySelector('[data-host=\"{}\"]'); return t && t.dataset.state === '{st}' ? 1 : null",
            name(i)
        );
        let t = Instant::now();
        set_state(&api, i, st, false).await?;
        poll(&b, &check, Duration::from_secs(30)).await?;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        set_state(&api, i, state(i, 0), i.is_multiple_of(97)).await?;
    }
    let update = summarize(&lat);

    // A burst: `burst` hosts change at once (a rack powering on), until the page shows all.
    let round = 1;
    let t = Instant::now();
    for_each_concurrent(o.burst.min(n), 16, |i| {
        let api = api.clone();
        async move { set_state(&api, i, state(i, round), false).await }
    })
    .await?;
    let written = t.elapsed().as_secs_f64();
    let want: Vec<String> = (0..o.burst.min(n))
        .map(|i| format!("['{}','{}']", name(i), state(i, round)))
        .collect();
    let check = format!(
        "const want = [{}]; return want.every(([h, s]) => document.querySelector('[data-host=\"' + h + '\"]').dataset.state === s) ? 1 : null",
        want.join(",")
    );
    poll(&b, &check, Duration::from_secs(120)).await?;
    let burst = t.elapsed().as_secs_f64();
    let heap = b
        .eval("return performance.memory ? performance.memory.usedJSHeapSize : null")
        .await
        .as_f64()
        .unwrap_or(0.0);
    b.close().await;

    let rows = vec![
        Row::new("hosts", n.to_string(), "in 40-host racks, 1 in 97 in error"),
        Row::new(
            "first paint p50 / max",
            format!("{:.0} / {:.0} ms", paint.p50_ms, paint.max_ms),
            "navigation -> every tile in the page (5 reloads, signed in)",
        ),
        Row::new(
            "one host's change -> its tile p50 / p99",
            format!("{:.0} / {:.0} ms", update.p50_ms, update.p99_ms),
            format!(
                "{} samples: status write -> the tile shows it",
                update.samples
            ),
        ),
        Row::new(
            format!("{} hosts change at once -> all shown", o.burst.min(n)),
            secs(burst),
            format!("writing them took {}", secs(written)),
        ),
        Row::new(
            "page JS heap",
            format!("{:.1} MiB", heap / f64::from(1 << 20)),
            "after the run",
        ),
    ];
    finish(
        "console",
        n,
        &rows,
        json!({"first_paint_ms": paints, "update_ms": update, "burst_s": burst,
               "burst_write_s": written, "burst": o.burst.min(n), "js_heap_bytes": heap}),
    )
}
