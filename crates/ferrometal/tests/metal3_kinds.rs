//! Every other kind baremetal-operator serves, through kubectl against `ferrometal serve`:
//! kubectl's own messages for kinds nobody serves (it reads `/openapi/v2` in protobuf), metal3's
//! day-2 and switch kinds stored field for field, refused with the field named when invalid,
//! and marked as not acted on in their status.

mod serve_common;

use serde_json::{Value, json};
use serve_common::*;

const KINDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/metal3-kinds.yaml"
);

/// The kinds of the fixture ferrometal keeps without acting on them, by plural.
const KEPT: [&str; 3] = [
    "preprovisioningimages",
    "baremetalswitches",
    "hostnetworkattachments",
];

fn not_acted_on(obj: &Value) -> Option<&Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ferrometal.io/NotActedOn")
}

#[test]
fn kubectl_says_no_matches_for_a_kind_nobody_serves() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: example.io/v1\nkind: Nope\nmetadata: {name: x, namespace: default}\n"),
    );
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains(r#"no matches for kind "Nope" in version "example.io/v1""#),
        "kubectl's usual message: {text}"
    );
    assert!(!text.contains("proto"), "{text}");
    // A kind that is served, given a field it lacks, gets the server's strict-field answer,
    // as from kube-apiserver.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: metal3.io/v1alpha1\nkind: PreprovisioningImage\n\
             metadata: {name: x, namespace: default}\nspec: {foo: bar}\n",
        ),
    );
    let text = output_text(&out);
    assert!(
        text.contains(r#"strict decoding error: unknown field "spec.foo""#),
        "{text}"
    );
}

