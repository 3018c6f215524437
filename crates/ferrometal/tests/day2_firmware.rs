//! Day 2 on a host ferrometal manages, through kubectl against `ferrometal serve` and checked
//! on the built-in emulator's Redfish service: BIOS settings (read, validated, applied in
//! preparing or by servicing), firmware updates, hardware RAID, and the firmware objects each
//! registered host gets, as metal3 makes them.

mod day2_common;
mod serve_common;

use day2_common::*;
use serde_json::{Value, json};

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
    let hfc = || hfc_of(&s);
    s.wait("the firmware versions read", || {
        hfc()["status"]["components"]
            .as_array()
            .is_some_and(|c| c.len() == 3)
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
    // The network adapter in the system's chassis, named as Ironic names it.
    let nic = components
        .iter()
        .find(|c| c["component"] == "nic:NIC.Slot.1")
        .unwrap();
    assert_eq!(nic["currentVersion"], "FM-NIC-20.0.1");
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
    let (emu, _dir, s) = lab("", "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareComponents\nmetadata: {name: node-0, namespace: infra}\nspec: {updates: [{component: bios, url: 'http://fw.example/bios-2.1.0.bin'}, {component: 'nic:NIC.Slot.1', url: 'http://fw.example/nic-22.5.bin'}]}\n").await;
    let hfc = || hfc_of(&s);
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
    s.wait(
        "the BIOS and the NIC flashed and recorded, the host available",
        || {
            let h = hfc();
            component(&h, "bios")["lastVersionFlashed"] == "bios-2.1.0"
                && component(&h, "nic:NIC.Slot.1")["lastVersionFlashed"] == "nic-22.5"
                && condition(&h, "ChangeDetected").is_some_and(|(c, _)| c == "False")
                && bmh()["status"]["provisioning"]["state"] == "available"
        },
    );
    let h = hfc();
    assert_eq!(component(&h, "bios")["initialVersion"], "FM-BIOS-1.0.0");
    assert_eq!(component(&h, "bios")["currentVersion"], "bios-2.1.0");
    assert_eq!(h["status"]["updates"], h["spec"]["updates"]);
    assert_eq!(
        component(&h, "nic:NIC.Slot.1")["initialVersion"],
        "FM-NIC-20.0.1"
    );
    assert_eq!(
        component(&h, "nic:NIC.Slot.1")["currentVersion"],
        "nic-22.5"
    );
    // One component at a time, in the order written; the adapter's own resource flashed.
    assert_eq!(
        updates(),
        [
            "SimpleUpdate:Bios:bios-2.1.0.bin",
            "SimpleUpdate:Nic:nic-22.5.bin"
        ]
    );
    assert!(host_events(&s, "node-0").contains(&"FirmwareUpdated".to_string()));
    // The object the user wrote (with kubectl's client-side apply) is adopted by its host, its
    // updates left as written (owning them would conflict with the user's field manager).
    s.wait("the user's object owned by its host", || {
        hfc()["metadata"]["ownerReferences"][0]["kind"] == "BareMetalHost"
    });

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
        4,
        "nothing flashed before the reboot: {:?}",
        updates()
    );
    // A setting staged on the BMC meanwhile, applied by the same reboot (as a flash may change
    // settings): the host's HostFirmwareSettings, which asks for nothing and so is otherwise
    // read only when made, is read again after the update.
    let hfs = || s.json(&["get", "hfs", "node-0", "-n", "infra", "-o", "json"]);
    assert_eq!(hfs()["status"]["settings"]["ProcTurboMode"], "Enabled");
    let staged = reqwest::Client::new()
        .patch(format!("{}/Bios/Settings", emu.system_url(0)))
        .basic_auth("admin", Some("password"))
        .json(&json!({"Attributes": {"ProcTurboMode": "Disabled"}}))
        .send()
        .await
        .unwrap();
    assert!(staged.status().is_success());
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
    assert_eq!(updates().len(), 5);
    s.wait("the settings read again after the update", || {
        let h = hfs();
        h["status"]["settings"]["ProcTurboMode"] == "Disabled"
            && condition(&h, "ferrometal.io/SettingsRead").is_some_and(|(c, _)| c == "True")
    });
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

/// The `ownerReferences` uids of a kubectl JSON object.
fn owner_uids(obj: &Value) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_registered_host_gets_its_firmware_objects_and_they_go_with_it() {
    let emu = emulator(2).await;
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        free_port(),
        &["--power-poll-interval", "2", "--firmware-schema-sweep", "1"],
    );
    s.ok(&["create", "namespace", "infra"]);
    let address = |i| {
        emu.system_url(i)
            .replace("http://", "redfish-virtualmedia+http://")
    };
    // node-0's HostFirmwareSettings is written by its user with the host; node-1 has none. A
    // FirmwareSchema written by hand (no ferrometal label) is never collected.
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: bmc, namespace: infra}}\n\
         stringData: {{username: admin, password: password}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareSettings\n\
         metadata: {{name: node-0, namespace: infra}}\nspec: {{settings: {{NumCores: 8}}}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: FirmwareSchema\n\
         metadata: {{name: schema-by-hand, namespace: infra}}\nspec: {{schema: {{}}}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\n\
         metadata: {{name: node-0, namespace: infra}}\n\
         spec: {{online: false, automatedCleaningMode: disabled, bmc: {{address: \"{}\", credentialsName: bmc}}}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\n\
         metadata: {{name: node-1, namespace: infra}}\n\
         spec: {{online: false, automatedCleaningMode: disabled, bmc: {{address: \"{}\", credentialsName: bmc}}}}\n",
        address(0),
        address(1)
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    assert!(out.status.success(), "{}", output_text(&out));
    let uid = |host: &str| {
        s.json(&["get", "bmh", host, "-n", "infra", "-o", "json"])["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let get = |kind: &str, name: &str| {
        let o = s.kubectl(&["get", kind, name, "-n", "infra", "-o", "json"]);
        serde_json::from_slice::<Value>(&o.stdout).unwrap_or(Value::Null)
    };

    // Both hosts register: each gets a HostFirmwareSettings and a HostFirmwareComponents
    // owned by it, read from its BMC; node-0's own object is adopted with its settings kept.
    let hosts = [("node-0", uid("node-0")), ("node-1", uid("node-1"))];
    s.wait("both hosts' firmware objects made, owned and read", || {
        hosts.iter().all(|(host, uid)| {
            let hfs = get("hfs", host);
            let hfc = get("hostfirmwarecomponents", host);
            owner_uids(&hfs) == [uid.clone()]
                && owner_uids(&hfc) == [uid.clone()]
                && hfs["status"]["settings"]["ProcTurboMode"].is_string()
                && hfs["status"]["schema"]["name"].is_string()
                && hfc["status"]["components"]
                    .as_array()
                    .is_some_and(|c| !c.is_empty())
        })
    });
    assert_eq!(
        get("hfs", "node-0")["spec"]["settings"],
        json!({"NumCores": 8})
    );
    assert_eq!(get("hfs", "node-1")["spec"]["settings"], json!({}));
    assert_eq!(
        get("hostfirmwarecomponents", "node-1")["spec"]["updates"],
        json!([])
    );
    // One registry, one schema, marked as ferrometal's.
    let schema = get("hfs", "node-0")["status"]["schema"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(get("hfs", "node-1")["status"]["schema"]["name"], schema);
    assert_eq!(
        get("firmwareschema", &schema)["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "ferrometal"
    );

    // node-1 deleted: its objects go with it (garbage collection of owned objects); the schema
    // node-0 still names stays. A labelled schema nothing names is collected: once it is gone,
    // the sweep has run after node-1's objects went, and kept the shared one.
    s.ok(&["delete", "bmh", "node-1", "-n", "infra", "--wait=false"]);
    s.wait("node-1's firmware objects gone with it", || {
        get("hfs", "node-1").is_null() && get("hostfirmwarecomponents", "node-1").is_null()
    });
    let orphan = "apiVersion: metal3.io/v1alpha1\nkind: FirmwareSchema\n\
                  metadata: {name: schema-orphan, namespace: infra, \
                  labels: {app.kubernetes.io/managed-by: ferrometal}}\nspec: {schema: {}}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(orphan));
    assert!(out.status.success(), "{}", output_text(&out));
    s.wait("the unnamed labelled schema collected", || {
        get("firmwareschema", "schema-orphan").is_null()
    });
    assert!(!get("firmwareschema", &schema).is_null(), "node-0 names it");

    // A user's deletion of a host's object: it is made again (metal3 makes it at registration;
    // ferrometal keeps it there), owned and read.
    s.ok(&["delete", "hfs", "node-0", "-n", "infra"]);
    s.wait("node-0's settings object made again", || {
        let hfs = get("hfs", "node-0");
        owner_uids(&hfs) == [hosts[0].1.clone()] && hfs["status"]["settings"].is_object()
    });

    // node-0 deleted too: nothing names the schema, so it goes; the hand-written one stays.
    s.ok(&["delete", "bmh", "node-0", "-n", "infra", "--wait=false"]);
    s.wait("the last host's objects and its schema gone", || {
        get("hfs", "node-0").is_null()
            && get("hostfirmwarecomponents", "node-0").is_null()
            && get("firmwareschema", &schema).is_null()
    });
    assert!(!get("firmwareschema", "schema-by-hand").is_null());
    // node-0's wanted settings were already the BMC's: adopting its object changed nothing.
    assert!(bios_patches(&emu).is_empty(), "{:?}", bios_patches(&emu));
}

/// More hung BMCs than the firmware controllers have workers do not hold up another host's
/// firmware objects: each read runs on its own task until the BMC timeout, so a healthy
/// host's settings are read while every hung read still waits (none has ended in its
/// `SettingsRead=False` yet). A read that held a worker would leave the healthy host's read
/// queued until the first hung ones timed out and recorded their failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_bmcs_do_not_hold_up_other_hosts_firmware_reads() {
    use ferrometal_emulator::Fault;
    // Six hung BMCs: more than the controller's four workers.
    let hung = || 1..=6_usize;
    let emu = emulator(7).await;
    let dir = tempfile::tempdir().unwrap();
    // No power polls: once registered, only the firmware reads reach the BMCs. A hung read
    // ends at the BMC timeout, long enough that the healthy host's read comes well before.
    let s = serve(
        dir.path(),
        free_port(),
        &["--power-poll-interval", "3600", "--bmc-timeout", "30"],
    );
    s.ok(&["create", "namespace", "infra"]);
    let mut yaml = "apiVersion: v1\nkind: Secret\nmetadata: {name: bmc, namespace: infra}\n\
                    stringData: {username: admin, password: password}\n"
        .to_string();
    for i in 0..7 {
        let address = emu
            .system_url(i)
            .replace("http://", "redfish-virtualmedia+http://");
        yaml.push_str(&format!(
            "---\napiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\n\
             metadata: {{name: node-{i}, namespace: infra}}\n\
             spec: {{online: false, automatedCleaningMode: disabled, bmc: {{address: \"{address}\", credentialsName: bmc}}}}\n"
        ));
    }
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    assert!(out.status.success(), "{}", output_text(&out));
    let hfs = |i: usize| {
        let o = s.kubectl(&[
            "get",
            "hfs",
            &format!("node-{i}"),
            "-n",
            "infra",
            "-o",
            "json",
        ]);
        serde_json::from_slice::<Value>(&o.stdout).unwrap_or(Value::Null)
    };
    // The generation of a settings object's last read, and whether it succeeded.
    let read_at = |obj: &Value| {
        obj["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "ferrometal.io/SettingsRead")
            .map(|c| (c["observedGeneration"].as_i64(), c["status"] == "True"))
    };
    s.wait("every host available and its settings read", || {
        (0..7).all(|i| {
            s.json(&[
                "get",
                "bmh",
                &format!("node-{i}"),
                "-n",
                "infra",
                "-o",
                "json",
            ])["status"]["provisioning"]["state"]
                == "available"
                && read_at(&hfs(i)).is_some_and(|(_, ok)| ok)
        })
    });
    let num_cores = hfs(0)["status"]["settings"]["NumCores"]
        .as_str()
        .unwrap()
        .to_string();
    // Asking each object for the value its BMC already has makes it read again and changes
    // nothing on the host.
    let ask = |i: usize| {
        let patch = format!(r#"{{"spec":{{"settings":{{"NumCores":{num_cores}}}}}}}"#);
        s.ok(&[
            "patch",
            "hfs",
            &format!("node-{i}"),
            "-n",
            "infra",
            "--type",
            "merge",
            "-p",
            &patch,
        ]);
        hfs(i)["metadata"]["generation"].as_i64()
    };

    let before = emu.counters();
    for i in hung() {
        emu.set_fault(i, Some(Fault::Hang));
    }
    let hung_at: Vec<Option<i64>> = hung().map(ask).collect();
    s.wait("a read parked on every hung BMC", || {
        let now = emu.counters();
        hung().all(|i| now.system(i).get > before.system(i).get)
    });
    let healthy_at = ask(0);
    s.wait("the healthy host's settings read again", || {
        read_at(&hfs(0)) == Some((healthy_at, true))
    });
    for (i, generation) in hung().zip(&hung_at) {
        let read = read_at(&hfs(i));
        assert!(
            read.is_some_and(|(g, _)| g != *generation),
            "node-{i}'s hung read ended before the healthy host's read: {read:?}"
        );
    }

    // The hung reads end at the BMC timeout, each with its own failure.
    s.wait("each hung read failed on its own", || {
        hung()
            .zip(&hung_at)
            .all(|(i, generation)| read_at(&hfs(i)) == Some((*generation, false)))
    });
    for i in hung() {
        emu.set_fault(i, None);
    }
}
