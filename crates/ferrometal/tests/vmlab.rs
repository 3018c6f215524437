//! Real (virtual) machines: QEMU VMs behind stock sushy-tools' libvirt driver, driven through
//! `ferrometal serve` and kubectl as a user would. A boot is proven by the line the guest's init
//! prints on that VM's serial console (it names the VM by its DMI UUID); power by libvirt's
//! own view of the domain.

mod serve_common;

use std::time::{Duration, Instant};

use ferrometal_test_support::peers::FileServer;
use ferrometal_test_support::vmlab::{Firmware, Lab, Vm, guest_images, publish};
use serde_json::Value;
use serve_common::{Serve, free_port, serve};

const LIVE_MARKER: &str = "FERROMETAL-LIVE-ISO booted";
/// Under software emulation a boot to the marker takes 7-13 s; leave room for a loaded machine.
const BOOT: Duration = Duration::from_secs(240);

fn flags() -> Vec<&'static str> {
    vec![
        "--power-poll-interval",
        "5",
        "--error-backoff",
        "2",
        "--bmc-timeout",
        "20",
    ]
}

fn host(s: &Serve, ns: &str, name: &str) -> Value {
    serde_json::from_str(&s.ok(&["get", "bmh", "-n", ns, name, "-o", "json"])).unwrap()
}

fn state(h: &Value) -> &str {
    h["status"]["provisioning"]["state"].as_str().unwrap_or("")
}

/// Polls `check` until it holds; fails with `what`, the serve log's tail and `detail()`.
fn wait_for(s: &Serve, what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = std::fs::read_to_string(s.dir.join("serve.log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    panic!(
        "{what}: not within {limit:?}\n--- serve log (newest first) ---\n{}",
        tail.join("\n")
    );
}

fn wait_state(s: &Serve, ns: &str, name: &str, want: &str, limit: Duration) {
    wait_for(s, &format!("{ns}/{name} {want}"), limit, || {
        state(&host(s, ns, name)) == want
    });
}

fn wait_domain(s: &Serve, lab: &Lab, vm: &Vm, want: &str) {
    wait_for(
        s,
        &format!("{} {want}", vm.name),
        Duration::from_secs(120),
        || lab.domain_state(vm) == want,
    );
}

fn live_boots(lab: &Lab, vm: &Vm) -> usize {
    lab.console(vm).matches(LIVE_MARKER).count()
}

/// Registration, inspection, a live ISO on the redfish provisioner, reboot, power off and on,
/// PowerCycle and ForceOff operations, a BMCJob and detach, on two UEFI VMs; the second VM is the control that must
/// stay untouched by what the first is asked.
/// `ferrometal bmc ... bios` against the lab's sushy-tools for `vm`.
fn bios_cli(lab: &Lab, vm: &Vm, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["bmc", "--address", &vm.bmc_address, "--username"])
        .arg(&lab.summary.sushy.username)
        .arg("--password-file")
        .arg(&lab.summary.sushy.password_file)
        .args(["-o", "json", "bios"])
        .args(args)
        .output()
        .unwrap()
}

