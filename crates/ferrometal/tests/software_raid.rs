//! metal3's `softwareRAIDVolumes` through ferrometal's deploy agent, on a lab VM with two disks
//! behind sushy-tools: a RAID 1 root of 2 GiB and a RAID 0 volume on the rest, the image
//! written to the mirror, the image's boot partitions copied to both disks. The proof is on the
//! VM: both disks carry the md 1.0 superblocks of both arrays and the same image bytes, the
//! disk boots (its first-boot line on the console), and it boots again with its first disk
//! pulled out of the VM.

mod lab_common;
mod serve_common;

use std::time::Duration;

use ferrometal_test_support::peers::FileServer;
use ferrometal_test_support::vmlab::{Firmware, Lab, Vm, guest_images, publish};
use lab_common::{
    FIRSTBOOT, LINUX_RAID, Ports, boot_without_first_disk, gpt, host, md10_superblock, patch_host,
    serve_on, sha256_hex, state,
};
use serve_common::Serve;

/// Software emulation: a boot into the ramdisk or the disk takes 6-15 s here; room for load.
const BOOT: Duration = Duration::from_secs(300);
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The agent keeps the first GiB of each member disk for the image's boot partitions.
const BOOT_REGION: u64 = GIB;
fn wait_for(s: &Serve, lab: &Lab, vm: &Vm, what: &str, check: impl FnMut() -> bool) {
    lab_common::wait_for(s, lab, vm, BOOT, what, check)
}

/// The md 1.0 superblock at the end of a member partition: its array UUID and RAID level.
#[test]
fn software_raid_volumes_are_built_by_the_agent_and_each_disk_boots_alone() {
    let lab = Lab::up_with_disks(1, Firmware::Legacy, "default", "5G", 2);
    let vm = lab.vm(0).clone();
    let files = FileServer::start();
    let images = guest_images();
    publish(files.dir.path(), "disk.raw", &images.disk_raw);
    let raw = std::fs::read(&images.disk_raw).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = serve_on(dir.path(), Ports::free(), &[]);
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&lab.manifests()));
    wait_for(&s, &lab, &vm, "available", || {
        state(&host(&s, "default", &vm.name)) == "available"
    });

    let url = format!("http://10.0.2.2:{}/disk.raw", files.port);
    let sum = sha256_hex(&raw);
    let raid = r#"{"softwareRAIDVolumes":[{"level":"1","sizeGibibytes":2},{"level":"0"}]}"#;
    patch_host(
        &s,
        "default",
        &vm.name,
        "merge",
        &format!(
            r#"{{"spec":{{"online":true,"raid":{raid},"image":{{"url":"{url}","format":"raw","checksum":"{sum}"}}}}}}"#
        ),
    );
    wait_for(&s, &lab, &vm, "the first boot from the disk", || {
        lab.console(&vm).contains(FIRSTBOOT)
    });
    wait_for(&s, &lab, &vm, "provisioned", || {
        state(&host(&s, "default", &vm.name)) == "provisioned"
    });
    let h = host(&s, "default", &vm.name);
    assert_eq!(
        h["spec"]["raid"]["softwareRAIDVolumes"][1]["level"], "0",
        "{h}"
    );
    assert_eq!(
        h["status"]["provisioning"]["raid"]["softwareRAIDVolumes"],
        h["spec"]["raid"]["softwareRAIDVolumes"],
        "{h}"
    );
    let conditions = h["status"]["conditions"].to_string();
    assert!(!conditions.contains("softwareRAIDVolumes"), "{conditions}");
    let console = lab.console(&vm);
    assert!(
        console.contains("software RAID /dev/md0: RAID 1 over /dev/vda3 /dev/vdb3 (2048 MiB)"),
        "{console}"
    );
    assert!(
        console.contains("software RAID /dev/md1: RAID 0 over /dev/vda4 /dev/vdb4"),
        "{console}"
    );
    let events = s.ok(&["get", "events", "-o", "json"]);
    assert!(
        events.contains("software RAID volumes, built by the deploy agent"),
        "{events}"
    );

    // Both disks: the image's boot partitions at its own LBAs and numbers, then the members.
    let image = gpt(&raw[..34 * 512]);
    let (esp_start, esp_len) = image
        .iter()
        .find(|e| e.0 == 1)
        .map(|e| (e.2, e.3))
        .expect("the image's ESP is its partition 2");
    let esp = &raw[esp_start as usize..(esp_start + esp_len) as usize];
    let mut arrays = Vec::new();
    for disk in 0..2 {
        let head = lab.read_disk_at(&vm, disk, 0, MIB);
        assert_eq!(
            head[..440],
            raw[..440],
            "disk {disk}: the image's boot code"
        );
        let table = gpt(&head);
        assert_eq!(
            table[..2]
                .iter()
                .map(|e| (e.0, e.2, e.3))
                .collect::<Vec<_>>(),
            image.iter().map(|e| (e.0, e.2, e.3)).collect::<Vec<_>>(),
            "disk {disk}"
        );
        let members: Vec<_> = table.iter().filter(|e| e.1 == LINUX_RAID).collect();
        assert_eq!(members.len(), 2, "disk {disk}: {table:?}");
        assert_eq!(members[0].2, BOOT_REGION);
        assert_eq!(members[0].3, 2 * GIB + MIB);
        assert_eq!(members[1].2, BOOT_REGION + 2 * GIB + MIB);
        // The copied ESP, and the image itself inside the mirror (md 1.0: data from byte 0).
        assert!(
            lab.read_disk_at(&vm, disk, esp_start, esp_len) == esp,
            "disk {disk}: ESP copy"
        );
        assert!(
            lab.read_disk_at(&vm, disk, BOOT_REGION + esp_start, esp_len) == esp,
            "disk {disk}: the image in the mirror"
        );
        arrays.push((
            md10_superblock(&lab, &vm, disk, members[0].2, members[0].3),
            md10_superblock(&lab, &vm, disk, members[1].2, members[1].3),
        ));
    }
    assert_eq!(
        arrays[0], arrays[1],
        "both disks are members of the same two arrays"
    );
    assert_ne!(arrays[0].0.0, arrays[0].1.0);
    assert_eq!((arrays[0].0.1, arrays[0].1.1), (1, 0), "RAID levels");

    // The first disk pulled out: the second boots on its own.
    let line = boot_without_first_disk(&s, &lab, &vm, BOOT);
    assert!(line.contains("\"boot\":\"bios\""), "{line}");
}
