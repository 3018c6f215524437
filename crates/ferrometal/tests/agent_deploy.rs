//! ferrometal's deploy agent on real (virtual) machines: `serve --agent-ramdisk` with the
//! default redfish provisioner, lab VMs behind sushy-tools. The VM boots the agent's ramdisk
//! from virtual media, reports its hardware in-band, cleans, writes the lab's qcow2 disk image
//! with a config drive, and boots it: the disk image's first-boot line on the VM's console
//! (host name from the metadata, SHA-256 of the user data) is the proof.

mod lab_common;
mod serve_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferrometal_test_support::peers::FileServer;
use ferrometal_test_support::vmlab::{Firmware, Lab, Vm, guest_images, lldp_frame, publish};
use lab_common::{FIRSTBOOT, Ports, host, serve_on, sha256_hex, state};
use serde_json::Value;
use serve_common::Serve;

/// Software emulation: a boot into the ramdisk or the disk takes 6-15 s here; room for load.
const BOOT: Duration = Duration::from_secs(300);

fn wait_for(s: &Serve, lab: &Lab, vm: &Vm, what: &str, check: impl FnMut() -> bool) {
    lab_common::wait_for(s, lab, vm, BOOT, what, check)
}

/// In-band inspection, then a tenant's HostClaim with a qcow2 image and cloud-init user data:
/// cleaning, the image and a config drive written, the disk booted; releasing the claim cleans
/// the disk again. On a UEFI VM.
#[test]
fn a_tenant_claim_deploys_a_qcow2_image_through_the_agent_on_a_uefi_vm() {
    let lab = Lab::up_with_switch(1, Firmware::Uefi, "infra", "5G");
    let vm = lab.vm(0).clone();
    let switch_mac = vm.switch_port.as_ref().unwrap().mac.clone();
    // The switch port announces itself every half second while the test runs.
    let frame = lldp_frame(
        "leaf-7",
        "Ethernet1/12",
        100,
        &[(100, "mgmt"), (200, "prov-20")],
    );
    let announcing = AtomicBool::new(true);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while announcing.load(Ordering::Relaxed) {
                lab.send_frame(&vm, &frame);
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        // Stops the announcements however the test ends (the scope waits for the thread).
        let _stop = StopOnDrop(&announcing);
        tenant_claim_on(&lab, &vm, &switch_mac);
    });
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

