//! Software RAID (metal3's `softwareRAIDVolumes`), built before the image is written, as
//! Ironic's agent builds it: each member disk gets a GPT with one partition per volume, an md
//! array is made of those partitions, and the image goes to the root volume's array.
//!
//! The arrays use md's 1.0 superblock, which sits at the end of each member: a member partition
//! starts with exactly what the array holds. A whole-disk image brings its own boot partitions
//! (an EFI system partition, a BIOS boot partition) inside the array, where no firmware looks;
//! so the first [`BOOT_REGION`] of every member disk is kept free, and once the image is
//! written its boot partitions are copied there at the same LBAs and partition numbers, with
//! its MBR boot code: each member disk boots alone, as after a disk failure. The installed OS
//! assembles the arrays itself (it needs mdadm, as with Ironic).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::hints::{choose_root_disk, describe_hints, matches};
use crate::partition::{GptEntry, read_gpt, write_gpt};
use crate::protocol::{Disk, RootDeviceHints, SoftwareRaidVolume};

/// Kept free at the start of each member disk for the image's boot partitions (Ironic's
/// default EFI system partition is 550 MiB).
pub const BOOT_REGION: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Room for md's 1.0 superblock and its internal bitmap at the end of a member.
const MD_META: u64 = MIB;
/// A member partition smaller than this is a mistake, not a volume.
const MIN_MEMBER: u64 = 16 * MIB;

/// Linux RAID: A19D880F-05FC-4D3B-A006-743F0F84911E.
const LINUX_RAID: [u8; 16] = [
    0x0F, 0x88, 0x9D, 0xA1, 0xFC, 0x05, 0x3B, 0x4D, 0xA0, 0x06, 0x74, 0x3F, 0x0F, 0x84, 0x91, 0x1E,
];
/// EFI system partition: C12A7328-F81F-11D2-BA4B-00A0C93EC93B.
const ESP: [u8; 16] = [
    0x28, 0x73, 0x2A, 0xC1, 0x1F, 0xF8, 0xD2, 0x11, 0xBA, 0x4B, 0x00, 0xA0, 0xC9, 0x3E, 0xC9, 0x3B,
];
/// BIOS boot partition (grub's core.img): 21686148-6449-6E6F-744E-656564454649.
const BIOS_BOOT: [u8; 16] = [
    0x48, 0x61, 0x68, 0x21, 0x49, 0x64, 0x6F, 0x6E, 0x74, 0x4E, 0x65, 0x65, 0x64, 0x45, 0x46, 0x49,
];

/// One member partition on a disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub volume: usize,
    pub start: u64,
    pub len: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// `/dev/NAME`.
    pub disk: String,
    pub size: u64,
    /// In volume order; partition `i + 1` while the arrays are built.
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// `/dev/mdN`.
    pub device: String,
    /// As mdadm's `--level`.
    pub level: &'static str,
    /// (holder index, part index) of each member.
    pub members: Vec<(usize, usize)>,
}

/// What to build, decided before anything is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub holders: Vec<Holder>,
    pub volumes: Vec<Volume>,
    /// Index of the volume the image goes to; `None`: the root device hints choose among
    /// the arrays and the other disks once they exist.
    pub root: Option<usize>,
}

