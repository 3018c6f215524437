//! One claim API over two kinds of compute, side by side (needs root): N lab VMs behind
//! sushy-tools enrolled as BareMetalHosts (UEFI, 5 GiB disks, `serve --agent-ramdisk`), and a
//! libvirt HostClass on the same libvirt. From one tenant namespace, N claims without a class
//! (served by the hosts through the deploy agent) and N claims of the class (a VM each), all
//! with the same raw image and their own user data, applied at once. Measured per claim: apply
//! -> OS booted (the guest's first-boot line on its console), and delete -> nothing left (the
//! host available again; the VM and its volumes gone). serve's CPU and peak RSS.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use crate::common::*;
use crate::deploy::{agent_serve, big_image, p50_max, sha256};
use crate::stats::{Row, secs};
use crate::vmlab::{LabGuard, console_text, script, value_of};

pub struct Opts {
    pub vms: usize,
    pub image_mib: u64,
    pub timeout: u64,
    pub ferrometal: Option<std::path::PathBuf>,
    pub keep: bool,
}

const FIRSTBOOT: &str = "FERROMETAL-FIRSTBOOT";
const TENANT: &str = "tenant-a";

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("kubectl")?;
    let mut input = child.stdin.take().context("stdin")?;
    input.write_all(stdin.unwrap_or_default().as_bytes())?;
    drop(input);
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

fn virsh(args: &[&str]) -> String {
    Command::new("virsh")
        .args(["-q", "-c", "qemu:///system"])
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default()
}

