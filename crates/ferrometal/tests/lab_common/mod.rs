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