/// A writable BIOS enumeration the VM has (ProcTurboMode first: nothing the lab's boots depend
/// on): its name, allowed values and current value.
fn writable_enumeration(lab: &Lab, vm: &Vm) -> (String, Vec<String>, String) {
    let out = bios_cli(lab, vm, &["show"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let attributes = shown["bios"]["attributes"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut registry = shown["bios"]["registry"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!attributes.is_empty() && !registry.is_empty(), "{shown}");
    registry.sort_by_key(|a| a["name"] != "ProcTurboMode");
    let (name, allowed) = registry
        .iter()
        .find_map(|a| {
            let values: Vec<String> = a["allowableValues"]
                .as_array()?
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            (a["readOnly"] != true
                && values.len() > 1
                && attributes.contains_key(a["name"].as_str()?))
            .then(|| (a["name"].as_str().unwrap().to_string(), values))
        })
        .expect("a writable enumeration");
    let current = attributes[&name].as_str().unwrap_or_default().to_string();
    (name, allowed, current)
}

/// `ferrometal bmc bios` against the lab's sushy-tools: the registry read, a bad value refused
/// before sending, a good one taken.
fn bios_through_the_cli(lab: &Lab, vm: &Vm) {
    let bios = |args: &[&str]| bios_cli(lab, vm, args);
    let (name, allowed, current) = writable_enumeration(lab, vm);
    let out = bios(&["set", &format!("{name}=NotAValue")]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown enumeration value"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = allowed.iter().find(|v| **v != current).unwrap().clone();
    let out = bios(&["set", &format!("{name}={other}")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&bios(&["show"]).stdout).unwrap();
    let seen = [
        &shown["bios"]["pending"][&name],
        &shown["bios"]["attributes"][&name],
    ];
    assert!(seen.iter().any(|v| **v == other.as_str()), "{shown}");
}

#[test]
fn uefi_vms_register_inspect_boot_a_live_iso_and_obey_power() {
    let lab = Lab::up(2, Firmware::Uefi, "default");
    let files = FileServer::start();
    publish(files.dir.path(), "live.iso", &guest_images().live_iso);
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &flags());
    let (a, b) = (lab.vm(0).clone(), lab.vm(1).clone());
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&lab.manifests()));

    // Registration and out-of-band inspection report what the VM really is.
    for vm in [&a, &b] {
        wait_state(
            &s,
            "default",
            &vm.name,
            "available",
            Duration::from_secs(180),
        );
    }
    let hw: Value =
        serde_json::from_str(&s.ok(&["get", "hardwaredata", &a.name, "-o", "json"])).unwrap();
    let hw = &hw["spec"]["hardware"];
    assert_eq!(hw["cpu"]["count"], 1, "{hw}");
    assert_eq!(hw["cpu"]["arch"], "x86_64", "{hw}");
    assert_eq!(hw["ramMebibytes"], 1024, "{hw}");
    let disks = hw["storage"].as_array().unwrap();
    assert_eq!(disks.len(), 1, "{hw}");
    assert_eq!(disks[0]["sizeBytes"], 2u64 << 30, "{hw}");
    let macs: Vec<&str> = hw["nics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["mac"].as_str())
        .collect();
    assert_eq!(macs, [a.boot_mac.as_str()], "{hw}");
    assert_eq!(lab.domain_state(&a), "shut off");

    // BIOS settings through sushy-tools' libvirt driver, which keeps them per domain.
    bios_through_the_cli(&lab, &b);

    // A live ISO: the VM boots it, that VM and no other.
    let iso = files.url("live.iso");
    s.ok(&[
        "patch",
        "bmh",
        &a.name,
        "--type",
        "merge",
        "-p",
        &format!(r#"{{"spec":{{"online":true,"image":{{"url":"{iso}","format":"live-iso"}}}}}}"#),
    ]);
    let line = lab.wait_console(&a, LIVE_MARKER, 0, BOOT);
    assert!(line.contains(&a.uuid), "booted on another VM: {line}");
    wait_state(
        &s,
        "default",
        &a.name,
        "provisioned",
        Duration::from_secs(120),
    );
    assert_eq!(lab.virtual_cd(&a)["Inserted"], true);
    assert_eq!(
        live_boots(&lab, &b),
        0,
        "the other VM booted: {}",
        lab.console(&b)
    );
    assert_eq!(lab.domain_state(&b), "shut off");

    // reboot.metal3.io: the console shows a second boot.
    let before = lab.console_len(&a);
    s.ok(&["annotate", "bmh", &a.name, "reboot.metal3.io="]);
    lab.wait_console(&a, LIVE_MARKER, before, BOOT);
    assert_eq!(live_boots(&lab, &a), 2);

    // Servicing: a BIOS setting of the provisioned VM changes only with a HostUpdatePolicy
    // `onReboot`, on a reboot; the VM boots the same live ISO again and stays provisioned.
    let (name, allowed, current) = writable_enumeration(&lab, &a);
    let other = allowed.iter().find(|v| **v != current).unwrap().clone();
    let firmware = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareSettings\n\
         metadata: {{name: {0}, namespace: default}}\nspec: {{settings: {{{name}: {other}}}}}\n---\n\
         apiVersion: metal3.io/v1alpha1\nkind: HostUpdatePolicy\n\
         metadata: {{name: {0}, namespace: default}}\nspec: {{firmwareSettings: onReboot}}\n",
        a.name
    );
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&firmware));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let hfs = || -> Value {
        serde_json::from_str(&s.ok(&["get", "hfs", &a.name, "-o", "json"])).unwrap()
    };
    wait_for(&s, "the change detected", Duration::from_secs(120), || {
        hfs()["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "ChangeDetected" && c["status"] == "True")
        })
    });
    assert_eq!(
        writable_enumeration(&lab, &a).2,
        current,
        "not changed before the reboot"
    );
    let before = lab.console_len(&a);
    s.ok(&["annotate", "bmh", &a.name, "reboot.metal3.io="]);
    lab.wait_console(&a, LIVE_MARKER, before, BOOT);
    wait_for(&s, "serviced, back on", Duration::from_secs(120), || {
        let h = host(&s, "default", &a.name);
        hfs()["status"]["settings"][&name] == other.as_str()
            && h["status"]["operationalStatus"] == "OK"
            && h["status"]["poweredOn"] == true
    });
    assert_eq!(writable_enumeration(&lab, &a).2, other);
    assert_eq!(
        host(&s, "default", &a.name)["status"]["provisioning"]["state"],
        "provisioned"
    );
    assert_eq!(live_boots(&lab, &a), 3, "one boot for the reboot");

    // A PowerCycle operation: a third boot.
    let before = lab.console_len(&a);
    s.ok(&[
        "annotate",
        "bmh",
        &a.name,
        "ferrometal.io/operation=PowerCycle",
    ]);
    lab.wait_console(&a, LIVE_MARKER, before, BOOT);

    // online: false switches the VM off, true back on (a fourth boot).
    s.ok(&[
        "patch",
        "bmh",
        &a.name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"online":false}}"#,
    ]);
    wait_domain(&s, &lab, &a, "shut off");
    wait_for(&s, "status says off", Duration::from_secs(60), || {
        host(&s, "default", &a.name)["status"]["poweredOn"] == false
    });
    let before = lab.console_len(&a);
    s.ok(&[
        "patch",
        "bmh",
        &a.name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"online":true}}"#,
    ]);
    lab.wait_console(&a, LIVE_MARKER, before, BOOT);
    wait_domain(&s, &lab, &a, "running");

    // A ForceOff operation: libvirt sees the VM switched off; `online` stays true, so the next
    // power observation switches it back on (a fifth boot).
    let before = lab.console_len(&a);
    s.ok(&[
        "annotate",
        "bmh",
        &a.name,
        "ferrometal.io/operation=ForceOff",
    ]);
    wait_domain(&s, &lab, &a, "shut off");
    lab.wait_console(&a, LIVE_MARKER, before, BOOT);
    wait_domain(&s, &lab, &a, "running");
    assert!(
        host(&s, "default", &a.name)["metadata"]["annotations"]
            .get("ferrometal.io/operation")
            .is_none()
    );

    // A BMCJob on the other VM: off, boot from CD once, on (its CD is empty: it is the boot
    // order that is checked, on libvirt's side, and the power).
    let job = format!(
        "apiVersion: ferrometal.io/v1alpha1\nkind: BMCJob\nmetadata: {{name: cd-once, namespace: default}}\nspec:\n  hostRef: {{name: {}}}\n  tasks:\n    - powerAction: \"off\"\n    - oneTimeBootDeviceAction: {{device: [cdrom], efiBoot: true}}\n    - powerAction: \"on\"\n  restoreDesiredState: false\n",
        b.name
    );
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&job));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_for(&s, "the BMCJob completed", Duration::from_secs(180), || {
        s.ok(&["get", "bmcjob", "cd-once", "-o", "jsonpath={.status.phase}"]) == "Completed"
    });
    assert_eq!(lab.domain_state(&b), "running");
    assert_eq!(lab.system(&b)["Boot"]["BootSourceOverrideTarget"], "Cd");

    // Detach: the VM keeps running and nothing more reaches its BMC, through delete too.
    s.ok(&[
        "annotate",
        "bmh",
        &a.name,
        "baremetalhost.metal3.io/detached=",
    ]);
    wait_for(&s, "detached", Duration::from_secs(60), || {
        host(&s, "default", &a.name)["status"]["operationalStatus"] == "detached"
    });
    let seen = lab.changes().len();
    s.ok(&[
        "patch",
        "bmh",
        &a.name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"online":false}}"#,
    ]);
    s.ok(&["delete", "bmh", &a.name, "--wait=true", "--timeout=60s"]);
    assert_eq!(
        lab.domain_state(&a),
        "running",
        "a detached host was touched"
    );
    assert_eq!(
        lab.changes()[seen..],
        [] as [String; 0],
        "requests reached a detached host's BMC"
    );

    // Deleting a host that is not detached powers nothing on and leaves the VM as it was.
    s.ok(&["delete", "bmh", &b.name, "--wait=true", "--timeout=120s"]);
    assert!(s.fails(&["get", "bmh", &b.name]).contains("NotFound"));
}

