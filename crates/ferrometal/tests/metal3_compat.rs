//! metal3 wire compatibility through kubectl against `ferrometal serve`: a BareMetalHost using
//! every metal3 field round-trips unchanged through create, get, patch, update and server-side
//! apply; fields no provisioner acts on are reported, not dropped; metal3's webhook rules refuse
//! bad objects with metal3's messages; a metal3 status is accepted by the schema and restored
//! through the status annotation into a fresh server.

mod serve_common;

use std::time::Duration;

use serde_json::{Value, json};
use serve_common::*;

const BMC: &str = "redfish+http://192.0.2.10/redfish/v1/Systems/1";

fn start(dir: &std::path::Path) -> Serve {
    serve(
        dir,
        free_port(),
        &[
            "--provisioner",
            "fixture",
            "--power-poll-interval",
            "2",
            "--error-backoff",
            "1",
        ],
    )
}

fn full_host() -> Value {
    json!({
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "BareMetalHost",
        "metadata": {"name": "full", "namespace": "default"},
        "spec": {
            "taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule", "timeAdded": "2026-01-02T03:04:05Z"}],
            "bmc": {"address": BMC, "credentialsName": "bmc", "disableCertificateVerification": true},
            "raid": {"hardwareRAIDVolumes": [{
                "sizeGibibytes": 100, "level": "1+0", "name": "root", "rotational": false,
                "numberOfPhysicalDisks": 2, "controller": "RAID.Integrated.1-1",
                "physicalDisks": ["Disk.Bay.0", "Disk.Bay.1"]
            }]},
            "firmware": {"virtualizationEnabled": true, "simultaneousMultithreadingEnabled": false, "sriovEnabled": true},
            "hardwareProfile": "unknown",
            "rootDeviceHints": {
                "deviceName": "/dev/disk/by-path/pci-0000:00:17.0-ata-1", "hctl": "0:0:0:0",
                "model": "PERC H730", "vendor": "DELL", "serialNumber": "S1", "minSizeGigabytes": 100,
                "wwn": "0x5000c500", "wwnWithExtension": "0x5000c500x1", "wwnVendorExtension": "0x1",
                "rotational": false
            },
            "bootMode": "UEFI",
            "bootMACAddress": "52:54:00:aa:bb:cc",
            "online": true,
            "consumerRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3Machine", "name": "m-0", "namespace": "default"},
            "image": {
                "url": "http://images.example/os.qcow2",
                "checksum": "http://images.example/os.qcow2.sha256sum",
                "checksumType": "sha256", "format": "qcow2", "ociAuthSecretName": "registry"
            },
            "userData": {"name": "ud", "namespace": "default"},
            "preprovisioningNetworkDataName": "ppnd",
            "networkData": {"name": "nd"},
            "metaData": {"name": "md"},
            "description": "every metal3 field",
            "externallyProvisioned": false,
            "automatedCleaningMode": "metadata",
            "customDeploy": {"method": "install_great_os"},
            "architecture": "x86_64",
            "disablePowerOff": false,
            "inspectionMode": "agent",
            "networkInterfaces": [
                {"name": "eno1", "switchPort": {"switchID": "aa:bb:cc:dd:ee:ff", "portID": "Ethernet1/1"}},
                {"macAddress": "52:54:00:aa:bb:cc", "hostNetworkAttachment": {"name": "prov", "namespace": "default"}}
            ]
        }
    })
}