#[test]
fn metal3_kinds_are_stored_as_written_refused_when_invalid_and_marked_not_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        free_port(),
        &["--provisioner", "fixture", "--power-poll-interval", "2"],
    );
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["apply", "-n", "infra", "-f", KINDS]);

    // Stored as written: a setting keeps its type (number or string), lists and maps intact,
    // defaults filled in as metal3's schema has them.
    let hfs = s.json(&["get", "hfs", "node-a", "-n", "infra", "-o", "json"]);
    assert_eq!(
        hfs["spec"]["settings"],
        json!({"NumCores": 8, "ProcTurboMode": "Disabled"})
    );
    let schema = s.json(&[
        "get",
        "firmwareschema",
        "schema-vendor-model",
        "-n",
        "infra",
        "-o",
        "json",
    ]);
    assert_eq!(
        schema["spec"]["schema"]["ProcTurboMode"]["allowable_values"],
        json!(["Enabled", "Disabled"])
    );
    assert_eq!(schema["spec"]["schema"]["NumCores"]["upper_bound"], 64);
    let hna = s.json(&[
        "get",
        "hostnetworkattachment",
        "storage-trunk",
        "-n",
        "infra",
        "-o",
        "json",
    ]);
    assert_eq!(hna["spec"]["allowedVLANs"], json!(["100", "200-210"]));
    assert_eq!(hna["spec"]["nativeVLAN"], 10);
    let switch = s.json(&["get", "bms", "tor-1", "-n", "infra", "-o", "json"]);
    assert_eq!(switch["spec"]["driver"], "generic-switch", "defaulted");
    let bes = s.json(&["get", "bes", "node-a-events", "-n", "infra", "-o", "json"]);
    assert_eq!(bes["spec"]["httpHeadersRef"]["name"], "event-headers");

    // Each says, in its status, that nothing acts on it.
    s.wait("every kept kind marked not acted on", || {
        KEPT.iter().all(|kind| {
            let items = s.items(kind, "infra");
            !items.is_empty()
                && items.iter().all(|i| {
                    not_acted_on(i)
                        .is_some_and(|c| c["status"] == "True" && c["observedGeneration"] == 1)
                })
        })
    });
    // A subscription for a host that does not exist says so in the Error column.
    s.wait("the subscription's error shown", || {
        s.ok(&["get", "bes", "-n", "infra"])
            .contains(r#"baremetal host "node-a" not found"#)
    });
    // A change to the spec is a new generation, marked again; the transition time stays.
    let get_hna = || {
        s.json(&[
            "get",
            "hostnetworkattachment",
            "storage-trunk",
            "-n",
            "infra",
            "-o",
            "json",
        ])
    };
    let before = not_acted_on(&get_hna()).cloned().unwrap();
    s.ok(&[
        "patch",
        "hostnetworkattachment",
        "storage-trunk",
        "-n",
        "infra",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"mtu":1500}}"#,
    ]);
    s.wait("the new generation marked", || {
        not_acted_on(&get_hna()).is_some_and(|c| c["observedGeneration"] == 2)
    });
    let after = get_hna();
    assert_eq!(
        not_acted_on(&after).unwrap()["lastTransitionTime"],
        before["lastTransitionTime"]
    );
    assert_eq!(after["spec"]["mtu"], 1500);
    // HostFirmwareSettings are acted on (read and validated): no such condition, and none of
    // the host's settings for a HostFirmwareSettings whose host does not exist.
    let hfs = s.json(&["get", "hfs", "node-a", "-n", "infra", "-o", "json"]);
    assert!(not_acted_on(&hfs).is_none(), "{hfs}");

    // Invalid objects are refused naming the field and value; nothing of them is stored.
    for (name, yaml, field) in [
        (
            "vlan",
            "apiVersion: metal3.io/v1alpha1\nkind: HostNetworkAttachment\nmetadata: {name: vlan}\n\
             spec: {mode: access, nativeVLAN: 5000}\n",
            "spec.nativeVLAN",
        ),
        (
            "mac",
            "apiVersion: metal3.io/v1alpha1\nkind: BareMetalSwitch\nmetadata: {name: mac}\n\
             spec: {address: 192.0.2.1, macAddress: not-a-mac, deviceType: netmiko_cisco_ios}\n",
            "spec.macAddress",
        ),
        (
            "format",
            "apiVersion: metal3.io/v1alpha1\nkind: PreprovisioningImage\nmetadata: {name: format}\n\
             spec: {acceptFormats: [vhd]}\n",
            "spec.acceptFormats[0]",
        ),
        (
            "policy",
            "apiVersion: metal3.io/v1alpha1\nkind: HostUpdatePolicy\nmetadata: {name: policy}\n\
             spec: {firmwareSettings: always}\n",
            "spec.firmwareSettings",
        ),
        (
            "type",
            "apiVersion: metal3.io/v1alpha1\nkind: FirmwareSchema\nmetadata: {name: type}\n\
             spec: {schema: {X: {attribute_type: Float}}}\n",
            "spec.schema.X.attribute_type",
        ),
        (
            "updates",
            "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareComponents\nmetadata: {name: updates}\n\
             spec: {}\n",
            "spec.updates",
        ),
    ] {
        let out = s.kubectl_stdin(&["apply", "-n", "infra", "-f", "-"], Some(yaml));
        let text = output_text(&out);
        assert!(!out.status.success(), "{name} accepted: {text}");
        assert!(text.contains(field), "{name}: names {field}: {text}");
    }
    for (kind, name) in [
        ("hostnetworkattachment", "vlan"),
        ("bms", "mac"),
        ("ppimg", "format"),
        ("hostupdatepolicy", "policy"),
        ("firmwareschema", "type"),
        ("hostfirmwarecomponents", "updates"),
    ] {
        let out = s.kubectl(&["get", kind, name, "-n", "infra"]);
        assert!(!out.status.success(), "{kind}/{name} was stored");
    }

    // An empty spec, as metal3's own samples write it, is accepted where metal3 accepts it
    // and read back as `{}`.
    let out = s.kubectl_stdin(
        &["apply", "-n", "infra", "-f", "-"],
        Some(
            "apiVersion: metal3.io/v1alpha1\nkind: HostDeployPolicy\nmetadata: {name: empty}\nspec:\n---\n\
             apiVersion: metal3.io/v1alpha1\nkind: HostUpdatePolicy\nmetadata: {name: empty}\nspec:\n",
        ),
    );
    assert!(out.status.success(), "{}", output_text(&out));
    let policy = s.json(&[
        "get",
        "hostupdatepolicy",
        "empty",
        "-n",
        "infra",
        "-o",
        "json",
    ]);
    assert_eq!(policy["spec"], json!({}));
}

