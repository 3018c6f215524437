//! Ironic all the way: `serve --provisioner ironic` supervising a standalone Ironic that boots
//! a real ironic-python-agent ramdisk (built by `scripts/ipa-ramdisk.sh` from PyPI and Debian)
//! on lab VMs through sushy-tools' virtual media. The VMs' first NICs sit on the lab's
//! provisioning network, where Ironic's API listens: the agent calls Ironic and Ironic calls
//! the agent, as on metal3's provisioning network. What the VM prints on its console and what
//! Ironic records for its node are the truth.

mod lab_common;
mod serve_common;

use std::time::Duration;

use ferrometal_provisioner::ironic::DEFAULT_KERNEL_PARAMS;
use ferrometal_test_support::peers::FileServer;
use ferrometal_test_support::vmlab::{Firmware, Lab, Vm, guest_images, ipa_ramdisk, publish};
use lab_common::{
    EFI_SYSTEM, FIRSTBOOT, boot_without_first_disk, gpt, md_superblock, md10_superblock,
    patch_host, sha256_hex, state,
};
use serde_json::Value;
use serve_common::{Serve, free_port, serve_env};

/// Software emulation: the agent ramdisk (a Debian userland with Python) takes a few minutes
/// to boot and inspect; cleaning and the image write follow on the same boot (fast track).
const LONG: Duration = Duration::from_secs(900);

fn host(s: &Serve, name: &str) -> Value {
    host_in(s, "default", name)
}

fn host_in(s: &Serve, ns: &str, name: &str) -> Value {
    lab_common::host(s, ns, name)
}

fn wait_for(s: &Serve, lab: &Lab, vm: &Vm, what: &str, check: impl FnMut() -> bool) {
    lab_common::wait_for(s, lab, vm, LONG, what, check)
}

/// serve with the ironic provisioner, Ironic's API on the lab's provisioning address and the
/// agent ramdisk served from `files`; `extra` flags after those.
fn serve_ironic(dir: &std::path::Path, lab: &Lab, files: &FileServer, extra: &[&str]) -> Serve {
    let ipa = ipa_ramdisk();
    publish(files.dir.path(), "ipa.kernel", &ipa.kernel);
    publish(files.dir.path(), "ipa.initramfs", &ipa.initrd);
    publish(files.dir.path(), "esp.img", &ipa.esp);
    let kernel = files.url("ipa.kernel");
    let ramdisk = files.url("ipa.initramfs");
    let esp = files.url("esp.img");
    let listen = lab.provisioning_address().to_string();
    // The defaults and, for the image's download, a second between IPA's attempts instead
    // of ten: the wrong checksum and the missing image below are retried nine times each.
    let kernel_params =
        format!("{DEFAULT_KERNEL_PARAMS} ipa-image-download-connection-retry-interval=1");
    let mut args = vec![
        "--provisioner",
        "ironic",
        "--power-poll-interval",
        "10",
        "--error-backoff",
        "2",
        "--bmc-timeout",
        "20",
        "--deploy-kernel-url",
        &kernel,
        "--deploy-ramdisk-url",
        &ramdisk,
        "--deploy-bootloader-url",
        &esp,
        "--ironic-listen",
        &listen,
        "--ironic-kernel-params",
        &kernel_params,
    ];
    args.extend_from_slice(extra);
    // After the last firmware update Ironic reads the BMC three times, 30 s apart by default,
    // before the step goes on: a minute of waiting on an emulator that never goes away.
    let env = [("OS_REDFISH__FIRMWARE_UPDATE_VALIDATION_INTERVAL", "2")];
    serve_env(dir, free_port(), &args, &env)
}

