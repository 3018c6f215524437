//! HostClaims over two kinds of compute: a libvirt HostClass gives each claim a QEMU VM of its
//! own on the lab's libvirt; a claim on the bare-metal class gets a BareMetalHost (a lab VM
//! behind sushy-tools), whose disk ferrometal's deploy agent writes. Boots are proven by the guests' consoles, power by libvirt's view of
//! the domains, removal by libvirt no longer knowing them or their volumes.

mod lab_common;
mod serve_common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ferrometal_test_support::peers::FileServer;
use ferrometal_test_support::vmlab::{Firmware, Lab, Vm, guest_images, publish};
use lab_common::{FIRSTBOOT, Ports, host, serve_on, sha256_hex, state};
use serde_json::Value;
use serve_common::{Serve, free_port, serve};

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

/// The complete console lines past byte `after` holding `text`. A line the VM is still
/// printing is left out: read half-written, it would be checked without its end.
fn console_lines(log: &PathBuf, after: usize, text: &str) -> Vec<String> {
    let bytes = std::fs::read(log).unwrap_or_default();
    let tail = bytes.get(after..).unwrap_or_default();
    let complete = tail
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |end| end + 1);
    let tail = String::from_utf8_lossy(&tail[..complete]).replace('\r', "");
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

/// A claim on the bare-metal class `metal`, for a lab host labelled `pool=lab`, of the image at
/// `url` (as the lab VMs reach it) in `format`, with user data `<name>-ud`.
fn metal_claim(name: &str, url: &str, format: &str, sum: &str) -> String {
    format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata:\n  name: {name}\n  annotations: {{ferrometal.io/host-class: metal}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: lab}}}}\n  userData: {{name: {name}-ud}}\n  image: {{url: \"{url}\", format: {format}, checksum: \"{sum}\", checksumType: sha256}}\n"
    )
}

/// The lab VM whose BareMetalHost the claim `name` holds (its consumerRef names the claim).
fn host_of<'a>(s: &Serve, lab: &'a Lab, name: &str) -> Option<&'a Vm> {
    lab.summary.vms.iter().find(|vm| {
        let h = host(s, "infra", &vm.name);
        h["spec"]["consumerRef"]["name"] == name && h["spec"]["consumerRef"]["kind"] == "HostClaim"
    })
}

