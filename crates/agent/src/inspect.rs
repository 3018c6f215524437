//! In-band inspection: the host's hardware as its own kernel sees it, read from /proc and /sys
//! into metal3's `HardwareDetails` shape.
//!
//! Everything is read under a root directory (`/` on the host) so tests can lay out a fake
//! system. The ramdisk has no udev, lshw or dmidecode, so each value comes from one plain file;
//! a file that is missing or unreadable leaves its field empty (None, 0) and never fails the
//! whole report. Every read is bounded: [`MAX_FILE_BYTES`] per file (`/proc/cpuinfo`, which
//! grows with the CPU count, is streamed up to [`MAX_CPUINFO_BYTES`]), at most [`MAX_DISKS`]
//! disks and [`MAX_NICS`] NICs.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::protocol::{Bios, Cpu, Disk, DiskType, Firmware, Hardware, Nic, SystemVendor, Vlan};

/// Most bytes read from any one file.
pub const MAX_FILE_BYTES: u64 = 64 << 10;
/// Most bytes read from `/proc/cpuinfo` (about 1.5 KiB per CPU; streamed, not kept).
pub const MAX_CPUINFO_BYTES: u64 = 16 << 20;
/// Most disks reported.
pub const MAX_DISKS: usize = 1024;
/// Most NICs reported.
pub const MAX_NICS: usize = 1024;
/// Most entries looked at in any one directory.
const MAX_DIR_ENTRIES: usize = 1 << 16;

/// The hardware under `root`, without IP addresses.
pub fn inspect(root: &Path) -> Hardware {
    inspect_with(root, &BTreeMap::new())
}

/// The hardware under `root`; `ips` maps interface names to the address to report for them
/// (the kernel offers IPv4 addresses per interface only through netlink).
pub fn inspect_with(root: &Path, ips: &BTreeMap<String, String>) -> Hardware {
    Hardware {
        system_vendor: system_vendor(root),
        firmware: firmware(root),
        ram_mebibytes: ram_mebibytes(root),
        nics: nics(root, ips),
        storage: disks(root),
        cpu: cpu(root),
        hostname: hostname(root),
    }
}

/// The CPU from `proc/cpuinfo` (the first processor's model, flags and MHz; the count of
/// `processor` entries), its clock from cpufreq's maximum when the kernel has it. None when
/// cpuinfo lists no processor.
pub fn cpu(root: &Path) -> Option<Cpu> {
    let file = fs::File::open(root.join("proc/cpuinfo")).ok()?;
    let mut reader = BufReader::new(file.take(MAX_CPUINFO_BYTES));
    let (mut count, mut model, mut flags, mut mhz) = (0i64, None, None, None);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "processor" => count += 1,
            "model name" if model.is_none() => model = Some(value.to_string()),
            // `Features` is arm64's name for the flags.
            "flags" | "Features" if flags.is_none() => {
                flags = Some(value.split_whitespace().map(str::to_string).collect());
            }
            "cpu MHz" if mhz.is_none() => mhz = value.parse::<f64>().ok(),
            _ => {}
        }
    }
    if count == 0 {
        return None;
    }
    let max_khz = read_text(&root.join("sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"))
        .and_then(|s| s.parse::<f64>().ok());
    Some(Cpu {
        arch: std::env::consts::ARCH.to_string(),
        model: model.unwrap_or_default(),
        clock_megahertz: max_khz.map(|khz| khz / 1000.0).or(mhz).unwrap_or(0.0),
        flags: flags.unwrap_or_default(),
        count,
    })
}

/// Installed RAM in MiB. Preferred: the online memory blocks of `sys/devices/system/memory`
/// (block count times `block_size_bytes`), which like Ironic's DMI figure counts the memory
/// the kernel reserved for itself. Else `MemTotal` of `proc/meminfo` rounded to the nearest
/// MiB, which comes out lower than the installed RAM by that reservation. 0 when neither is
/// there.
pub fn ram_mebibytes(root: &Path) -> i64 {
    memory_blocks_mebibytes(root)
        .or_else(|| meminfo_mebibytes(root))
        .unwrap_or(0)
}

fn memory_blocks_mebibytes(root: &Path) -> Option<i64> {
    let dir = root.join("sys/devices/system/memory");
    let block = u64::from_str_radix(&read_text(&dir.join("block_size_bytes"))?, 16).ok()?;
    let online = dir_names(&dir)
        .into_iter()
        .filter(|name| {
            name.strip_prefix("memory")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|name| read_text(&dir.join(name).join("online")).as_deref() == Some("1"))
        .count() as u64;
    let bytes = block.checked_mul(online).filter(|&b| b > 0)?;
    i64::try_from(bytes >> 20).ok()
}

fn meminfo_mebibytes(root: &Path) -> Option<i64> {
    let text = read_text(&root.join("proc/meminfo"))?;
    let kib: i64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some((kib + 512) / 1024)
}

/// The disks under `sys/block`, sorted by name: not loop, ram, zram, dm-, md or sr (optical)
/// devices, not hidden ones (NVMe multipath paths), none of size 0.
pub fn disks(root: &Path) -> Vec<Disk> {
    const SKIP: [&str; 6] = ["loop", "ram", "zram", "dm-", "md", "sr"];
    let block = root.join("sys/block");
    let aliases = disk_aliases(root);
    let mut names: Vec<String> = dir_names(&block)
        .into_iter()
        .filter(|n| !SKIP.iter().any(|p| n.starts_with(p)))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| disk(&block.join(&name), &name, &aliases))
        .take(MAX_DISKS)
        .collect()
}