fn condition(obj: &Value, t: &str) -> Option<(String, String)> {
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
fn patch_node(s: &Serve, kind: &str, body: &str) {
    s.ok(&[
        "patch", kind, "node-0", "-n", "infra", "--type", "merge", "-p", body,
    ]);
}

/// Reboots `infra/node-0` with `reboot.metal3.io` and waits until the emulator saw one more
/// boot, the annotation is gone and the host is on with nothing in progress.
fn reboot_node(s: &Serve, emu: &ferrometal_emulator::Emulator) {
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
async fn lab(
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

/// [`lab`] with the emulator's configuration (one system, 100 ms power changes, over it).
async fn lab_with(
    config: ferrometal_emulator::EmulatorConfig,
    host_spec: &str,
    objects: &str,
) -> (ferrometal_emulator::Emulator, tempfile::TempDir, Serve) {
    use ferrometal_emulator::{Emulator, EmulatorConfig};
    let emu = Emulator::start(
        EmulatorConfig {
            systems: 1,
            power_delay: std::time::Duration::from_millis(100),
            ..config
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_firmware_settings_show_the_bios_and_refuse_invalid_values_without_sending_them() {
    let (emu, _dir, s) = lab("", "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareSettings\nmetadata: {name: node-0, namespace: infra}\nspec: {settings: {ProcTurboMode: Enabled, NumCores: 8}}\n").await;
    let hfs = || s.json(&["get", "hfs", "node-0", "-n", "infra", "-o", "json"]);
    s.wait("the BIOS read into the status", || {
        hfs()["status"]["settings"]["ProcTurboMode"] == "Enabled"
    });
    let got = hfs();
    // metal3 keeps every value as a string, the serial number as the BMC reports it.
    assert_eq!(got["status"]["settings"]["NumCores"], "8");
    assert_eq!(got["status"]["settings"]["SerialNumber"], "FM00000000");
    assert!(
        got["status"]["settings"].get("SysPassword").is_none(),
        "{got}"
    );
    assert_eq!(condition(&got, "Valid").unwrap().0, "True", "{got}");
    // The wanted values are the BMC's: nothing to change.
    assert_eq!(
        condition(&got, "ChangeDetected").unwrap().0,
        "False",
        "{got}"
    );
    // The registry, as a FirmwareSchema the status names, with the host's vendor.
    let schema_name = got["status"]["schema"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(got["status"]["schema"]["namespace"], "infra");
    let schema = s.json(&[
        "get",
        "firmwareschema",
        &schema_name,
        "-n",
        "infra",
        "-o",
        "json",
    ]);
    assert_eq!(
        schema["spec"]["schema"]["ProcTurboMode"]["allowable_values"],
        serde_json::json!(["Enabled", "Disabled"])
    );
    assert_eq!(schema["spec"]["schema"]["SerialNumber"]["read_only"], true);
    assert_eq!(schema["spec"]["schema"]["NumCores"]["upper_bound"], 64);

    // Firmware versions: the BIOS's and the BMC's, first seen kept as initial; a component
    // metal3 refuses is invalid, and nothing is flashed.
    let hfc_yaml = "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareComponents\n\
                    metadata: {name: node-0, namespace: infra}\nspec: {updates: []}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(hfc_yaml));
    assert!(out.status.success(), "{}", output_text(&out));
    let hfc = || {
        s.json(&[
            "get",
            "hostfirmwarecomponents",
            "node-0",
            "-n",
            "infra",
            "-o",
            "json",
        ])
    };
    s.wait("the firmware versions read", || {
        hfc()["status"]["components"]
            .as_array()
            .is_some_and(|c| c.len() == 2)
    });
    let got = hfc();
    let components = got["status"]["components"].as_array().unwrap();
    let bios = components
        .iter()
        .find(|c| c["component"] == "bios")
        .unwrap();
    assert_eq!(bios["initialVersion"], "FM-BIOS-1.0.0");
    assert_eq!(bios["currentVersion"], "FM-BIOS-1.0.0");
    let bmc = components.iter().find(|c| c["component"] == "bmc").unwrap();
    assert_eq!(bmc["currentVersion"], "1.0.0-emulated");
    assert_eq!(condition(&got, "Valid").unwrap().0, "True");
    assert_eq!(condition(&got, "ChangeDetected").unwrap().0, "False");
    patch_node(
        &s,
        "hostfirmwarecomponents",
        r#"{"spec":{"updates":[{"component":"raid","url":"http://fw.example/r.bin"}]}}"#,
    );
    s.wait("the invalid component refused", || {
        condition(&hfc(), "Valid")
            .is_some_and(|(st, why)| st == "False" && why.contains("component raid is invalid"))
    });

    // An invalid value: Valid=False naming it; nothing reaches the BMC.
    patch_node(&s, "hfs", r#"{"spec":{"settings":{"NumCores":99}}}"#);
    s.wait("the invalid value refused", || {
        condition(&hfs(), "Valid").is_some_and(|(st, _)| st == "False")
    });
    let (_, why) = condition(&hfs(), "Valid").unwrap();
    assert_eq!(
        why,
        "Setting NumCores is invalid, integer 99 is above maximum value 64"
    );
    for action in emu.state(0).actions {
        assert!(
            !action.starts_with("PatchBios") && !action.starts_with("SimpleUpdate"),
            "sent to the BMC: {action}"
        );
    }
    // A change staged on the BMC is applied at the host's next boot and shows in the status at
    // the read its power change wakes.
    let bios_url = format!("{}/Bios/Settings", emu.system_url(0));
    let patched = reqwest::Client::new()
        .patch(&bios_url)
        .basic_auth("admin", Some("password"))
        .json(&serde_json::json!({"Attributes": {"ProcTurboMode": "Disabled"}}))
        .send()
        .await
        .unwrap();
    assert!(patched.status().is_success());
    patch_node(&s, "bmh", r#"{"spec":{"online":true}}"#);
    s.wait("the applied setting read back", || {
        hfs()["status"]["settings"]["ProcTurboMode"] == "Disabled"
    });
}

/// The BIOS value the emulator's Redfish service reports now.
async fn bios_value(emu: &ferrometal_emulator::Emulator, name: &str) -> Value {
    let bios: Value = reqwest::Client::new()
        .get(format!("{}/Bios", emu.system_url(0)))
        .basic_auth("admin", Some("password"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    bios["Attributes"][name].clone()
}

fn bios_patches(emu: &ferrometal_emulator::Emulator) -> Vec<String> {
    emu.state(0)
        .actions
        .into_iter()
        .filter(|a| a.starts_with("PatchBios"))
        .collect()
}

fn host_events(s: &Serve, host: &str) -> Vec<String> {
    s.items("events", "infra")
        .iter()
        .filter(|e| {
            e["involvedObject"]["name"] == host && e["involvedObject"]["kind"] == "BareMetalHost"
        })
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bios_settings_change_in_preparing_and_on_a_provisioned_hosts_reboot_only_when_a_policy_allows()
 {
    let (emu, dir, s) = lab("", "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareSettings\nmetadata: {name: node-0, namespace: infra}\nspec: {settings: {ProcTurboMode: Disabled}}\n").await;
    assert_eq!(bios_value(&emu, "ProcTurboMode").await, "Enabled");
    let hfs = || s.json(&["get", "hfs", "node-0", "-n", "infra", "-o", "json"]);
    let bmh = || s.json(&["get", "bmh", "node-0", "-n", "infra", "-o", "json"]);
    s.wait(
        "the setting applied and read back, the host available",
        || {
            let h = hfs();
            h["status"]["settings"]["ProcTurboMode"] == "Disabled"
                && condition(&h, "ChangeDetected").is_some_and(|(c, _)| c == "False")
                && bmh()["status"]["provisioning"]["state"] == "available"
        },
    );
    assert_eq!(bios_value(&emu, "ProcTurboMode").await, "Disabled");
    assert_eq!(
        bios_patches(&emu),
        ["PatchBios:ProcTurboMode"],
        "staged once, nothing else"
    );
    assert!(host_events(&s, "node-0").contains(&"FirmwareSettingsApplied".to_string()));
    // `online: false` holds after the boot that applied it.
    s.wait("the host off again", || {
        bmh()["status"]["poweredOn"] == false
    });

    // A provisioned host (here: externally provisioned) keeps its settings across a reboot
    // without a HostUpdatePolicy.
    patch_node(
        &s,
        "bmh",
        r#"{"spec":{"externallyProvisioned":true,"online":true}}"#,
    );
    s.wait("externally provisioned and on", || {
        let b = bmh();
        b["status"]["provisioning"]["state"] == "externally provisioned"
            && b["status"]["poweredOn"] == true
    });
    patch_node(&s, "hfs", r#"{"spec":{"settings":{"NumCores":16}}}"#);
    s.wait("the change detected", || {
        condition(&hfs(), "ChangeDetected")
            .is_some_and(|(c, why)| c == "True" && why.contains("NumCores"))
    });
    reboot_node(&s, &emu);
    assert_eq!(
        bios_value(&emu, "NumCores").await,
        8,
        "no policy: not changed"
    );
    assert_eq!(bios_patches(&emu).len(), 1);

    // With `firmwareSettings: onReboot`, the next reboot services the host: the setting is
    // staged, applied by the boot that brings the host back, read back, and the host stays
    // provisioned, booted from its own disk.
    let policy = "apiVersion: metal3.io/v1alpha1\nkind: HostUpdatePolicy\n\
                  metadata: {name: node-0, namespace: infra}\nspec: {firmwareSettings: onReboot}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(policy));
    assert!(out.status.success(), "{}", output_text(&out));
    reboot_node(&s, &emu);
    s.wait("the new value read back", || {
        hfs()["status"]["settings"]["NumCores"] == "16"
    });
    assert_eq!(bios_value(&emu, "NumCores").await, 16);
    assert_eq!(
        bios_patches(&emu),
        ["PatchBios:ProcTurboMode", "PatchBios:NumCores"]
    );
    let b = bmh();
    assert_eq!(
        b["status"]["provisioning"]["state"],
        "externally provisioned"
    );
    assert_eq!(emu.state(0).last_boot_source.as_deref(), Some("Default"));
    let events = host_events(&s, "node-0");
    for reason in [
        "ServicingStarted",
        "FirmwareSettingsApplied",
        "ServicingComplete",
    ] {
        assert!(events.contains(&reason.to_string()), "{reason}: {events:?}");
    }

    // kill -9 while servicing, once the setting is staged: the server that comes back on the
    // same store finishes the servicing; the setting is staged once and applied by one boot.
    patch_node(&s, "hfs", r#"{"spec":{"settings":{"NumCores":32}}}"#);
    s.wait("the change detected", || {
        condition(&hfs(), "ChangeDetected")
            .is_some_and(|(c, why)| c == "True" && why.contains("NumCores"))
    });
    // A slow BMC keeps the servicing going long enough to be cut short.
    emu.set_fault(
        0,
        Some(ferrometal_emulator::Fault::Latency(
            std::time::Duration::from_millis(700),
        )),
    );
    let patches = bios_patches(&emu).len();
    let boots = emu.state(0).boots;
    s.ok(&[
        "annotate",
        "bmh",
        "node-0",
        "-n",
        "infra",
        "reboot.metal3.io=",
    ]);
    let mut s = s;
    s.wait("the setting staged", || bios_patches(&emu).len() > patches);
    s.kill();
    emu.set_fault(0, None);
    let port = s.port;
    let s = serve(dir.path(), port, &["--power-poll-interval", "2"]);
    let bmh = || s.json(&["get", "bmh", "node-0", "-n", "infra", "-o", "json"]);
    assert_eq!(
        bmh()["status"]["operationalStatus"],
        "servicing",
        "the servicing the killed server started is on record"
    );
    s.wait("servicing finished by the new server", || {
        let b = bmh();
        b["status"]["operationalStatus"] == "OK" && b["status"]["poweredOn"] == true
    });
    assert_eq!(bios_value(&emu, "NumCores").await, 32);
    assert_eq!(
        bios_patches(&emu)[patches..],
        ["PatchBios:NumCores"],
        "staged once"
    );
    assert_eq!(emu.state(0).boots, boots + 1, "applied by one boot");
    assert_eq!(
        bmh()["status"]["provisioning"]["state"],
        "externally provisioned"
    );

    // A BMC that silently drops a setting at boot: an error naming it, not success; once the
    // BMC takes settings again, the retry makes the change.
    emu.set_fault(0, Some(ferrometal_emulator::Fault::DropBiosSettings));
    patch_node(
        &s,
        "bmh",
        r#"{"spec":{"externallyProvisioned":false,"online":false}}"#,
    );
    patch_node(
        &s,
        "hfs",
        r#"{"spec":{"settings":{"ProcTurboMode":"Enabled"}}}"#,
    );
    s.wait("the dropped setting reported", || {
        let b = bmh();
        b["status"]["errorType"] == "preparation error"
            && b["status"]["errorMessage"]
                .as_str()
                .is_some_and(|m| m.contains("did not apply") && m.contains("ProcTurboMode"))
    });
    assert_eq!(bios_value(&emu, "ProcTurboMode").await, "Disabled");
    emu.set_fault(0, None);
    s.wait("the retry applied it", || {
        let b = bmh();
        b["status"]["provisioning"]["state"] == "available"
            && b["status"]["errorType"].is_null()
            && hfs_of(&s)["status"]["settings"]["ProcTurboMode"] == "Enabled"
    });
}

fn hfs_of(s: &Serve) -> Value {
    s.json(&["get", "hfs", "node-0", "-n", "infra", "-o", "json"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firmware_updates_flash_one_component_at_a_time_and_a_failed_one_is_an_error() {
    let (emu, _dir, s) = lab("", "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareComponents\nmetadata: {name: node-0, namespace: infra}\nspec: {updates: [{component: bios, url: 'http://fw.example/bios-2.1.0.bin'}]}\n").await;
    let hfc = || {
        s.json(&[
            "get",
            "hostfirmwarecomponents",
            "node-0",
            "-n",
            "infra",
            "-o",
            "json",
        ])
    };
    let bmh = || s.json(&["get", "bmh", "node-0", "-n", "infra", "-o", "json"]);
    let component = |h: &Value, name: &str| {
        h["status"]["components"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["component"] == name).cloned())
            .unwrap_or_default()
    };
    let updates = || -> Vec<String> {
        emu.state(0)
            .actions
            .into_iter()
            .filter(|a| a.starts_with("SimpleUpdate"))
            .collect()
    };
    // In preparing: flashed, followed to the end, recorded, read back.
    s.wait("the BIOS flashed and recorded, the host available", || {
        let h = hfc();
        component(&h, "bios")["lastVersionFlashed"] == "bios-2.1.0"
            && condition(&h, "ChangeDetected").is_some_and(|(c, _)| c == "False")
            && bmh()["status"]["provisioning"]["state"] == "available"
    });
    let h = hfc();
    assert_eq!(component(&h, "bios")["initialVersion"], "FM-BIOS-1.0.0");
    assert_eq!(component(&h, "bios")["currentVersion"], "bios-2.1.0");
    assert_eq!(h["status"]["updates"], h["spec"]["updates"]);
    assert_eq!(updates(), ["SimpleUpdate:Bios:bios-2.1.0.bin"]);
    assert!(host_events(&s, "node-0").contains(&"FirmwareUpdated".to_string()));

    // An image the BMC refuses: a preparation error with the BMC's message; nothing else
    // changes, and the corrected URL goes through.
    patch_node(
        &s,
        "hostfirmwarecomponents",
        r#"{"spec":{"updates":[{"component":"bmc","url":"http://fw.example/bmc-corrupt.bin"}]}}"#,
    );
    s.wait("the failed update reported", || {
        let b = bmh();
        b["status"]["errorType"] == "preparation error"
            && b["status"]["errorMessage"]
                .as_str()
                .is_some_and(|m| m.contains("bmc-corrupt.bin failed verification"))
    });
    assert_eq!(component(&hfc(), "bmc")["currentVersion"], "1.0.0-emulated");
    assert_eq!(component(&hfc(), "bios")["currentVersion"], "bios-2.1.0");
    assert_eq!(bmh()["status"]["provisioning"]["state"], "preparing");
    patch_node(
        &s,
        "hostfirmwarecomponents",
        r#"{"spec":{"updates":[{"component":"bmc","url":"http://fw.example/bmc-2.0.bin"}]}}"#,
    );
    s.wait("the corrected update made, the host available", || {
        let b = bmh();
        component(&hfc(), "bmc")["currentVersion"] == "bmc-2.0"
            && b["status"]["provisioning"]["state"] == "available"
            && b["status"]
                .get("errorType")
                .is_none_or(|e| e.is_null() || e == "")
    });

    // A provisioned host: only with `firmwareUpdates: onReboot`, on its next reboot.
    patch_node(
        &s,
        "bmh",
        r#"{"spec":{"externallyProvisioned":true,"online":true}}"#,
    );
    s.wait("externally provisioned and on", || {
        let b = bmh();
        b["status"]["provisioning"]["state"] == "externally provisioned"
            && b["status"]["poweredOn"] == true
    });
    let policy = "apiVersion: metal3.io/v1alpha1\nkind: HostUpdatePolicy\n\
                  metadata: {name: node-0, namespace: infra}\nspec: {firmwareUpdates: onReboot}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(policy));
    assert!(out.status.success(), "{}", output_text(&out));
    patch_node(
        &s,
        "hostfirmwarecomponents",
        r#"{"spec":{"updates":[{"component":"bios","url":"http://fw.example/bios-3.0.bin"}]}}"#,
    );
    s.wait("the change detected", || {
        condition(&hfc(), "ChangeDetected").is_some_and(|(c, _)| c == "True")
    });
    let flashed = updates().len();
    assert_eq!(
        flashed,
        3,
        "nothing flashed before the reboot: {:?}",
        updates()
    );
    s.ok(&[
        "annotate",
        "bmh",
        "node-0",
        "-n",
        "infra",
        "reboot.metal3.io=",
    ]);
    s.wait("serviced on the reboot", || {
        let b = bmh();
        component(&hfc(), "bios")["currentVersion"] == "bios-3.0"
            && b["status"]["operationalStatus"] == "OK"
            && b["status"]["poweredOn"] == true
    });
    assert_eq!(
        bmh()["status"]["provisioning"]["state"],
        "externally provisioned"
    );
    assert_eq!(updates().len(), 4);
}

/// The volumes the emulator's controller has: (name, RAID type, drives).
async fn volumes(emu: &ferrometal_emulator::Emulator) -> Vec<(String, String, usize)> {
    let client = reqwest::Client::new();
    let get = |path: String| {
        client
            .get(path)
            .basic_auth("admin", Some("password"))
            .send()
    };
    let list: Value = get(format!("{}/Storage/1/Volumes", emu.system_url(0)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let origin = emu.system_url(0);
    let origin = &origin[..origin.find("/redfish").unwrap()];
    let mut out = Vec::new();
    for m in list["Members"].as_array().unwrap() {
        let v: Value = get(format!("{origin}{}", m["@odata.id"].as_str().unwrap()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        out.push((
            v["Name"].as_str().unwrap().to_string(),
            v["RAIDType"].as_str().unwrap().to_string(),
            v["Links"]["Drives"].as_array().unwrap().len(),
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardware_raid_volumes_are_built_in_preparing_changed_and_removed() {
    let (emu, _dir, s) = lab(
        ", raid: {hardwareRAIDVolumes: [{name: os, level: '1'}]}",
        "",
    )
    .await;
    let bmh = || s.json(&["get", "bmh", "node-0", "-n", "infra", "-o", "json"]);
    s.wait("the mirror built and recorded, the host available", || {
        let b = bmh();
        b["status"]["provisioning"]["state"] == "available"
            && b["status"]["provisioning"]["raid"]["hardwareRAIDVolumes"][0]["name"] == "os"
    });
    assert_eq!(volumes(&emu).await, [("os".into(), "RAID1".into(), 2)]);
    let b = bmh();
    let not_acted_on = b["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "ferrometal.io/FieldsNotActedOn");
    assert!(!not_acted_on, "hardware RAID is acted on: {b}");
    assert!(host_events(&s, "node-0").contains(&"RAIDConfigured".to_string()));

    // Another layout: the old volume goes, the new ones are built, on named drives.
    patch_node(
        &s,
        "bmh",
        r#"{"spec":{"raid":{"hardwareRAIDVolumes":[
            {"name":"scratch","level":"0","physicalDisks":["Disk0"],"controller":"1"},
            {"name":"logs","level":"0","numberOfPhysicalDisks":1}]}}}"#,
    );
    s.wait("the new layout built", || {
        let b = bmh();
        b["status"]["provisioning"]["state"] == "available"
            && b["status"]["provisioning"]["raid"]["hardwareRAIDVolumes"][0]["name"] == "scratch"
    });
    assert_eq!(
        volumes(&emu).await,
        [
            ("scratch".into(), "RAID0".into(), 1),
            ("logs".into(), "RAID0".into(), 1)
        ]
    );
    // A layout the drives cannot hold: a preparation error with the BMC's reason, nothing
    // built or lost but what had to go first.
    patch_node(
        &s,
        "bmh",
        r#"{"spec":{"raid":{"hardwareRAIDVolumes":[{"name":"big","level":"5"}]}}}"#,
    );
    s.wait("the impossible layout refused", || {
        let b = bmh();
        b["status"]["errorType"] == "preparation error"
            && b["status"]["errorMessage"]
                .as_str()
                .is_some_and(|m| m.contains("RAID5 needs at least 3 drives"))
    });
    // An empty list removes them all.
    patch_node(&s, "bmh", r#"{"spec":{"raid":{"hardwareRAIDVolumes":[]}}}"#);
    s.wait("the volumes removed", || {
        let b = bmh();
        b["status"]["provisioning"]["state"] == "available"
            && b["status"]["provisioning"]["raid"]["hardwareRAIDVolumes"]
                .as_array()
                .is_some_and(|v| v.is_empty())
    });
    assert!(volumes(&emu).await.is_empty());
    let actions: Vec<String> = emu
        .state(0)
        .actions
        .into_iter()
        .filter(|a| a.contains("Volume"))
        .collect();
    assert_eq!(
        actions,
        [
            "CreateVolume:os:RAID1",
            "DeleteVolume:os",
            "CreateVolume:scratch:RAID0",
            "CreateVolume:logs:RAID0",
            "DeleteVolume:scratch",
            "DeleteVolume:logs",
        ],
        "each volume built once and deleted once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_image_is_attached_at_the_next_boot_and_detached_when_deleted() {
    // The emulator records the ISO without fetching it.
    let config = ferrometal_emulator::EmulatorConfig {
        fetch_media: false,
        ..Default::default()
    };
    let (emu, _dir, s) = lab_with(config, ", externallyProvisioned: true, online: true", "").await;
    let bmh = || s.json(&["get", "bmh", "node-0", "-n", "infra", "-o", "json"]);
    s.wait("externally provisioned and on", || {
        let b = bmh();
        b["status"]["provisioning"]["state"] == "externally provisioned"
            && b["status"]["poweredOn"] == true
    });
    let image = "apiVersion: metal3.io/v1alpha1\nkind: DataImage\n\
                 metadata: {name: node-0, namespace: infra}\n\
                 spec: {url: 'http://images.example/config.iso'}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(image));
    assert!(out.status.success(), "{}", output_text(&out));
    let di = || s.json(&["get", "dataimage", "node-0", "-n", "infra", "-o", "json"]);
    s.wait("the DataImage tied to its host", || {
        let d = di();
        d["metadata"]["finalizers"][0] == "dataimage.metal3.io"
            && d["metadata"]["ownerReferences"][0]["name"] == "node-0"
    });
    assert!(
        !emu.state(0).virtual_media.inserted,
        "nothing attached before the next boot"
    );
    reboot_node(&s, &emu);
    s.wait("the attachment recorded", || {
        di()["status"]["attachedImage"]["url"] == "http://images.example/config.iso"
    });
    let media = emu.state(0).virtual_media;
    assert!(media.inserted);
    assert_eq!(
        media.image.as_deref(),
        Some("http://images.example/config.iso")
    );
    assert!(host_events(&s, "node-0").contains(&"DataImageAttached".to_string()));

    // Deleted: held until the next boot detaches it, then gone.
    s.ok(&[
        "delete",
        "dataimage",
        "node-0",
        "-n",
        "infra",
        "--wait=false",
    ]);
    s.wait("marked for deletion", || {
        di()["metadata"]["deletionTimestamp"].is_string()
    });
    assert!(
        emu.state(0).virtual_media.inserted,
        "detached only at the next boot"
    );
    reboot_node(&s, &emu);
    s.wait("the DataImage gone", || {
        !s.kubectl(&["get", "dataimage", "node-0", "-n", "infra"])
            .status
            .success()
    });
    assert!(!emu.state(0).virtual_media.inserted);
    assert_eq!(
        bmh()["status"]["provisioning"]["state"],
        "externally provisioned"
    );

    // A DataImage with no host of its name says so.
    let lonely = "apiVersion: metal3.io/v1alpha1\nkind: DataImage\n\
                  metadata: {name: nobody, namespace: infra}\nspec: {url: 'http://x/y.iso'}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(lonely));
    assert!(out.status.success(), "{}", output_text(&out));
    s.wait("no host, said so", || {
        condition(
            &s.json(&["get", "dataimage", "nobody", "-n", "infra", "-o", "json"]),
            "ferrometal.io/HostFound",
        )
        .is_some_and(|(st, why)| st == "False" && why.contains("no BareMetalHost named nobody"))
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bmc_event_subscription_is_made_on_the_bmc_and_removed_with_the_object() {
    let (emu, _dir, s) = lab("", "").await;
    s.wait("the host registered", || {
        s.json(&["get", "bmh", "node-0", "-n", "infra", "-o", "json"])["status"]["provisioning"]
            ["state"]
            == "available"
    });
    let subscription = "apiVersion: v1\nkind: Secret\nmetadata: {name: hook-headers, namespace: infra}\n\
                        stringData: {Authorization: 'Bearer s3cr3t-hook-token'}\n---\n\
                        apiVersion: metal3.io/v1alpha1\nkind: BMCEventSubscription\n\
                        metadata: {name: node-0-events, namespace: infra}\n\
                        spec: {hostName: node-0, destination: 'https://events.example/hook', \
                        context: rack-7, httpHeadersRef: {name: hook-headers, namespace: infra}}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(subscription));
    assert!(out.status.success(), "{}", output_text(&out));
    let bes = || s.json(&["get", "bes", "node-0-events", "-n", "infra", "-o", "json"]);
    s.wait("the subscription made", || {
        bes()["status"]["subscriptionID"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    });
    let made = emu.subscriptions();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].destination, "https://events.example/hook");
    assert_eq!(made[0].context, "rack-7");
    assert_eq!(
        made[0].headers,
        [(
            "Authorization".to_string(),
            "Bearer s3cr3t-hook-token".to_string()
        )]
    );
    let b = bes();
    assert_eq!(b["status"]["subscriptionID"], made[0].id.to_string());
    assert_eq!(
        b["metadata"]["finalizers"][0],
        "bmceventsubscription.metal3.io"
    );
    // The header's value is nowhere a reader of the object or its Events sees it.
    let shown = s.ok(&["get", "bes", "node-0-events", "-n", "infra", "-o", "yaml"])
        + &s.ok(&["get", "events", "-n", "infra", "-o", "yaml"]);
    assert!(!shown.contains("s3cr3t-hook-token"), "{shown}");

    // Deleted: removed from the BMC first, then gone.
    s.ok(&[
        "delete",
        "bes",
        "node-0-events",
        "-n",
        "infra",
        "--timeout=60s",
    ]);
    assert!(emu.subscriptions().is_empty());
    assert!(
        !s.kubectl(&["get", "bes", "node-0-events", "-n", "infra"])
            .status
            .success()
    );
}