/// Ironic's own record of a node, read with the credentials serve generated for it.
fn ironic_node(s: &Serve, ns: &str, name: &str) -> Value {
    let dir = s.dir.join("ironic");
    let creds = std::fs::read_to_string(dir.join("credentials")).unwrap();
    let conf = std::fs::read_to_string(dir.join("ironic.conf")).unwrap();
    let field = |key: &str| {
        conf.lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = ")))
            .unwrap()
            .trim()
            .to_string()
    };
    let url = format!(
        "http://{}:{}/v1/nodes/{ns}~{name}",
        field("host_ip"),
        field("port")
    );
    let out = std::process::Command::new("curl")
        .args([
            "-sf",
            "-u",
            creds.trim(),
            "-H",
            "X-OpenStack-Ironic-API-Version: 1.81",
        ])
        .arg(&url)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// Registration, in-band inspection by IPA (the VM's real CPUs, RAM, disk and NIC), metadata
/// cleaning, a BIOS update before provisioning (Ironic's `update` clean step with its agent,
/// in `preparing`), then a qcow2 image with user data and network data written by IPA (`direct`
/// deploy, the config drive Ironic builds) and booted from the disk, deprovisioning (cleaning
/// again) back to available, and a missing image named in the provisioning error; on a
/// legacy-BIOS VM. The host is online from the start, as a host kept ready for a deploy: the
/// agent that inspected and cleaned keeps running (Ironic's fast track), and the deploy uses it
/// without booting the ramdisk again.
#[test]
fn ironic_and_its_agent_inspect_clean_and_deploy_a_qcow2_image_on_a_vm() {
    // Two VMs, one registered (the second never starts): with one system behind it, Ironic's
    // firmware update leaves out SimpleUpdate's Targets, which sushy-tools requires.
    let lab = Lab::up_provisioning(2, Firmware::Legacy, "default", "5G", 1, 2048);
    let vm = lab.vm(0).clone();
    let files = FileServer::start_on(lab.provisioning_address());
    let images = guest_images();
    publish(files.dir.path(), "disk.qcow2", &images.disk_qcow2);
    std::fs::write(files.dir.path().join("bios.bin"), b"a BIOS image").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = serve_ironic(dir.path(), &lab, &files, &[]);

    let manifest = std::fs::read_to_string(&vm.manifest)
        .unwrap()
        .replace("  online: false\n", "  online: true\n");
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&manifest));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_for(
        &s,
        &lab,
        &vm,
        "available after inspection and cleaning",
        || state(&host(&s, &vm.name)) == "available",
    );
    let console = lab.console(&vm);
    assert!(
        console.contains("ironic-python-agent"),
        "the agent never ran on the VM:\n{console}"
    );
    let node = ironic_node(&s, "default", &vm.name);
    assert_eq!(node["inspect_interface"], "agent", "{node}");
    // What IPA saw from inside the VM.
    let hw = &host(&s, &vm.name)["status"]["hardware"];
    assert_eq!(hw["cpu"]["count"], 1, "{hw}");
    let ram = hw["ramMebibytes"].as_i64().unwrap_or(0);
    assert!((1900..=2048).contains(&ram), "RAM {ram} MiB: {hw}");
    let disks = hw["storage"].as_array().cloned().unwrap_or_default();
    assert!(
        disks
            .iter()
            .any(|d| d["name"] == "/dev/vda" && d["sizeBytes"] == 5_368_709_120_i64),
        "{hw}"
    );
    let prov_net = lab.provisioning_address().rsplit_once('.').unwrap().0;
    let nics = hw["nics"].as_array().cloned().unwrap_or_default();
    let boot_nic = nics
        .iter()
        .find(|n| n["mac"].as_str() == Some(vm.boot_mac.as_str()))
        .unwrap_or_else(|| panic!("no NIC with the boot MAC: {hw}"));
    assert!(
        boot_nic["ip"]
            .as_str()
            .is_some_and(|ip| ip.starts_with(&format!("{prov_net}."))),
        "{boot_nic}"
    );

    // A BIOS update before provisioning: the host goes back to preparing, where Ironic runs its
    // firmware `update` clean step with its agent (the one still up from cleaning): SimpleUpdate
    // on the BMC, the reboot that applies it; then the host is available again and the version
    // the BMC reports is the one flashed.
    let bios_before = lab.system(&vm)["BiosVersion"].as_str().unwrap().to_string();
    let hfc_yaml = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareComponents\n\
         metadata: {{name: {0}, namespace: default}}\n\
         spec: {{updates: [{{component: bios, url: \"{1}\"}}]}}\n",
        vm.name,
        files.url("bios.bin")
    );
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(&hfc_yaml));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let hfc = || -> Value {
        serde_json::from_str(&s.ok(&["get", "hostfirmwarecomponents", &vm.name, "-o", "json"]))
            .unwrap()
    };
    wait_for(
        &s,
        &lab,
        &vm,
        "the BIOS flashed in preparing, the host available again",
        || {
            !hfc()["status"]["updates"]
                .as_array()
                .is_none_or(Vec::is_empty)
                && state(&host(&s, &vm.name)) == "available"
        },
    );
    let bios_after = lab.system(&vm)["BiosVersion"].as_str().unwrap().to_string();
    assert_ne!(bios_after, bios_before, "the BMC flashed nothing");
    let events = s.ok(&["get", "events", "-o", "jsonpath={.items[*].reason}"]);
    assert!(events.contains("FirmwareUpdated"), "{events}");
    wait_for(&s, &lab, &vm, "the flashed version read back", || {
        hfc()["status"]["components"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["component"] == "bios" && c["currentVersion"] == bios_after.as_str())
    });

    // A qcow2 image with user data and network data: a static address on the boot NIC, which
    // the image's first boot applies from the config drive Ironic wrote, beside the user data.
    let qcow2 = std::fs::read(&images.disk_qcow2).unwrap();
    let image = |url: &str| {
        format!(
            r#"{{"url":"{url}","format":"qcow2","checksum":"{}","checksumType":"sha256"}}"#,
            sha256_hex(&qcow2)
        )
    };
    let user_data = "#!/bin/sh\necho hello from the ironic test\n";
    s.ok(&[
        "create",
        "secret",
        "generic",
        "web-user-data",
        &format!("--from-literal=userData={user_data}"),
    ]);
    let address = format!("{prov_net}.77");
    let network = format!(
        r#"{{"links":[{{"id":"prov","type":"phy","ethernet_mac_address":"{}"}}],"networks":[{{"id":"p","type":"ipv4","link":"prov","ip_address":"{address}","netmask":"255.255.255.0"}}],"services":[]}}"#,
        vm.boot_mac
    );
    s.ok(&[
        "create",
        "secret",
        "generic",
        "web-network-data",
        &format!("--from-literal=networkData={network}"),
    ]);
    patch_host(
        &s,
        "default",
        &vm.name,
        "merge",
        &format!(
            r#"{{"spec":{{"userData":{{"name":"web-user-data"}},"networkData":{{"name":"web-network-data"}},"image":{}}}}}"#,
            image(&files.url("disk.qcow2"))
        ),
    );
    wait_for(&s, &lab, &vm, "the image's first boot", || {
        lab.console(&vm).contains(FIRSTBOOT)
    });
    let line = lab.wait_console(&vm, FIRSTBOOT, 0, LONG);
    assert!(
        line.contains(&format!("\"hostname\":\"{}\"", vm.name)),
        "{line}"
    );
    assert!(line.contains(&sha256_hex(user_data.as_bytes())), "{line}");
    assert!(line.contains("\"network\":\"static\""), "{line}");
    assert!(line.contains(&format!("\"{address}/24\"")), "{line}");
    wait_for(&s, &lab, &vm, "provisioned", || {
        state(&host(&s, &vm.name)) == "provisioned"
    });
    let node = ironic_node(&s, "default", &vm.name);
    assert_eq!(node["provision_state"], "active", "{node}");
    assert_eq!(node["deploy_interface"], "direct", "{node}");
    assert_eq!(lab.console(&vm).matches(FIRSTBOOT).count(), 1);

    // Deprovisioning cleans the disk's metadata again and the host is available.
    patch_host(
        &s,
        "default",
        &vm.name,
        "json",
        r#"[{"op":"remove","path":"/spec/image"}]"#,
    );
    wait_for(&s, &lab, &vm, "available after deprovisioning", || {
        state(&host(&s, &vm.name)) == "available"
    });
    let node = ironic_node(&s, "default", &vm.name);
    assert_eq!(node["provision_state"], "available", "{node}");

    // A missing image, on the host cleaned and ready again: the provisioning error names it
    // (Ironic's validation of the image, through its last_error), and nothing boots.
    let missing = files.url("missing.qcow2");
    patch_host(
        &s,
        "default",
        &vm.name,
        "merge",
        &format!(r#"{{"spec":{{"image":{}}}}}"#, image(&missing)),
    );
    wait_for(
        &s,
        &lab,
        &vm,
        "a provisioning error naming the image",
        || {
            let h = host(&s, &vm.name);
            h["status"]["errorType"] == "provisioning error"
                && h["status"]["errorMessage"]
                    .as_str()
                    .is_some_and(|m| m.contains("missing.qcow2"))
        },
    );
    assert_eq!(
        lab.console(&vm).matches(FIRSTBOOT).count(),
        1,
        "booted again"
    );
}

/// A tenant's HostClaim on a UEFI VM with two disks (Ironic builds the agent's ISO with the
/// ramdisk script's EFI boot loader), the host's root device hints naming the second, and
/// `automatedCleaningMode: disabled`: inspection by IPA and no cleaning, the agent kept up
/// for the first deploy (fast track, the host online from the start); a wrong checksum on the
/// host first ends in a provisioning error naming it (Ironic's last_error) with nothing
/// booted, then the tenant's raw image with user data deploys and boots, and releasing the
/// claim deprovisions the host; then the host's two disks are mirrored (software RAID through
/// Ironic's agent), the image deployed onto the mirror, and each disk boots it.
#[test]
fn a_tenant_claim_then_a_software_raid_mirror_take_raw_images_through_ironic_on_a_uefi_vm() {
    let lab = Lab::up_provisioning(1, Firmware::Uefi, "infra", "5G", 2, 2048);
    let vm = lab.vm(0).clone();
    let files = FileServer::start_on(lab.provisioning_address());
    let images = guest_images();
    publish(files.dir.path(), "disk.raw", &images.disk_raw);
    let raw = std::fs::read(&images.disk_raw).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // One attempt per image: the checksum failure below reaches the retry limit at once.
    let s = serve_ironic(
        dir.path(),
        &lab,
        &files,
        &["--max-provisioning-retries", "1"],
    );
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["create", "namespace", "tenant-a"]);
    // Online from the start: the agent that inspected stays up (fast track) and takes the
    // first image without a second boot of the ramdisk.
    let manifests = lab.manifests().replace(
        "  online: false\n",
        "  online: true\n  automatedCleaningMode: disabled\n  rootDeviceHints: {deviceName: /dev/vdb}\n",
    );
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&manifests));
    s.ok(&["label", "bmh", "-n", "infra", &vm.name, "pool=lab"]);
    wait_for(&s, &lab, &vm, "available after inspection", || {
        state(&host_in(&s, "infra", &vm.name)) == "available"
    });
    let node = ironic_node(&s, "infra", &vm.name);
    assert_eq!(node["automated_clean"], false, "{node}");
    assert_eq!(node["inspect_interface"], "agent", "{node}");
    let console = lab.console(&vm);
    assert!(console.contains("ironic-python-agent"), "{console}");
    assert!(
        !console.contains("erase_devices_metadata"),
        "cleaned although cleaning is disabled:\n{console}"
    );
    let hw = &host_in(&s, "infra", &vm.name)["status"]["hardware"];
    let disks: Vec<&str> = hw["storage"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(disks, ["/dev/vda", "/dev/vdb"], "{hw}");

    // A wrong checksum: IPA refuses the image, Ironic's last_error names it, nothing boots.
    let url = files.url("disk.raw");
    let wrong = "0".repeat(64);
    patch_host(
        &s,
        "infra",
        &vm.name,
        "merge",
        &format!(
            r#"{{"spec":{{"online":true,"image":{{"url":"{url}","format":"raw","checksum":"{wrong}","checksumType":"sha256"}}}}}}"#
        ),
    );
    // The retry limit: after the failed attempt is undeployed the host stays available with
    // the limit's error, and Ironic's node is left alone (not deployed again). The failure
    // itself (Ironic's last_error, naming the checksum) is the host's ProvisioningError Event:
    // its errorMessage moves on to the limit as soon as the attempt is undeployed.
    wait_for(&s, &lab, &vm, "the retry limit", || {
        let h = host_in(&s, "infra", &vm.name);
        state(&h) == "available"
            && h["status"]["provisioningFailCount"] == 1
            && h["status"]["errorType"] == "provisioning error"
            && h["status"]["errorMessage"]
                .as_str()
                .is_some_and(|m| m.contains("retry limit (1) reached"))
    });
    let events = s.ok(&[
        "get",
        "events",
        "-n",
        "infra",
        "--field-selector",
        &format!("involvedObject.name={}", vm.name),
        "-o",
        "jsonpath={range .items[?(@.reason==\"ProvisioningError\")]}{.message}{\"\\n\"}{end}",
    ]);
    assert!(
        events
            .lines()
            .any(|m| m.to_lowercase().contains("checksum")),
        "{events}"
    );
    let node = ironic_node(&s, "infra", &vm.name);
    assert_eq!(node["provision_state"], "available", "{node}");
    assert!(!lab.console(&vm).contains(FIRSTBOOT));
    patch_host(
        &s,
        "infra",
        &vm.name,
        "json",
        r#"[{"op":"remove","path":"/spec/image"},{"op":"replace","path":"/spec/online","value":false}]"#,
    );
    wait_for(&s, &lab, &vm, "available again", || {
        state(&host_in(&s, "infra", &vm.name)) == "available"
    });

    // The tenant's claim: a raw image and user data, through Ironic's direct deploy.
    s.lend("infra", "tenant-a");
    let alice = s.tenant("alice", "tenant-a");
    let user_data = "#!/bin/sh\necho hello from the ironic claim test\n";
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
    let claim = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: web}}\nspec:\n  poweredOn: true\n  hostSelector: {{matchLabels: {{pool: lab}}}}\n  userData: {{name: web-user-data}}\n  image: {{url: \"{url}\", format: raw, checksum: \"{}\", checksumType: sha256}}\n",
        sha256_hex(&raw)
    );
    let o = s.kubectl_with(&alice, &["apply", "-f", "-"], Some(&claim));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_for(&s, &lab, &vm, "the image's first boot", || {
        lab.console(&vm).contains(FIRSTBOOT)
    });
    let line = lab.wait_console(&vm, FIRSTBOOT, 0, LONG);
    assert!(
        line.contains(&format!("\"hostname\":\"{}\"", vm.name)),
        "{line}"
    );
    assert!(line.contains(&sha256_hex(user_data.as_bytes())), "{line}");
    assert!(line.contains("\"boot\":\"uefi\""), "{line}");
    wait_for(&s, &lab, &vm, "provisioned", || {
        state(&host_in(&s, "infra", &vm.name)) == "provisioned"
    });
    let node = ironic_node(&s, "infra", &vm.name);
    assert_eq!(node["provision_state"], "active", "{node}");
    // The hints reached IPA: the image is on the second disk, the first is as blank as made.
    assert_eq!(
        node["properties"]["root_device"]["name"], "/dev/vdb",
        "{node}"
    );
    let vdb = lab.read_disk_at(&vm, 1, 0, 1 << 20);
    assert_eq!(&vdb[512..520], b"EFI PART", "no GPT on /dev/vdb");
    assert!(
        lab.read_disk_at(&vm, 0, 0, 1 << 20).iter().all(|b| *b == 0),
        "/dev/vda was written"
    );

    // Releasing the claim deprovisions the host (no cleaning: disabled) back to available.
    let o = s.kubectl_with(&alice, &["delete", "hostclaim", "web"], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_for(&s, &lab, &vm, "available after the claim's release", || {
        state(&host_in(&s, "infra", &vm.name)) == "available"
    });
    assert_eq!(
        ironic_node(&s, "infra", &vm.name)["provision_state"],
        "available"
    );

    // Software RAID (metal3's softwareRAIDVolumes): the infrastructure team mirrors the two
    // disks. Ironic's agent builds the mirror in a manual cleaning, writes the image onto it
    // and puts the image's ESP on both disks (itself a mirror); each disk then boots alone.
    patch_host(
        &s,
        "infra",
        &vm.name,
        "json",
        &format!(
            r#"[{{"op":"remove","path":"/spec/rootDeviceHints"}},{{"op":"add","path":"/spec/raid","value":{{"softwareRAIDVolumes":[{{"level":"1"}}]}}}},{{"op":"replace","path":"/spec/online","value":true}},{{"op":"add","path":"/spec/image","value":{{"url":"{url}","format":"raw","checksum":"{}","checksumType":"sha256"}}}}]"#,
            sha256_hex(&raw)
        ),
    );
    let before = lab.console_len(&vm);
    wait_for(&s, &lab, &vm, "provisioned on the mirror", || {
        state(&host_in(&s, "infra", &vm.name)) == "provisioned"
    });
    let line = lab.wait_console(&vm, FIRSTBOOT, before, LONG);
    assert!(line.contains("\"boot\":\"uefi\""), "{line}");
    let h = host_in(&s, "infra", &vm.name);
    assert_eq!(
        h["status"]["provisioning"]["raid"]["softwareRAIDVolumes"],
        h["spec"]["raid"]["softwareRAIDVolumes"],
        "{h}"
    );
    let node = ironic_node(&s, "infra", &vm.name);
    assert_eq!(node["raid_interface"], "agent", "{node}");
    let built = &node["raid_config"]["logical_disks"];
    assert_eq!(built.as_array().map(Vec::len), Some(1), "{node}");
    assert_eq!(built[0]["raid_level"], "1", "{node}");
    assert_eq!(built[0]["controller"], "software", "{node}");
    // Each disk: two partitions, an ESP member (md 1.0: its data from byte 0, the image's FAT
    // label in its first sector) and the root array's member after it (md 1.2: the superblock
    // 4 KiB in); the same two arrays on both.
    let mut arrays = Vec::new();
    for disk in 0..2 {
        let table = gpt(&lab.read_disk_at(&vm, disk, 0, 1 << 20));
        assert_eq!(table.len(), 2, "disk {disk}: {table:?}");
        let esp = *table
            .iter()
            .find(|e| e.1 == EFI_SYSTEM)
            .unwrap_or_else(|| panic!("disk {disk}: no EFI system partition in {table:?}"));
        let member = *table.iter().find(|e| e.1 != EFI_SYSTEM).unwrap();
        assert!(member.2 > esp.2, "disk {disk}: {table:?}");
        let boot_sector = lab.read_disk_at(&vm, disk, esp.2, 512);
        assert!(
            boot_sector.windows(6).any(|w| w == b"FMBOOT"),
            "disk {disk}: the ESP copy is not the image's"
        );
        let root = md_superblock(&lab, &vm, disk, member.2 + 4096);
        let esp_array = md10_superblock(&lab, &vm, disk, esp.2, esp.3);
        arrays.push((root, esp_array));
    }
    assert_eq!(
        arrays[0], arrays[1],
        "both disks are members of both arrays"
    );
    assert_ne!(arrays[0].0.0, arrays[0].1.0);
    assert_eq!((arrays[0].0.1, arrays[0].1.1), (1, 1), "RAID levels");

    // The first disk pulled out: the second boots on its own.
    let line = boot_without_first_disk(&s, &lab, &vm, LONG);
    assert!(line.contains("\"boot\":\"uefi\""), "{line}");
}
