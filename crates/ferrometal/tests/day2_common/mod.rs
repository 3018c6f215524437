//! What the day-2 tests share: a one-server lab (the built-in emulator and `ferrometal serve`
//! managing it as `infra/node-0`), and reading and nudging that host through kubectl.

#![allow(dead_code)]

use serde_json::Value;

pub use crate::serve_common::*;

pub fn condition(obj: &Value, t: &str) -> Option<(String, String)> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
}

/// `kubectl patch KIND node-0 -n infra --type merge -p BODY`.
pub fn patch_node(s: &Serve, kind: &str, body: &str) {
    s.ok(&[
        "patch", kind, "node-0", "-n", "infra", "--type", "merge", "-p", body,
    ]);
}

/// Reboots `infra/node-0` with `reboot.metal3.io` and waits until the emulator saw one more
/// boot, the annotation is gone and the host is on with nothing in progress.
pub fn reboot_node(s: &Serve, emu: &ferrometal_emulator::Emulator) {
    let boots = emu.state(0).boots;
    s.ok(&[
        "annotate",
        "bmh",
        "node-0",
        "-n",
        "infra",
        "reboot.metal3.io=",
    ]);
    s.wait("the reboot done", || {
        let b = s.json(&["get", "bmh", "node-0", "-n", "infra", "-o", "json"]);
        emu.state(0).boots > boots
            && b["metadata"]["annotations"]
                .get("reboot.metal3.io")
                .is_none()
            && b["status"]["poweredOn"] == true
            && b["status"]["operationalStatus"] == "OK"
    });
}

/// One emulated server (sys-0, 100 ms power changes) and `ferrometal serve` managing it as the
/// host `infra/node-0`, off, with `host_spec` appended to its spec (`, raid: ...`) and the
/// objects of `objects` (YAML) applied with it. The data directory is the server's store.
pub async fn lab(
    host_spec: &str,
    objects: &str,
) -> (ferrometal_emulator::Emulator, tempfile::TempDir, Serve) {
    lab_with(
        ferrometal_emulator::EmulatorConfig::default(),
        host_spec,
        objects,
    )
    .await
}

/// The built-in emulator with `systems` systems whose power changes take 100 ms, on a free port.
pub async fn emulator(systems: usize) -> ferrometal_emulator::Emulator {
    emulator_with(ferrometal_emulator::EmulatorConfig::default(), systems).await
}

async fn emulator_with(
    config: ferrometal_emulator::EmulatorConfig,
    systems: usize,
) -> ferrometal_emulator::Emulator {
    ferrometal_emulator::Emulator::start(
        ferrometal_emulator::EmulatorConfig {
            systems,
            power_delay: std::time::Duration::from_millis(100),
            ..config
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

/// [`lab`] with the emulator's configuration (one system, 100 ms power changes, over it).
pub async fn lab_with(
    config: ferrometal_emulator::EmulatorConfig,
    host_spec: &str,
    objects: &str,
) -> (ferrometal_emulator::Emulator, tempfile::TempDir, Serve) {
    let emu = emulator_with(config, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--power-poll-interval", "2"]);
    let address = emu
        .system_url(0)
        .replace("http://", "redfish-virtualmedia+http://");
    s.ok(&["create", "namespace", "infra"]);
    let host = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: bmc, namespace: infra}}\n\
         stringData: {{username: admin, password: password}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\n\
         metadata: {{name: node-0, namespace: infra}}\n\
         spec: {{online: false, bmc: {{address: \"{address}\", credentialsName: bmc}}{host_spec}}}\n\
         ---\n{objects}"
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&host));
    assert!(out.status.success(), "{}", output_text(&out));
    (emu, dir, s)
}

pub fn host_events(s: &Serve, host: &str) -> Vec<String> {
    s.items("events", "infra")
        .iter()
        .filter(|e| {
            e["involvedObject"]["name"] == host && e["involvedObject"]["kind"] == "BareMetalHost"
        })
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `infra/node-0`'s HostFirmwareComponents as kubectl shows it.
pub fn hfc_of(s: &Serve) -> Value {
    s.json(&[
        "get",
        "hostfirmwarecomponents",
        "node-0",
        "-n",
        "infra",
        "-o",
        "json",
    ])
}
