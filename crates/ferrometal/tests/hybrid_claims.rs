//! HostClaims over two kinds of compute: a libvirt HostClass gives each claim a QEMU VM of its
//! own on the lab's libvirt; a claim without a class gets a BareMetalHost (a lab VM behind
//! sushy-tools) as before. Boots are proven by the guests' consoles, power by libvirt's view of
//! the domains, removal by libvirt no longer knowing them or their volumes.

mod lab_common;
mod serve_common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ferrometal_test_support::peers::FileServer;
use ferrometal_test_support::vmlab::{Firmware, Lab, guest_images, publish};
use lab_common::sha256_hex;
use serde_json::Value;
use serve_common::{Serve, free_port, serve};

const FIRSTBOOT: &str = "FERROMETAL-FIRSTBOOT";
const LIVE_MARKER: &str = "FERROMETAL-LIVE-ISO booted";
/// Writing the image and booting under software emulation, on a loaded 2-core machine.
const BOOT: Duration = Duration::from_secs(300);

fn virsh(args: &[&str]) -> String {
    let o = Command::new("virsh")
        .args(["-q", "-c", "qemu:///system"])
        .args(args)
        .output()
        .expect("virsh");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn domain_state(name: &str) -> String {
    virsh(&["domstate", name])
}

fn volumes() -> String {
    virsh(&["vol-list", "default"])
}

fn until(s: &Serve, what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            eprintln!("{what} after {:.0?}", start.elapsed());
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "{what}: not within {limit:?}\n--- serve ({}), last log lines ---\n{}",
        s.process_state(),
        s.log_tail(60)
    );
}

fn claim_json(s: &Serve, ns: &str, name: &str) -> Value {
    serde_json::from_str(&s.ok(&["get", "hostclaim", "-n", ns, name, "-o", "json"])).unwrap()
}

fn condition<'a>(c: &'a Value, type_: &str) -> Option<&'a Value> {
    c["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|x| x["type"] == type_)
}

fn is_true(c: &Value, type_: &str) -> bool {
    condition(c, type_).is_some_and(|x| x["status"] == "True")
}

/// The console lines past byte `after` holding `text`.
fn console_lines(log: &PathBuf, after: usize, text: &str) -> Vec<String> {
    let bytes = std::fs::read(log).unwrap_or_default();
    let tail = String::from_utf8_lossy(bytes.get(after..).unwrap_or_default()).replace('\r', "");
    tail.lines()
        .filter(|l| l.contains(text))
        .map(str::to_string)
        .collect()
}

fn class_yaml(
    name: &str,
    secret: &str,
    prefix: &str,
    console_dir: &str,
    boot_mode: &str,
) -> String {
    format!(
        "apiVersion: ferrometal.io/v1alpha1\nkind: HostClass\nmetadata: {{name: {name}}}\nspec:\n  provider: libvirt\n  libvirt:\n    connectionSecretRef: {{namespace: infra, name: {secret}}}\n    domainType: qemu\n    bootMode: {boot_mode}\n    cpus: 1\n    maxCpus: 2\n    memoryMib: 512\n    maxMemoryMib: 1024\n    diskGib: 3\n    namePrefix: {prefix}\n    consoleLogDir: {console_dir}\n"
    )
}

/// The class `lab-vms` on the lab's libvirt (`uri` in Secret infra/lab-libvirt): VMs named
/// into the lab (`<lab prefix>-claim-…`, so they go with the lab however the test ends),
/// consoles logged beside the lab's; `boot_mode` `legacy` or `UEFI`. Returns the name prefix
/// and the console directory.
fn lab_class(s: &Serve, lab: &Lab, uri: &str, boot_mode: &str) -> (String, PathBuf) {
    let prefix = format!("{}-claim-", lab.summary.prefix);
    let console_dir = lab.state.path().join("console");
    std::fs::create_dir_all(&console_dir).unwrap();
    s.ok(&[
        "create",
        "secret",
        "generic",
        "-n",
        "infra",
        "lab-libvirt",
        &format!("--from-literal=uri={uri}"),
    ]);
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&class_yaml(
            "lab-vms",
            "lab-libvirt",
            &prefix,
            console_dir.to_str().unwrap(),
            boot_mode,
        )),
    );
    (prefix, console_dir)
}