fn tenant_claim_on(lab: &Lab, vm: &Vm, switch_mac: &str) {
    let files = FileServer::start();
    let images = guest_images();
    publish(files.dir.path(), "disk.qcow2", &images.disk_qcow2);
    let qcow2 = std::fs::read(&images.disk_qcow2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ports = Ports::free();
    let metrics = ports.metrics;
    let s = serve_on(dir.path(), ports, &["--agent-lldp-wait", "20s"]);
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["create", "namespace", "tenant-a"]);
    // A provisioning network without DHCP, as far as the ramdisk knows: a static address
    // (QEMU's user-mode network routes any address of 10.0.2.0/24; its DHCP gives .15).
    let network = format!(
        r#"{{"links":[{{"id":"prov","type":"phy","ethernet_mac_address":"{}"}}],"networks":[{{"id":"p","type":"ipv4","link":"prov","ip_address":"10.0.2.50","netmask":"255.255.255.0","routes":[{{"network":"0.0.0.0","netmask":"0.0.0.0","gateway":"10.0.2.2"}}]}}],"services":[{{"type":"dns","address":"10.0.2.3"}}]}}"#,
        vm.boot_mac.to_uppercase()
    );
    s.ok(&[
        "create",
        "secret",
        "generic",
        "-n",
        "infra",
        "ramdisk-net",
        &format!("--from-literal=networkData={network}"),
    ]);
    let manifests = lab.manifests().replace(
        "  online: false\n",
        "  online: false\n  inspectionMode: agent\n  preprovisioningNetworkDataName: ramdisk-net\n",
    );
    assert!(manifests.contains("inspectionMode: agent"));
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&manifests));
    s.ok(&["label", "bmh", "-n", "infra", &vm.name, "pool=lab"]);

    // While the agent boots the host, its boot media are in the host's PreprovisioningImage,
    // as metal3's image-customization contract reports them: the ISO the BMC was given, with
    // the network data Secret's version it carries.
    let ppimg = || {
        let o = s.kubectl(&["get", "ppimg", "-n", "infra", &vm.name, "-o", "json"]);
        serde_json::from_slice::<Value>(&o.stdout).unwrap_or(Value::Null)
    };
    let ready = |p: &Value| {
        p["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .map(|c| c["status"].as_str().unwrap_or_default().to_string())
    };
    wait_for(&s, lab, vm, "the agent's boot media reported", || {
        ready(&ppimg()).as_deref() == Some("True")
    });
    let booting = ppimg();
    let url = booting["status"]["imageUrl"].as_str().unwrap().to_string();
    assert_eq!(lab.virtual_cd(vm)["Image"], url.as_str(), "{booting}");
    assert_eq!(booting["status"]["format"], "iso", "{booting}");
    assert_eq!(booting["status"]["architecture"], "x86_64", "{booting}");
    let secret_version = s.ok(&[
        "get",
        "secret",
        "-n",
        "infra",
        "ramdisk-net",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    assert_eq!(
        booting["status"]["networkData"],
        serde_json::json!({"name": "ramdisk-net", "version": secret_version}),
        "{booting}"
    );
    assert_eq!(
        booting["spec"]["networkDataName"], "ramdisk-net",
        "{booting}"
    );
    assert_eq!(booting["spec"]["acceptFormats"], serde_json::json!(["iso"]));
    let owner = &booting["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "BareMetalHost", "{booting}");
    assert_eq!(owner["name"], vm.name.as_str(), "{booting}");
    assert!(
        booting["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["type"] != "ferrometal.io/NotActedOn"),
        "{booting}"
    );

    // In-band inspection: the agent's view of the VM (CPU flags are nothing a BMC reports).
    wait_for(&s, lab, vm, "available", || {
        state(&host(&s, "infra", &vm.name)) == "available"
    });
    // The boot is over: its media are gone, and the object says there are none.
    wait_for(&s, lab, vm, "the boot media reported gone", || {
        ready(&ppimg()).as_deref() == Some("False")
    });
    let after = ppimg();
    assert!(after["status"].get("imageUrl").is_none(), "{after}");
    let code = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &url])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&code.stdout),
        "404",
        "the ended boot's ISO is not served"
    );
    assert!(
        lab.console(vm).contains("ferrometal-agent: inspecting"),
        "{}",
        lab.console(vm)
    );
    let hw: Value = serde_json::from_str(&s.ok(&[
        "get",
        "hardwaredata",
        "-n",
        "infra",
        &vm.name,
        "-o",
        "json",
    ]))
    .unwrap();
    let hw = &hw["spec"]["hardware"];
    assert_eq!(hw["cpu"]["count"], 1, "{hw}");
    assert_eq!(hw["cpu"]["arch"], "x86_64", "{hw}");
    assert!(
        hw["cpu"]["flags"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "sse2")),
        "{hw}"
    );
    assert_eq!(hw["ramMebibytes"], 1024, "{hw}");
    let disks = hw["storage"].as_array().unwrap();
    assert_eq!(disks.len(), 1, "{hw}");
    assert_eq!(disks[0]["name"], "/dev/vda", "{hw}");
    assert_eq!(disks[0]["sizeBytes"], 5u64 << 30, "{hw}");
    // The ramdisk has no udev; the names it would give come from sysfs (checked against the
    // domain below).
    let macs: Vec<&str> = hw["nics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["mac"].as_str())
        .collect();
    assert_eq!(macs, [vm.boot_mac.as_str(), switch_mac], "{hw}");
    // Where libvirt put the devices, as the agent read them from sysfs; QEMU's SMBIOS.
    for (nic, mac) in hw["nics"].as_array().unwrap().iter().zip(&macs) {
        assert_eq!(nic["pciAddress"], lab.pci_address(vm, mac), "{hw}");
    }
    let by_path = format!("/dev/disk/by-path/pci-{}", lab.pci_address(vm, "vda"));
    assert!(
        disks[0]["alternateNames"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == by_path.as_str())),
        "{by_path} in {hw}"
    );
    assert_eq!(hw["systemVendor"]["manufacturer"], "QEMU", "{hw}");
    assert!(
        hw["systemVendor"]["productName"]
            .as_str()
            .is_some_and(|p| p.contains("Q35")),
        "the domain's machine is q35: {hw}"
    );
    assert!(
        hw["firmware"]["bios"]["vendor"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "{hw}"
    );
    // The switch port's LLDP: its untagged VLAN and the VLANs it carries, as metal3 shows them.
    assert_eq!(hw["nics"][1]["vlanId"], 100, "{hw}");
    assert_eq!(
        hw["nics"][1]["vlans"],
        serde_json::json!([{"id": 100, "name": "mgmt"}, {"id": 200, "name": "prov-20"}]),
        "{hw}"
    );
    assert!(hw["nics"][0].get("vlanId").is_none(), "{hw}");
    assert!(lab.console(vm).contains("LLDP on"), "{}", lab.console(vm));
    // The ramdisk took the static address, not a lease.
    assert_eq!(hw["nics"][0]["ip"], "10.0.2.50", "{hw}");
    assert!(
        lab.console(vm)
            .contains("ferrometal-agent: network data: ip -4 addr add 10.0.2.50/24"),
        "{}",
        lab.console(vm)
    );
    assert_eq!(
        lab.domain_state(vm),
        "shut off",
        "powered off after inspection"
    );
    assert_eq!(lab.virtual_cd(vm)["Inserted"], false, "media ejected");

    // The tenant claims the host with a qcow2 image and cloud-init user data.
    s.lend("infra", "tenant-a");
    let alice = s.tenant("alice", "tenant-a");
    let user_data = "#!/bin/sh\necho hello from the agent test\n";
    let o = s.kubectl_with(
        &alice,
        &[
            "create",
            "secret",
            "generic",
            "web-user-data",
            &format!("--from-literal=userData={user_data}"),
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let url = format!("http://10.0.2.2:{}/disk.qcow2", files.port);
    let claim = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: web}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: lab}}}}\n  userData: {{name: web-user-data}}\n  image: {{url: \"{url}\", format: qcow2, checksum: \"{}\", checksumType: sha256}}\n",
        sha256_hex(&qcow2)
    );
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&claim));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_for(&s, lab, vm, "the first boot from the disk", || {
        lab.console(vm).contains(FIRSTBOOT)
    });
    let line = lab.wait_console(vm, FIRSTBOOT, 0, BOOT);
    assert!(
        line.contains(&format!("\"hostname\":\"{}\"", vm.name)),
        "{line}"
    );
    assert!(
        line.contains(&sha256_hex(user_data.as_bytes())),
        "user data hash: {line}"
    );
    assert!(line.contains("\"source\":\"config-2\""), "{line}");
    assert!(line.contains("\"boot\":\"uefi\""), "{line}");
    wait_for(&s, lab, vm, "provisioned", || {
        state(&host(&s, "infra", &vm.name)) == "provisioned"
    });
    let console = lab.console(vm);
    assert!(console.contains("ferrometal-agent: cleaning"), "{console}");
    assert!(console.contains("ferrometal-agent: deploying"), "{console}");
    assert_eq!(lab.virtual_cd(vm)["Inserted"], false, "media ejected");

    // Where the time went: an Event per phase, an annotation `kubectl describe` shows, and the
    // phase histogram on /metrics.
    let described = s.ok(&["describe", "bmh", "-n", "infra", &vm.name]);
    for phase in [
        "provision-phases",
        "inspect-phases",
        "bootMedia",
        "ramdiskBoot",
        "cleaning",
        "download+write",
        "MB/s",
        "configDrive",
        "rebootToPowerOn",
        "PhaseTiming",
    ] {
        assert!(described.contains(phase), "{phase} in {described}");
    }
    let text = std::process::Command::new("curl")
        .args(["-s", &format!("http://127.0.0.1:{metrics}/metrics")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            r#"ferrometal_provision_phase_seconds_count{phase="download+write",provisioner="redfish"} 1"#
        ),
        "{text}"
    );
    wait_for(&s, lab, vm, "the claim ready", || {
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
    // What the tenant reads names neither the BMC, its credentials, nor the agent's media.
    let seen = String::from_utf8_lossy(
        &s.kubectl_with(
            &alice,
            &["get", "hostclaim,hardwaredata,events", "-o", "yaml"],
            None,
        )
        .stdout,
    )
    .to_string();
    let bmc = format!("127.0.0.1:{}", lab.summary.sushy.port);
    for secret in [
        bmc.as_str(),
        "redfish",
        &lab.password(),
        "-bmc",
        ".iso",
        "Bearer",
    ] {
        assert!(!seen.contains(secret), "{secret} in {seen}");
    }

    // The written disk, as the VM holds it: a GPT and its partitions.
    let partitions = gpt_partition_starts(&lab.read_disk(vm, 0, 1 << 20));
    assert!(!partitions.is_empty(), "the deployed disk has partitions");

    // Releasing the claim deprovisions: the agent cleans the disk, the host is available.
    let o = s.kubectl_with(
        &alice,
        &["delete", "hostclaim", "web", "--timeout=300s"],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_for(&s, lab, vm, "available again", || {
        state(&host(&s, "infra", &vm.name)) == "available"
    });
    assert_eq!(
        lab.console(vm)
            .matches("ferrometal-agent: cleaning")
            .count(),
        2
    );
    // Cleaned, read from the VM's disk: no partition table at either end, and no file system
    // signature where each partition began.
    let size = lab.disk_size(vm);
    assert!(zero(&lab.read_disk(vm, 0, 1 << 20)), "first MiB");
    assert!(
        zero(&lab.read_disk(vm, size - (1 << 20), 1 << 20)),
        "last MiB"
    );
    for start in partitions {
        assert!(
            zero(&lab.read_disk(vm, start, 64 << 10)),
            "partition at byte {start}"
        );
    }
}

fn zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| *b == 0)
}