/// Decides the member partitions of `volumes` on `disks`: every check that can fail does so
/// here, before any disk is touched.
pub fn plan(
    volumes: &[SoftwareRaidVolume],
    disks: &[Disk],
    root_hints: &RootDeviceHints,
) -> Result<Plan, String> {
    if volumes.is_empty() || volumes.len() > 2 {
        return Err(format!(
            "softwareRAIDVolumes: 1 or 2 volumes can be built, not {}",
            volumes.len()
        ));
    }
    if volumes[0].level != "1" {
        return Err(format!(
            "softwareRAIDVolumes[0].level: the first volume must be RAID 1 (it holds the OS), not {:?}",
            volumes[0].level
        ));
    }
    let mut holders: Vec<Holder> = Vec::new();
    let mut planned = Vec::new();
    for (v, volume) in volumes.iter().enumerate() {
        let level = match volume.level.as_str() {
            "0" => "0",
            "1" => "1",
            "1+0" => "10",
            other => {
                return Err(format!(
                    "softwareRAIDVolumes[{v}].level: {other:?} is not 0, 1 or 1+0"
                ));
            }
        };
        let chosen: Vec<&Disk> = if volume.physical_disks.is_empty() {
            disks.iter().collect()
        } else {
            let mut chosen: Vec<&Disk> = Vec::new();
            for (j, hints) in volume.physical_disks.iter().enumerate() {
                let disk = disks
                    .iter()
                    .find(|d| matches(d, hints) && !chosen.iter().any(|c| c.name == d.name))
                    .ok_or_else(|| {
                        format!(
                            "softwareRAIDVolumes[{v}].physicalDisks[{j}]: no other disk matches {} (disks: {})",
                            describe_hints(hints),
                            names(disks)
                        )
                    })?;
                chosen.push(disk);
            }
            chosen
        };
        if chosen.len() < 2 {
            return Err(format!(
                "softwareRAIDVolumes[{v}]: RAID needs at least 2 disks, this host has {} ({})",
                chosen.len(),
                names(disks)
            ));
        }
        let n = chosen.len() as u64;
        let data = volume.size_gibibytes.filter(|g| *g > 0).map(|g| {
            let total = g as u64 * GIB;
            match level {
                "0" => total.div_ceil(n),
                "10" => (2 * total).div_ceil(n),
                _ => total,
            }
        });
        let mut members = Vec::new();
        for disk in chosen {
            let h = match holders.iter().position(|h| h.disk == disk.name) {
                Some(h) => h,
                None => {
                    holders.push(Holder {
                        disk: disk.name.clone(),
                        size: u64::try_from(disk.size_bytes).unwrap_or(0),
                        parts: Vec::new(),
                    });
                    holders.len() - 1
                }
            };
            let holder = &mut holders[h];
            let start = holder.parts.last().map_or(BOOT_REGION, |p| p.start + p.len);
            // The backup GPT takes the disk's last MiB.
            let room = (holder.size.saturating_sub(MIB) / MIB * MIB).saturating_sub(start);
            let len = match data {
                Some(d) => (d + MD_META).div_ceil(MIB) * MIB,
                None => room,
            };
            if len > room || len < MIN_MEMBER {
                return Err(format!(
                    "softwareRAIDVolumes[{v}]: no room on {} ({} MiB; {} MiB are free after the first {} MiB kept for boot partitions and the volumes before), {} MiB wanted",
                    holder.disk,
                    holder.size / MIB,
                    room / MIB,
                    BOOT_REGION / MIB,
                    len.max(MIN_MEMBER) / MIB
                ));
            }
            holder.parts.push(Part {
                volume: v,
                start,
                len,
            });
            members.push((h, holder.parts.len() - 1));
        }
        planned.push(Volume {
            device: format!("/dev/md{v}"),
            level,
            members,
        });
    }
    let hinted = !crate::hints::given_hints(root_hints).is_empty();
    let root = match volumes.iter().position(|v| v.root_volume) {
        Some(r) => Some(r),
        None if hinted => None,
        None => Some(0),
    };
    Ok(Plan {
        holders,
        volumes: planned,
        root,
    })
}