/// A status as metal3 writes it, including what only metal3 sets (servicing, RAID applied,
/// firmware, the failed-attempt count, LLDP and VLANs from inspection).
fn metal3_status() -> Value {
    json!({
        "operationalStatus": "OK",
        "errorMessage": "",
        "errorCount": 0,
        "provisioningFailCount": 2,
        "lastAttemptedImage": {"url": "http://images.example/os.qcow2", "checksum": "abc", "checksumType": "sha256", "format": "qcow2"},
        "lastUpdated": "2026-03-04T05:06:07Z",
        "hardwareProfile": "unknown",
        "poweredOn": true,
        "hardware": {
            "systemVendor": {"manufacturer": "Dell Inc.", "productName": "PowerEdge R650", "serialNumber": "ABC123"},
            "firmware": {"bios": {"date": "2025-01-01", "vendor": "Dell Inc.", "version": "1.2.3"}},
            "ramMebibytes": 262144,
            "nics": [{
                "name": "eno1", "model": "0x8086 0x1572", "mac": "52:54:00:aa:bb:cc", "ip": "192.0.2.50",
                "speedGbps": 25, "vlans": [{"id": 100, "name": "prov"}], "vlanId": 100, "pxe": true,
                "lldp": {"switchID": "aa:bb:cc:dd:ee:ff", "portID": "Ethernet1/1", "switchSystemName": "tor-1"},
                "pciAddress": "0000:3b:00.0"
            }],
            "storage": [{
                "name": "/dev/sda", "alternateNames": ["/dev/disk/by-path/pci-0000:00:17.0-ata-1"],
                "rotational": false, "type": "SSD", "sizeBytes": 960_197_124_096_i64, "vendor": "ATA",
                "model": "SSD 960", "serialNumber": "S1", "wwn": "0x5000c500",
                "wwnVendorExtension": "0x1", "wwnWithExtension": "0x5000c500x1", "hctl": "0:0:0:0"
            }],
            "cpu": {"arch": "x86_64", "model": "Xeon", "clockMegahertz": 2400.5, "flags": ["vmx"], "count": 64},
            "hostname": "node-0"
        },
        "provisioning": {
            "state": "provisioned",
            "ID": "0b4fbf4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f",
            "image": {"url": "http://images.example/os.qcow2", "checksum": "abc", "checksumType": "sha256", "format": "qcow2"},
            "rootDeviceHints": {"deviceName": "/dev/sda"},
            "bootMode": "UEFI",
            "raid": {"hardwareRAIDVolumes": [{"level": "1", "name": "root", "sizeGibibytes": 100}]},
            "firmware": {"sriovEnabled": true}
        },
        "goodCredentials": {"credentials": {"name": "bmc", "namespace": "default"}, "credentialsVersion": "1"},
        "triedCredentials": {"credentials": {"name": "bmc", "namespace": "default"}, "credentialsVersion": "1"},
        "operationHistory": {
            "register": {"start": "2026-03-04T05:00:00Z", "end": "2026-03-04T05:00:10Z"},
            "inspect": {"start": "2026-03-04T05:00:10Z", "end": "2026-03-04T05:02:00Z"},
            "provision": {"start": "2026-03-04T05:03:00Z", "end": "2026-03-04T05:06:00Z"},
            "deprovision": {}
        },
        "conditions": [
            {"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "", "lastTransitionTime": "2026-03-04T05:06:00Z"},
            {"type": "Ready", "status": "True", "reason": "Provisioned", "message": "", "lastTransitionTime": "2026-03-04T05:06:00Z"}
        ]
    })
}

/// A merge patch of the status subresource (kubectl patch --subresource status).
fn try_patch_status(s: &Serve, name: &str, patch: &str) -> std::process::Output {
    s.kubectl(&[
        "patch",
        "bmh",
        name,
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        patch,
    ])
}

fn patch_status(s: &Serve, name: &str, patch: &str) {
    succeeded(&try_patch_status(s, name, patch));
}

fn get(s: &Serve, name: &str) -> Value {
    serde_json::from_str(&s.ok(&["get", "bmh", name, "-o", "json"])).unwrap()
}

fn apply(s: &Serve, args: &[&str], doc: &Value) -> std::process::Output {
    s.kubectl_stdin(args, Some(&doc.to_string()))
}

fn succeeded(o: &std::process::Output) {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn wait(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..600 {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

fn secrets(s: &Serve) {
    let yaml = "apiVersion: v1\nkind: Secret\nmetadata: {name: bmc}\nstringData: {username: admin, password: pw}\n---\n\
                apiVersion: v1\nkind: Secret\nmetadata: {name: ud}\nstringData: {userData: '#cloud-config'}\n---\n\
                apiVersion: v1\nkind: Secret\nmetadata: {name: nd}\nstringData: {networkData: '{}'}\n---\n\
                apiVersion: v1\nkind: Secret\nmetadata: {name: md}\nstringData: {metaData: '{}'}\n";
    succeeded(&s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml)));
}

#[test]
fn every_metal3_field_round_trips_and_what_is_not_acted_on_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path());
    secrets(&s);
    let input = full_host();
    let want = input["spec"].clone();

    succeeded(&apply(&s, &["create", "-f", "-"], &input));
    assert_eq!(get(&s, "full")["spec"], want, "create/get");

    s.ok(&[
        "patch",
        "bmh",
        "full",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"description":"patched"}}"#,
    ]);
    let mut patched = want.clone();
    patched["description"] = json!("patched");
    assert_eq!(get(&s, "full")["spec"], patched, "merge patch");

    // Update with the object as read (kubectl replace = PUT).
    let current = get(&s, "full");
    succeeded(&apply(&s, &["replace", "-f", "-"], &current));
    assert_eq!(get(&s, "full")["spec"], patched, "update");

    // Server-side apply of the original brings the description back and nothing else changes.
    succeeded(&apply(
        &s,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        &input,
    ));
    assert_eq!(get(&s, "full")["spec"], want, "server-side apply");

    // The controller works the host and names what it keeps without acting on it.
    wait("the FieldsNotActedOn condition", || {
        get(&s, "full")["status"]["conditions"]
            .as_array()
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "ferrometal.io/FieldsNotActedOn" && c["status"] == "True")
            })
    });
    let host = get(&s, "full");
    let condition = host["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ferrometal.io/FieldsNotActedOn")
        .unwrap()
        .clone();
    let message = condition["message"].as_str().unwrap();
    for field in [
        "spec.firmware",
        "spec.taints",
        "spec.networkInterfaces",
        "spec.image.ociAuthSecretName",
    ] {
        assert!(message.contains(field), "{field} not reported: {message}");
    }
    // Hardware RAID volumes are built (in preparing), so not reported.
    assert!(!message.contains("spec.raid"), "{message}");
    assert_eq!(host["spec"], want, "the controller changed no spec field");
    let events = s.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=FieldsNotActedOn",
        "-o",
        "json",
    ]);
    assert!(events.contains("spec.taints"), "a Warning Event: {events}");
    // metal3's six conditions are all there.
    for t in [
        "Manageable",
        "AvailableForProvisioning",
        "Provisioned",
        "Ready",
        "Progressing",
        "Healthy",
    ] {
        assert!(
            host["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == t),
            "condition {t} missing: {}",
            host["status"]["conditions"]
        );
    }

    // The status ferrometal wrote is accepted unchanged by the schema (written back as is).
    let ours = host["status"].clone();
    let mut paused = full_host();
    paused["metadata"] =
        json!({"name": "paused", "annotations": {"baremetalhost.metal3.io/paused": ""}});
    succeeded(&apply(&s, &["create", "-f", "-"], &paused));
    let patch = json!({"status": ours}).to_string();
    patch_status(&s, "paused", &patch);
    assert_eq!(get(&s, "paused")["status"], ours, "ferrometal's status");

    // So is metal3's, with the fields only metal3 sets (on a host with no status yet).
    paused["metadata"]["name"] = json!("paused-m3");
    succeeded(&apply(&s, &["create", "-f", "-"], &paused));
    let theirs = metal3_status();
    let patch = json!({"status": theirs}).to_string();
    patch_status(&s, "paused-m3", &patch);
    assert_eq!(get(&s, "paused-m3")["status"], theirs, "metal3's status");
    // metal3's own enums: servicing and servicing error.
    patch_status(
        &s,
        "paused",
        r#"{"status":{"operationalStatus":"servicing","errorType":"servicing error"}}"#,
    );
    let o = try_patch_status(&s, "paused", r#"{"status":{"errorType":"detach error"}}"#);
    assert!(!o.status.success(), "metal3's schema has no detach error");
}

#[test]
fn a_metal3_status_is_restored_into_a_fresh_server() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path());
    secrets(&s);
    let theirs = metal3_status();
    let mut host = full_host();
    host["metadata"] = json!({
        "name": "moved",
        "annotations": {"baremetalhost.metal3.io/status": theirs.to_string()}
    });
    host["spec"]["image"] = theirs["provisioning"]["image"].clone();
    host["spec"]["customDeploy"] = Value::Null;
    host["spec"]["rootDeviceHints"] = theirs["provisioning"]["rootDeviceHints"].clone();
    succeeded(&apply(&s, &["create", "-f", "-"], &host));
    wait("the status restored", || {
        let h = get(&s, "moved");
        h["metadata"]["annotations"]
            .get("baremetalhost.metal3.io/status")
            .is_none()
            && h["status"]["provisioning"]["state"] == "provisioned"
    });
    let restored = get(&s, "moved")["status"].clone();
    assert_eq!(restored["provisioning"]["ID"], theirs["provisioning"]["ID"]);
    for key in ["hardware", "lastAttemptedImage", "operationHistory"] {
        assert_eq!(restored[key], theirs[key], "status.{key}");
    }
    for key in ["raid", "firmware", "image", "bootMode"] {
        assert_eq!(
            restored["provisioning"][key], theirs["provisioning"][key],
            "status.provisioning.{key}"
        );
    }
    // Adopted, not provisioned again: the failed attempts metal3 counted are kept.
    assert_eq!(restored["provisioningFailCount"], 2);
}

