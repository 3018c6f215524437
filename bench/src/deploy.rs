//! The deploy agent on real (virtual) machines: N lab VMs (`scripts/vmlab.sh`, UEFI, 5 GiB
//! disks) behind sushy-tools, `ferrometal serve --agent-ramdisk`, and three rounds on the same
//! VMs: a raw disk image of `--image-mib` MiB (the lab's guest disk image with random data after
//! its partitions), the same image as qcow2, and the live ISO. For each: available -> OS booted
//! (the guest's console line on every VM), the agent's phases (from each host's
//! `ferrometal.io/provision-phases`) as p50/max, the write rate, BMC requests per host, and
//! serve's CPU and peak RSS. Between the disk rounds, deprovisioning cleans the disks.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::common::*;
use crate::stats::{Row, secs};
use crate::vmlab::{LabGuard, per_host, requests_per_vm, script, value_of};

pub struct Opts {
    pub vms: usize,
    pub image_mib: u64,
    pub timeout: u64,
    pub ferrometal: Option<std::path::PathBuf>,
    pub keep: bool,
}

const FIRSTBOOT: &str = "FERROMETAL-FIRSTBOOT";
const LIVE: &str = "FERROMETAL-LIVE-ISO booted";

fn run_tool(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// The lab's disk image grown to `mib` MiB, random data after its partitions (so neither
/// compression nor sparse files shorten the write), the backup GPT moved to the new end.
pub(crate) fn big_image(guest_raw: &str, dir: &Path, mib: u64) -> anyhow::Result<(String, String)> {
    let raw = dir.join("big.raw");
    std::fs::copy(guest_raw, &raw)?;
    let start = std::fs::metadata(&raw)?.len().div_ceil(1 << 20) + 1;
    anyhow::ensure!(mib > start + 2, "--image-mib must exceed {}", start + 2);
    run_tool(
        "dd",
        &[
            "if=/dev/urandom",
            &format!("of={}", raw.display()),
            "bs=1M",
            &format!("seek={start}"),
            &format!("count={}", mib - start - 1),
            "conv=notrunc",
            "status=none",
        ],
    )?;
    let file = std::fs::OpenOptions::new().write(true).open(&raw)?;
    file.set_len(mib << 20)?;
    drop(file);
    run_tool("sgdisk", &["-e", &raw.to_string_lossy()])?;
    let qcow2 = dir.join("big.qcow2");
    run_tool(
        "qemu-img",
        &[
            "convert",
            "-q",
            "-f",
            "raw",
            "-O",
            "qcow2",
            &raw.to_string_lossy(),
            &qcow2.to_string_lossy(),
        ],
    )?;
    Ok((
        raw.to_string_lossy().to_string(),
        qcow2.to_string_lossy().to_string(),
    ))
}

pub(crate) fn sha256(path: &str) -> anyhow::Result<String> {
    let out = run_tool("sha256sum", &[path])?;
    Ok(out
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// Phase name -> seconds per host, parsed from `ferrometal.io/provision-phases`
/// (`bootMedia 0.1s, ramdiskBoot 15.9s, download+write 11.6s (1.0 MB/s), ...`).
pub(crate) fn phases(annotation: &str) -> (BTreeMap<String, f64>, Option<f64>) {
    let mut out = BTreeMap::new();
    let mut rate = None;
    for part in annotation.split(", ") {
        let mut words = part.split_whitespace();
        let (Some(name), Some(secs)) = (words.next(), words.next()) else {
            continue;
        };
        if let Ok(s) = secs.trim_end_matches('s').parse::<f64>() {
            out.insert(name.to_string(), s);
        }
        if let Some(r) = words.next() {
            rate = r.trim_start_matches('(').parse::<f64>().ok();
        }
    }
    (out, rate)
}

pub(crate) fn p50_max(values: &[f64]) -> (f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let p50 = v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0.0);
    (p50, v.last().copied().unwrap_or(0.0))
}

struct Round {
    name: &'static str,
    to_booted: Duration,
    per_vm: Vec<f64>,
    phases: BTreeMap<String, Vec<f64>>,
    rates: Vec<f64>,
    requests_per_host: f64,
}

/// `serve` with the deploy agent (its ramdisk in `ramdisk_dir`), as the lab's VMs reach it:
/// QEMU's user network shows the host as 10.0.2.2.
pub(crate) fn agent_serve(
    ferrometal: Option<&Path>,
    dir: &Path,
    ramdisk_dir: &Path,
) -> anyhow::Result<ServeChild> {
    let binary = ferrometal_binary(ferrometal)?;
    let agent_port = free_port()?;
    ServeChild::start(
        &binary,
        dir,
        &[
            "--power-poll-interval".into(),
            "10".into(),
            "--agent-ramdisk".into(),
            ramdisk_dir.to_string_lossy().to_string(),
            "--agent-listen".into(),
            format!("127.0.0.1:{agent_port}"),
            "--agent-url".into(),
            format!("https://10.0.2.2:{agent_port}"),
            "--agent-media-listen".into(),
            format!("127.0.0.1:{}", free_port()?),
        ],
    )
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let scratch = Scratch::new(&format!("deploy-{}", o.vms), o.keep)?;
    let deadline = Instant::now() + Duration::from_secs(o.timeout);
    let images = script("guest-images.sh", &[])?;
    let live_iso = value_of(&images, "live_iso")?;
    let guest_raw = value_of(&images, "disk_raw")?;
    let images_dir = scratch.path.join("images");
    std::fs::create_dir_all(&images_dir)?;
    let (raw, qcow2) = big_image(&guest_raw, &images_dir, o.image_mib)?;
    std::os::unix::fs::symlink(&live_iso, images_dir.join("live.iso"))?;
    let (raw_sum, qcow2_sum) = (sha256(&raw)?, sha256(&qcow2)?);
    let qcow2_mib = std::fs::metadata(&qcow2)?.len() as f64 / f64::from(1 << 20);
    let t = Instant::now();
    let ramdisk = script("agent-ramdisk.sh", &[])?;
    let ramdisk_build = t.elapsed();
    let iso = value_of(&ramdisk, "iso")?;
    let ramdisk_mib = std::fs::metadata(&iso)?.len() as f64 / f64::from(1 << 20);
    let ramdisk_dir = Path::new(&iso).parent().context("iso dir")?.to_path_buf();

    let state = scratch.path.join("lab");
    let state_str = state.to_string_lossy().to_string();
    let count = o.vms.to_string();
    script(
        "vmlab.sh",
        &[
            "up", &count, "--uefi", "--disk", "5G", "--ram", "1024", "--nics", "1", "--state",
            &state_str,
        ],
    )?;
    let _lab = LabGuard(state_str.clone());
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(state.join("lab.json"))?)?;
    let vms = summary["vms"].as_array().context("vms")?.clone();
    let uuids: Vec<String> = vms
        .iter()
        .map(|v| v["uuid"].as_str().unwrap_or_default().to_string())
        .collect();
    let sushy_log = state.join("sushy/sushy.log");
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

    let serve = agent_serve(o.ferrometal.as_deref(), &scratch.path, &ramdisk_dir)?;
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    let (states, watch) = watch_states(&client);
    let hosts = bmh_api(&client);
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&serve.kubeconfig)
        .args(["apply", "-f"])
        .arg(state.join("hosts.yaml"))
        .output()?;
    if !out.status.success() {
        bail!("kubectl apply: {}", String::from_utf8_lossy(&out.stderr));
    }
    wait_all(&states, o.vms, "available", Instant::now(), deadline).await?;
    let names: Vec<String> = vms
        .iter()
        .map(|v| v["name"].as_str().unwrap_or_default().to_string())
        .collect();
    let consoles: Vec<String> = vms
        .iter()
        .map(|v| v["console_log"].as_str().unwrap_or_default().to_string())
        .collect();
    let cpu0 = crate::procfs::read(serve.pid())
        .unwrap_or_default()
        .cpu_secs;

    let base = "http://10.0.2.2";
    let rounds_spec = [
        (
            "raw",
            json!({"url": format!("{base}:{port}/big.raw"), "format": "raw", "checksum": raw_sum}),
            FIRSTBOOT,
        ),
        (
            "qcow2",
            json!({"url": format!("{base}:{port}/big.qcow2"), "format": "qcow2", "checksum": qcow2_sum}),
            FIRSTBOOT,
        ),
        (
            "live-iso",
            json!({"url": format!("http://127.0.0.1:{port}/live.iso"), "format": "live-iso"}),
            LIVE,
        ),
    ];
    let mut rounds = Vec::new();
    for (name, image, marker) in rounds_spec {
        say(&format!("round {name}: deploying on {} VMs", o.vms));
        let seen: Vec<usize> = consoles
            .iter()
            .map(|c| crate::vmlab::console_text(c).matches(marker).count())
            .collect();
        let r0 = requests_per_vm(&sushy_log, &uuids);
        let t = Instant::now();
        for n in &names {
            let patch = json!({"spec": {"online": true, "image": image}});
            hosts
                .patch(n, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let mut booted: Vec<Option<f64>> = vec![None; names.len()];
        while booted.iter().any(Option::is_none) {
            if Instant::now() > deadline {
                bail!("round {name}: not every VM booted in time: {booted:?}");
            }
            for (i, c) in consoles.iter().enumerate() {
                let now = crate::vmlab::console_text(c).matches(marker).count();
                if booted[i].is_none() && now > seen[i] {
                    booted[i] = Some(t.elapsed().as_secs_f64());
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let to_booted = t.elapsed();
        wait_all(&states, o.vms, "provisioned", t, deadline).await?;
        let r1 = requests_per_vm(&sushy_log, &uuids);
        let mut phase_values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut rates = Vec::new();
        if marker == FIRSTBOOT {
            for n in &names {
                let h = hosts.get(n).await?;
                let text = h
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("ferrometal.io/provision-phases"))
                    .cloned()
                    .unwrap_or_default();
                let (p, rate) = phases(&text);
                for (k, v) in p {
                    phase_values.entry(k).or_default().push(v);
                }
                rates.extend(rate);
            }
        }
        rounds.push(Round {
            name,
            to_booted,
            per_vm: booted.into_iter().flatten().collect(),
            phases: phase_values,
            rates,
            requests_per_host: per_host(&r0, &r1),
        });
        // Back to available (the agent cleans the disks) before the next round.
        say(&format!("round {name}: deprovisioning"));
        for n in &names {
            let patch = json!({"spec": {"image": null}});
            hosts
                .patch(n, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        wait_all(&states, o.vms, "available", Instant::now(), deadline).await?;
    }
    let reading = crate::procfs::read(serve.pid()).unwrap_or_default();
    watch.abort();
    let _ = files.kill();
    let _ = files.wait();

    let mut rows = vec![
        Row::new(
            "VMs",
            o.vms.to_string(),
            "UEFI (OVMF), 5 GiB virtio disk, 1 GiB RAM",
        ),
        Row::new(
            "image",
            format!("{} MiB raw / {qcow2_mib:.0} MiB qcow2", o.image_mib),
            "random data after the guest image's partitions",
        ),
        Row::new(
            "agent ramdisk",
            format!("{ramdisk_mib:.1} MiB ISO"),
            format!(
                "scripts/agent-ramdisk.sh: {} (cached when 0)",
                secs(ramdisk_build.as_secs_f64())
            ),
        ),
    ];
    let mut json_rounds = Vec::new();
    for r in &rounds {
        let (p50, max) = p50_max(&r.per_vm);
        rows.push(Row::new(
            format!("{}: available -> OS booted p50 / max", r.name),
            format!("{} / {}", secs(p50), secs(max)),
            format!("console line; all VMs {}", secs(r.to_booted.as_secs_f64())),
        ));
        for (phase, values) in &r.phases {
            let (p50, max) = p50_max(values);
            rows.push(Row::new(
                format!("{}:   {phase} p50 / max", r.name),
                format!("{} / {}", secs(p50), secs(max)),
                "ferrometal.io/provision-phases",
            ));
        }
        if !r.rates.is_empty() {
            let (p50, max) = p50_max(&r.rates);
            rows.push(Row::new(
                format!("{}:   write rate p50 / max", r.name),
                format!("{p50:.1} / {max:.1} MB/s"),
                "downloaded bytes / download+write time",
            ));
        }
        rows.push(Row::new(
            format!("{}: BMC requests/host", r.name),
            format!("{:.1}", r.requests_per_host),
            "sushy-tools request log, provisioning",
        ));
        json_rounds.push(json!({
            "name": r.name,
            "to_all_booted_s": r.to_booted.as_secs_f64(),
            "booted_s": r.per_vm,
            "phases": r.phases,
            "write_mb_per_s": r.rates,
            "requests_per_host": r.requests_per_host,
        }));
    }
    rows.push(Row::new(
        "serve CPU, three rounds",
        secs(reading.cpu_secs - cpu0),
        "user + system",
    ));
    rows.push(Row::new(
        "serve peak RSS",
        format!("{:.1} MiB", reading.hwm as f64 / f64::from(1 << 20)),
        "VmHWM, whole run",
    ));
    let out = json!({
        "vms": o.vms,
        "image_mib": o.image_mib,
        "qcow2_mib": qcow2_mib,
        "ramdisk_iso_mib": ramdisk_mib,
        "rounds": json_rounds,
        "serve_cpu_s": reading.cpu_secs - cpu0,
        "serve_peak_rss_mib": reading.hwm as f64 / f64::from(1 << 20),
    });
    finish("deploy", o.vms, &rows, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_annotations_read_back() {
        let (p, rate) = phases("bootMedia 0.1s, download+write 11.6s (1.0 MB/s), deploy 11.6s");
        assert_eq!(p["bootMedia"], 0.1);
        assert_eq!(p["download+write"], 11.6);
        assert_eq!(rate, Some(1.0));
        assert_eq!(p50_max(&[3.0, 1.0, 2.0]), (2.0, 3.0));
    }
}