fn disk(dir: &Path, name: &str, aliases: &BTreeMap<String, Vec<String>>) -> Option<Disk> {
    let sectors: i64 = read_text(&dir.join("size"))?.parse().ok()?;
    if sectors <= 0 || read_text(&dir.join("hidden")).as_deref() == Some("1") {
        return None;
    }
    let device = dir.join("device");
    let rotational = read_text(&dir.join("queue/rotational")).as_deref() == Some("1");
    let type_ = if name.starts_with("nvme") {
        DiskType::Nvme
    } else if rotational {
        DiskType::Hdd
    } else {
        DiskType::Ssd
    };
    let serial = read_text(&device.join("serial"))
        .or_else(|| read_text(&dir.join("serial")))
        .or_else(|| vpd_serial(&device.join("vpd_pg80")));
    let wwn = read_text(&device.join("wwid"))
        .or_else(|| read_text(&dir.join("wwid")))
        .map(|w| parse_wwid(&w))
        .unwrap_or_default();
    let hctl = dir_names(&device.join("scsi_device")).into_iter().min();
    let model = read_text(&device.join("model"));
    let vendor = read_text(&device.join("vendor"));
    // udev's links when it ran; the ramdisk has no udev, so the same names from sysfs.
    let alternate_names = match aliases.get(name) {
        Some(names) => names.clone(),
        None => derived_aliases(
            dir,
            name,
            &DiskIds {
                vendor: vendor.as_deref(),
                model: model.as_deref(),
                serial: serial.as_deref(),
                wwn: wwn.with_extension.as_deref().or(wwn.wwn.as_deref()),
            },
        ),
    };
    Some(Disk {
        name: format!("/dev/{name}"),
        alternate_names,
        rotational,
        type_: Some(type_),
        size_bytes: sectors.saturating_mul(512),
        vendor,
        model,
        serial_number: serial,
        wwn: wwn.wwn,
        wwn_vendor_extension: wwn.vendor_extension,
        wwn_with_extension: wwn.with_extension,
        hctl,
    })
}

/// A disk's world wide name in the three forms metal3 reports (udev's `ID_WWN*`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Wwn {
    pub wwn: Option<String>,
    pub with_extension: Option<String>,
    pub vendor_extension: Option<String>,
}

/// Reads a sysfs `wwid`. An NAA id (`naa.` + 16 or 32 hex digits) gives `0x` + its first 16
/// digits as the WWN, `0x` + all of them with the extension, and `0x` + the digits past 16 as
/// the vendor extension when there are any, as udev does for SCSI disks. An EUI-64 or NVMe id
/// (`eui.`, `nvme.`) is the WWN as it stands, as udev does for NVMe. Anything else (`t10.`, a
/// vendor, model and serial glued together) is no WWN.
pub fn parse_wwid(wwid: &str) -> Wwn {
    let wwid = wwid.trim();
    if let Some(hex) = wwid.strip_prefix("naa.") {
        let hex = hex.to_ascii_lowercase();
        if hex.len() < 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Wwn::default();
        }
        let (head, tail) = hex.split_at(16);
        return Wwn {
            wwn: Some(format!("0x{head}")),
            with_extension: Some(format!("0x{hex}")),
            vendor_extension: (!tail.is_empty()).then(|| format!("0x{tail}")),
        };
    }
    if wwid.starts_with("eui.") || wwid.starts_with("nvme.") {
        return Wwn {
            wwn: Some(wwid.to_string()),
            ..Wwn::default()
        };
    }
    Wwn::default()
}

/// The serial number in a SCSI disk's VPD page 0x80 (unit serial number): a 4-byte header
/// whose last two bytes give the length, then ASCII.
fn vpd_serial(path: &Path) -> Option<String> {
    let bytes = read_bytes(path)?;
    if bytes.len() < 4 || bytes[1] != 0x80 {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
    let data = bytes.get(4..)?;
    let data = &data[..len.min(data.len())];
    nonempty(String::from_utf8_lossy(data).trim_matches(|c: char| c.is_whitespace() || c == '\0'))
}

/// Disk name (`sda`) to its symlinks in `dev/disk/by-path` and `dev/disk/by-id`, as
/// `/dev/disk/by-.../LINK`, sorted.
fn disk_aliases(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for kind in ["by-path", "by-id"] {
        let dir = root.join("dev/disk").join(kind);
        for link in dir_names(&dir) {
            let Ok(target) = fs::read_link(dir.join(&link)) else {
                continue;
            };
            if let Some(target) = target.file_name().and_then(|t| t.to_str()) {
                aliases
                    .entry(target.to_string())
                    .or_default()
                    .push(format!("/dev/disk/{kind}/{link}"));
            }
        }
    }
    for names in aliases.values_mut() {
        names.sort();
    }
    aliases
}

/// What a disk's `by-id` names are made of.
struct DiskIds<'a> {
    vendor: Option<&'a str>,
    model: Option<&'a str>,
    serial: Option<&'a str>,
    wwn: Option<&'a str>,
}

