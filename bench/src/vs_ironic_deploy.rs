//! The race: Ironic with its agent (IPA, `scripts/ipa-ramdisk.sh`) against ferrometal's own
//! deploy agent, on the same kind of lab VMs behind one sushy-tools each run, the same disk
//! images (raw and qcow2, random data after the guest image's partitions) and user data; one
//! stack after the other, each on a fresh lab, data directory and serve. The VMs' first NICs
//! sit on the lab's provisioning network, where both stacks listen (Ironic and IPA call each
//! other; ferrometal's agent only calls out). Per stack: apply -> available (registration,
//! in-band inspection, metadata cleaning), then per image available -> OS booted (the disk
//! image's first-boot line on each VM's console), provisioned, and deprovisioned (cleaning);
//! BMC requests per host (sushy-tools' log), peak RSS of the whole stack (serve and every
//! process under it: Ironic's included) and its CPU, and the ramdisk's size.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::common::*;
use crate::deploy::{big_image, p50_max, sha256};
use crate::procfs::PeakSampler;
use crate::stats::{Row, secs};
use crate::vmlab::{LabGuard, per_host, requests_per_vm, script, value_of};

pub struct Opts {
    pub vms: usize,
    pub image_mib: u64,
    pub legacy: bool,
    pub timeout: u64,
    pub ferrometal: Option<std::path::PathBuf>,
    pub keep: bool,
}

const FIRSTBOOT: &str = "FERROMETAL-FIRSTBOOT";
const USER_DATA: &str = "#!/bin/sh\necho hello from the race\n";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stack {
    Ironic,
    Agent,
}

impl Stack {
    fn name(self) -> &'static str {
        match self {
            Stack::Ironic => "ironic+ipa",
            Stack::Agent => "ferrometal agent",
        }
    }
}

struct Image {
    name: &'static str,
    file: String,
    format: &'static str,
    sum: String,
}

#[derive(Default)]
struct Outcome {
    to_available: f64,
    requests_to_available: f64,
    rounds: Vec<(String, f64, f64, f64, f64, f64)>,
    peak_rss_mib: f64,
    cpu_s: f64,
    ramdisk_mib: f64,
}

