//! What the tests that deploy disk images on lab VMs share: serve with ferrometal's deploy
//! agent, reading a host, waiting with everything needed to see why not (the host, the VM's
//! console, serve's and Ironic's logs), and the SHA-256 the first-boot line prints.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use ferrometal_test_support::vmlab::{Lab, Vm, agent_ramdisk};
use serde_json::Value;

use crate::serve_common::{Serve, free_port, serve, tail_of};

/// The line the lab's disk image prints on its first boot.
pub const FIRSTBOOT: &str = "FERROMETAL-FIRSTBOOT";

pub fn host(s: &Serve, ns: &str, name: &str) -> Value {
    serde_json::from_str(&s.ok(&["get", "bmh", "-n", ns, name, "-o", "json"])).unwrap()
}

pub fn state(h: &Value) -> String {
    h["status"]["provisioning"]["state"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The namespace of the lab's hosts (`infra` or `default`).
pub fn lab_namespace(lab: &Lab) -> &'static str {
    if lab.manifests().contains("namespace: infra") {
        "infra"
    } else {
        "default"
    }
}

/// Polls `check` until it holds or `limit` passes; then fails with the host, the console and
/// the newest lines of serve's log (and of the supervised Ironic's, when there is one).
pub fn wait_for(
    s: &Serve,
    lab: &Lab,
    vm: &Vm,
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> bool,
) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            // Where a VM test's time goes, in its output (shown with --nocapture or on failure).
            eprintln!("{}: {what} after {:.0?}", vm.name, start.elapsed());
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let ironic = s.dir.join("ironic/ironic.log");
    let ironic = if ironic.exists() {
        format!(
            "\n--- ironic log (last lines) ---\n{}",
            tail_of(&ironic, 40)
        )
    } else {
        String::new()
    };
    panic!(
        "{what}: not within {limit:?}\n--- host ---\n{}\n--- console ---\n{}\n--- serve ({}), last log lines ---\n{}{ironic}",
        host(s, lab_namespace(lab), &vm.name),
        lab.console(vm),
        s.process_state(),
        s.log_tail(40),
    );
}

pub fn sha256_hex(data: &[u8]) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(data)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// The ports one serve with the agent uses, kept for a restart.
#[derive(Clone, Copy)]
pub struct Ports {
    pub api_server: u16,
    pub agent: u16,
    pub media: u16,
    pub metrics: u16,
}

impl Ports {
    pub fn free() -> Ports {
        Ports {
            api_server: free_port(),
            agent: free_port(),
            media: free_port(),
            metrics: free_port(),
        }
    }
}

/// serve with the agent: its API on a free port that the VMs reach at 10.0.2.2 (QEMU's
/// user-mode network forwards it to the host's loopback), media on another for sushy-tools.
pub fn serve_on(dir: &std::path::Path, ports: Ports, extra: &[&str]) -> Serve {
    let ramdisk = agent_ramdisk().to_string_lossy().to_string();
    let listen = format!("127.0.0.1:{}", ports.agent);
    let url = format!("https://10.0.2.2:{}", ports.agent);
    let media_listen = format!("127.0.0.1:{}", ports.media);
    let metrics_listen = format!("127.0.0.1:{}", ports.metrics);
    let mut flags = vec![
        "--power-poll-interval",
        "5",
        "--error-backoff",
        "2",
        "--bmc-timeout",
        "20",
        "--agent-ramdisk",
        &ramdisk,
        "--agent-listen",
        &listen,
        "--agent-url",
        &url,
        "--agent-media-listen",
        &media_listen,
        "--metrics-listen",
        &metrics_listen,
    ];
    flags.extend_from_slice(extra);
    serve(dir, ports.api_server, &flags)
}

/// Linux RAID's partition type as stored (A19D880F-05FC-4D3B-A006-743F0F84911E).
pub const LINUX_RAID: [u8; 16] = [
    0x0F, 0x88, 0x9D, 0xA1, 0xFC, 0x05, 0x3B, 0x4D, 0xA0, 0x06, 0x74, 0x3F, 0x0F, 0x84, 0x91, 0x1E,
];
/// The EFI system partition's type as stored (C12A7328-F81F-11D2-BA4B-00A0C93EC93B).
pub const EFI_SYSTEM: [u8; 16] = [
    0x28, 0x73, 0x2A, 0xC1, 0x1F, 0xF8, 0xD2, 0x11, 0xBA, 0x4B, 0x00, 0xA0, 0xC9, 0x3E, 0xC9, 0x3B,
];

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// (slot, type GUID, first byte, length) of each used entry of the GPT at the start of `head`.
pub fn gpt(head: &[u8]) -> Vec<(usize, [u8; 16], u64, u64)> {
    assert_eq!(&head[512..520], b"EFI PART", "no GPT");
    head[1024..1024 + 128 * 128]
        .chunks_exact(128)
        .enumerate()
        .filter(|(_, e)| e[..16].iter().any(|b| *b != 0))
        .map(|(i, e)| {
            let first = le64(e, 32) * 512;
            let last = le64(e, 40) * 512 + 512;
            (i, e[..16].try_into().unwrap(), first, last - first)
        })
        .collect()
}

/// The md version-1 superblock at byte `at` of a VM's disk `disk`: its array UUID and RAID
/// level.
pub fn md_superblock(lab: &Lab, vm: &Vm, disk: usize, at: u64) -> ([u8; 16], u32) {
    let sb = lab.read_disk_at(vm, disk, at, 4096);
    assert_eq!(
        sb[..4],
        0xa92b_4efcu32.to_le_bytes(),
        "no md superblock at byte {at} of disk {disk}"
    );
    assert_eq!(
        u32::from_le_bytes(sb[4..8].try_into().unwrap()),
        1,
        "major version"
    );
    (
        sb[16..32].try_into().unwrap(),
        u32::from_le_bytes(sb[72..76].try_into().unwrap()),
    )
}

/// The md 1.0 superblock of the member partition at byte `start`, `len` bytes long (8 KiB
/// before its end, on a 4 KiB boundary): its array UUID and RAID level.
pub fn md10_superblock(lab: &Lab, vm: &Vm, disk: usize, start: u64, len: u64) -> ([u8; 16], u32) {
    md_superblock(lab, vm, disk, (start + len - 8192) / 4096 * 4096)
}

/// Patches host `name` in `ns` (`kind`: `merge` or `json`), as its owner would with kubectl.
pub fn patch_host(s: &Serve, ns: &str, name: &str, kind: &str, patch: &str) {
    s.ok(&["patch", "bmh", "-n", ns, name, "--type", kind, "-p", patch]);
}

/// A mirrored host's first disk pulled out, as a failed disk is: powered off through its spec,
/// the disk taken out of the VM, powered on again. Returns the image's first-boot line, from
/// the second disk alone; the host stays provisioned.
pub fn boot_without_first_disk(s: &Serve, lab: &Lab, vm: &Vm, limit: Duration) -> String {
    let ns = lab_namespace(lab);
    patch_host(s, ns, &vm.name, "merge", r#"{"spec":{"online":false}}"#);
    wait_for(s, lab, vm, limit, "powered off", || {
        host(s, ns, &vm.name)["status"]["poweredOn"] == false
    });
    lab.detach_disk(vm, "vda");
    let before = lab.console_len(vm);
    patch_host(s, ns, &vm.name, "merge", r#"{"spec":{"online":true}}"#);
    let line = lab.wait_console(vm, FIRSTBOOT, before, limit);
    assert_eq!(
        state(&host(s, ns, &vm.name)),
        "provisioned",
        "the host stays provisioned"
    );
    line
}
