//! Real (virtual) machines: N QEMU VMs behind sushy-tools' libvirt driver (`scripts/vmlab.sh`),
//! driven by `ferrometal serve` from apply to `available` and from `available` to the live ISO
//! running (the guest's console line seen on every VM), with the BMC requests each host cost
//! per phase (counted in sushy-tools' request log).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::common::*;
use crate::stats::{Row, secs};

pub struct Opts {
    pub vms: usize,
    pub legacy: bool,
    pub timeout: u64,
    pub ferrometal: Option<std::path::PathBuf>,
    pub keep: bool,
}

const MARKER: &str = "FERROMETAL-LIVE-ISO booted";

pub(crate) fn script(name: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("bash")
        .arg(workspace_root().join("scripts").join(name))
        .args(args)
        // The lab goes with this process, however it ends.
        .env("FERROMETAL_PEER_OWNER", std::process::id().to_string())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running scripts/{name}"))?;
    if !out.status.success() {
        bail!(
            "scripts/{name} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

pub(crate) fn value_of(text: &str, key: &str) -> anyhow::Result<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(String::from)
        .with_context(|| format!("no {key}= in {text}"))
}

/// A VM's console log as text (firmware writes bytes that are not UTF-8).
pub(crate) fn console_text(path: &str) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// Takes the lab down on every way out of the scenario.
pub(crate) struct LabGuard(pub(crate) String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = script("vmlab.sh", &["down", "--state", &self.0]);
    }
}

/// Redfish requests sushy-tools logged for each VM (by its UUID in the path), in order.
pub(crate) fn requests_per_vm(log: &Path, uuids: &[String]) -> Vec<usize> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    uuids
        .iter()
        .map(|u| {
            text.lines()
                .filter(|l| l.contains("\"GET ") || l.contains("\"POST ") || l.contains("\"PATCH "))
                .filter(|l| l.contains(u.as_str()))
                .count()
        })
        .collect()
}

