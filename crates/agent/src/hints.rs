//! Picks the root disk by metal3's `rootDeviceHints`, with Ironic's semantics, so a host
//! deploys to the same disk here as it would under Ironic.
//!
//! Every hint given must match. `deviceName` matches the disk's name or one of its alternate
//! names exactly; the other strings compare as Ironic's default `s==` does (trimmed, case
//! ignored); `minSizeGigabytes` is a minimum in GiB; `rotational` must be equal. Of several
//! matching disks the smallest wins (ties: the first by name). With no hints, the smallest
//! disk of at least 4 GiB wins, as in ironic-python-agent.
//!
//! As metal3 leaves them out of what it sends Ironic, an empty string and a
//! `minSizeGigabytes` of 0 (or less) count as not given.

use crate::protocol::{Disk, RootDeviceHints};

/// The size below which a disk is never picked without hints (ironic-python-agent's).
pub const DEFAULT_MIN_BYTES: i64 = 4 << 30;

const GIB: i64 = 1 << 30;

/// No disk fits the hints; says which hints and which disks, so the reader can fix either.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct NoMatch {
    /// [`describe_hints`] of the hints given.
    pub hints: String,
    /// One line per disk seen: name, size, model, serial.
    pub disks: Vec<String>,
}

impl NoMatch {
    fn render(&self) -> String {
        let disks = if self.disks.is_empty() {
            "no disks found".to_string()
        } else {
            format!("disks: {}", self.disks.join("; "))
        };
        if self.hints == NO_HINTS {
            format!("no disk of at least 4 GiB for the root device, no hints given ({disks})")
        } else {
            format!(
                "no disk matches the root device hints {} ({disks})",
                self.hints
            )
        }
    }
}

const NO_HINTS: &str = "none";

/// The disk to deploy to, from `disks` (as [`crate::inspect::disks`] reports them).
pub fn choose_root_disk<'a>(
    disks: &'a [Disk],
    hints: &RootDeviceHints,
) -> Result<&'a Disk, NoMatch> {
    let given = !given_hints(hints).is_empty();
    disks
        .iter()
        .filter(|d| {
            if given {
                matches(d, hints)
            } else {
                d.size_bytes >= DEFAULT_MIN_BYTES
            }
        })
        .min_by(|a, b| (a.size_bytes, &a.name).cmp(&(b.size_bytes, &b.name)))
        .ok_or_else(|| NoMatch {
            hints: describe_hints(hints),
            disks: disks.iter().map(describe_disk).collect(),
        })
}

/// Whether `disk` satisfies every hint given (true when none is).
pub fn matches(disk: &Disk, hints: &RootDeviceHints) -> bool {
    let text = |hint: &Option<String>, value: &Option<String>| match given(hint) {
        None => true,
        Some(hint) => value
            .as_deref()
            .is_some_and(|v| v.trim().to_lowercase() == hint.to_lowercase()),
    };
    let name = match given(&hints.device_name) {
        None => true,
        Some(hint) => disk.name == hint || disk.alternate_names.iter().any(|n| n == hint),
    };
    let size = min_size(hints).is_none_or(|gib| disk.size_bytes >= gib.saturating_mul(GIB));
    name && size
        && text(&hints.hctl, &disk.hctl)
        && text(&hints.model, &disk.model)
        && text(&hints.vendor, &disk.vendor)
        && text(&hints.serial_number, &disk.serial_number)
        && text(&hints.wwn, &disk.wwn)
        && text(&hints.wwn_with_extension, &disk.wwn_with_extension)
        && text(&hints.wwn_vendor_extension, &disk.wwn_vendor_extension)
        && hints.rotational.is_none_or(|r| r == disk.rotational)
}