async fn run_stack(
    o: &Opts,
    stack: Stack,
    scratch: &Path,
    images_dir: &Path,
    images: &[Image],
    deadline: Instant,
) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let dir = scratch.join(match stack {
        Stack::Ironic => "ironic",
        Stack::Agent => "agent",
    });
    std::fs::create_dir_all(&dir)?;
    let state = dir.join("lab");
    let state_str = state.to_string_lossy().to_string();
    let count = o.vms.to_string();
    let mode = if o.legacy { "--legacy" } else { "--uefi" };
    script(
        "vmlab.sh",
        &[
            "up",
            &count,
            mode,
            "--disk",
            "5G",
            "--ram",
            "2048",
            "--nics",
            "1",
            "--prov-network",
            "--state",
            &state_str,
        ],
    )?;
    let _lab = LabGuard(state_str.clone());
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(state.join("lab.json"))?)?;
    let prov = summary["provisioning"]["address"]
        .as_str()
        .context("provisioning address")?
        .to_string();
    let vms = summary["vms"].as_array().context("vms")?.clone();
    let field = |k: &str| -> Vec<String> {
        vms.iter()
            .map(|v| v[k].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let (uuids, names, consoles) = (field("uuid"), field("name"), field("console_log"));
    let sushy_log = state.join("sushy/sushy.log");

    // Images and the ramdisk on the provisioning address, where VMs and Ironic reach them.
    let port = free_port()?;
    let mut files = Command::new("python3")
        .args(["-m", "http.server", "--bind", &prov, &port.to_string()])
        .arg("--directory")
        .arg(images_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let base = format!("http://{prov}:{port}");
    let mut flags: Vec<String> = vec!["--power-poll-interval".into(), "10".into()];
    match stack {
        Stack::Ironic => {
            let ipa = script("ipa-ramdisk.sh", &[])?;
            for (key, name) in [
                ("kernel", "ipa.kernel"),
                ("initrd", "ipa.initrd"),
                ("esp", "esp.img"),
            ] {
                let _ = std::fs::remove_file(images_dir.join(name));
                std::os::unix::fs::symlink(value_of(&ipa, key)?, images_dir.join(name))?;
            }
            out.ramdisk_mib = (std::fs::metadata(value_of(&ipa, "kernel")?)?.len()
                + std::fs::metadata(value_of(&ipa, "initrd")?)?.len())
                as f64
                / f64::from(1 << 20);
            flags.extend([
                "--provisioner".into(),
                "ironic".into(),
                "--deploy-kernel-url".into(),
                format!("{base}/ipa.kernel"),
                "--deploy-ramdisk-url".into(),
                format!("{base}/ipa.initrd"),
                "--deploy-bootloader-url".into(),
                format!("{base}/esp.img"),
                "--ironic-listen".into(),
                prov.clone(),
            ]);
        }
        Stack::Agent => {
            let ramdisk = script("agent-ramdisk.sh", &[])?;
            let iso = value_of(&ramdisk, "iso")?;
            out.ramdisk_mib = std::fs::metadata(&iso)?.len() as f64 / f64::from(1 << 20);
            let agent_port = free_port()?;
            flags.extend([
                "--agent-ramdisk".into(),
                Path::new(&iso)
                    .parent()
                    .context("iso dir")?
                    .to_string_lossy()
                    .to_string(),
                "--agent-listen".into(),
                format!("{prov}:{agent_port}"),
                "--agent-url".into(),
                format!("https://{prov}:{agent_port}"),
                "--agent-media-listen".into(),
                format!("127.0.0.1:{}", free_port()?),
            ]);
        }
    }
    let binary = ferrometal_binary(o.ferrometal.as_deref())?;
    let serve = ServeChild::start(&binary, &dir, &flags)?;
    let sampler = PeakSampler::start(serve.pid(), Duration::from_millis(200));
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    let (states, watch) = watch_states(&client);
    let hosts = bmh_api(&client);
    let kubectl = |args: &[&str], stdin: Option<&str>| -> anyhow::Result<()> {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&serve.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(text) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(text.as_bytes())?;
        }
        drop(child.stdin.take());
        let o = child.wait_with_output()?;
        if !o.status.success() {
            bail!("kubectl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        }
        Ok(())
    };
    kubectl(
        &[
            "create",
            "secret",
            "generic",
            "race-user-data",
            &format!("--from-literal=userData={USER_DATA}"),
        ],
        None,
    )?;
    // Both inspect in-band (ferrometal's agent only when asked; Ironic always with a ramdisk).
    let manifests = std::fs::read_to_string(state.join("hosts.yaml"))?;
    let manifests = if stack == Stack::Agent {
        manifests.replace(
            "  online: false\n",
            "  online: false\n  inspectionMode: agent\n",
        )
    } else {
        manifests
    };
    let cpu0 = crate::procfs::read_tree(serve.pid()).cpu_secs;
    let r0 = requests_per_vm(&sushy_log, &uuids);
    let t = Instant::now();
    kubectl(&["apply", "-f", "-"], Some(&manifests))?;
    wait_all(&states, o.vms, "available", t, deadline).await?;
    out.to_available = t.elapsed().as_secs_f64();
    out.requests_to_available = per_host(&r0, &requests_per_vm(&sushy_log, &uuids));

    for image in images {
        say(&format!(
            "{}: {} image on {} VMs",
            stack.name(),
            image.name,
            o.vms
        ));
        let seen: Vec<usize> = consoles
            .iter()
            .map(|c| crate::vmlab::console_text(c).matches(FIRSTBOOT).count())
            .collect();
        let r0 = requests_per_vm(&sushy_log, &uuids);
        let t = Instant::now();
        let spec = json!({"spec": {
            "online": true,
            "userData": {"name": "race-user-data"},
            "image": {"url": format!("{base}/{}", image.file), "format": image.format,
                      "checksum": image.sum, "checksumType": "sha256"},
        }});
        for n in &names {
            hosts
                .patch(n, &PatchParams::default(), &Patch::Merge(&spec))
                .await?;
        }
        let mut booted: Vec<Option<f64>> = vec![None; names.len()];
        while booted.iter().any(Option::is_none) {
            if Instant::now() > deadline {
                bail!("{}: not every VM booted in time: {booted:?}", stack.name());
            }
            for (i, c) in consoles.iter().enumerate() {
                let now = crate::vmlab::console_text(c).matches(FIRSTBOOT).count();
                if booted[i].is_none() && now > seen[i] {
                    booted[i] = Some(t.elapsed().as_secs_f64());
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let (p50, max) = p50_max(&booted.into_iter().flatten().collect::<Vec<_>>());
        let provisioned = wait_all(&states, o.vms, "provisioned", t, deadline).await?;
        let requests = per_host(&r0, &requests_per_vm(&sushy_log, &uuids));
        let t = Instant::now();
        for n in &names {
            let patch = json!({"spec": {"image": null, "userData": null}});
            hosts
                .patch(n, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let back = wait_all(&states, o.vms, "available", t, deadline).await?;
        out.rounds.push((
            image.name.to_string(),
            p50,
            max,
            provisioned.as_secs_f64(),
            requests,
            back.as_secs_f64(),
        ));
    }
    out.cpu_s = crate::procfs::read_tree(serve.pid()).cpu_secs - cpu0;
    out.peak_rss_mib = sampler.peak() as f64 / f64::from(1 << 20);
    watch.abort();
    drop(sampler);
    let _ = files.kill();
    let _ = files.wait();
    Ok(out)
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let scratch = Scratch::new(&format!("vs-ironic-deploy-{}", o.vms), o.keep)?;
    let deadline = Instant::now() + Duration::from_secs(o.timeout);
    let guest = script("guest-images.sh", &[])?;
    let images_dir = scratch.path.join("images");
    std::fs::create_dir_all(&images_dir)?;
    let (raw, qcow2) = big_image(&value_of(&guest, "disk_raw")?, &images_dir, o.image_mib)?;
    let images = vec![
        Image {
            name: "raw",
            file: "big.raw".into(),
            format: "raw",
            sum: sha256(&raw)?,
        },
        Image {
            name: "qcow2",
            file: "big.qcow2".into(),
            format: "qcow2",
            sum: sha256(&qcow2)?,
        },
    ];
    let qcow2_mib = std::fs::metadata(&qcow2)?.len() as f64 / f64::from(1 << 20);
    let mut outcomes = Vec::new();
    // Ours first: it fails fast when something is off; the table shows Ironic first.
    for stack in [Stack::Agent, Stack::Ironic] {
        say(&format!("stack {}", stack.name()));
        let outcome = run_stack(&o, stack, &scratch.path, &images_dir, &images, deadline).await?;
        outcomes.insert(0, (stack, outcome));
    }
    let col = |f: &dyn Fn(&Outcome) -> String| -> String {
        outcomes
            .iter()
            .map(|(_, out)| f(out))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let mut rows = vec![
        Row::new(
            "VMs",
            o.vms.to_string(),
            format!(
                "{}, 5 GiB virtio disk, 2 GiB RAM, first NIC on the provisioning network",
                if o.legacy { "BIOS" } else { "UEFI (OVMF)" }
            ),
        ),
        Row::new(
            "image",
            format!("{} MiB raw / {qcow2_mib:.0} MiB qcow2", o.image_mib),
            "random data after the guest image's partitions; user data",
        ),
        Row::new(
            "ramdisk (ironic+ipa | agent)",
            col(&|out| format!("{:.1} MiB", out.ramdisk_mib)),
            "IPA kernel+initrd | agent ISO",
        ),
        Row::new(
            "apply -> available (ironic+ipa | agent)",
            col(&|out| secs(out.to_available)),
            "registration, in-band inspection, metadata cleaning",
        ),
        Row::new(
            "BMC requests/host to available",
            col(&|out| format!("{:.1}", out.requests_to_available)),
            "sushy-tools request log",
        ),
    ];
    for (i, image) in images.iter().enumerate() {
        let r = |out: &Outcome| out.rounds[i].clone();
        rows.push(Row::new(
            format!("{}: available -> OS booted p50 / max", image.name),
            col(&|out| format!("{} / {}", secs(r(out).1), secs(r(out).2))),
            "first-boot line on each console",
        ));
        rows.push(Row::new(
            format!("{}: -> provisioned (all)", image.name),
            col(&|out| secs(r(out).3)),
            "",
        ));
        rows.push(Row::new(
            format!("{}: BMC requests/host", image.name),
            col(&|out| format!("{:.1}", r(out).4)),
            "",
        ));
        rows.push(Row::new(
            format!("{}: deprovision -> available (all)", image.name),
            col(&|out| secs(r(out).5)),
            "metadata cleaning",
        ));
    }
    rows.push(Row::new(
        "stack CPU, whole run",
        col(&|out| secs(out.cpu_s)),
        "serve and its children (Ironic's processes)",
    ));
    rows.push(Row::new(
        "stack peak RSS",
        col(&|out| format!("{:.1} MiB", out.peak_rss_mib)),
        "sum over the process tree, sampled every 200 ms",
    ));
    let json_out = json!({
        "vms": o.vms,
        "image_mib": o.image_mib,
        "qcow2_mib": qcow2_mib,
        "legacy": o.legacy,
        "stacks": outcomes.iter().map(|(stack, out)| json!({
            "stack": stack.name(),
            "ramdisk_mib": out.ramdisk_mib,
            "to_available_s": out.to_available,
            "requests_per_host_to_available": out.requests_to_available,
            "rounds": out.rounds.iter().map(|r| json!({
                "image": r.0, "booted_p50_s": r.1, "booted_max_s": r.2,
                "provisioned_s": r.3, "requests_per_host": r.4, "deprovisioned_s": r.5,
            })).collect::<Vec<_>>(),
            "cpu_s": out.cpu_s,
            "peak_rss_mib": out.peak_rss_mib,
        })).collect::<Vec<_>>(),
    });
    finish("vs-ironic-deploy", o.vms, &rows, json_out)
}