/// Byte offsets where the partitions of a GPT disk begin, from its first MiB (header at LBA 1,
/// entries from LBA 2, 128 bytes each, start LBA at byte 32 of an entry).
fn gpt_partition_starts(head: &[u8]) -> Vec<u64> {
    assert_eq!(&head[512..520], b"EFI PART", "no GPT header");
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let entries_lba = u64_at(head, 512 + 72) as usize;
    head[entries_lba * 512..]
        .chunks(128)
        .take(128)
        .filter(|e| e[..16].iter().any(|b| *b != 0))
        .map(|e| u64_at(e, 32) * 512)
        .collect()
}

fn error_message(s: &Serve, name: &str) -> String {
    host(s, "default", name)["status"]["errorMessage"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn set_image(s: &Serve, name: &str, image: &str) {
    s.ok(&[
        "patch",
        "bmh",
        name,
        "--type",
        "merge",
        "-p",
        &format!(r#"{{"spec":{{"online":true,"image":{image}}}}}"#),
    ]);
}

/// What goes wrong is said plainly, and nothing half-written boots: a missing image, a wrong
/// checksum, an image larger than the disk and hints no disk matches each end in a
/// provisioning error naming the cause; then a raw image deploys and boots, on a legacy-BIOS
/// VM. An agent API request with a forged token is refused and logged without the token.
#[test]
fn deploy_failures_name_their_cause_and_a_raw_image_then_boots_on_a_legacy_vm() {
    let lab = Lab::up_with_disk(1, Firmware::Legacy, "default", "5G");
    let vm = lab.vm(0).clone();
    let files = FileServer::start();
    let images = guest_images();
    publish(files.dir.path(), "disk.raw", &images.disk_raw);
    let raw = std::fs::read(&images.disk_raw).unwrap();
    let big = files.dir.path().join("big.qcow2");
    let made = std::process::Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2"])
        .arg(&big)
        .arg("6G")
        .status()
        .unwrap();
    assert!(made.success());
    let big_sum = sha256_hex(&std::fs::read(&big).unwrap());
    // An image server signed by a private CA, which serve hands the agent.
    let secure = FileServer::https();
    let image_ca = secure.ca_file.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ports = Ports::free();
    let api = ports.agent;
    let s = serve_on(
        dir.path(),
        ports,
        &["--agent-image-ca", image_ca.to_str().unwrap()],
    );
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&lab.manifests()));
    wait_for(&s, &lab, &vm, "available", || {
        state(&host(&s, "default", &vm.name)) == "available"
    });
    let base = format!("http://10.0.2.2:{}", files.port);
    let good = sha256_hex(&raw);

    // A missing image: the URL and the HTTP status.
    let missing = format!("{base}/missing.raw");
    set_image(
        &s,
        &vm.name,
        &format!(r#"{{"url":"{missing}","format":"raw","checksum":"{good}"}}"#),
    );
    wait_for(&s, &lab, &vm, "a 404 error", || {
        error_message(&s, &vm.name).contains(&format!("{missing}: HTTP 404"))
    });

    // A wrong checksum: expected and actual; the disk keeps no partition table.
    let wrong = "0".repeat(64);
    set_image(
        &s,
        &vm.name,
        &format!(r#"{{"url":"{base}/disk.raw","format":"raw","checksum":"{wrong}"}}"#),
    );
    wait_for(&s, &lab, &vm, "a checksum error", || {
        let m = error_message(&s, &vm.name);
        m.contains(&format!("sha256 checksum {good}, not the expected {wrong}"))
    });
    assert!(
        !lab.console(&vm).contains(FIRSTBOOT),
        "{}",
        lab.console(&vm)
    );
    let head = lab.read_disk(&vm, 0, 1 << 20);
    assert!(
        head[510..512] != [0x55, 0xaa] && &head[512..520] != b"EFI PART",
        "a partition table after a checksum mismatch"
    );

    // An image larger than the disk: refused before a byte is written.
    set_image(
        &s,
        &vm.name,
        &format!(r#"{{"url":"{base}/big.qcow2","format":"qcow2","checksum":"{big_sum}"}}"#),
    );
    wait_for(&s, &lab, &vm, "a too-large error", || {
        error_message(&s, &vm.name).contains("more than the 5368709120 bytes of /dev/vda")
    });

    // Hints no disk matches: the hints and every disk seen.
    s.ok(&[
        "patch",
        "bmh",
        &vm.name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"rootDeviceHints":{"minSizeGigabytes":100}}}"#,
    ]);
    set_image(
        &s,
        &vm.name,
        &format!(r#"{{"url":"{base}/disk.raw","format":"raw","checksum":"{good}"}}"#),
    );
    wait_for(&s, &lab, &vm, "a hints error", || {
        let m = error_message(&s, &vm.name);
        m.contains("minSizeGigabytes=100") && m.contains("/dev/vda 5.0 GiB")
    });
    assert!(
        !lab.console(&vm).contains(FIRSTBOOT),
        "{}",
        lab.console(&vm)
    );

    // The hints fixed and the image named anew (a failed image is retried only so often): the
    // raw image, over HTTPS with its checksum in a checksum file there too, is written and boots
    // from the disk (legacy BIOS).
    s.ok(&[
        "patch",
        "bmh",
        &vm.name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"rootDeviceHints":{"minSizeGigabytes":null,"deviceName":"/dev/vda"}}}"#,
    ]);
    publish(secure.dir.path(), "fixed.raw", &images.disk_raw);
    std::fs::write(
        secure.dir.path().join("SHA256SUMS"),
        format!("{wrong}  other.raw\n{good}  fixed.raw\n"),
    )
    .unwrap();
    let secure_base = format!("https://10.0.2.2:{}", secure.port);
    // metaData as YAML, which metal3 allows: its keys win over the ones ferrometal adds.
    s.ok(&[
        "create",
        "secret",
        "generic",
        "legacy-meta",
        "--from-literal=metaData=local-hostname: legacy-node\nrole: worker\n",
    ]);
    s.ok(&[
        "patch",
        "bmh",
        &vm.name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"metaData":{"name":"legacy-meta"}}}"#,
    ]);
    set_image(
        &s,
        &vm.name,
        &format!(
            r#"{{"url":"{secure_base}/fixed.raw","format":"raw","checksum":"{secure_base}/SHA256SUMS","checksumType":"sha256"}}"#
        ),
    );
    wait_for(&s, &lab, &vm, "the first boot from the disk", || {
        lab.console(&vm).contains(FIRSTBOOT)
    });
    let line = lab.wait_console(&vm, FIRSTBOOT, 0, BOOT);
    assert!(line.contains("\"boot\":\"bios\""), "{line}");
    assert!(line.contains("\"source\":\"config-2\""), "{line}");
    wait_for(&s, &lab, &vm, "provisioned", || {
        state(&host(&s, "default", &vm.name)) == "provisioned"
    });
    assert_eq!(error_message(&s, &vm.name), "");

    // A forged token: 401, nothing changes, and the refusal is in the log without the token.
    let before = host(&s, "default", &vm.name)["status"].clone();
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(s.dir.join("agent/ca.crt"))
        .args([
            "-H",
            "Authorization: Bearer forged-token-1234",
            &format!("https://127.0.0.1:{api}/v1/instruction"),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "401");
    let log = std::fs::read_to_string(s.dir.join("serve.log")).unwrap();
    assert!(
        log.contains("refused a request with an unknown or expired token"),
        "{log}"
    );
    assert!(!log.contains("forged-token-1234"));
    assert_eq!(host(&s, "default", &vm.name)["status"], before);
    // The agent API's audit log: the refusal with its peer, the real agent's calls under its
    // host, never a token.
    let audit_path = s.dir.join("agent/audit/audit.log");
    let mut audit = String::new();
    for _ in 0..50 {
        audit = std::fs::read_to_string(&audit_path).unwrap_or_default();
        if audit.contains("\"code\":401") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l["code"] == 401
            && l["path"] == "/v1/instruction"
            && l["user"]
                .as_str()
                .is_some_and(|u| u.starts_with("unauthenticated agent at 127.0.0.1"))),
        "{audit}"
    );
    let me = format!("agent:default~{}", vm.name);
    for (path, code) in [("/v1/instruction", 200), ("/v1/report", 204)] {
        assert!(
            lines
                .iter()
                .any(|l| l["user"] == me.as_str() && l["path"] == path && l["code"] == code),
            "{path} {code} by {me} in {audit}"
        );
    }
    assert!(!audit.contains("forged-token-1234") && !audit.contains("Bearer"));
}