fn patch_power(s: &Serve, alice: &Path, name: &str, on: bool) {
    let o = s.kubectl_with(
        alice,
        &[
            "patch",
            "hostclaim",
            name,
            "--type=merge",
            "-p",
            &format!(r#"{{"spec":{{"poweredOn":{on}}}}}"#),
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Annotates the claim `name` as its tenant: `reboot.metal3.io=`, `ferrometal.io/operation=…`.
fn annotate(s: &Serve, alice: &Path, name: &str, annotation: &str) {
    let o = s.kubectl_with(alice, &["annotate", "hostclaim", name, annotation], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The hybrid scenario. One tenant namespace, four claims, all of the lab's disk image with user
/// data of their own: two on the bare-metal class (lab VMs behind sushy-tools, enrolled as
/// BareMetalHosts; ferrometal's deploy agent writes the image, qcow2 on one and raw on the
/// other) and two on a libvirt class (VMs of their own, the same image raw and qcow2, one asking
/// for a second CPU). All four boot and print their own host name and user-data hash; power
/// off/on, a reboot and a power cycle through each claim act on its machine and no other;
/// deleting the four frees the hosts and removes the VMs and their volumes. What the tenant
/// reads names no libvirt URI, connection Secret or BMC.
#[test]
fn one_claim_api_serves_vms_and_bare_metal_side_by_side() {
    let lab = Lab::up_with_disk(2, Firmware::Legacy, "infra", "5G");
    let files = FileServer::start();
    let images = guest_images();
    publish(files.dir.path(), "disk.raw", &images.disk_raw);
    publish(files.dir.path(), "disk.qcow2", &images.disk_qcow2);
    let (raw_sum, qcow_sum) = (file_sum(&images.disk_raw), file_sum(&images.disk_qcow2));
    let dir = tempfile::tempdir().unwrap();
    let s = serve_on(dir.path(), Ports::free(), &[]);
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["create", "namespace", "tenant-a"]);
    // No cleaning (the agent's tests clean): the deploys here are the point, and the time.
    let manifests = lab.manifests().replace(
        "  online: false\n",
        "  online: false\n  automatedCleaningMode: disabled\n",
    );
    assert!(manifests.contains("automatedCleaningMode: disabled"));
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&manifests));
    for vm in &lab.summary.vms {
        s.ok(&["label", "bmh", "-n", "infra", &vm.name, "pool=lab"]);
    }
    for vm in &lab.summary.vms {
        until(&s, &format!("{} available", vm.name), BOOT, || {
            state(&host(&s, "infra", &vm.name)) == "available"
        });
    }
    s.lend("infra", "tenant-a");
    let alice = s.tenant("alice", "tenant-a");

    let (prefix, console_dir) = lab_class(&s, &lab, "qemu:///system", "legacy");
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: ferrometal.io/v1alpha1\nkind: HostClass\nmetadata: {name: metal}\nspec: {provider: baremetal}\n"),
    );
    // The tenant reads classes, and writes none.
    let o = s.kubectl_with(&alice, &["get", "hostclasses"], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = s.kubectl_with(&alice, &["delete", "hostclass", "lab-vms"], None);
    assert!(!o.status.success(), "a tenant deleted a HostClass");

    // Four claims from one namespace, each with its own user data.
    let user_data = |name: &str| format!("#!/bin/sh\necho {name}\n");
    for name in ["vm-raw", "vm-qcow", "metal-a", "metal-b", "vm-bad"] {
        let o = s.kubectl_with(
            &alice,
            &[
                "create",
                "secret",
                "generic",
                &format!("{name}-ud"),
                &format!("--from-literal=userData={}", user_data(name)),
            ],
            None,
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // The lab VMs reach the file server at QEMU's user-network address of the host.
    let lab_url = |file: &str| format!("http://10.0.2.2:{}/{file}", files.port);
    let apply = [
        vm_claim("vm-raw", "lab-vms", &files.url("disk.raw"), &raw_sum, ""),
        vm_claim(
            "vm-qcow",
            "lab-vms",
            &files.url("disk.qcow2"),
            &qcow_sum,
            ", vm.ferrometal.io/cpus: \"2\"",
        ),
        metal_claim("metal-a", &lab_url("disk.qcow2"), "qcow2", &qcow_sum),
        metal_claim("metal-b", &lab_url("disk.raw"), "raw", &raw_sum),
        // A checksum that does not match keeps nothing running, and says so.
        vm_claim(
            "vm-bad",
            "lab-vms",
            &files.url("disk.raw"),
            &"0".repeat(64),
            "",
        ),
    ]
    .join("---\n");
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&apply));
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
    // Each claim's machine: its console, and how libvirt sees it.
    struct Machine {
        claim: &'static str,
        domain: String,
        console: PathBuf,
        hostname: String,
    }
    let mut machines = vec![];
    for (claim, dom) in [("vm-raw", &raw_dom), ("vm-qcow", &qcow_dom)] {
        machines.push(Machine {
            claim,
            domain: dom.clone(),
            console: console_dir.join(format!("{dom}.console.log")),
            hostname: claim.to_string(),
        });
    }
    for claim in ["metal-a", "metal-b"] {
        until(&s, &format!("{claim} bound"), BOOT, || {
            host_of(&s, &lab, claim).is_some()
        });
        let vm = host_of(&s, &lab, claim).unwrap();
        machines.push(Machine {
            claim,
            domain: vm.name.clone(),
            console: vm.console_log.clone(),
            hostname: vm.name.clone(),
        });
    }
    assert_ne!(machines[2].domain, machines[3].domain);

    // All four boot the image with their own config drives.
    for m in &machines {
        until(&s, &format!("{} boots", m.claim), BOOT, || {
            !console_lines(&m.console, 0, FIRSTBOOT).is_empty()
        });
        let line = console_lines(&m.console, 0, FIRSTBOOT).remove(0);
        assert!(
            line.contains(&format!("\"hostname\":\"{}\"", m.hostname)),
            "{line}"
        );
        assert!(
            line.contains(&sha256_hex(user_data(m.claim).as_bytes())),
            "{}: {line}",
            m.claim
        );
        assert!(line.contains("\"source\":\"config-2\""), "{line}");
        until(&s, &format!("{} ready", m.claim), BOOT, || {
            let c = claim_json(&s, "tenant-a", m.claim);
            is_true(&c, "Ready") && c["status"]["poweredOn"] == true
        });
        assert_eq!(domain_state(&m.domain), "running");
    }
    // The agent wrote the hosts' disks.
    for m in &machines[2..] {
        let console = std::fs::read_to_string(&m.console).unwrap_or_default();
        assert!(console.contains("ferrometal-agent: deploying"), "{console}");
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
            &["get", "hostclaims,hostclasses,hardwaredata", "-o", "yaml"],
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
    for m in &machines {
        let c = String::from_utf8_lossy(
            &s.kubectl_with(&alice, &["get", "hostclaim", m.claim, "-o", "yaml"], None)
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

    // Power and reboots through the claims, in three rounds over two halves (a VM and a host
    // each): each round acts on one half through its claims, and the other half shows it was
    // not touched.
    let size = |m: &Machine| std::fs::metadata(&m.console).map_or(0, |x| x.len() as usize);
    let booted_again = |m: &Machine, after: usize| {
        until(&s, &format!("{} boots again", m.claim), BOOT, || {
            !console_lines(&m.console, after, FIRSTBOOT).is_empty()
        });
    };
    let off = |m: &Machine| {
        until(&s, &format!("{} off", m.claim), BOOT, || {
            domain_state(&m.domain) == "shut off"
                && claim_json(&s, "tenant-a", m.claim)["status"]["poweredOn"] != true
        });
    };
    let (one, other): (Vec<&Machine>, Vec<&Machine>) = machines
        .iter()
        .partition(|m| m.claim == "vm-raw" || m.claim == "metal-a");
    // 1. The first half off, the other half rebooted.
    let marks: Vec<usize> = other.iter().map(|m| size(m)).collect();
    for m in &one {
        patch_power(&s, &alice, m.claim, false);
    }
    for m in &other {
        annotate(&s, &alice, m.claim, "reboot.metal3.io=");
    }
    for m in &one {
        off(m);
    }
    for (m, after) in other.iter().zip(&marks) {
        booted_again(m, *after);
        assert_eq!(domain_state(&m.domain), "running", "{}", m.claim);
    }
    for m in &one {
        assert_eq!(domain_state(&m.domain), "shut off", "{}", m.claim);
    }
    // 2. The first half on again, the other half off.
    let marks: Vec<usize> = one.iter().map(|m| size(m)).collect();
    for m in &one {
        patch_power(&s, &alice, m.claim, true);
    }
    for m in &other {
        patch_power(&s, &alice, m.claim, false);
    }
    for (m, after) in one.iter().zip(&marks) {
        booted_again(m, *after);
    }
    for m in &other {
        off(m);
    }
    // 3. The other half on, the first power-cycled (ferrometal's operation annotation).
    let marks_one: Vec<usize> = one.iter().map(|m| size(m)).collect();
    let marks_other: Vec<usize> = other.iter().map(|m| size(m)).collect();
    for m in &other {
        patch_power(&s, &alice, m.claim, true);
    }
    for m in &one {
        annotate(&s, &alice, m.claim, "ferrometal.io/operation=PowerCycle");
    }
    for (m, after) in other.iter().zip(&marks_other) {
        booted_again(m, *after);
    }
    for (m, after) in one.iter().zip(&marks_one) {
        booted_again(m, *after);
    }
    for m in &machines {
        until(
            &s,
            &format!("{}'s one-shot annotations consumed, powered on", m.claim),
            Duration::from_secs(120),
            || {
                let c = claim_json(&s, "tenant-a", m.claim);
                let a = &c["metadata"]["annotations"];
                a.get("reboot.metal3.io").is_none()
                    && a.get("ferrometal.io/operation").is_none()
                    && c["status"]["poweredOn"] == true
            },
        );
        assert_eq!(domain_state(&m.domain), "running", "{}", m.claim);
    }

    // The tenant reads what was done, and an operation a VM cannot do is refused, not kept.
    annotate(&s, &alice, "vm-qcow", "ferrometal.io/operation=PxeOnce");
    until(&s, "PxeOnce refused", Duration::from_secs(60), || {
        claim_json(&s, "tenant-a", "vm-qcow")["metadata"]["annotations"]
            .get("ferrometal.io/operation")
            .is_none()
    });
    let events = String::from_utf8_lossy(
        &s.kubectl_with(&alice, &["get", "events", "-o", "yaml"], None)
            .stdout,
    )
    .to_string();
    for text in [
        "OperationNotSupported",
        "PowerCycle issued: the virtual machine was powered off and on",
        "the virtual machine was reset",
    ] {
        assert!(events.contains(text), "{text} in {events}");
    }
    for secret in ["qemu:///system", &bmc, &lab.password(), &prefix] {
        assert!(!events.contains(secret), "{secret} in {events}");
    }
    assert_eq!(domain_state(&qcow_dom), "running");

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

    // Deleting the claims removes the VMs and their volumes, and frees the hosts.
    let o = s.kubectl_with(
        &alice,
        &["delete", "hostclaims", "--all", "--timeout=300s"],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let all = virsh(&["list", "--all", "--name"]);
    assert!(!all.contains(&prefix), "{all}");
    let vols = volumes();
    assert!(!vols.contains(&prefix), "{vols}");
    for m in &machines[2..] {
        until(&s, &format!("{} available again", m.domain), BOOT, || {
            let h = host(&s, "infra", &m.domain);
            state(&h) == "available" && h["spec"].get("consumerRef").is_none()
        });
    }
}

/// A class whose libvirt cannot be reached: the claim says so (naming no socket), and a claim
/// naming no class that exists is told so. Once the class's connection is mended the claim's VM
/// is made (UEFI, without Secure Boot), and serve is SIGKILLed while it is (the image on its way,
/// throttled): after the restart the claim completes with exactly one VM and its two volumes,
/// and deleting the claims leaves nothing in libvirt.
#[test]
fn a_vm_claim_waits_for_its_hypervisor_and_survives_a_killed_serve() {
    let lab = Lab::up(1, Firmware::Legacy, "infra");
    // Slow enough that the kill lands while the image is still on its way.
    let files = FileServer::throttled(2 << 20);
    publish(files.dir.path(), "disk.qcow2", &guest_images().disk_qcow2);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut s = serve(dir.path(), port, &["--error-backoff", "2"]);
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
    // A class for another team's namespace, and one that takes images from one server only.
    let console = console_dir.to_str().unwrap();
    let restricted = [
        class_yaml("team-b-vms", "lab-libvirt", &prefix, console, "legacy")
            + "    namespaces: [team-b]\n",
        class_yaml("mirror-vms", "lab-libvirt", &prefix, console, "legacy")
            + "    imageUrlPrefixes: [\"http://images.invalid/\"]\n",
    ]
    .join("---\n");
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&restricted));
    let image_url = files.url("disk.qcow2");
    let sum = file_sum(&guest_images().disk_qcow2);
    let elsewhere = [
        vm_claim("elsewhere", "team-b-vms", &image_url, &sum, ""),
        vm_claim("mirrored", "mirror-vms", &image_url, &sum, ""),
    ]
    .join("---\n")
    .replace("  userData: {name: elsewhere-ud}\n", "")
    .replace("  userData: {name: mirrored-ud}\n", "");
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&elsewhere));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (claim, reason, text) in [
        (
            "elsewhere",
            "HostClassNotAllowed",
            "namespace tenant-a".to_string(),
        ),
        (
            "mirrored",
            "InvalidRequest",
            format!("spec.image.url: \"{image_url}\""),
        ),
    ] {
        until(
            &s,
            &format!("{claim}: {reason}"),
            Duration::from_secs(60),
            || {
                let c = claim_json(&s, "tenant-a", claim);
                condition(&c, "Associated").is_some_and(|a| {
                    a["reason"] == reason && a["message"].as_str().unwrap_or("").contains(&text)
                })
            },
        );
    }

    until(
        &s,
        "the unreachable libvirt reported",
        Duration::from_secs(60),
        || {
            let c = claim_json(&s, "tenant-a", "vm");
            condition(&c, "Associated").is_some_and(|a| a["reason"] == "HypervisorUnreachable")
        },
    );
    let seen = String::from_utf8_lossy(
        &s.kubectl_with(&alice, &["get", "hostclaim", "vm", "-o", "yaml"], None)
            .stdout,
    )
    .to_string();
    assert!(seen.contains("HypervisorUnreachable"), "{seen}");
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

    // The connection mended: the VM is being made when serve is killed.
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
    let line = console_lines(&log, 0, FIRSTBOOT).remove(0);
    assert!(line.contains("\"boot\":\"uefi\""), "{line}");
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
        "hostclaims",
        "-n",
        "tenant-a",
        "--all",
        "--timeout=120s",
    ]);
    assert!(!virsh(&["list", "--all", "--name"]).contains(&prefix));
    assert!(!volumes().contains(&prefix));
}