/// The `/dev/disk/by-path` and `by-id` names udev would give a disk, from where it sits in
/// sysfs: `pci-ADDR` (virtio), `pci-ADDR-nvme-NSID`, `pci-ADDR-ata-PORT` and `-ata-PORT.0`,
/// `pci-ADDR-scsi-H:C:T:L` (host counted from the controller's first); `virtio-SERIAL`,
/// `nvme-MODEL_SERIAL`, `nvme-EUI`, `ata-MODEL_SERIAL`, `wwn-WWN`. Sorted.
fn derived_aliases(dir: &Path, name: &str, ids: &DiskIds) -> Vec<String> {
    let mut names = Vec::new();
    let clean = |s: &str| s.trim().replace(' ', "_");
    if let Ok(path) = fs::canonicalize(dir) {
        let parts: Vec<&str> = path.iter().filter_map(|p| p.to_str()).collect();
        if let Some(pci) = parts.iter().rposition(|p| is_pci_address(p)) {
            let base = format!("/dev/disk/by-path/pci-{}", parts[pci]);
            let below = &parts[pci + 1..];
            let ata = below
                .iter()
                .find_map(|p| p.strip_prefix("ata").and_then(|n| n.parse::<u32>().ok()));
            let hctl = below.iter().find(|p| {
                let f: Vec<&str> = p.split(':').collect();
                f.len() == 4 && f.iter().all(|n| n.parse::<u32>().is_ok())
            });
            if name.starts_with("nvme") {
                if let Some(nsid) = name.rsplit_once('n').map(|(_, n)| n)
                    && nsid.parse::<u32>().is_ok()
                {
                    names.push(format!("{base}-nvme-{nsid}"));
                }
            } else if let Some(port) = ata {
                names.push(format!("{base}-ata-{port}"));
                names.push(format!("{base}-ata-{port}.0"));
            } else if let Some(hctl) = hctl {
                // udev numbers SCSI hosts from the controller's first one.
                let pci_dir: std::path::PathBuf = parts[..=pci].iter().collect();
                let first = host_numbers(&pci_dir).into_iter().min().unwrap_or(0);
                let f: Vec<u32> = hctl.split(':').filter_map(|n| n.parse().ok()).collect();
                names.push(format!(
                    "{base}-scsi-{}:{}:{}:{}",
                    f[0].saturating_sub(first),
                    f[1],
                    f[2],
                    f[3]
                ));
            } else if below.iter().any(|p| p.starts_with("virtio")) {
                names.push(base);
            }
        }
    }
    let by_id = |s: String| format!("/dev/disk/by-id/{s}");
    if name.starts_with("vd")
        && let Some(serial) = ids.serial
    {
        names.push(by_id(format!("virtio-{}", clean(serial))));
    }
    if name.starts_with("nvme") {
        if let (Some(model), Some(serial)) = (ids.model, ids.serial) {
            names.push(by_id(format!("nvme-{}_{}", clean(model), clean(serial))));
        }
        if let Some(wwn) = ids.wwn {
            names.push(by_id(format!("nvme-{wwn}")));
        }
    } else if let Some(wwn) = ids.wwn {
        names.push(by_id(format!("wwn-{wwn}")));
    }
    if ids.vendor.map(str::trim) == Some("ATA")
        && let (Some(model), Some(serial)) = (ids.model, ids.serial)
    {
        names.push(by_id(format!("ata-{}_{}", clean(model), clean(serial))));
    }
    names.sort();
    names
}

/// The N of every `hostN` directly under a controller's device directory or one level down
/// (virtio-scsi puts its host under `virtioN`).
fn host_numbers(pci_dir: &Path) -> Vec<u32> {
    let number = |n: &str| n.strip_prefix("host").and_then(|n| n.parse::<u32>().ok());
    let mut found = Vec::new();
    for child in dir_names(pci_dir) {
        if let Some(n) = number(&child) {
            found.push(n);
        } else if child.starts_with("virtio") || child.starts_with("ata") {
            found.extend(
                dir_names(&pci_dir.join(&child))
                    .iter()
                    .filter_map(|c| number(c)),
            );
        }
    }
    found
}

/// The physical NICs under `sys/class/net`, sorted by name: not `lo`, none without a `device`
/// link (bridges, veths, bonds, VLAN interfaces). VLANs from `proc/net/vlan/config` are listed
/// on their parent; `ips` gives the address to report per interface name.
pub fn nics(root: &Path, ips: &BTreeMap<String, String>) -> Vec<Nic> {
    let net = root.join("sys/class/net");
    let mut vlans = vlans(root);
    let mut names = dir_names(&net);
    names.retain(|n| n != "lo");
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let dir = net.join(&name);
            let device = dir.join("device");
            fs::symlink_metadata(&device).ok()?;
            let speed_mbps = read_text(&dir.join("speed"))
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(0)
                .max(0);
            let model = [
                read_text(&device.join("vendor")),
                read_text(&device.join("device")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
            Some(Nic {
                model: nonempty(&model),
                mac: read_text(&dir.join("address")).unwrap_or_default(),
                ip: ips.get(&name).cloned(),
                speed_gbps: speed_mbps / 1000,
                vlans: vlans.remove(&name).unwrap_or_default(),
                vlan_id: None,
                pxe: false,
                pci_address: pci_address(&device),
                name,
            })
        })
        .take(MAX_NICS)
        .collect()
}