pub async fn run(o: Opts) -> anyhow::Result<()> {
    let scratch = Scratch::new(&format!("hybrid-{}", o.vms), o.keep)?;
    let deadline = Instant::now() + Duration::from_secs(o.timeout);
    let images = script("guest-images.sh", &[])?;
    let guest_raw = value_of(&images, "disk_raw")?;
    let images_dir = scratch.path.join("images");
    std::fs::create_dir_all(&images_dir)?;
    let (raw, _) = big_image(&guest_raw, &images_dir, o.image_mib)?;
    let raw_sum = sha256(&raw)?;
    let ramdisk = script("agent-ramdisk.sh", &[])?;
    let iso = value_of(&ramdisk, "iso")?;
    let ramdisk_dir = Path::new(&iso).parent().context("iso dir")?.to_path_buf();

    let state = scratch.path.join("lab");
    let state_str = state.to_string_lossy().to_string();
    script(
        "vmlab.sh",
        &[
            "up",
            &o.vms.to_string(),
            "--uefi",
            "--disk",
            "5G",
            "--ram",
            "1024",
            "--nics",
            "1",
            "--state",
            &state_str,
        ],
    )?;
    let _lab = LabGuard(state_str.clone());
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(state.join("lab.json"))?)?;
    let prefix = format!(
        "{}-claim-",
        summary["prefix"].as_str().context("lab prefix")?
    );
    let console_dir = state.join("console");
    std::fs::create_dir_all(&console_dir)?;
    let port = free_port()?;
    let mut files = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1"])
        .arg(port.to_string())
        .arg("--directory")
        .arg(&images_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;

    let serve = agent_serve(o.ferrometal.as_deref(), &scratch.path, &ramdisk_dir)?;
    let client = serve.client().await?;
    wait_for_crd(&client).await?;
    let (states, watch) = watch_states(&client);
    let kc = serve.kubeconfig.clone();
    kubectl(
        &kc,
        &["apply", "-f", &state.join("hosts.yaml").to_string_lossy()],
        None,
    )?;
    wait_all(&states, o.vms, "available", Instant::now(), deadline).await?;
    let host_ns = if std::fs::read_to_string(state.join("hosts.yaml"))?.contains("namespace: infra")
    {
        "infra"
    } else {
        "default"
    };
    kubectl(&kc, &["create", "namespace", TENANT], None)?;
    kubectl(
        &kc,
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: metal3.io/v1alpha1\nkind: HostDeployPolicy\nmetadata: {{name: lend, namespace: {host_ns}}}\nspec: {{hostClaimNamespaces: {{names: [{TENANT}]}}}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: lab-libvirt, namespace: {host_ns}}}\nstringData: {{uri: \"qemu:///system\"}}\n---\napiVersion: ferrometal.io/v1alpha1\nkind: HostClass\nmetadata: {{name: vms}}\nspec:\n  provider: libvirt\n  libvirt: {{connectionSecretRef: {{namespace: {host_ns}, name: lab-libvirt}}, domainType: qemu, cpus: 1, memoryMib: 1024, diskGib: 5, bootMode: UEFI, namePrefix: {prefix}, consoleLogDir: {}}}\n",
            console_dir.display()
        )),
    )?;
    let cpu0 = crate::procfs::read(serve.pid())
        .unwrap_or_default()
        .cpu_secs;

    // Every claim at once: bm-i served by host i (through the agent, which downloads from the
    // host's address as the guest sees it), vm-i by a VM of its own (the controller downloads).
    let mut manifest = String::new();
    for i in 0..o.vms {
        for (kind, url, class) in [
            ("bm", format!("http://10.0.2.2:{port}/big.raw"), None),
            (
                "vm",
                format!("http://127.0.0.1:{port}/big.raw"),
                Some("vms"),
            ),
        ] {
            let name = format!("{kind}-{i}");
            let annotations = class.map_or(String::new(), |c| {
                format!("  annotations: {{ferrometal.io/host-class: {c}}}\n")
            });
            manifest.push_str(&format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}-ud, namespace: {TENANT}}}\nstringData: {{userData: \"#!/bin/sh\\necho {name}\\n\"}}\n---\napiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata:\n  name: {name}\n  namespace: {TENANT}\n{annotations}spec:\n  poweredOn: true\n  image: {{url: \"{url}\", format: raw, checksum: \"{raw_sum}\", checksumType: sha256}}\n  userData: {{name: {name}-ud}}\n---\n"
            ));
        }
    }
    say(&format!(
        "applying {} bare-metal and {} VM claims",
        o.vms, o.vms
    ));
    let t = Instant::now();
    kubectl(&kc, &["apply", "-f", "-"], Some(&manifest))?;
    let claim = |name: &str| -> anyhow::Result<Value> {
        Ok(serde_json::from_str(&kubectl(
            &kc,
            &["get", "hostclaim", "-n", TENANT, name, "-o", "json"],
            None,
        )?)?)
    };
    // Where each claim's console is: the host's (from the lab) or its VM's.
    let hosts: Vec<&Value> = summary["vms"].as_array().context("vms")?.iter().collect();
    let mut bm_booted: Vec<Option<f64>> = vec![None; o.vms];
    let mut vm_booted: Vec<Option<f64>> = vec![None; o.vms];
    let mut vm_consoles: Vec<Option<String>> = vec![None; o.vms];
    while bm_booted.iter().chain(&vm_booted).any(Option::is_none) {
        if Instant::now() > deadline {
            bail!("not every claim booted in time: bm {bm_booted:?}, vm {vm_booted:?}");
        }
        for (i, h) in hosts.iter().enumerate() {
            let c = console_text(h["console_log"].as_str().unwrap_or_default());
            if bm_booted[i].is_none() && c.contains(FIRSTBOOT) {
                bm_booted[i] = Some(t.elapsed().as_secs_f64());
            }
        }
        for i in 0..o.vms {
            if vm_consoles[i].is_none() {
                let uid = claim(&format!("vm-{i}"))?["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                vm_consoles[i] = Some(
                    console_dir
                        .join(format!("{prefix}{uid}.console.log"))
                        .to_string_lossy()
                        .to_string(),
                );
            }
            let c = console_text(vm_consoles[i].as_deref().unwrap_or_default());
            if vm_booted[i].is_none() && c.contains(FIRSTBOOT) {
                vm_booted[i] = Some(t.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let to_all_booted = t.elapsed().as_secs_f64();
    let booted_cpu = crate::procfs::read(serve.pid())
        .unwrap_or_default()
        .cpu_secs
        - cpu0;

    say("deleting every claim");
    let t = Instant::now();
    kubectl(
        &kc,
        &[
            "delete",
            "hostclaims",
            "-n",
            TENANT,
            "--all",
            "--wait=false",
        ],
        None,
    )?;
    let mut vm_gone = None;
    let mut bm_gone = None;
    while vm_gone.is_none() || bm_gone.is_none() {
        if Instant::now() > deadline {
            bail!("the claims were not released in time");
        }
        if vm_gone.is_none()
            && !virsh(&["list", "--all", "--name"]).contains(&prefix)
            && !virsh(&["vol-list", "default"]).contains(&prefix)
        {
            vm_gone = Some(t.elapsed().as_secs_f64());
        }
        if bm_gone.is_none() {
            let list = kubectl(
                &kc,
                &["get", "hostclaims", "-n", TENANT, "-o", "name"],
                None,
            )?;
            let available = states
                .lock()
                .unwrap()
                .values()
                .filter(|s| s.as_str() == "available")
                .count();
            if !list.contains("bm-") && available == o.vms {
                bm_gone = Some(t.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let reading = crate::procfs::read(serve.pid()).unwrap_or_default();
    watch.abort();
    let _ = files.kill();
    let _ = files.wait();

    let bm: Vec<f64> = bm_booted.into_iter().flatten().collect();
    let vm: Vec<f64> = vm_booted.into_iter().flatten().collect();
    let (bm50, bmmax) = p50_max(&bm);
    let (vm50, vmmax) = p50_max(&vm);
    let rows = vec![
        Row::new(
            "claims",
            format!("{} bare metal + {} VM", o.vms, o.vms),
            "one tenant namespace, applied at once",
        ),
        Row::new(
            "image",
            format!("{} MiB raw", o.image_mib),
            "random data after the guest image's partitions",
        ),
        Row::new(
            "bare metal: apply -> OS booted p50 / max",
            format!("{} / {}", secs(bm50), secs(bmmax)),
            "lab VM behind sushy-tools, UEFI, deploy agent",
        ),
        Row::new(
            "VM: apply -> OS booted p50 / max",
            format!("{} / {}", secs(vm50), secs(vmmax)),
            "libvirt class, UEFI, 1 CPU, 1 GiB",
        ),
        Row::new("all booted", secs(to_all_booted), "from the apply"),
        Row::new(
            "bare metal: delete -> host available",
            secs(bm_gone.unwrap_or_default()),
            "deprovisioning cleans the disk",
        ),
        Row::new(
            "VM: delete -> VM and volumes gone",
            secs(vm_gone.unwrap_or_default()),
            "libvirt no longer knows them",
        ),
        Row::new("serve CPU to all booted", secs(booted_cpu), "user + system"),
        Row::new(
            "serve peak RSS",
            format!("{:.1} MiB", reading.hwm as f64 / f64::from(1 << 20)),
            "VmHWM, whole run",
        ),
    ];
    let out = json!({
        "vms": o.vms,
        "image_mib": o.image_mib,
        "bare_metal_booted_s": bm,
        "vm_booted_s": vm,
        "all_booted_s": to_all_booted,
        "bare_metal_released_s": bm_gone,
        "vm_removed_s": vm_gone,
        "serve_cpu_to_booted_s": booted_cpu,
        "serve_peak_rss_mib": reading.hwm as f64 / f64::from(1 << 20),
    });
    finish("hybrid", o.vms, &rows, out)
}
