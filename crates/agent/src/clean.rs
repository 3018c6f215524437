//! Metadata cleaning (metal3's `automatedCleaningMode: metadata`): partition tables and
//! filesystem signatures go, the data between them stays.
//!
//! What `wipefs --all` plus `sgdisk --zap-all` reach, in one rule: the first and the last MiB of
//! the disk (MBR, primary and backup GPT, the superblocks of ISO 9660, ext, XFS, btrfs, swap at
//! their starts, MD and LVM labels) and the first and last MiB of every partition the kernel
//! knows (filesystems and RAID members inside them).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// The byte ranges to zero on a disk of `disk_size` bytes with these partitions (start, length),
/// merged and within the disk.
pub fn ranges(disk_size: u64, partitions: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut spans = vec![(0, disk_size)];
    spans.extend_from_slice(partitions);
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (start, len) in spans {
        let end = (start + len).min(disk_size);
        if start >= end {
            continue;
        }
        out.push((start, (start + MIB).min(end)));
        out.push((end.saturating_sub(MIB).max(start), end));
    }
    out.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in out {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged.into_iter().map(|(s, e)| (s, e - s)).collect()
}

/// The partitions of block device `name` as the kernel lists them under `sys/block/NAME`
/// (start and length in bytes).
pub fn partitions(sys_root: &Path, name: &str) -> Vec<(u64, u64)> {
    let dir = sys_root.join("sys/block").join(name);
    let read = |p: &Path| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return out;
    };
    for entry in entries.flatten().take(1024) {
        let p = entry.path();
        if !p.join("partition").exists() {
            continue;
        }
        if let (Some(start), Some(size)) = (read(&p.join("start")), read(&p.join("size"))) {
            // sysfs counts 512-byte sectors whatever the device's block size.
            out.push((start * 512, size * 512));
        }
    }
    out.sort_unstable();
    out
}

/// Zeroes the `ranges` of an open disk and flushes it.
pub fn wipe(disk: &File, ranges: &[(u64, u64)]) -> io::Result<()> {
    let zeros = vec![0u8; MIB as usize];
    for &(start, len) in ranges {
        let mut at = start;
        while at < start + len {
            let n = (start + len - at).min(MIB) as usize;
            disk.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
    }
    disk.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disks_and_each_partitions_ends_are_wiped_once() {
        let gib = 1 << 30;
        assert_eq!(ranges(gib, &[]), vec![(0, MIB), (gib - MIB, MIB)]);
        // A partition from 1 MiB to 513 MiB: its start joins the disk's first MiB.
        assert_eq!(
            ranges(gib, &[(MIB, 512 * MIB)]),
            vec![(0, 2 * MIB), (512 * MIB, MIB), (gib - MIB, MIB)]
        );
        // Small disks and partitions: no range past the end, none twice.
        assert_eq!(ranges(MIB / 2, &[(0, MIB)]), vec![(0, MIB / 2)]);
        assert_eq!(ranges(0, &[]), vec![]);
    }
}