/// Each metal3 webhook rule, with metal3's message; nothing is stored.
#[test]
fn metal3_validation_rules_refuse_with_metal3_messages() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path());
    let base = |name: &str| {
        json!({
            "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": name},
            "spec": {"online": false, "bmc": {"address": BMC, "credentialsName": "bmc"}}
        })
    };
    let with = |name: &str, spec: Value| {
        let mut h = base(name);
        for (k, v) in spec.as_object().unwrap() {
            h["spec"][k] = v.clone();
        }
        h
    };
    let annotated = |name: &str, key: &str, value: &str| {
        let mut h = base(name);
        h["metadata"]["annotations"] = json!({ key: value });
        h
    };
    let cases: Vec<(Value, &str)> = vec![
        (
            base("0b4fbf4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f"),
            "BareMetalHost resource name cannot be a UUID",
        ),
        (
            with(
                "secure-ipmi",
                json!({"bootMode": "UEFISecureBoot", "bmc": {"address": "ipmi://192.0.2.1", "credentialsName": "bmc"}}),
            ),
            "BMC driver ipmi does not support secure boot",
        ),
        (
            with(
                "raid-ipmi",
                json!({"bmc": {"address": "192.0.2.1", "credentialsName": "bmc"},
                       "raid": {"hardwareRAIDVolumes": [{"level": "1"}]}}),
            ),
            "BMC driver ipmi does not support configuring RAID",
        ),
        (
            with(
                "libvirt",
                json!({"bmc": {"address": "libvirt://192.0.2.1/", "credentialsName": "bmc"}}),
            ),
            "BMC driver libvirt requires a BootMACAddress value",
        ),
        (
            with("hint", json!({"rootDeviceHints": {"deviceName": "sda"}})),
            r#"device name of root device hint must be a /dev/ path, not "sda""#,
        ),
        (
            with(
                "hint-path",
                json!({"rootDeviceHints": {"deviceName": "/dev/disk/by-id/wwn-1"}}),
            ),
            "device name of root device hint must be path in /dev/ or /dev/disk/by-path/",
        ),
        (
            with(
                "file-url",
                json!({"image": {"url": "file:///os.img", "checksum": "abc"}}),
            ),
            "image URL file:///os.img is invalid",
        ),
        (
            with(
                "oci-sum",
                json!({"image": {"url": "oci://registry.example/os:1", "checksum": "abc"}}),
            ),
            "spec.image.checksum must be empty for OCI images (oci:// images have embedded checksums)",
        ),
        (
            with(
                "no-sum",
                json!({"image": {"url": "http://images.example/os.qcow2", "format": "qcow2"}}),
            ),
            "checksum is required for normal images",
        ),
        (
            with(
                "both-raid",
                json!({"raid": {"hardwareRAIDVolumes": [{"level": "1"}],
                                "softwareRAIDVolumes": [{"level": "1"}]}}),
            ),
            "hardwareRAIDVolumes and softwareRAIDVolumes can not be set at the same time",
        ),
        (
            with(
                "no-controller",
                json!({"raid": {"hardwareRAIDVolumes": [{"level": "1", "physicalDisks": ["a", "b"]}]}}),
            ),
            "'physicalDisks' specified without 'controller' in hardware RAID volume",
        ),
        (
            with(
                "disk-count",
                json!({"raid": {"hardwareRAIDVolumes": [{"level": "1", "controller": "c",
                        "numberOfPhysicalDisks": 3, "physicalDisks": ["a", "b"]}]}}),
            ),
            "the 'numberOfPhysicalDisks'[3] and number of 'physicalDisks'[2] is not same",
        ),
        (
            with(
                "two-roots",
                json!({"raid": {"softwareRAIDVolumes": [{"level": "1", "rootVolume": true},
                                                       {"level": "1", "rootVolume": true}]}}),
            ),
            "softwareRAIDVolumes[*].rootVolume can only be set once",
        ),
        (
            with(
                "root-raid0",
                json!({"raid": {"softwareRAIDVolumes": [{"level": "0", "rootVolume": true}]}}),
            ),
            "softwareRAIDVolumes with rootVolume set must use RAID level 1",
        ),
        (
            with(
                "root-and-hints",
                json!({"rootDeviceHints": {"deviceName": "/dev/sda"},
                       "raid": {"softwareRAIDVolumes": [{"level": "1", "rootVolume": true}]}}),
            ),
            "softwareRAIDVolumes[*].rootVolume and rootDeviceHints can not be set at the same time",
        ),
        (
            with(
                "nic-none",
                json!({"networkInterfaces": [{"switchPort": {"switchID": "aa:bb:cc:dd:ee:ff", "portID": "1"}}]}),
            ),
            "must specify either name or macAddress",
        ),
        (
            with(
                "nic-both",
                json!({"networkInterfaces": [{"name": "eno1", "macAddress": "52:54:00:aa:bb:cc"}]}),
            ),
            "name and macAddress are mutually exclusive",
        ),
        (
            with("power", json!({"disablePowerOff": true})),
            "node can't simultaneously have online set to false and have power off disabled",
        ),
        (
            with(
                "raid-level",
                json!({"raid": {"hardwareRAIDVolumes": [{"level": "7"}]}}),
            ),
            "spec.raid.hardwareRAIDVolumes[0].level",
        ),
        // Server checks: what CEL cannot see (annotations, the namespace).
        (
            annotated(
                "status-json",
                "baremetalhost.metal3.io/status",
                "{\"poweredOn\":",
            ),
            "error decoding status annotation",
        ),
        (
            annotated(
                "status-enum",
                "baremetalhost.metal3.io/status",
                r#"{"operationalStatus":"broken"}"#,
            ),
            "invalid operationalStatus 'broken' in the baremetalhost.metal3.io/status annotation",
        ),
        (
            annotated(
                "status-field",
                "baremetalhost.metal3.io/status",
                r#"{"provisioning":{"state":"available","colour":"red"}}"#,
            ),
            r#"error decoding status annotation: json: unknown field "provisioning.colour""#,
        ),
        (
            annotated(
                "hwd-inspecting",
                "inspect.metal3.io/hardwaredetails",
                r#"{"cpu":{"count":2}}"#,
            ),
            "when hardware details are provided, inspection must be disabled",
        ),
        (
            annotated("reboot-json", "reboot.metal3.io/capm3", "soft"),
            "failed to unmarshal the data from the reboot.metal3.io annotation",
        ),
        (
            annotated("reboot-mode", "reboot.metal3.io", r#"{"mode":"gentle"}"#),
            "invalid mode in the reboot.metal3.io annotation",
        ),
        (
            annotated(
                "detached-json",
                "baremetalhost.metal3.io/detached",
                r#"{"deleteAction":"soon"}"#,
            ),
            "failed to unmarshal the data from the baremetalhost.metal3.io/detached annotation",
        ),
        (
            annotated("inspect-value", "inspect.metal3.io", "again"),
            "invalid value for the inspect.metal3.io annotation",
        ),
        (
            {
                let mut h = annotated("inspect-contradicts", "inspect.metal3.io", "disabled");
                h["spec"]["inspectionMode"] = json!("agent");
                h
            },
            "inspect.metal3.io annotation and inspectionMode field have contradicting values",
        ),
        (
            with(
                "cross-ns",
                json!({"userData": {"name": "cloud-init", "namespace": "kube-system"}}),
            ),
            "userData: cross-namespace Secret references are not allowed",
        ),
        (
            // A misspelled scheme: refused when written, with the message the host's status
            // gave once the controller met it.
            with(
                "misspelled",
                json!({"bmc": {"address": "redfsh+http://192.0.2.1/redfish/v1/Systems/1", "credentialsName": "bmc"}}),
            ),
            "BMC address \"redfsh+http://192.0.2.1/redfish/v1/Systems/1\" has unknown scheme \"redfsh+http\"; supported: ",
        ),
        (
            // metal3's VirtualBMC scheme is IPMI; its privilege level is one IPMI has.
            with(
                "vbmc-level",
                json!({"bootMACAddress": "52:54:00:aa:bb:01",
                       "bmc": {"address": "libvirt://192.0.2.1:6233/?privilegelevel=ROOT", "credentialsName": "bmc"}}),
            ),
            "privilegelevel \"ROOT\" is not one of ADMINISTRATOR, OPERATOR, USER, CALLBACK",
        ),
    ];
    for (host, message) in &cases {
        let o = apply(&s, &["create", "-f", "-"], host);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success(),
            "{} was accepted",
            host["metadata"]["name"]
        );
        assert!(
            err.contains(message),
            "{}: want {message:?} in {err}",
            host["metadata"]["name"]
        );
    }
    let listed = s.ok(&["get", "bmh", "-o", "name"]);
    assert!(listed.trim().is_empty(), "nothing stored: {listed}");

    // Update rules: immutable once set, with metal3's messages; the stored object is intact.
    let host = with("h", json!({"bootMACAddress": "52:54:00:aa:bb:cc"}));
    succeeded(&apply(&s, &["create", "-f", "-"], &host));
    let before = get(&s, "h")["spec"].clone();
    let err = s.fails(&[
        "patch",
        "bmh",
        "h",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"bootMACAddress":"52:54:00:00:00:01"}}"#,
    ]);
    assert!(
        err.contains("bootMACAddress can not be changed once it is set"),
        "{err}"
    );
    // A provisioned host (status set directly; the host is paused so nothing else writes it).
    s.ok(&["annotate", "bmh", "h", "baremetalhost.metal3.io/paused="]);
    patch_status(
        &s,
        "h",
        r#"{"status":{"operationalStatus":"OK","errorMessage":"","poweredOn":true,"provisioning":{"state":"provisioned","ID":"x"}}}"#,
    );
    let err = s.fails(&[
        "patch",
        "bmh",
        "h",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"externallyProvisioned":true}}"#,
    ]);
    assert!(
        err.contains("externallyProvisioned can only be enabled when in Available state, currently in provisioned"),
        "{err}"
    );
    let err = s.fails(&[
        "patch",
        "bmh",
        "h",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"bmc":{"address":"redfish+http://192.0.2.99/redfish/v1/Systems/1"}}}"#,
    ]);
    assert!(
        err.contains("BMC address can not be changed if the BMH is not in the Registering state, or if the BMH is not detached"),
        "{err}"
    );
    // Annotations are checked on update too (kubectl annotate), and nothing is stored.
    let err = s.fails(&["annotate", "bmh", "h", "reboot.metal3.io=now"]);
    assert!(
        err.contains("failed to unmarshal the data from the reboot.metal3.io annotation"),
        "{err}"
    );
    let stored = get(&s, "h");
    assert!(
        stored["metadata"]["annotations"]
            .get("reboot.metal3.io")
            .is_none()
    );
    assert_eq!(stored["spec"], before, "nothing changed");
}