/// A claim on `class` for the image at `url` (its SHA-256 `sum`), with user data `<name>-ud`.
fn vm_claim(name: &str, class: &str, url: &str, sum: &str, extra: &str) -> String {
    format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata:\n  name: {name}\n  annotations: {{ferrometal.io/host-class: {class}{extra}}}\nspec:\n  poweredOn: true\n  image: {{url: \"{url}\", checksum: \"{sum}\", checksumType: sha256}}\n  userData: {{name: {name}-ud}}\n"
    )
}

fn file_sum(path: &std::path::Path) -> String {
    sha256_hex(&std::fs::read(path).unwrap())
}

/// One tenant namespace, three claims: two on a libvirt class (a raw and a qcow2 image, each
/// with its own user data, one asking for a second CPU) and one without a class, served by a
/// lab VM behind sushy-tools (a live ISO). All boot; the VM claims' guests print their own
/// hostname and user-data hash; power off/on and a reboot through a claim act on its VM only;
/// deleting the claims removes the VMs and their volumes and frees the host. What the tenant
/// reads names no libvirt URI, connection Secret or host.
#[test]
fn one_claim_api_serves_vms_and_bare_metal_side_by_side() {
    let lab = Lab::up(1, Firmware::Legacy, "infra");
    let files = FileServer::start();
    let images = guest_images();
    publish(files.dir.path(), "disk.raw", &images.disk_raw);
    publish(files.dir.path(), "disk.qcow2", &images.disk_qcow2);
    publish(files.dir.path(), "live.iso", &images.live_iso);
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        free_port(),
        &["--power-poll-interval", "5", "--error-backoff", "2"],
    );
    let host = lab.vm(0).clone();
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["create", "namespace", "tenant-a"]);
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&lab.manifests()));
    s.ok(&["label", "bmh", "-n", "infra", &host.name, "pool=lab"]);
    s.lend("infra", "tenant-a");
    let alice = s.tenant("alice", "tenant-a");

    let (prefix, console_dir) = lab_class(&s, &lab, "qemu:///system", "legacy");
    // The tenant reads classes, and writes none.
    let o = s.kubectl_with(&alice, &["get", "hostclasses"], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = s.kubectl_with(&alice, &["delete", "hostclass", "lab-vms"], None);
    assert!(!o.status.success(), "a tenant deleted a HostClass");

    // Three claims from one namespace, each with its own user data.
    let mut apply = String::new();
    for (name, data) in [
        ("vm-raw", "#!/bin/sh\necho raw\n"),
        ("vm-qcow", "#!/bin/sh\necho qcow\n"),
    ] {
        let o = s.kubectl_with(
            &alice,
            &[
                "create",
                "secret",
                "generic",
                &format!("{name}-ud"),
                &format!("--from-literal=userData={data}"),
            ],
            None,
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    apply.push_str(&vm_claim(
        "vm-raw",
        "lab-vms",
        &files.url("disk.raw"),
        &file_sum(&images.disk_raw),
        "",
    ));
    apply.push_str("---\n");
    apply.push_str(&vm_claim(
        "vm-qcow",
        "lab-vms",
        &files.url("disk.qcow2"),
        &file_sum(&images.disk_qcow2),
        ", vm.ferrometal.io/cpus: \"2\"",
    ));
    apply.push_str("---\n");
    apply.push_str(&format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: metal}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: lab}}}}\n  image: {{url: \"{}\", format: live-iso}}\n",
        files.url("live.iso")
    ));
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&apply));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A checksum that does not match keeps nothing running, and says so.
    let bad = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata:\n  name: vm-bad\n  annotations: {{ferrometal.io/host-class: lab-vms}}\nspec:\n  poweredOn: true\n  image: {{url: \"{}\", checksum: \"{}\", checksumType: sha256}}\n",
        files.url("disk.raw"),
        "0".repeat(64)
    );
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&bad));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let uid = |name: &str| {
        claim_json(&s, "tenant-a", name)["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (raw_dom, qcow_dom) = (
        format!("{prefix}{}", uid("vm-raw")),
        format!("{prefix}{}", uid("vm-qcow")),
    );
    let console = |dom: &str| console_dir.join(format!("{dom}.console.log"));

    // Both VMs boot their images with their own config drives.
    for (name, dom, data) in [
        ("vm-raw", &raw_dom, "#!/bin/sh\necho raw\n"),
        ("vm-qcow", &qcow_dom, "#!/bin/sh\necho qcow\n"),
    ] {
        until(&s, &format!("{name} boots"), BOOT, || {
            !console_lines(&console(dom), 0, FIRSTBOOT).is_empty()
        });
        let line = console_lines(&console(dom), 0, FIRSTBOOT).remove(0);
        assert!(line.contains(&format!("\"hostname\":\"{name}\"")), "{line}");
        assert!(line.contains(&sha256_hex(data.as_bytes())), "{line}");
        until(
            &s,
            &format!("{name} ready"),
            Duration::from_secs(120),
            || {
                let c = claim_json(&s, "tenant-a", name);
                is_true(&c, "Ready") && c["status"]["poweredOn"] == true
            },
        );
        assert_eq!(domain_state(dom), "running");
    }
    // The tenant reads what its VM is, as a bare-metal claim's inspection data.
    let hd: Value = serde_json::from_slice(
        &s.kubectl_with(
            &alice,
            &["get", "hardwaredata", "vm-qcow", "-o", "json"],
            None,
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(hd["spec"]["hardware"]["cpu"]["count"], 2, "{hd}");
    assert_eq!(hd["spec"]["hardware"]["ramMebibytes"], 512, "{hd}");
    let mac = hd["spec"]["hardware"]["nics"][0]["mac"]
        .as_str()
        .unwrap_or("");
    assert!(
        virsh(&["dumpxml", &qcow_dom]).contains(mac) && !mac.is_empty(),
        "{hd}"
    );
    assert_eq!(
        claim_json(&s, "tenant-a", "vm-qcow")["status"]["hardwareData"]["name"],
        "vm-qcow"
    );
    // The second CPU asked for, within the class's limit.
    assert!(virsh(&["dumpxml", &qcow_dom]).contains("<vcpu placement='static'>2</vcpu>"));
    assert!(virsh(&["dumpxml", &raw_dom]).contains("<vcpu placement='static'>1</vcpu>"));
    // The bare-metal claim's host boots the live ISO.
    lab.wait_console(&host, LIVE_MARKER, 0, BOOT);
    until(&s, "the bare-metal claim ready", BOOT, || {
        is_true(&claim_json(&s, "tenant-a", "metal"), "Ready")
    });
    // The image whose checksum is wrong: no VM, and the tenant reads why.
    until(
        &s,
        "the bad checksum reported",
        Duration::from_secs(120),
        || {
            let c = claim_json(&s, "tenant-a", "vm-bad");
            condition(&c, "Provisioned").is_some_and(|p| {
                p["reason"] == "ProvisioningFailed"
                    && p["message"].as_str().unwrap_or("").contains("checksum")
            })
        },
    );
    let bad_dom = format!("{prefix}{}", uid("vm-bad"));
    assert_eq!(
        virsh(&["list", "--all", "--name"])
            .lines()
            .filter(|l| *l == bad_dom)
            .count(),
        0
    );

    // What the tenant reads names no libvirt URI, connection Secret, host or BMC.
    let seen = String::from_utf8_lossy(
        &s.kubectl_with(
            &alice,
            &["get", "hostclaims,hostclasses", "-o", "yaml"],
            None,
        )
        .stdout,
    )
    .to_string();
    // (The class names its connection Secret; what it holds stays out of reach.)
    let bmc = format!("127.0.0.1:{}", lab.summary.sushy.port);
    for secret in ["qemu:///system", "/var/lib/libvirt", &bmc, &lab.password()] {
        assert!(!seen.contains(secret), "{secret} in {seen}");
    }
    for claim in ["vm-raw", "vm-qcow"] {
        let c = String::from_utf8_lossy(
            &s.kubectl_with(&alice, &["get", "hostclaim", claim, "-o", "yaml"], None)
                .stdout,
        )
        .to_string();
        assert!(!c.contains("lab-libvirt"), "{c}");
        assert!(!c.contains(&prefix), "{c}");
    }
    let o = s.kubectl_with(
        &alice,
        &["get", "secret", "-n", "infra", "lab-libvirt"],
        None,
    );
    assert!(!o.status.success(), "a tenant read the libvirt connection");

    // Power off through one claim: its VM stops, the other runs on.
    s.ok(&[
        "patch",
        "hostclaim",
        "-n",
        "tenant-a",
        "vm-raw",
        "--type=merge",
        "-p",
        r#"{"spec":{"poweredOn":false}}"#,
    ]);
    until(&s, "vm-raw off", Duration::from_secs(120), || {
        domain_state(&raw_dom) == "shut off"
            && claim_json(&s, "tenant-a", "vm-raw")["status"]["poweredOn"] != true
    });
    assert_eq!(domain_state(&qcow_dom), "running");
    let before = std::fs::metadata(console(&raw_dom)).unwrap().len() as usize;
    s.ok(&[
        "patch",
        "hostclaim",
        "-n",
        "tenant-a",
        "vm-raw",
        "--type=merge",
        "-p",
        r#"{"spec":{"poweredOn":true}}"#,
    ]);
    until(&s, "vm-raw boots again", BOOT, || {
        !console_lines(&console(&raw_dom), before, "FERROMETAL").is_empty()
    });
    // A reboot through the other claim: its VM boots again, and the annotation is consumed.
    let before = std::fs::metadata(console(&qcow_dom)).unwrap().len() as usize;
    let o = s.kubectl_with(
        &alice,
        &["annotate", "hostclaim", "vm-qcow", "reboot.metal3.io="],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    until(&s, "vm-qcow reboots", BOOT, || {
        !console_lines(&console(&qcow_dom), before, "FERROMETAL").is_empty()
    });
    until(
        &s,
        "the reboot annotation consumed",
        Duration::from_secs(60),
        || {
            claim_json(&s, "tenant-a", "vm-qcow")["metadata"]["annotations"]
                .get("reboot.metal3.io")
                .is_none()
        },
    );
    assert_eq!(domain_state(&raw_dom), "running");

    // A claim stays with the class that made its VM: pointing it elsewhere afterwards changes
    // nothing, and its deletion still removes that VM.
    let o = s.kubectl_with(
        &alice,
        &[
            "annotate",
            "--overwrite",
            "hostclaim",
            "vm-raw",
            "ferrometal.io/host-class=no-such-class",
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        claim_json(&s, "tenant-a", "vm-raw")["metadata"]["annotations"]["hostclaim.ferrometal.io/vm-class"],
        "lab-vms"
    );

    // Deleting the claims removes the VMs and their volumes, and frees the host.
    let o = s.kubectl_with(
        &alice,
        &["delete", "hostclaims", "--all", "--timeout=240s"],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let all = virsh(&["list", "--all", "--name"]);
    assert!(!all.contains(&prefix), "{all}");
    let vols = volumes();
    assert!(!vols.contains(&prefix), "{vols}");
    until(&s, "the host available again", BOOT, || {
        s.ok(&[
            "get",
            "bmh",
            "-n",
            "infra",
            &host.name,
            "-o",
            "jsonpath={.status.provisioning.state}",
        ]) == "available"
    });
}

/// A class whose libvirt cannot be reached: the claim says so, and gets its VM (UEFI, without
/// Secure Boot) once the class's connection is mended. A claim naming no existing class is
/// told so.
#[test]
fn a_claim_waits_for_an_unreachable_class_and_binds_when_it_is_back() {
    let lab = Lab::up(1, Firmware::Legacy, "infra");
    let files = FileServer::start();
    publish(files.dir.path(), "disk.qcow2", &guest_images().disk_qcow2);
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--error-backoff", "2"]);
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["create", "namespace", "tenant-a"]);
    let alice = s.tenant("alice", "tenant-a");
    // A socket nobody listens on.
    let nowhere = dir.path().join("no-libvirt.sock");
    let (prefix, console_dir) = lab_class(
        &s,
        &lab,
        &format!("qemu:///system?socket={}", nowhere.display()),
        "UEFI",
    );
    let o = s.kubectl_with(
        &alice,
        &[
            "create",
            "secret",
            "generic",
            "vm-ud",
            "--from-literal=userData=#!/bin/sh",
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let claim = vm_claim(
        "vm",
        "lab-vms",
        &files.url("disk.qcow2"),
        &file_sum(&guest_images().disk_qcow2),
        "",
    );
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&claim));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lost = "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata:\n  name: lost\n  annotations: {ferrometal.io/host-class: no-such-class}\nspec: {poweredOn: true}\n";
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(lost));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    until(
        &s,
        "the unreachable libvirt reported",
        Duration::from_secs(60),
        || {
            let c = claim_json(&s, "tenant-a", "vm");
            condition(&c, "Associated").is_some_and(|a| a["reason"] == "HypervisorUnreachable")
        },
    );
    let seen = s.ok(&["get", "hostclaim", "-n", "tenant-a", "vm", "-o", "yaml"]);
    assert!(!seen.contains("no-libvirt.sock"), "{seen}");
    until(
        &s,
        "the missing class reported",
        Duration::from_secs(60),
        || {
            let c = claim_json(&s, "tenant-a", "lost");
            condition(&c, "Associated").is_some_and(|a| {
                a["reason"] == "HostClassNotFound"
                    && a["message"]
                        .as_str()
                        .unwrap_or("")
                        .contains("no-such-class")
            })
        },
    );

    // The connection mended: the claim gets its VM, which boots.
    s.ok(&[
        "patch",
        "secret",
        "-n",
        "infra",
        "lab-libvirt",
        "--type=merge",
        "-p",
        r#"{"stringData":{"uri":"qemu:///system"}}"#,
    ]);
    let uid = claim_json(&s, "tenant-a", "vm")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let dom = format!("{prefix}{uid}");
    let log = console_dir.join(format!("{dom}.console.log"));
    until(&s, "the VM boots", BOOT, || {
        !console_lines(&log, 0, FIRSTBOOT).is_empty()
    });
    until(&s, "the claim ready", Duration::from_secs(120), || {
        is_true(&claim_json(&s, "tenant-a", "vm"), "Ready")
    });
    let o = s.kubectl_with(
        &alice,
        &["delete", "hostclaims", "--all", "--timeout=120s"],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!virsh(&["list", "--all", "--name"]).contains(&prefix));
    assert!(!volumes().contains(&prefix));
}

/// serve SIGKILLed while a claim's VM is being made (its image on its way, throttled): after the
/// restart the claim completes with exactly one VM and its two volumes, and deleting it leaves
/// nothing in libvirt.
#[test]
fn a_vm_claim_completes_after_serve_is_killed_mid_creation() {
    let lab = Lab::up(1, Firmware::Legacy, "infra");
    // Slow enough that the kill lands while the image is still on its way.
    let files = FileServer::throttled(4 << 20);
    publish(files.dir.path(), "disk.raw", &guest_images().disk_raw);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut s = serve(dir.path(), port, &["--error-backoff", "2"]);
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["create", "namespace", "tenant-a"]);
    let (prefix, console_dir) = lab_class(&s, &lab, "qemu:///system", "legacy");
    s.ok(&[
        "create",
        "secret",
        "generic",
        "-n",
        "tenant-a",
        "vm-ud",
        "--from-literal=userData=#!/bin/sh",
    ]);
    let claim = vm_claim(
        "vm",
        "lab-vms",
        &files.url("disk.raw"),
        &file_sum(&guest_images().disk_raw),
        "",
    );
    s.kubectl_stdin(&["apply", "-n", "tenant-a", "-f", "-"], Some(&claim));
    let uid = claim_json(&s, "tenant-a", "vm")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let dom = format!("{prefix}{uid}");
    until(&s, "the VM being made", Duration::from_secs(60), || {
        let c = claim_json(&s, "tenant-a", "vm");
        condition(&c, "Provisioned").is_some_and(|p| p["reason"] == "Provisioning")
    });
    std::thread::sleep(Duration::from_secs(2));
    s.kill();
    let during = (volumes(), virsh(&["list", "--all", "--name"]));
    eprintln!(
        "at the kill: volumes {:?}, domains {:?}",
        during.0, during.1
    );

    let s = serve(dir.path(), port, &["--error-backoff", "2"]);
    let log = console_dir.join(format!("{dom}.console.log"));
    until(&s, "the VM boots after the restart", BOOT, || {
        !console_lines(&log, 0, FIRSTBOOT).is_empty()
    });
    until(&s, "the claim ready", Duration::from_secs(120), || {
        is_true(&claim_json(&s, "tenant-a", "vm"), "Ready")
    });
    let domains: Vec<String> = virsh(&["list", "--all", "--name"])
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    assert_eq!(domains, std::slice::from_ref(&dom));
    let disks = volumes()
        .lines()
        .filter(|l| l.trim_start().starts_with(&prefix))
        .count();
    assert_eq!(disks, 2, "{}", volumes());
    s.ok(&[
        "delete",
        "hostclaim",
        "-n",
        "tenant-a",
        "vm",
        "--timeout=120s",
    ]);
    assert!(!virsh(&["list", "--all", "--name"]).contains(&prefix));
    assert!(!volumes().contains(&prefix));
}