/// A legacy-BIOS VM (its BMC reports no boot mode) claimed by a tenant through a HostClaim:
/// the tenant's live ISO boots on it; releasing the claim ejects the media and the VM is off.
#[test]
fn a_tenant_claim_boots_a_live_iso_on_a_legacy_bios_vm() {
    let lab = Lab::up(1, Firmware::Legacy, "infra");
    let files = FileServer::start();
    publish(files.dir.path(), "live.iso", &guest_images().live_iso);
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &flags());
    let vm = lab.vm(0).clone();
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["create", "namespace", "tenant-a"]);
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&lab.manifests()));
    s.ok(&["label", "bmh", "-n", "infra", &vm.name, "pool=lab"]);
    s.lend("infra", "tenant-a");
    let alice = s.tenant("alice", "tenant-a");
    wait_state(&s, "infra", &vm.name, "available", Duration::from_secs(180));
    assert_eq!(host(&s, "infra", &vm.name)["spec"]["bootMode"], "legacy");

    let iso = files.url("live.iso");
    let claim = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: web}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: lab}}}}\n  image: {{url: \"{iso}\", format: live-iso}}\n"
    );
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&claim));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = lab.wait_console(&vm, LIVE_MARKER, 0, BOOT);
    assert!(line.contains(&vm.uuid), "{line}");
    assert!(line.contains("bios"), "not a BIOS boot: {line}");
    wait_for(&s, "the claim ready", Duration::from_secs(120), || {
        let c: Value = serde_json::from_slice(
            &s.kubectl_with(&alice, &["get", "hostclaim", "web", "-o", "json"], None)
                .stdout,
        )
        .unwrap_or_default();
        c["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    });
    // What the tenant reads names neither the BMC nor its credentials.
    let seen = String::from_utf8_lossy(
        &s.kubectl_with(&alice, &["get", "hostclaim", "web", "-o", "yaml"], None)
            .stdout,
    )
    .to_string();
    let bmc = format!("127.0.0.1:{}", lab.summary.sushy.port);
    assert!(!seen.contains(&bmc), "{seen}");
    assert!(!seen.contains("redfish"), "{seen}");
    assert!(!seen.contains(&lab.password()), "{seen}");
    assert!(!seen.contains("-bmc"), "{seen}");

    // Releasing the claim deprovisions: media ejected, the VM off.
    let o = s.kubectl_with(
        &alice,
        &["delete", "hostclaim", "web", "--timeout=180s"],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_state(&s, "infra", &vm.name, "available", Duration::from_secs(180));
    wait_domain(&s, &lab, &vm, "shut off");
    assert_eq!(lab.virtual_cd(&vm)["Inserted"], false);
}

/// The ironic provisioner: a BIOS setting changed in preparing through Ironic's manual cleaning
/// (its bios interface, no agent ramdisk), the same live ISO through Ironic's redfish virtual
/// media, a BIOS setting of the provisioned VM changed and its BIOS flashed through Ironic's
/// servicing on one reboot (with an `onReboot` policy), then deprovisioning.
#[test]
fn ironic_boots_the_live_iso_on_a_vm() {
    // Two VMs, one registered: with one system behind it, Ironic's firmware update leaves out
    // SimpleUpdate's Targets, which sushy-tools requires.
    let lab = Lab::up(2, Firmware::Uefi, "default");
    let files = FileServer::start();
    publish(files.dir.path(), "live.iso", &guest_images().live_iso);
    std::fs::write(files.dir.path().join("bios.bin"), b"a BIOS image").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut args = flags();
    args.extend(["--provisioner", "ironic"]);
    let s = serve(dir.path(), free_port(), &args);
    let vm = lab.vm(0).clone();
    // Ironic cleans and inspects in-band with its agent ramdisk, which this lab does not boot.
    let manifest = std::fs::read_to_string(&vm.manifest).unwrap().replace(
        "  online: false\n",
        "  online: false\n  inspectionMode: disabled\n  automatedCleaningMode: disabled\n",
    );
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&manifest));
    wait_state(
        &s,
        "default",
        &vm.name,
        "available",
        Duration::from_secs(240),
    );
    let hfs = || -> Value {
        serde_json::from_str(&s.ok(&["get", "hfs", &vm.name, "-o", "json"])).unwrap()
    };
    let events = || s.ok(&["get", "events", "-o", "jsonpath={.items[*].reason}"]);

    // Preparing: a wanted BIOS value takes the available host back to preparing, where Ironic
    // cleans it with its bios step; the VM's BIOS has the value after, and the host is
    // available again.
    let (name, allowed, current) = writable_enumeration(&lab, &vm);
    let other = allowed.iter().find(|v| **v != current).unwrap().clone();
    let settings = |value: &str| {
        format!(
            "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareSettings\n\
             metadata: {{name: {0}, namespace: default}}\nspec: {{settings: {{{name}: {value}}}}}\n",
            vm.name
        )
    };
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&settings(&other)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_for(
        &s,
        "the setting applied by Ironic in preparing",
        Duration::from_secs(300),
        || {
            hfs()["status"]["settings"][&name] == other.as_str()
                && state(&host(&s, "default", &vm.name)) == "available"
        },
    );
    assert_eq!(writable_enumeration(&lab, &vm).2, other);
    assert!(events().contains("FirmwareSettingsApplied"), "{}", events());

    let iso = files.url("live.iso");
    s.ok(&[
        "patch",
        "bmh",
        &vm.name,
        "--type",
        "merge",
        "-p",
        &format!(r#"{{"spec":{{"online":true,"image":{{"url":"{iso}","format":"live-iso"}}}}}}"#),
    ]);
    let line = lab.wait_console(&vm, LIVE_MARKER, 0, BOOT);
    assert!(line.contains(&vm.uuid), "{line}");
    assert!(line.contains("uefi"), "{line}");
    wait_state(
        &s,
        "default",
        &vm.name,
        "provisioned",
        Duration::from_secs(240),
    );

    // Servicing: with an `onReboot` policy, the provisioned host's reboot has Ironic run the
    // bios step and then the firmware update as service steps; the live ISO boots again and
    // the host stays provisioned.
    let bios_before = lab.system(&vm)["BiosVersion"].as_str().unwrap().to_string();
    let policy = format!(
        "---\napiVersion: metal3.io/v1alpha1\nkind: HostUpdatePolicy\n\
         metadata: {{name: {0}, namespace: default}}\n\
         spec: {{firmwareSettings: onReboot, firmwareUpdates: onReboot}}\n\
         ---\napiVersion: metal3.io/v1alpha1\nkind: HostFirmwareComponents\n\
         metadata: {{name: {0}, namespace: default}}\n\
         spec: {{updates: [{{component: bios, url: \"{1}\"}}]}}\n",
        vm.name,
        files.url("bios.bin")
    );
    let o = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&format!("{}{policy}", settings(&current))),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let hfc = || -> Value {
        serde_json::from_str(&s.ok(&["get", "hostfirmwarecomponents", &vm.name, "-o", "json"]))
            .unwrap()
    };
    let detected = |o: Value| {
        o["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "ChangeDetected" && c["status"] == "True")
        })
    };
    wait_for(&s, "the changes detected", Duration::from_secs(120), || {
        detected(hfs()) && detected(hfc())
    });
    let before = lab.console_len(&vm);
    s.ok(&["annotate", "bmh", &vm.name, "reboot.metal3.io="]);
    lab.wait_console(&vm, LIVE_MARKER, before, BOOT);
    wait_for(
        &s,
        "serviced by Ironic, back on",
        Duration::from_secs(600),
        || {
            let h = host(&s, "default", &vm.name);
            hfs()["status"]["settings"][&name] == current.as_str()
                && !hfc()["status"]["updates"]
                    .as_array()
                    .is_none_or(Vec::is_empty)
                && h["status"]["operationalStatus"] == "OK"
                && h["status"]["poweredOn"] == true
        },
    );
    assert_eq!(writable_enumeration(&lab, &vm).2, current);
    assert_eq!(state(&host(&s, "default", &vm.name)), "provisioned");
    assert!(events().contains("ServicingComplete"), "{}", events());
    // The image went through Ironic to the BMC, which flashed it: the VM's BIOS version moved,
    // and the host's HostFirmwareComponents read it back as the version flashed.
    let bios_after = lab.system(&vm)["BiosVersion"].as_str().unwrap().to_string();
    assert_ne!(bios_after, bios_before);
    wait_for(
        &s,
        "the flashed version read",
        Duration::from_secs(120),
        || {
            hfc()["status"]["components"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| {
                    c["component"] == "bios"
                        && c["currentVersion"] == bios_after.as_str()
                        && c["lastVersionFlashed"] == bios_after.as_str()
                })
        },
    );

    // Deprovisioning through Ironic ejects the media and powers the VM off.
    s.ok(&[
        "patch",
        "bmh",
        &vm.name,
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/spec/image"}]"#,
    ]);
    wait_state(
        &s,
        "default",
        &vm.name,
        "available",
        Duration::from_secs(240),
    );
    wait_domain(&s, &lab, &vm, "shut off");
}