fn names(disks: &[Disk]) -> String {
    if disks.is_empty() {
        return "no disks found".into();
    }
    disks
        .iter()
        .map(|d| format!("{} {} MiB", d.name, d.size_bytes.max(0) as u64 / MIB))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `/dev/vda` 1 → `/dev/vda1`; `/dev/nvme0n1` 1 → `/dev/nvme0n1p1`.
pub fn part_path(disk: &str, number: usize) -> String {
    if disk.ends_with(|c: char| c.is_ascii_digit()) {
        format!("{disk}p{number}")
    } else {
        format!("{disk}{number}")
    }
}

/// The arrays as built: where the image goes and what it can be told about them.
#[derive(Debug, Clone)]
pub struct Built {
    pub plan: Plan,
    /// Each volume's array size in bytes.
    pub sizes: Vec<u64>,
    /// The device the image goes to, and its size.
    pub root: Disk,
    /// Per holder, per part: its partition number (1-based) in the table the disk keeps.
    pub numbers: Vec<Vec<usize>>,
}

impl Built {
    /// One line per array, for the console and the report.
    pub fn describe(&self) -> Vec<String> {
        self.plan
            .volumes
            .iter()
            .zip(&self.sizes)
            .map(|(v, size)| {
                let members: Vec<String> = v
                    .members
                    .iter()
                    .map(|(h, p)| part_path(&self.plan.holders[*h].disk, self.numbers[*h][*p]))
                    .collect();
                format!(
                    "{}: RAID {} over {} ({} MiB)",
                    v.device,
                    if v.level == "10" { "1+0" } else { v.level },
                    members.join(" "),
                    size / MIB
                )
            })
            .collect()
    }
}

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Stops every md array the kernel runs (left by an earlier deploy or found by the kernel), so
/// the disks can be partitioned again.
fn stop_arrays(sys_root: &Path) -> Result<(), String> {
    let Ok(dir) = std::fs::read_dir(sys_root.join("sys/block")) else {
        return Ok(());
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("md") {
            run("mdadm", &["--stop", &format!("/dev/{name}")])?;
        }
    }
    Ok(())
}

fn sector_of(sys_root: &Path, dev: &str) -> u64 {
    crate::partition::logical_block_size(sys_root, dev)
}

fn open(dev: &str) -> Result<File, String> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(dev)
        .map_err(|e| format!("opening {dev}: {e}"))
}