pub(crate) fn per_host(before: &[usize], after: &[usize]) -> f64 {
    let total: usize = after.iter().zip(before).map(|(a, b)| a - b).sum();
    total as f64 / after.len().max(1) as f64
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let scratch = Scratch::new(&format!("vmlab-{}", o.vms), o.keep)?;
    let deadline = Instant::now() + Duration::from_secs(o.timeout);
    let images = script("guest-images.sh", &[])?;
    let live_iso = value_of(&images, "live_iso")?;
    let state = scratch.path.join("lab");
    let state_str = state.to_string_lossy().to_string();
    let count = o.vms.to_string();
    let mode = if o.legacy { "--legacy" } else { "--uefi" };
    let t = Instant::now();
    script(
        "vmlab.sh",
        &[
            "up", &count, mode, "--disk", "2G", "--ram", "1024", "--nics", "1", "--state",
            &state_str,
        ],
    )?;
    let _lab = LabGuard(state_str.clone());
    let lab_up = t.elapsed();
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(state.join("lab.json"))?)?;
    let vms = summary["vms"].as_array().context("vms")?.clone();
    let uuids: Vec<String> = vms
        .iter()
        .map(|v| v["uuid"].as_str().unwrap_or_default().to_string())
        .collect();
    let sushy_log = state.join("sushy/sushy.log");

    // The ISO, served on loopback (sushy-tools downloads it into libvirt's pool).
    let images_dir = scratch.path.join("images");
    std::fs::create_dir_all(&images_dir)?;
    std::os::unix::fs::symlink(&live_iso, images_dir.join("live.iso"))?;
    let port = free_port()?;
    let mut files = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
            "--directory",
        ])
        .arg(&images_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;

    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let serve = ServeChild::start(
        &binary,
        &scratch.path,
        &["--power-poll-interval".into(), "10".into()],
    )?;
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    let (states, watch) = watch_states(&client);

    // Phase 1: apply -> available (registration and out-of-band inspection).
    let r0 = requests_per_vm(&sushy_log, &uuids);
    let t = Instant::now();
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&serve.kubeconfig)
        .args(["apply", "-f"])
        .arg(state.join("hosts.yaml"))
        .output()?;
    if !out.status.success() {
        bail!("kubectl apply: {}", String::from_utf8_lossy(&out.stderr));
    }
    let to_available = wait_all(&states, o.vms, "available", t, deadline).await?;
    let r1 = requests_per_vm(&sushy_log, &uuids);

    // Phase 2: available -> the live ISO running on every VM (console line seen).
    let hosts = bmh_api(&client);
    let url = format!("http://127.0.0.1:{port}/live.iso");
    let t = Instant::now();
    for v in &vms {
        let name = v["name"].as_str().unwrap_or_default();
        let patch = json!({"spec": {"online": true, "image": {"url": url, "format": "live-iso"}}});
        hosts
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let mut booted = vec![None; vms.len()];
    while booted.iter().any(Option::is_none) {
        if Instant::now() > deadline {
            bail!("not every VM booted the ISO in time: {booted:?}");
        }
        for (i, v) in vms.iter().enumerate() {
            if booted[i].is_none() {
                let log = v["console_log"].as_str().unwrap_or_default();
                let console = std::fs::read_to_string(log).unwrap_or_default();
                if console.contains(MARKER) {
                    booted[i] = Some(t.elapsed());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let to_running = t.elapsed();
    let to_provisioned = wait_all(&states, o.vms, "provisioned", t, deadline).await?;
    let r2 = requests_per_vm(&sushy_log, &uuids);
    watch.abort();
    let _ = files.kill();
    let _ = files.wait();

    let first = booted.iter().flatten().min().copied().unwrap_or_default();
    let rows = vec![
        Row::new(
            "VMs",
            o.vms.to_string(),
            if o.legacy {
                "legacy BIOS"
            } else {
                "UEFI (OVMF)"
            },
        ),
        Row::new(
            "lab up",
            secs(lab_up.as_secs_f64()),
            "vmlab.sh up: define VMs, start sushy-tools",
        ),
        Row::new(
            "apply -> available",
            secs(to_available.as_secs_f64()),
            "registration + inspection, all VMs",
        ),
        Row::new(
            "BMC requests/host, to available",
            format!("{:.2}", per_host(&r0, &r1)),
            "sushy-tools request log",
        ),
        Row::new(
            "available -> first ISO booted",
            secs(first.as_secs_f64()),
            "console line seen",
        ),
        Row::new(
            "available -> every ISO booted",
            secs(to_running.as_secs_f64()),
            "console line seen on each VM",
        ),
        Row::new(
            "available -> all provisioned",
            secs(to_provisioned.as_secs_f64()),
            "status",
        ),
        Row::new(
            "BMC requests/host, provisioning",
            format!("{:.2}", per_host(&r1, &r2)),
            "insert media, boot override, power, polls",
        ),
    ];
    let json = json!({
        "vms": o.vms,
        "legacy": o.legacy,
        "lab_up_s": lab_up.as_secs_f64(),
        "to_available_s": to_available.as_secs_f64(),
        "to_every_iso_booted_s": to_running.as_secs_f64(),
        "iso_booted_s": booted.iter().map(|b| b.map(|d| d.as_secs_f64())).collect::<Vec<_>>(),
        "to_provisioned_s": to_provisioned.as_secs_f64(),
        "requests_per_host_to_available": per_host(&r0, &r1),
        "requests_per_host_provisioning": per_host(&r1, &r2),
        "requests_to_available": r1.iter().zip(&r0).map(|(a, b)| a - b).collect::<Vec<_>>(),
        "requests_provisioning": r2.iter().zip(&r1).map(|(a, b)| a - b).collect::<Vec<_>>(),
    });
    let scenario = if o.legacy { "vmlab-legacy" } else { "vmlab" };
    finish(scenario, o.vms, &rows, json)
}