/// The hints given, as `name=value` joined by `, ` in the order of their metal3 names
/// (`minSizeGigabytes=20, vendor=ATA`); `none` when no hint is given.
pub fn describe_hints(hints: &RootDeviceHints) -> String {
    let given = given_hints(hints);
    if given.is_empty() {
        return NO_HINTS.to_string();
    }
    given
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The hints given, by metal3 name, sorted by it.
pub fn given_hints(h: &RootDeviceHints) -> Vec<(&'static str, String)> {
    let strings = [
        ("deviceName", &h.device_name),
        ("hctl", &h.hctl),
        ("model", &h.model),
        ("serialNumber", &h.serial_number),
        ("vendor", &h.vendor),
        ("wwn", &h.wwn),
        ("wwnVendorExtension", &h.wwn_vendor_extension),
        ("wwnWithExtension", &h.wwn_with_extension),
    ];
    let mut given: Vec<(&'static str, String)> = strings
        .into_iter()
        .filter_map(|(name, hint)| Some((name, given(hint)?.to_string())))
        .collect();
    given.extend(min_size(h).map(|n| ("minSizeGigabytes", n.to_string())));
    given.extend(h.rotational.map(|r| ("rotational", r.to_string())));
    given.sort_by_key(|(name, _)| *name);
    given
}

/// A string hint's value, trimmed; None when absent or blank.
fn given(hint: &Option<String>) -> Option<&str> {
    hint.as_deref().map(str::trim).filter(|h| !h.is_empty())
}

fn min_size(h: &RootDeviceHints) -> Option<i64> {
    h.min_size_gigabytes.filter(|&n| n > 0)
}

/// `/dev/vda 2.0 GiB model - serial fm-disk-0`.
fn describe_disk(d: &Disk) -> String {
    format!(
        "{} {:.1} GiB model {} serial {}",
        d.name,
        d.size_bytes as f64 / GIB as f64,
        d.model.as_deref().unwrap_or("-"),
        d.serial_number.as_deref().unwrap_or("-"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disks() -> Vec<Disk> {
        let disk = |name: &str, gib: i64| Disk {
            name: format!("/dev/{name}"),
            size_bytes: gib * GIB,
            ..Disk::default()
        };
        vec![
            Disk {
                alternate_names: vec![
                    "/dev/disk/by-id/virtio-fm-disk-0".into(),
                    "/dev/disk/by-path/pci-0000:04:00.0".into(),
                ],
                vendor: Some("0x1af4".into()),
                serial_number: Some("fm-disk-0".into()),
                ..disk("vda", 2)
            },
            Disk {
                alternate_names: vec!["/dev/disk/by-path/pci-0000:00:1f.2-ata-1".into()],
                rotational: true,
                vendor: Some("ATA".into()),
                model: Some("QEMU HARDDISK".into()),
                serial_number: Some("QM00001".into()),
                wwn: Some("0x5000c500a1b2c3d4".into()),
                wwn_with_extension: Some("0x5000c500a1b2c3d4".into()),
                hctl: Some("0:0:0:0".into()),
                ..disk("sda", 40)
            },
            Disk {
                alternate_names: vec!["/dev/disk/by-path/pci-0000:00:1f.2-ata-2".into()],
                rotational: false,
                vendor: Some("ATA".into()),
                model: Some("QEMU HARDDISK".into()),
                serial_number: Some("QM00002".into()),
                wwn: Some("0x600508b1001c4d5e".into()),
                wwn_with_extension: Some("0x600508b1001c4d5e6f708192a3b4c5d6".into()),
                wwn_vendor_extension: Some("0x6f708192a3b4c5d6".into()),
                hctl: Some("1:0:0:0".into()),
                ..disk("sdb", 20)
            },
            Disk {
                model: Some("QEMU NVMe Ctrl".into()),
                serial_number: Some("fm-nvme-0".into()),
                wwn: Some("eui.0025385b71b0c1f2".into()),
                ..disk("nvme0n1", 8)
            },
        ]
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn hints_pick_the_disk_ironic_would() {
        let h = RootDeviceHints::default;
        #[rustfmt::skip]
        let cases: Vec<(&str, RootDeviceHints, Option<&str>)> = vec![
            ("no hints: smallest of at least 4 GiB", h(), Some("/dev/nvme0n1")),
            ("blank hints are no hints", RootDeviceHints { model: s("  "), min_size_gigabytes: Some(0), ..h() }, Some("/dev/nvme0n1")),
            ("deviceName by name", RootDeviceHints { device_name: s("/dev/vda"), ..h() }, Some("/dev/vda")),
            ("deviceName by path", RootDeviceHints { device_name: s("/dev/disk/by-path/pci-0000:00:1f.2-ata-2"), ..h() }, Some("/dev/sdb")),
            ("deviceName by id", RootDeviceHints { device_name: s("/dev/disk/by-id/virtio-fm-disk-0"), ..h() }, Some("/dev/vda")),
            ("deviceName is exact", RootDeviceHints { device_name: s("vda"), ..h() }, None),
            ("deviceName is case-sensitive", RootDeviceHints { device_name: s("/dev/VDA"), ..h() }, None),
            ("deviceName of no disk", RootDeviceHints { device_name: s("/dev/sdz"), ..h() }, None),
            ("hctl", RootDeviceHints { hctl: s("1:0:0:0"), ..h() }, Some("/dev/sdb")),
            ("hctl of no disk", RootDeviceHints { hctl: s("2:0:0:0"), ..h() }, None),
            ("model, case ignored, smallest of two", RootDeviceHints { model: s("qemu harddisk "), ..h() }, Some("/dev/sdb")),
            ("model is not a prefix match", RootDeviceHints { model: s("QEMU"), ..h() }, None),
            ("vendor", RootDeviceHints { vendor: s("0x1AF4"), ..h() }, Some("/dev/vda")),
            ("vendor no disk reports", RootDeviceHints { vendor: s("Samsung"), ..h() }, None),
            ("serialNumber", RootDeviceHints { serial_number: s("QM00001"), ..h() }, Some("/dev/sda")),
            ("serialNumber of no disk", RootDeviceHints { serial_number: s("QM00009"), ..h() }, None),
            ("wwn", RootDeviceHints { wwn: s("0x5000C500A1B2C3D4"), ..h() }, Some("/dev/sda")),
            ("wwn of an NVMe disk", RootDeviceHints { wwn: s("eui.0025385b71b0c1f2"), ..h() }, Some("/dev/nvme0n1")),
            ("wwn of no disk", RootDeviceHints { wwn: s("0x5000c500a1b2c3d5"), ..h() }, None),
            ("wwnWithExtension", RootDeviceHints { wwn_with_extension: s("0x600508b1001c4d5e6f708192a3b4c5d6"), ..h() }, Some("/dev/sdb")),
            ("wwnWithExtension of no disk", RootDeviceHints { wwn_with_extension: s("0x600508b1001c4d5e"), ..h() }, None),
            ("wwnVendorExtension", RootDeviceHints { wwn_vendor_extension: s("0x6f708192a3b4c5d6"), ..h() }, Some("/dev/sdb")),
            ("wwnVendorExtension no disk has", RootDeviceHints { wwn_vendor_extension: s("0x0"), ..h() }, None),
            ("minSizeGigabytes: smallest big enough", RootDeviceHints { min_size_gigabytes: Some(10), ..h() }, Some("/dev/sdb")),
            ("minSizeGigabytes is inclusive", RootDeviceHints { min_size_gigabytes: Some(40), ..h() }, Some("/dev/sda")),
            ("minSizeGigabytes above every disk", RootDeviceHints { min_size_gigabytes: Some(41), ..h() }, None),
            ("hints drop the 4 GiB default minimum", RootDeviceHints { min_size_gigabytes: Some(1), ..h() }, Some("/dev/vda")),
            ("rotational", RootDeviceHints { rotational: Some(true), ..h() }, Some("/dev/sda")),
            ("not rotational", RootDeviceHints { rotational: Some(false), ..h() }, Some("/dev/vda")),
            ("vendor and rotational", RootDeviceHints { vendor: s("ATA"), rotational: Some(false), ..h() }, Some("/dev/sdb")),
            ("vendor and size", RootDeviceHints { vendor: s("ATA"), min_size_gigabytes: Some(30), ..h() }, Some("/dev/sda")),
            ("model and serial of different disks", RootDeviceHints { model: s("QEMU NVMe Ctrl"), serial_number: s("QM00001"), ..h() }, None),
            ("every hint of one disk", RootDeviceHints {
                device_name: s("/dev/sda"), hctl: s("0:0:0:0"), model: s("QEMU HARDDISK"), vendor: s("ATA"),
                serial_number: s("QM00001"), min_size_gigabytes: Some(40), wwn: s("0x5000c500a1b2c3d4"),
                wwn_with_extension: s("0x5000c500a1b2c3d4"), wwn_vendor_extension: None, rotational: Some(true),
            }, Some("/dev/sda")),
            ("every hint but one wrong", RootDeviceHints {
                device_name: s("/dev/sda"), hctl: s("0:0:0:0"), model: s("QEMU HARDDISK"), vendor: s("ATA"),
                serial_number: s("QM00001"), min_size_gigabytes: Some(40), wwn: s("0x5000c500a1b2c3d4"),
                wwn_with_extension: s("0x5000c500a1b2c3d4"), wwn_vendor_extension: None, rotational: Some(false),
            }, None),
        ];
        let disks = disks();
        for (what, hints, want) in cases {
            let got = choose_root_disk(&disks, &hints);
            let name = got.as_ref().map(|d| d.name.as_str()).ok();
            assert_eq!(name, want, "{what}: {got:?}");
        }
    }

    #[test]
    fn ties_go_to_the_first_name() {
        let disk = |name: &str| Disk {
            name: name.into(),
            size_bytes: 10 * GIB,
            ..Disk::default()
        };
        let disks = [disk("/dev/sdc"), disk("/dev/sda"), disk("/dev/sdb")];
        let none = RootDeviceHints::default();
        assert_eq!(choose_root_disk(&disks, &none).unwrap().name, "/dev/sda");
        let hints = RootDeviceHints {
            rotational: Some(false),
            ..none
        };
        assert_eq!(choose_root_disk(&disks, &hints).unwrap().name, "/dev/sda");
    }

    #[test]
    fn the_default_needs_4_gib() {
        let disk = |name: &str, bytes: i64| Disk {
            name: name.into(),
            size_bytes: bytes,
            ..Disk::default()
        };
        let none = RootDeviceHints::default();
        let disks = [disk("/dev/sda", 4 * GIB - 512), disk("/dev/sdb", 4 * GIB)];
        assert_eq!(choose_root_disk(&disks, &none).unwrap().name, "/dev/sdb");
        let err = choose_root_disk(&disks[..1], &none).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no disk of at least 4 GiB for the root device, no hints given \
             (disks: /dev/sda 4.0 GiB model - serial -)"
        );
    }

    #[test]
    fn the_error_names_the_hints_and_every_disk() {
        let hints = RootDeviceHints {
            vendor: s("ATA"),
            min_size_gigabytes: Some(50),
            ..RootDeviceHints::default()
        };
        let err = choose_root_disk(&disks(), &hints).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no disk matches the root device hints minSizeGigabytes=50, vendor=ATA (disks: \
             /dev/vda 2.0 GiB model - serial fm-disk-0; \
             /dev/sda 40.0 GiB model QEMU HARDDISK serial QM00001; \
             /dev/sdb 20.0 GiB model QEMU HARDDISK serial QM00002; \
             /dev/nvme0n1 8.0 GiB model QEMU NVMe Ctrl serial fm-nvme-0)"
        );
        assert_eq!(err.disks.len(), 4);

        let err = choose_root_disk(&[], &hints).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no disk matches the root device hints minSizeGigabytes=50, vendor=ATA \
             (no disks found)"
        );
        let err = choose_root_disk(&[], &RootDeviceHints::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no disk of at least 4 GiB for the root device, no hints given (no disks found)"
        );
    }

    #[test]
    fn hints_are_described_by_their_metal3_names() {
        assert_eq!(describe_hints(&RootDeviceHints::default()), "none");
        let every = RootDeviceHints {
            device_name: s("/dev/sda"),
            hctl: s("0:0:0:0"),
            model: s(" QEMU HARDDISK "),
            vendor: s("ATA"),
            serial_number: s("QM00001"),
            min_size_gigabytes: Some(20),
            wwn: s("0x5000c500a1b2c3d4"),
            wwn_with_extension: s("0x5000c500a1b2c3d4aa"),
            wwn_vendor_extension: s("0xaa"),
            rotational: Some(false),
        };
        assert_eq!(
            describe_hints(&every),
            "deviceName=/dev/sda, hctl=0:0:0:0, minSizeGigabytes=20, model=QEMU HARDDISK, \
             rotational=false, serialNumber=QM00001, vendor=ATA, wwn=0x5000c500a1b2c3d4, \
             wwnVendorExtension=0xaa, wwnWithExtension=0x5000c500a1b2c3d4aa"
        );
        let blank = RootDeviceHints {
            vendor: s(""),
            min_size_gigabytes: Some(0),
            ..RootDeviceHints::default()
        };
        assert_eq!(describe_hints(&blank), "none");
    }
}