/// What must survive: serve killed with SIGKILL while the agent writes the image (the deploy
/// starts again cleanly after the restart and the disk boots), and an agent that falls silent
/// (the VM frozen mid-write, as a hung ramdisk): a timeout error naming it, then a retry that
/// starts clean and succeeds. (A VM switched off mid-write is seen by the power poll and booted
/// into the same session again, which starts its step over.)
#[test]
fn a_deploy_survives_a_killed_serve_and_a_silent_agent() {
    let lab = Lab::up_with_disk(1, Firmware::Uefi, "default", "5G");
    let vm = lab.vm(0).clone();
    // ~1 MB/s: the 11 MiB image takes about ten seconds to write, time to interrupt it.
    let files = FileServer::throttled(1_000_000);
    let images = guest_images();
    publish(files.dir.path(), "disk.qcow2", &images.disk_qcow2);
    publish(files.dir.path(), "again.qcow2", &images.disk_qcow2);
    let sum = sha256_hex(&std::fs::read(&images.disk_qcow2).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let ports = Ports::free();
    let quiet = ["--agent-silence-timeout", "45s"];
    let mut s = serve_on(dir.path(), ports, &quiet);
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&lab.manifests()));
    wait_for(&s, &lab, &vm, "available", || {
        state(&host(&s, "default", &vm.name)) == "available"
    });
    let base = format!("http://10.0.2.2:{}", files.port);
    let deploying = |lab: &Lab| {
        lab.console(&vm)
            .matches("ferrometal-agent: deploying")
            .count()
    };

    // SIGKILL mid-write; the restarted serve deploys again from the start.
    set_image(
        &s,
        &vm.name,
        &format!(r#"{{"url":"{base}/disk.qcow2","format":"qcow2","checksum":"{sum}"}}"#),
    );
    wait_for(&s, &lab, &vm, "the agent writing", || deploying(&lab) == 1);
    s.kill();
    let s = serve_on(dir.path(), ports, &quiet);
    wait_for(&s, &lab, &vm, "the first boot from the disk", || {
        lab.console(&vm).contains(FIRSTBOOT)
    });
    wait_for(&s, &lab, &vm, "provisioned", || {
        state(&host(&s, "default", &vm.name)) == "provisioned"
    });
    assert_eq!(deploying(&lab), 2, "{}", lab.console(&vm));

    // The VM frozen while the agent writes: the silence is an error, the retry works.
    set_image(
        &s,
        &vm.name,
        &format!(r#"{{"url":"{base}/again.qcow2","format":"qcow2","checksum":"{sum}"}}"#),
    );
    wait_for(&s, &lab, &vm, "the agent writing again", || {
        deploying(&lab) == 3
    });
    let frozen = std::process::Command::new("virsh")
        .args(["-q", "-c", "qemu:///system", "suspend", &vm.name])
        .status()
        .unwrap();
    assert!(frozen.success());
    wait_for(&s, &lab, &vm, "the silence reported", || {
        error_message(&s, &vm.name).contains("stopped answering")
    });
    wait_for(&s, &lab, &vm, "the second boot from the disk", || {
        lab.console(&vm).matches(FIRSTBOOT).count() == 2
    });
    wait_for(&s, &lab, &vm, "provisioned again", || {
        state(&host(&s, "default", &vm.name)) == "provisioned"
    });
    assert_eq!(error_message(&s, &vm.name), "");
}