/// Parent interface to its VLANs, from `proc/net/vlan/config` (`NAME | VID | PARENT` lines
/// after two header lines), each list sorted by id.
fn vlans(root: &Path) -> BTreeMap<String, Vec<Vlan>> {
    let mut vlans: BTreeMap<String, Vec<Vlan>> = BTreeMap::new();
    let text = read_text(&root.join("proc/net/vlan/config")).unwrap_or_default();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('|').map(str::trim).collect();
        let [name, vid, parent] = fields[..] else {
            continue;
        };
        let Ok(vid) = vid.parse::<i32>() else {
            continue;
        };
        vlans.entry(parent.to_string()).or_default().push(Vlan {
            id: Some(vid),
            name: Some(name.to_string()),
        });
    }
    for list in vlans.values_mut() {
        list.sort_by(|a, b| (a.id, &a.name).cmp(&(b.id, &b.name)));
    }
    vlans
}

/// The PCI address of a NIC's `device` link: the link's own target (`0000:01:00.0`) or, for a
/// virtio NIC whose link names the virtio device (`virtio2`), that device's parent.
fn pci_address(device: &Path) -> Option<String> {
    let pci = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .filter(|n| is_pci_address(n))
            .map(str::to_string)
    };
    match fs::canonicalize(device) {
        Ok(resolved) => pci(&resolved).or_else(|| resolved.parent().and_then(pci)),
        Err(_) => fs::read_link(device).ok().as_deref().and_then(pci),
    }
}

