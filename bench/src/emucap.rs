//! The emulator's own capacity: ComputerSystem GETs per second, spread over the fleet, with
//! Basic auth and 64 keep-alive connections (wrk when installed, else the bench's own load).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ferrometal_emulator::{Emulator, EmulatorConfig};
use serde::Serialize;

use crate::common::{Scratch, finish, say};
use crate::stats::{Row, ratio};

const CONNECTIONS: usize = 64;
const AUTH: &str = "Basic YWRtaW46cGFzc3dvcmQ="; // admin:password, the emulator's default

const WRK_SCRIPT: &str = r#"local systems = tonumber(os.getenv("SYSTEMS") or "10000")
function setup(thread) thread:set("seed", math.random(1, 1000000)) end
function init(args) math.randomseed(seed or os.time()) end
function request()
  return wrk.format("GET", "/redfish/v1/Systems/sys-" .. math.random(0, systems - 1))
end
"#;

#[derive(Clone, Debug, Serialize)]
pub struct Capacity {
    pub requests_per_sec: f64,
    pub tool: String,
    pub seconds: f64,
    pub connections: usize,
}

fn has_wrk() -> bool {
    std::process::Command::new("wrk")
        .arg("--version")
        .output()
        .is_ok()
}

/// Parses wrk's `Requests/sec:  37463.12` line.
pub fn parse_wrk(output: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:")?.trim().parse().ok())
}

pub async fn measure(
    base_url: &str,
    systems: usize,
    seconds: u64,
    dir: &Path,
) -> anyhow::Result<Capacity> {
    if has_wrk() {
        let script = dir.join("wrk-systems.lua");
        std::fs::write(&script, WRK_SCRIPT)?;
        let out = tokio::process::Command::new("wrk")
            .args(["-t1", &format!("-c{CONNECTIONS}"), &format!("-d{seconds}s")])
            .arg("-s")
            .arg(&script)
            .args(["-H", &format!("Authorization: {AUTH}"), base_url])
            .env("SYSTEMS", systems.to_string())
            .kill_on_drop(true)
            .output()
            .await
            .context("running wrk")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let rps =
            parse_wrk(&text).with_context(|| format!("no Requests/sec in wrk output: {text}"))?;
        return Ok(Capacity {
            requests_per_sec: rps,
            tool: "wrk -t1 -c64".into(),
            seconds: seconds as f64,
            connections: CONNECTIONS,
        });
    }
    own_load(base_url, systems, seconds).await
}

/// Closed-loop GETs from `CONNECTIONS` tasks for `seconds`.
async fn own_load(base_url: &str, systems: usize, seconds: u64) -> anyhow::Result<Capacity> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(CONNECTIONS)
        .build()?;
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for t in 0..CONNECTIONS {
        let (http, done, base) = (http.clone(), done.clone(), base_url.to_string());
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while Instant::now() < deadline {
                let url = format!("{base}/redfish/v1/Systems/sys-{}", i % systems.max(1));
                if let Ok(r) = http.get(&url).header("Authorization", AUTH).send().await
                    && r.status().is_success()
                    && r.bytes().await.is_ok()
                {
                    done.fetch_add(1, Ordering::Relaxed);
                }
                i = i.wrapping_mul(2_654_435_761).wrapping_add(7919);
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(Capacity {
        requests_per_sec: ratio(done.load(Ordering::Relaxed) as f64, elapsed),
        tool: "bench (reqwest, 64 connections)".into(),
        seconds: elapsed,
        connections: CONNECTIONS,
    })
}

pub struct Opts {
    pub systems: usize,
    pub seconds: u64,
    pub runs: usize,
    pub keep: bool,
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let scratch = Scratch::new("emulator", o.keep)?;
    let emu = Emulator::start(
        EmulatorConfig {
            systems: o.systems,
            ..EmulatorConfig::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    say(&format!(
        "emulator: {} systems at {}; {} runs of {} s",
        o.systems,
        emu.base_url(),
        o.runs,
        o.seconds
    ));
    let mut runs = Vec::new();
    for r in 0..o.runs {
        let c = measure(&emu.base_url(), o.systems, o.seconds, &scratch.path).await?;
        say(&format!(
            "run {}: {:.0} GET/s ({})",
            r + 1,
            c.requests_per_sec,
            c.tool
        ));
        runs.push(c);
    }
    let counted = emu.counters().total;
    let mut rates: Vec<f64> = runs.iter().map(|c| c.requests_per_sec).collect();
    rates.sort_by(f64::total_cmp);
    let median = rates.get(rates.len() / 2).copied().unwrap_or(0.0);
    let mut rows: Vec<Row> = runs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Row::new(
                format!("run {} GET/s", i + 1),
                format!("{:.0}", c.requests_per_sec),
                c.tool.clone(),
            )
        })
        .collect();
    rows.push(Row::new(
        "median GET/s",
        format!("{median:.0}"),
        format!("{} systems, Basic auth; target >= 20000", o.systems),
    ));
    rows.push(Row::new(
        "requests counted by emulator",
        counted.to_string(),
        "",
    ));
    emu.shutdown().await;
    finish(
        "emulator",
        o.systems,
        &rows,
        serde_json::json!({ "runs": runs, "median_requests_per_sec": median, "counted": counted }),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_wrk_output() {
        let out = "Running 5s test @ http://127.0.0.1:1\n  1 threads and 64 connections\n\
                   Requests/sec:  37463.12\nTransfer/sec:     62.17MB\n";
        assert_eq!(super::parse_wrk(out), Some(37463.12));
        assert_eq!(super::parse_wrk("nothing"), None);
    }
}