/// Partitions the member disks and creates the arrays; the image is then written to
/// `Built::root`.
pub fn build(
    plan: Plan,
    disks: &[Disk],
    root_hints: &RootDeviceHints,
    sys_root: &Path,
) -> Result<Built, String> {
    stop_arrays(sys_root)?;
    for holder in &plan.holders {
        let f = open(&holder.disk)?;
        let sector = sector_of(sys_root, &holder.disk);
        // Old tables at both ends go first, so nothing of them is read back.
        let zeros = vec![0u8; MIB as usize];
        f.write_all_at(&zeros, 0)
            .and_then(|()| f.write_all_at(&zeros, holder.size - MIB))
            .map_err(|e| format!("wiping {}: {e}", holder.disk))?;
        let entries: Vec<GptEntry> = holder
            .parts
            .iter()
            .enumerate()
            .map(|(i, p)| member_entry(i, p, sector))
            .collect::<Result<_, _>>()?;
        write_gpt(&f, holder.size, sector, &entries, guid()?, &[0; 440])
            .and_then(|()| f.sync_all().map_err(Into::into))
            .map_err(|e| format!("partitioning {}: {e}", holder.disk))?;
        drop(f);
        run("blockdev", &["--rereadpt", &holder.disk])?;
    }
    for volume in &plan.volumes {
        let members: Vec<String> = volume
            .members
            .iter()
            .map(|(h, p)| part_path(&plan.holders[*h].disk, p + 1))
            .collect();
        for m in &members {
            wait_for(m)?;
            // A superblock left from another life would make mdadm ask; none is wanted.
            let _ = run("mdadm", &["--zero-superblock", "--force", m]);
        }
        let level = format!("--level={}", volume.level);
        let count = format!("--raid-devices={}", members.len());
        let mut args = vec![
            "--create",
            volume.device.as_str(),
            "--run",
            "--force",
            "--metadata=1.0",
            // Nothing on the members is read before it is written; a resync would write
            // every block of every disk before the first boot.
            "--assume-clean",
            level.as_str(),
            count.as_str(),
        ];
        args.extend(members.iter().map(String::as_str));
        run("mdadm", &args)?;
    }
    let mut sizes = Vec::new();
    for volume in &plan.volumes {
        let name = volume.device.trim_start_matches("/dev/");
        let sectors: u64 =
            std::fs::read_to_string(sys_root.join("sys/block").join(name).join("size"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
        sizes.push(sectors * 512);
    }
    let arrays: Vec<Disk> = plan
        .volumes
        .iter()
        .zip(&sizes)
        .map(|(v, size)| Disk {
            name: v.device.clone(),
            size_bytes: i64::try_from(*size).unwrap_or(i64::MAX),
            ..Disk::default()
        })
        .collect();
    let root = match plan.root {
        Some(r) => arrays[r].clone(),
        None => {
            // The hints choose among the arrays and the disks that hold none.
            let mut candidates = arrays.clone();
            candidates.extend(
                disks
                    .iter()
                    .filter(|d| !plan.holders.iter().any(|h| h.disk == d.name))
                    .cloned(),
            );
            choose_root_disk(&candidates, root_hints)
                .map_err(|e| e.to_string())?
                .clone()
        }
    };
    let numbers = plan
        .holders
        .iter()
        .map(|h| (1..=h.parts.len()).collect())
        .collect();
    Ok(Built {
        plan,
        sizes,
        root,
        numbers,
    })
}

fn member_entry(i: usize, p: &Part, sector: u64) -> Result<GptEntry, String> {
    Ok(GptEntry::new(
        i,
        LINUX_RAID,
        guid()?,
        p.start / sector,
        (p.start + p.len) / sector - 1,
        &format!("md{}", p.volume),
    ))
}

fn guid() -> Result<[u8; 16], String> {
    crate::partition::random_guid().map_err(|e| format!("reading /dev/urandom: {e}"))
}

/// The kernel names a new partition a moment after the table is read again.
fn wait_for(dev: &str) -> Result<(), String> {
    let started = Instant::now();
    while !Path::new(dev).exists() {
        if started.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "{dev} did not appear after its disk was partitioned"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// After the image is on the root array: copies its boot partitions and MBR boot code to every
/// member disk of that array, stops the arrays and gives each member disk its final table (the
/// boot partitions at the image's partition numbers, the members in the free slots).
pub fn install_boot(built: &mut Built, sys_root: &Path) -> Result<(), String> {
    let root_volume = built
        .plan
        .volumes
        .iter()
        .position(|v| v.device == built.root.name);
    let image_dev = &built.root.name;
    let (boot, boot_code) = match root_volume {
        Some(r) => {
            let sector = sector_of(sys_root, image_dev);
            let f = File::open(image_dev).map_err(|e| format!("opening {image_dev}: {e}"))?;
            let entries = read_gpt(&f, sector)
                .map_err(|e| format!("reading the image's partition table on {image_dev}: {e}"))?
                .ok_or_else(|| {
                    format!("the image on {image_dev} has no GPT: a software RAID root needs a GPT whole-disk image, whose boot partitions are copied to each member disk")
                })?;
            let boot: Vec<GptEntry> = entries
                .into_iter()
                .filter(|e| e.type_guid() == ESP || e.type_guid() == BIOS_BOOT)
                .collect();
            if boot.is_empty() {
                return Err(format!(
                    "the image on {image_dev} has no EFI system or BIOS boot partition to copy to the member disks, so none of them could boot"
                ));
            }
            for e in &boot {
                if (e.last_lba() + 1) * sector > BOOT_REGION {
                    return Err(format!(
                        "the image's boot partition {} ends at {} MiB, past the first {} MiB each member disk keeps for boot partitions",
                        e.slot + 1,
                        (e.last_lba() + 1) * sector / MIB,
                        BOOT_REGION / MIB
                    ));
                }
            }
            let mut code = [0u8; 440];
            f.read_exact_at(&mut code, 0)
                .map_err(|e| format!("reading {image_dev}: {e}"))?;
            // Copied while the arrays run: the boot region lies before every member partition.
            let root_members = &built.plan.volumes[r].members;
            let mut chunk = vec![0u8; 4 * MIB as usize];
            for (h, _) in root_members {
                let disk = &built.plan.holders[*h].disk;
                let to = open(disk)?;
                for e in &boot {
                    let end = (e.last_lba() + 1) * sector;
                    let mut at = e.first_lba() * sector;
                    while at < end {
                        let n = (end - at).min(chunk.len() as u64) as usize;
                        f.read_exact_at(&mut chunk[..n], at)
                            .map_err(|err| format!("reading {image_dev}: {err}"))?;
                        to.write_all_at(&chunk[..n], at)
                            .map_err(|err| format!("copying boot partitions to {disk}: {err}"))?;
                        at += n as u64;
                    }
                }
                to.sync_all()
                    .map_err(|err| format!("writing to {disk}: {err}"))?;
            }
            (Some(boot), code)
        }
        None => (None, [0u8; 440]),
    };
    // The image and config drive were synced by the deploy, the boot copies above.
    for volume in &built.plan.volumes {
        run("mdadm", &["--stop", &volume.device])?;
    }
    for (h, holder) in built.plan.holders.iter().enumerate() {
        let sector = sector_of(sys_root, &holder.disk);
        let holds_root = root_volume
            .is_some_and(|r| built.plan.volumes[r].members.iter().any(|(mh, _)| *mh == h));
        let mut entries = Vec::new();
        let f = open(&holder.disk)?;
        let mut code = [0u8; 440];
        if let (true, Some(boot)) = (holds_root, &boot) {
            entries.extend(boot.iter().cloned());
            code = boot_code;
        }
        let mut slot = 0;
        for (i, p) in holder.parts.iter().enumerate() {
            while entries.iter().any(|e| e.slot == slot) {
                slot += 1;
            }
            let mut e = member_entry(i, p, sector)?;
            e.slot = slot;
            entries.push(e);
            built.numbers[h][i] = slot + 1;
        }
        write_gpt(&f, holder.size, sector, &entries, guid()?, &code)
            .and_then(|()| f.sync_all().map_err(Into::into))
            .map_err(|e| format!("partitioning {}: {e}", holder.disk))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(name: &str, gib: i64) -> Disk {
        Disk {
            name: name.into(),
            size_bytes: gib << 30,
            serial_number: Some(format!("SN-{name}")),
            ..Disk::default()
        }
    }

    fn vol(level: &str, gib: Option<i64>) -> SoftwareRaidVolume {
        SoftwareRaidVolume {
            level: level.into(),
            size_gibibytes: gib,
            ..SoftwareRaidVolume::default()
        }
    }

    #[test]
    fn guids_are_stored_mixed_endian() {
        let g = |s: &str| {
            let h: Vec<u8> = (0..16)
                .map(|i| u8::from_str_radix(&s.replace('-', "")[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            [
                h[3], h[2], h[1], h[0], h[5], h[4], h[7], h[6], h[8], h[9], h[10], h[11], h[12],
                h[13], h[14], h[15],
            ]
        };
        assert_eq!(LINUX_RAID, g("A19D880F-05FC-4D3B-A006-743F0F84911E"));
        assert_eq!(ESP, g("C12A7328-F81F-11D2-BA4B-00A0C93EC93B"));
        assert_eq!(BIOS_BOOT, g("21686148-6449-6E6F-744E-656564454649"));
    }

    #[test]
    fn a_mirror_and_a_stripe_share_every_disk_after_the_boot_region() {
        let disks = [disk("/dev/vda", 10), disk("/dev/vdb", 10)];
        let p = plan(
            &[vol("1", Some(2)), vol("0", None)],
            &disks,
            &RootDeviceHints::default(),
        )
        .unwrap();
        assert_eq!(p.root, Some(0));
        assert_eq!(p.holders.len(), 2);
        for h in &p.holders {
            assert_eq!(h.parts[0].start, BOOT_REGION);
            assert_eq!(h.parts[0].len, 2 * GIB + MIB);
            assert_eq!(h.parts[1].start, BOOT_REGION + 2 * GIB + MIB);
            // The rest, but the backup table's MiB.
            assert_eq!(h.parts[1].start + h.parts[1].len, 10 * GIB - MIB);
        }
        assert_eq!(p.volumes[0].level, "1");
        assert_eq!(p.volumes[1].members, vec![(0, 1), (1, 1)]);
        assert_eq!(p.volumes[1].device, "/dev/md1");
    }

    #[test]
    fn sizes_are_split_across_stripes() {
        let disks = [
            disk("/dev/sda", 10),
            disk("/dev/sdb", 10),
            disk("/dev/sdc", 10),
            disk("/dev/sdd", 10),
        ];
        let p = plan(
            &[vol("1", Some(1)), vol("1+0", Some(4))],
            &disks,
            &RootDeviceHints::default(),
        )
        .unwrap();
        // RAID 1+0 of 4 GiB on 4 disks: 2 GiB each (mirrored halves of a stripe).
        assert_eq!(p.holders[0].parts[1].len, 2 * GIB + MIB);
        assert_eq!(p.volumes[1].level, "10");
    }

    #[test]
    fn physical_disk_hints_pick_one_disk_each() {
        let disks = [
            disk("/dev/sda", 10),
            disk("/dev/sdb", 10),
            disk("/dev/sdc", 10),
        ];
        let mut v = vol("1", None);
        v.physical_disks = vec![
            RootDeviceHints {
                serial_number: Some("SN-/dev/sdc".into()),
                ..Default::default()
            },
            RootDeviceHints {
                device_name: Some("/dev/sda".into()),
                ..Default::default()
            },
        ];
        let p = plan(&[v.clone()], &disks, &RootDeviceHints::default()).unwrap();
        let held: Vec<&str> = p.holders.iter().map(|h| h.disk.as_str()).collect();
        assert_eq!(held, ["/dev/sdc", "/dev/sda"]);
        v.physical_disks[1].device_name = Some("/dev/sdz".into());
        let err = plan(&[v], &disks, &RootDeviceHints::default()).unwrap_err();
        assert!(
            err.starts_with("softwareRAIDVolumes[0].physicalDisks[1]: no other disk matches"),
            "{err}"
        );
    }

    #[test]
    fn what_cannot_be_built_is_refused_before_any_disk_is_touched() {
        let two = [disk("/dev/vda", 5), disk("/dev/vdb", 5)];
        let none = RootDeviceHints::default();
        let err = plan(&[vol("0", None)], &two, &none).unwrap_err();
        assert!(err.contains("first volume must be RAID 1"), "{err}");
        let err = plan(&[vol("1", None)], &two[..1], &none).unwrap_err();
        assert!(err.contains("at least 2 disks, this host has 1"), "{err}");
        let err = plan(&[vol("1", Some(8))], &two, &none).unwrap_err();
        assert!(err.contains("no room on /dev/vda"), "{err}");
        // A volume with no size takes the rest: nothing is left for a second one.
        let err = plan(&[vol("1", None), vol("0", None)], &two, &none).unwrap_err();
        assert!(err.starts_with("softwareRAIDVolumes[1]: no room"), "{err}");
    }

    #[test]
    fn root_device_hints_leave_the_choice_to_after_the_build() {
        let two = [disk("/dev/vda", 5), disk("/dev/vdb", 5)];
        let hints = RootDeviceHints {
            device_name: Some("/dev/md0".into()),
            ..Default::default()
        };
        assert_eq!(plan(&[vol("1", None)], &two, &hints).unwrap().root, None);
        let mut root = vol("1", Some(1));
        root.root_volume = true;
        let p = plan(
            &[vol("1", Some(1)), root],
            &two,
            &RootDeviceHints::default(),
        )
        .unwrap();
        assert_eq!(p.root, Some(1));
    }

    #[test]
    fn partitions_of_numbered_disks_take_a_p() {
        assert_eq!(part_path("/dev/vda", 3), "/dev/vda3");
        assert_eq!(part_path("/dev/nvme0n1", 1), "/dev/nvme0n1p1");
    }
}