/// `DOMAIN:BB:DD.F` in hex, e.g. `0000:00:02.0` (the domain may be longer than 4 digits).
pub fn is_pci_address(s: &str) -> bool {
    let hex = |p: &str, len: Option<usize>| {
        !p.is_empty()
            && len.is_none_or(|l| p.len() == l)
            && p.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let mut parts = s.split(':');
    let (Some(domain), Some(bus), Some(slot), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Some((dev, func)) = slot.split_once('.') else {
        return false;
    };
    hex(domain, None)
        && domain.len() >= 4
        && hex(bus, Some(2))
        && hex(dev, Some(2))
        && matches!(func.as_bytes(), [b'0'..=b'7'])
}

/// BIOS vendor, version and date from DMI; None when DMI says nothing.
pub fn firmware(root: &Path) -> Option<Firmware> {
    let dmi = root.join("sys/class/dmi/id");
    let bios = Bios {
        date: read_text(&dmi.join("bios_date")),
        vendor: read_text(&dmi.join("bios_vendor")),
        version: read_text(&dmi.join("bios_version")),
    };
    (bios != Bios::default()).then_some(Firmware { bios: Some(bios) })
}

/// Manufacturer, product and serial number from DMI (the serial is readable by root only);
/// None when DMI says nothing.
pub fn system_vendor(root: &Path) -> Option<SystemVendor> {
    let dmi = root.join("sys/class/dmi/id");
    let vendor = SystemVendor {
        manufacturer: read_text(&dmi.join("sys_vendor")),
        product_name: read_text(&dmi.join("product_name")),
        serial_number: read_text(&dmi.join("product_serial")),
    };
    (vendor != SystemVendor::default()).then_some(vendor)
}

/// The kernel's hostname; None when unset (`(none)`).
pub fn hostname(root: &Path) -> Option<String> {
    read_text(&root.join("proc/sys/kernel/hostname")).filter(|h| h != "(none)")
}

/// At most [`MAX_FILE_BYTES`] of a file.
fn read_bytes(path: &Path) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// A file's text, trimmed; None when missing, unreadable or blank.
fn read_text(path: &Path) -> Option<String> {
    nonempty(String::from_utf8_lossy(&read_bytes(path)?).trim())
}

fn nonempty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// The UTF-8 names in a directory (at most [`MAX_DIR_ENTRIES`]), unsorted; empty when it
/// cannot be read.
fn dir_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .take(MAX_DIR_ENTRIES)
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    use super::*;

    /// Writes `rel` under `root`, making its directories.
    fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    /// Makes `rel` under `root` a symlink to `target` (relative, as sysfs has them).
    fn link(root: &Path, rel: &str, target: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target, path).unwrap();
    }

    fn mkdir(root: &Path, rel: &str) {
        fs::create_dir_all(root.join(rel)).unwrap();
    }

    const FLAGS: &str = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat \
        pse36 clflush mmx fxsr sse sse2 ss syscall nx pdpe1gb rdtscp lm constant_tsc \
        rep_good nopl xtopology cpuid tsc_known_freq pni pclmulqdq vmx ssse3 fma cx16 \
        pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor \
        lahf_lm abm 3dnowprefetch avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx";

    fn cpuinfo_entry(n: u32) -> String {
        format!(
            "processor\t: {n}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\n\
             model name\t: Intel Xeon Processor (Icelake)\nstepping\t: 0\n\
             microcode\t: 0x1\ncpu MHz\t\t: 2095.076\ncache size\t: 16384 KB\n\
             physical id\t: {n}\nsiblings\t: 1\ncore id\t\t: 0\ncpu cores\t: 1\n\
             apicid\t\t: {n}\nfpu\t\t: yes\nfpu_exception\t: yes\ncpuid level\t: 13\n\
             wp\t\t: yes\nflags\t\t: {FLAGS}\n\
             bugs\t\t: spectre_v1 spectre_v2 spec_store_bypass swapgs\n\
             bogomips\t: 4190.15\nclflush size\t: 64\ncache_alignment\t: 64\n\
             address sizes\t: 46 bits physical, 57 bits virtual\npower management:\n\n"
        )
    }

    /// A fake root laid out like a QEMU q35 VM with 2 CPUs, 4 GiB, a virtio disk, a SATA disk,
    /// an NVMe disk, a CD-ROM, an e1000e NIC with a VLAN, a virtio NIC and a veth.
    fn q35() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();

        write(r, "proc/cpuinfo", cpuinfo_entry(0) + &cpuinfo_entry(1));
        write(
            r,
            "proc/meminfo",
            "MemTotal:        4005232 kB\nMemFree:         3701524 kB\n\
             MemAvailable:    3695432 kB\nBuffers:            2128 kB\n",
        );
        // 128 MiB blocks: 2 GiB below the PCI hole, 2 GiB above 4 GiB, one block offline.
        write(r, "sys/devices/system/memory/block_size_bytes", "8000000\n");
        write(
            r,
            "sys/devices/system/memory/auto_online_blocks",
            "online\n",
        );
        for n in (0..16).chain(32..48) {
            write(
                r,
                &format!("sys/devices/system/memory/memory{n}/online"),
                "1\n",
            );
        }
        write(r, "sys/devices/system/memory/memory48/online", "0\n");
        write(r, "proc/sys/kernel/hostname", "fm-host-0\n");

        // DMI as QEMU with SeaBIOS and `-smbios type=1,serial=fm-host-0` shows it.
        write(r, "sys/class/dmi/id/bios_vendor", "SeaBIOS\n");
        write(
            r,
            "sys/class/dmi/id/bios_version",
            "1.16.2-debian-1.16.2-1\n",
        );
        write(r, "sys/class/dmi/id/bios_date", "04/01/2014\n");
        write(r, "sys/class/dmi/id/sys_vendor", "QEMU\n");
        write(
            r,
            "sys/class/dmi/id/product_name",
            "Standard PC (Q35 + ICH9, 2009)\n",
        );
        write(r, "sys/class/dmi/id/product_serial", "fm-host-0\n");

        // vda: virtio-blk; `device` is the virtio device, the serial sits on the disk.
        let virtio3 = "sys/devices/pci0000:00/0000:00:02.3/0000:04:00.0/virtio3";
        let vda = format!("{virtio3}/block/vda");
        link(r, "sys/block/vda", &format!("../{}", &vda[4..]));
        write(r, &format!("{vda}/size"), "4194304\n");
        write(r, &format!("{vda}/queue/rotational"), "0\n");
        write(r, &format!("{vda}/serial"), "fm-disk-0");
        write(r, &format!("{vda}/hidden"), "0\n");
        link(r, &format!("{vda}/device"), "../../../virtio3");
        write(r, &format!("{virtio3}/vendor"), "0x1af4\n");
        write(r, &format!("{virtio3}/device"), "0x0002\n");
        mkdir(r, &format!("{vda}/vda1"));
        write(r, &format!("{vda}/vda1/size"), "2048\n");

        // sda: SATA through the ICH9 AHCI controller.
        let scsi = "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0";
        let sda = format!("{scsi}/block/sda");
        link(r, "sys/block/sda", &format!("../{}", &sda[4..]));
        write(r, &format!("{sda}/size"), "20971520\n");
        write(r, &format!("{sda}/queue/rotational"), "1\n");
        link(r, &format!("{sda}/device"), "../../../0:0:0:0");
        write(r, &format!("{scsi}/vendor"), "ATA     \n");
        write(r, &format!("{scsi}/model"), "QEMU HARDDISK   \n");
        write(r, &format!("{scsi}/wwid"), "naa.5000c500a1b2c3d4\n");
        let mut pg80 = vec![0x00, 0x80, 0x00, 0x14];
        pg80.extend_from_slice(b"QM00001             ");
        write(r, &format!("{scsi}/vpd_pg80"), pg80);
        mkdir(r, &format!("{scsi}/scsi_device/0:0:0:0"));

        // nvme0n1: `device` is the controller, the wwid sits on the namespace.
        let nvme = "sys/devices/pci0000:00/0000:00:02.4/0000:05:00.0/nvme/nvme0";
        let nvme0n1 = format!("{nvme}/nvme0n1");
        link(r, "sys/block/nvme0n1", &format!("../{}", &nvme0n1[4..]));
        write(r, &format!("{nvme0n1}/size"), "16777216\n");
        write(r, &format!("{nvme0n1}/queue/rotational"), "0\n");
        write(r, &format!("{nvme0n1}/wwid"), "eui.0025385b71b0c1f2\n");
        link(r, &format!("{nvme0n1}/device"), "../../nvme0");
        write(
            r,
            &format!("{nvme}/model"),
            "QEMU NVMe Ctrl                          \n",
        );
        write(r, &format!("{nvme}/serial"), "fm-nvme-0           \n");

        // Left out: a CD-ROM, a loop device, an unused nbd (size 0), a device mapper volume.
        let sr0 = "sys/devices/pci0000:00/0000:00:1f.2/ata3/host2/target2:0:0/2:0:0:0/block/sr0";
        link(r, "sys/block/sr0", &format!("../{}", &sr0[4..]));
        write(r, &format!("{sr0}/size"), "2097152\n");
        mkdir(
            r,
            "sys/devices/pci0000:00/0000:00:1f.2/ata3/host2/target2:0:0/2:0:0:0/scsi_device/2:0:0:0",
        );
        for (name, size) in [("loop0", "1024"), ("nbd0", "0"), ("dm-0", "4096")] {
            write(r, &format!("sys/devices/virtual/block/{name}/size"), size);
            link(
                r,
                &format!("sys/block/{name}"),
                &format!("../devices/virtual/block/{name}"),
            );
        }

        for (kind, alias, target) in [
            ("by-path", "pci-0000:04:00.0", "vda"),
            ("by-path", "pci-0000:04:00.0-part1", "vda1"),
            ("by-path", "pci-0000:00:1f.2-ata-1", "sda"),
            ("by-path", "pci-0000:00:1f.2-ata-1.0", "sda"),
            ("by-path", "pci-0000:00:1f.2-ata-3", "sr0"),
            ("by-path", "pci-0000:05:00.0-nvme-1", "nvme0n1"),
            ("by-id", "virtio-fm-disk-0", "vda"),
            ("by-id", "ata-QEMU_HARDDISK_QM00001", "sda"),
            ("by-id", "wwn-0x5000c500a1b2c3d4", "sda"),
            ("by-id", "nvme-QEMU_NVMe_Ctrl_fm-nvme-0", "nvme0n1"),
            ("by-id", "nvme-eui.0025385b71b0c1f2", "nvme0n1"),
        ] {
            link(
                r,
                &format!("dev/disk/{kind}/{alias}"),
                &format!("../../{target}"),
            );
        }

        // enp1s0: an e1000e behind a PCIe root port, with VLAN 100 on it.
        let e1000e = "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0";
        let enp1s0 = format!("{e1000e}/net/enp1s0");
        link(
            r,
            "sys/class/net/enp1s0",
            &format!("../../{}", &enp1s0[4..]),
        );
        write(r, &format!("{enp1s0}/address"), "52:54:00:12:34:56\n");
        write(r, &format!("{enp1s0}/speed"), "1000\n");
        link(r, &format!("{enp1s0}/device"), "../../../0000:01:00.0");
        write(r, &format!("{e1000e}/vendor"), "0x8086\n");
        write(r, &format!("{e1000e}/device"), "0x10d3\n");
        write(
            r,
            "proc/net/vlan/config",
            "VLAN Dev name\t | VLAN ID\nName-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\n\
             enp1s0.100     | 100  | enp1s0\n",
        );

        // enp0s3: virtio-net; `device` is the virtio device, its parent the PCI function.
        let virtio = "sys/devices/pci0000:00/0000:00:03.0/virtio2";
        let enp0s3 = format!("{virtio}/net/enp0s3");
        link(
            r,
            "sys/class/net/enp0s3",
            &format!("../../{}", &enp0s3[4..]),
        );
        write(r, &format!("{enp0s3}/address"), "52:54:00:ab:cd:ef\n");
        write(r, &format!("{enp0s3}/speed"), "-1\n");
        link(r, &format!("{enp0s3}/device"), "../../../virtio2");
        write(r, &format!("{virtio}/vendor"), "0x1af4\n");
        write(r, &format!("{virtio}/device"), "0x0001\n");

        // Virtual interfaces, left out.
        for name in ["lo", "veth0", "enp1s0.100"] {
            let dir = format!("sys/devices/virtual/net/{name}");
            write(r, &format!("{dir}/address"), "00:00:00:00:00:00\n");
            link(
                r,
                &format!("sys/class/net/{name}"),
                &format!("../../devices/virtual/net/{name}"),
            );
        }
        tmp
    }

    fn expected() -> Hardware {
        Hardware {
            system_vendor: Some(SystemVendor {
                manufacturer: Some("QEMU".into()),
                product_name: Some("Standard PC (Q35 + ICH9, 2009)".into()),
                serial_number: Some("fm-host-0".into()),
            }),
            firmware: Some(Firmware {
                bios: Some(Bios {
                    date: Some("04/01/2014".into()),
                    vendor: Some("SeaBIOS".into()),
                    version: Some("1.16.2-debian-1.16.2-1".into()),
                }),
            }),
            ram_mebibytes: 4096,
            nics: vec![
                Nic {
                    name: "enp0s3".into(),
                    model: Some("0x1af4 0x0001".into()),
                    mac: "52:54:00:ab:cd:ef".into(),
                    ip: None,
                    speed_gbps: 0,
                    vlans: vec![],
                    vlan_id: None,
                    pxe: false,
                    pci_address: Some("0000:00:03.0".into()),
                },
                Nic {
                    name: "enp1s0".into(),
                    model: Some("0x8086 0x10d3".into()),
                    mac: "52:54:00:12:34:56".into(),
                    ip: Some("192.168.111.20".into()),
                    speed_gbps: 1,
                    vlans: vec![Vlan {
                        id: Some(100),
                        name: Some("enp1s0.100".into()),
                    }],
                    vlan_id: None,
                    pxe: false,
                    pci_address: Some("0000:01:00.0".into()),
                },
            ],
            storage: vec![
                Disk {
                    name: "/dev/nvme0n1".into(),
                    alternate_names: vec![
                        "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_fm-nvme-0".into(),
                        "/dev/disk/by-id/nvme-eui.0025385b71b0c1f2".into(),
                        "/dev/disk/by-path/pci-0000:05:00.0-nvme-1".into(),
                    ],
                    rotational: false,
                    type_: Some(DiskType::Nvme),
                    size_bytes: 8 << 30,
                    vendor: None,
                    model: Some("QEMU NVMe Ctrl".into()),
                    serial_number: Some("fm-nvme-0".into()),
                    wwn: Some("eui.0025385b71b0c1f2".into()),
                    wwn_vendor_extension: None,
                    wwn_with_extension: None,
                    hctl: None,
                },
                Disk {
                    name: "/dev/sda".into(),
                    alternate_names: vec![
                        "/dev/disk/by-id/ata-QEMU_HARDDISK_QM00001".into(),
                        "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4".into(),
                        "/dev/disk/by-path/pci-0000:00:1f.2-ata-1".into(),
                        "/dev/disk/by-path/pci-0000:00:1f.2-ata-1.0".into(),
                    ],
                    rotational: true,
                    type_: Some(DiskType::Hdd),
                    size_bytes: 10 << 30,
                    vendor: Some("ATA".into()),
                    model: Some("QEMU HARDDISK".into()),
                    serial_number: Some("QM00001".into()),
                    wwn: Some("0x5000c500a1b2c3d4".into()),
                    wwn_vendor_extension: None,
                    wwn_with_extension: Some("0x5000c500a1b2c3d4".into()),
                    hctl: Some("0:0:0:0".into()),
                },
                Disk {
                    name: "/dev/vda".into(),
                    alternate_names: vec![
                        "/dev/disk/by-id/virtio-fm-disk-0".into(),
                        "/dev/disk/by-path/pci-0000:04:00.0".into(),
                    ],
                    rotational: false,
                    type_: Some(DiskType::Ssd),
                    size_bytes: 2 << 30,
                    vendor: Some("0x1af4".into()),
                    model: None,
                    serial_number: Some("fm-disk-0".into()),
                    wwn: None,
                    wwn_vendor_extension: None,
                    wwn_with_extension: None,
                    hctl: None,
                },
            ],
            cpu: Some(Cpu {
                arch: std::env::consts::ARCH.into(),
                model: "Intel Xeon Processor (Icelake)".into(),
                clock_megahertz: 2095.076,
                flags: FLAGS.split_whitespace().map(String::from).collect(),
                count: 2,
            }),
            hostname: Some("fm-host-0".into()),
        }
    }

    fn ips() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("enp1s0".to_string(), "192.168.111.20".to_string()),
            ("veth0".to_string(), "10.1.0.1".to_string()),
        ])
    }

    #[test]
    fn a_q35_vm_reads_as_its_hardware() {
        let root = q35();
        let hardware = inspect_with(root.path(), &ips());
        let want = expected();
        // Field by field first, so a failure points at the part that differs.
        assert_eq!(hardware.cpu, want.cpu);
        assert_eq!(hardware.storage, want.storage);
        assert_eq!(hardware.nics, want.nics);
        assert_eq!(hardware, want);

        let mut no_ips = want;
        no_ips.nics[1].ip = None;
        assert_eq!(inspect(root.path()), no_ips);
    }

    #[test]
    fn without_udev_the_alternate_names_come_from_sysfs() {
        let root = q35();
        fs::remove_dir_all(root.path().join("dev/disk")).unwrap();
        assert_eq!(
            inspect_with(root.path(), &ips()).storage,
            expected().storage
        );
    }

    #[test]
    fn a_virtio_scsi_disk_is_named_by_its_controller_and_lun() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        let ctl = "sys/devices/pci0000:00/0000:00:05.0";
        let sdb = format!("{ctl}/virtio2/host2/target2:0:1:0/2:0:1:0/block/sdb");
        mkdir(r, &sdb);
        mkdir(r, &format!("{ctl}/virtio2/host3"));
        link(r, "sys/block/sdb", &format!("../{}", &sdb[4..]));
        let ids = DiskIds {
            vendor: Some("QEMU"),
            model: Some("QEMU HARDDISK"),
            serial: Some("s1"),
            wwn: Some("0x5000c50015ea71ac"),
        };
        assert_eq!(
            derived_aliases(&r.join("sys/block/sdb"), "sdb", &ids),
            [
                "/dev/disk/by-id/wwn-0x5000c50015ea71ac",
                "/dev/disk/by-path/pci-0000:00:05.0-scsi-0:0:1:0",
            ]
        );
    }

    #[test]
    fn the_report_has_metal3s_field_names() {
        let root = q35();
        let text = serde_json::to_string(&inspect_with(root.path(), &ips())).unwrap();
        for field in [
            r#""ramMebibytes":4096"#,
            r#""sizeBytes":2147483648"#,
            r#""type":"SSD""#,
            r#""type":"HDD""#,
            r#""type":"NVME""#,
            r#""systemVendor":{"manufacturer":"QEMU""#,
            r#""speedGbps":1"#,
            r#""alternateNames":["/dev/disk/by-id/virtio-fm-disk-0""#,
            r#""serialNumber":"QM00001""#,
            r#""wwnWithExtension":"0x5000c500a1b2c3d4""#,
            r#""pciAddress":"0000:01:00.0""#,
            r#""clockMegahertz":2095.076"#,
            r#""firmware":{"bios":{"date":"04/01/2014""#,
            r#""vlans":[{"id":100,"name":"enp1s0.100"}]"#,
        ] {
            assert!(text.contains(field), "{field} missing from {text}");
        }
        let back: Hardware = serde_json::from_str(&text).unwrap();
        assert_eq!(back, inspect_with(root.path(), &ips()));
    }

    #[test]
    fn fallbacks_apply_when_the_preferred_source_is_missing() {
        let root = q35();
        let r = root.path();
        fs::remove_dir_all(r.join("sys/devices/system/memory")).unwrap();
        // 4005232 kB is 3911.36 MiB.
        assert_eq!(ram_mebibytes(r), 3911);
        write(
            r,
            "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
            "3500000\n",
        );
        assert_eq!(cpu(r).unwrap().clock_megahertz, 3500.0);
        write(r, "proc/sys/kernel/hostname", "(none)\n");
        assert_eq!(hostname(r), None);
    }

    #[test]
    fn an_empty_root_gives_an_empty_report() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(inspect(root.path()), Hardware::default());
        assert_eq!(
            inspect(&PathBuf::from("/nonexistent/root")),
            Hardware::default()
        );
    }

    #[test]
    fn wwids_read_as_udev_does() {
        let naa = |w, e, v: Option<&str>| Wwn {
            wwn: Some(String::from(w)),
            with_extension: Some(String::from(e)),
            vendor_extension: v.map(String::from),
        };
        let cases = [
            (
                "naa.5000C500A1B2C3D4",
                naa("0x5000c500a1b2c3d4", "0x5000c500a1b2c3d4", None),
            ),
            (
                "naa.600508b1001c4d5e6f708192a3b4c5d6\n",
                naa(
                    "0x600508b1001c4d5e",
                    "0x600508b1001c4d5e6f708192a3b4c5d6",
                    Some("0x6f708192a3b4c5d6"),
                ),
            ),
            (
                "eui.0025385b71b0c1f2",
                Wwn {
                    wwn: Some("eui.0025385b71b0c1f2".into()),
                    ..Wwn::default()
                },
            ),
            ("naa.5000", Wwn::default()),
            ("naa.xyz0c500a1b2c3d4", Wwn::default()),
            ("t10.ATA     QEMU HARDDISK        QM00001", Wwn::default()),
            ("", Wwn::default()),
        ];
        for (wwid, want) in cases {
            assert_eq!(parse_wwid(wwid), want, "{wwid:?}");
        }
    }

    #[test]
    fn pci_addresses_are_recognised() {
        for good in [
            "0000:00:02.0",
            "0000:01:00.7",
            "10000:e1:1f.3",
            "0000:AF:00.1",
        ] {
            assert!(is_pci_address(good), "{good}");
        }
        for bad in [
            "virtio2",
            "0000:00:02",
            "0000:00:02.8",
            "00:02.0",
            "0000:0:02.0",
            "",
        ] {
            assert!(!is_pci_address(bad), "{bad}");
        }
    }

    #[test]
    fn this_machine_inspects_without_panicking() {
        let hardware = inspect(Path::new("/"));
        let cpu = hardware.cpu.expect("/proc/cpuinfo lists processors");
        assert!(cpu.count >= 1, "{cpu:?}");
        assert!(!cpu.arch.is_empty());
        assert!(hardware.ram_mebibytes > 0);
        for disk in &hardware.storage {
            assert!(
                disk.name.starts_with("/dev/") && disk.size_bytes > 0,
                "{disk:?}"
            );
        }
        assert!(hardware.nics.iter().all(|n| n.name != "lo"));
    }
}
