//! A partition for the config drive at the end of a disk that was just written with an image.
//!
//! As Ironic's agent does, the config drive gets its own partition after the image's, here the
//! last `size` bytes of the disk (aligned to 1 MiB). On a GPT disk the image's table only
//! describes the image: its backup header sits where the image ended. So the primary table gets
//! the new entry and the disk's real size, the backup table moves to the disk's end, the old
//! backup header is wiped and the protective MBR covers the whole disk. An MBR disk gets a
//! primary partition of type 0x83 in a free slot.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The byte span the new partition holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: u64,
    pub len: u64,
    /// Its number (1-based), as the kernel names it (`vda3`).
    pub number: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("{0}")]
    Layout(String),
    #[error("reading or writing the partition table: {0}")]
    Io(#[from] io::Error),
}

/// Linux filesystem data, the type Ironic gives the config drive partition.
const LINUX_DATA: [u8; 16] = guid_bytes(
    0x0FC6_3DAF,
    0x8483,
    0x4772,
    [0x8E, 0x79, 0x3D, 0x69, 0xD8, 0x47, 0x7D, 0xE4],
);
const ALIGN: u64 = 1 << 20;

/// The on-disk (mixed-endian) form of a GUID.
const fn guid_bytes(a: u32, b: u16, c: u16, d: [u8; 8]) -> [u8; 16] {
    let a = a.to_le_bytes();
    let b = b.to_le_bytes();
    let c = c.to_le_bytes();
    [
        a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d[0], d[1], d[2], d[3], d[4], d[5], d[6],
        d[7],
    ]
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Adds a partition of `size` bytes named `name` (GPT) at the end of `disk` (`disk_size` bytes,
/// `sector`-byte logical blocks). `unique` is the new GPT entry's GUID (random, from the caller).
pub fn add_at_end(
    disk: &impl FileExt,
    disk_size: u64,
    sector: u64,
    size: u64,
    name: &str,
    unique: [u8; 16],
) -> Result<Span, PartitionError> {
    let mut head = vec![0u8; (2 * sector) as usize];
    disk.read_exact_at(&mut head, 0)?;
    if &head[sector as usize..sector as usize + 8] == b"EFI PART" {
        gpt_add(disk, disk_size, sector, size, name, unique, &head)
    } else if head[510] == 0x55 && head[511] == 0xAA {
        mbr_add(disk, disk_size, sector, size, &head)
    } else {
        Err(PartitionError::Layout(
            "the image has no partition table (neither GPT nor MBR), so a config drive partition cannot be added to it".into(),
        ))
    }
}

/// Where the new partition goes: the last `size` bytes before `end` (exclusive), 1 MiB aligned,
/// after `used_end` (the end of the image's partitions).
fn place(end: u64, used_end: u64, size: u64) -> Result<u64, PartitionError> {
    let start = end.checked_sub(size).map(|s| s / ALIGN * ALIGN);
    match start {
        Some(start) if start >= used_end => Ok(start),
        _ => Err(PartitionError::Layout(format!(
            "no room for a {} MiB config drive after the image's partitions (they end at {} MiB of a {} MiB disk)",
            size >> 20,
            used_end >> 20,
            end >> 20
        ))),
    }
}

fn gpt_add(
    disk: &impl FileExt,
    disk_size: u64,
    sector: u64,
    size: u64,
    name: &str,
    unique: [u8; 16],
    head: &[u8],
) -> Result<Span, PartitionError> {
    let Table {
        mut header,
        mut entries,
        entries_lba,
        count,
        entry_size,
    } = read_table(disk, sector, head)?;
    let old_backup = le64(&header, 32);
    let lbas = disk_size / sector;
    let entries_sectors = (count * entry_size).div_ceil(sector);
    let backup_lba = lbas - 1;
    let backup_entries_lba = backup_lba - entries_sectors;
    let last_usable = backup_entries_lba - 1;

    let mut free = None;
    let mut used_end = (entries_lba + entries_sectors) * sector;
    for (i, e) in entries.chunks_exact(entry_size as usize).enumerate() {
        if e[..16].iter().all(|b| *b == 0) {
            free = free.or(Some(i));
        } else {
            used_end = used_end.max((le64(e, 40) + 1) * sector);
        }
    }
    let Some(slot) = free else {
        return Err(PartitionError::Layout(format!(
            "all {count} GPT entries are in use"
        )));
    };
    let start = place((last_usable + 1) * sector, used_end, size)?;
    let (first, last) = (start / sector, last_usable);

    let e = &mut entries[slot * entry_size as usize..(slot + 1) * entry_size as usize];
    e.fill(0);
    e[..128].copy_from_slice(&GptEntry::new(slot, LINUX_DATA, unique, first, last, name).raw);
    let entries_crc = crc32fast::hash(&entries);

    // Primary header: the disk's real end; then its backup copy, which swaps the two LBAs.
    header[32..40].copy_from_slice(&backup_lba.to_le_bytes());
    header[48..56].copy_from_slice(&last_usable.to_le_bytes());
    header[88..92].copy_from_slice(&entries_crc.to_le_bytes());
    let primary = seal(&header);
    let mut backup = header.clone();
    backup[24..32].copy_from_slice(&backup_lba.to_le_bytes());
    backup[32..40].copy_from_slice(&1u64.to_le_bytes());
    backup[72..80].copy_from_slice(&backup_entries_lba.to_le_bytes());
    let backup = seal(&backup);

    disk.write_all_at(&entries, backup_entries_lba * sector)?;
    disk.write_all_at(&backup, backup_lba * sector)?;
    disk.write_all_at(&entries, entries_lba * sector)?;
    disk.write_all_at(&primary, sector)?;
    if old_backup != backup_lba && old_backup > 1 && old_backup < lbas {
        // The image's own backup header, now stale: wiped so no tool takes it for the disk's.
        disk.write_all_at(&vec![0u8; sector as usize], old_backup * sector)?;
    }
    // The protective MBR's 0xEE partition covers the whole disk (or 2 TiB, its limit).
    let mut mbr = [0u8; 16];
    disk.read_exact_at(&mut mbr, 446)?;
    if mbr[4] == 0xEE {
        let sectors = u32::try_from(lbas - 1).unwrap_or(u32::MAX);
        disk.write_all_at(&sectors.to_le_bytes(), 446 + 12)?;
    }
    Ok(Span {
        start,
        len: (last - first + 1) * sector,
        number: slot as u32 + 1,
    })
}

/// One GPT entry as stored (the first 128 bytes: type, unique GUID, first and last LBA,
/// attributes, name), with its slot (0-based; the kernel names the partition `slot + 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GptEntry {
    pub slot: usize,
    pub raw: [u8; 128],
}

impl GptEntry {
    pub fn new(
        slot: usize,
        type_guid: [u8; 16],
        unique: [u8; 16],
        first: u64,
        last: u64,
        name: &str,
    ) -> Self {
        let mut raw = [0u8; 128];
        raw[..16].copy_from_slice(&type_guid);
        raw[16..32].copy_from_slice(&unique);
        raw[32..40].copy_from_slice(&first.to_le_bytes());
        raw[40..48].copy_from_slice(&last.to_le_bytes());
        for (i, unit) in name.encode_utf16().take(36).enumerate() {
            raw[56 + 2 * i..58 + 2 * i].copy_from_slice(&unit.to_le_bytes());
        }
        GptEntry { slot, raw }
    }

    pub fn type_guid(&self) -> [u8; 16] {
        self.raw[..16].try_into().expect("16 bytes")
    }

    pub fn first_lba(&self) -> u64 {
        le64(&self.raw, 32)
    }

    pub fn last_lba(&self) -> u64 {
        le64(&self.raw, 40)
    }
}

/// The used entries of the GPT at the start of `disk`; `None` when the disk has no GPT.
pub fn read_gpt(disk: &impl FileExt, sector: u64) -> Result<Option<Vec<GptEntry>>, PartitionError> {
    let mut head = vec![0u8; (2 * sector) as usize];
    disk.read_exact_at(&mut head, 0)?;
    if &head[sector as usize..sector as usize + 8] != b"EFI PART" {
        return Ok(None);
    }
    let Table {
        entries,
        entry_size,
        ..
    } = read_table(disk, sector, &head)?;
    Ok(Some(
        entries
            .chunks_exact(entry_size as usize)
            .enumerate()
            .filter(|(_, e)| e[..16].iter().any(|b| *b != 0))
            .map(|(slot, e)| GptEntry {
                slot,
                raw: e[..128].try_into().expect("128 bytes"),
            })
            .collect(),
    ))
}

/// Writes a new GPT (128 entries, primary and backup, and a protective MBR after `boot_code`,
/// the MBR's first 440 bytes) over the whole of `disk`. Entries must lie in the usable LBAs.
pub fn write_gpt(
    disk: &impl FileExt,
    disk_size: u64,
    sector: u64,
    entries: &[GptEntry],
    disk_guid: [u8; 16],
    boot_code: &[u8; 440],
) -> Result<(), PartitionError> {
    const COUNT: u64 = 128;
    const ENTRY: u64 = 128;
    let lbas = disk_size / sector;
    let entries_sectors = (COUNT * ENTRY).div_ceil(sector);
    let first_usable = 2 + entries_sectors;
    let backup_lba = lbas - 1;
    let backup_entries_lba = backup_lba - entries_sectors;
    let last_usable = backup_entries_lba - 1;
    let mut table = vec![0u8; (COUNT * ENTRY) as usize];
    for e in entries {
        if e.slot >= COUNT as usize
            || e.first_lba() < first_usable
            || e.last_lba() > last_usable
            || e.first_lba() > e.last_lba()
        {
            return Err(PartitionError::Layout(format!(
                "partition {} (LBA {}..{}) does not fit a GPT of a {} MiB disk",
                e.slot + 1,
                e.first_lba(),
                e.last_lba(),
                disk_size >> 20
            )));
        }
        table[e.slot * ENTRY as usize..(e.slot + 1) * ENTRY as usize].copy_from_slice(&e.raw);
    }
    let mut header = vec![0u8; 92];
    header[..8].copy_from_slice(b"EFI PART");
    header[8..12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
    header[12..16].copy_from_slice(&92u32.to_le_bytes());
    header[24..32].copy_from_slice(&1u64.to_le_bytes());
    header[32..40].copy_from_slice(&backup_lba.to_le_bytes());
    header[40..48].copy_from_slice(&first_usable.to_le_bytes());
    header[48..56].copy_from_slice(&last_usable.to_le_bytes());
    header[56..72].copy_from_slice(&disk_guid);
    header[72..80].copy_from_slice(&2u64.to_le_bytes());
    header[80..84].copy_from_slice(&(COUNT as u32).to_le_bytes());
    header[84..88].copy_from_slice(&(ENTRY as u32).to_le_bytes());
    header[88..92].copy_from_slice(&crc32fast::hash(&table).to_le_bytes());
    let primary = seal(&header);
    let mut backup = header;
    backup[24..32].copy_from_slice(&backup_lba.to_le_bytes());
    backup[32..40].copy_from_slice(&1u64.to_le_bytes());
    backup[72..80].copy_from_slice(&backup_entries_lba.to_le_bytes());
    let backup = seal(&backup);

    let mut mbr = vec![0u8; sector as usize];
    mbr[..440].copy_from_slice(boot_code);
    // One 0xEE partition over the whole disk (or 2 TiB, its limit); CHS "beyond CHS".
    mbr[446 + 1..446 + 4].copy_from_slice(&[0x00, 0x02, 0x00]);
    mbr[446 + 4] = 0xEE;
    mbr[446 + 5..446 + 8].copy_from_slice(&[0xFF, 0xFF, 0xFF]);
    mbr[446 + 8..446 + 12].copy_from_slice(&1u32.to_le_bytes());
    let sectors = u32::try_from(lbas - 1).unwrap_or(u32::MAX);
    mbr[446 + 12..446 + 16].copy_from_slice(&sectors.to_le_bytes());
    mbr[510] = 0x55;
    mbr[511] = 0xAA;
    let mut primary_sector = vec![0u8; sector as usize];
    primary_sector[..92].copy_from_slice(&primary);
    let mut backup_sector = vec![0u8; sector as usize];
    backup_sector[..92].copy_from_slice(&backup);
    disk.write_all_at(&table, backup_entries_lba * sector)?;
    disk.write_all_at(&backup_sector, backup_lba * sector)?;
    disk.write_all_at(&table, 2 * sector)?;
    disk.write_all_at(&primary_sector, sector)?;
    disk.write_all_at(&mbr, 0)?;
    Ok(())
}

/// A GPT's header (as long as it says it is) and its whole entry array, checked.
struct Table {
    header: Vec<u8>,
    entries: Vec<u8>,
    entries_lba: u64,
    count: u64,
    entry_size: u64,
}

/// The GPT whose header is in `head`'s second sector (`head`: the disk's first two sectors).
fn read_table(disk: &impl FileExt, sector: u64, head: &[u8]) -> Result<Table, PartitionError> {
    let h = &head[sector as usize..];
    let header_size = le32(h, 12) as usize;
    if !(92..=sector as usize).contains(&header_size) {
        return Err(PartitionError::Layout(format!(
            "the GPT header claims a size of {header_size} bytes"
        )));
    }
    let header = h[..header_size].to_vec();
    let entries_lba = le64(&header, 72);
    let count = le32(&header, 80) as u64;
    let entry_size = le32(&header, 84) as u64;
    if !(128..=4096).contains(&entry_size) || count == 0 || count > 4096 {
        return Err(PartitionError::Layout(format!(
            "the GPT header describes {count} entries of {entry_size} bytes"
        )));
    }
    let mut entries = vec![0u8; (count * entry_size) as usize];
    disk.read_exact_at(&mut entries, entries_lba * sector)?;
    if crc32fast::hash(&entries) != le32(&header, 88) {
        return Err(PartitionError::Layout(
            "the GPT partition entries do not match their checksum".into(),
        ));
    }
    Ok(Table {
        header,
        entries,
        entries_lba,
        count,
        entry_size,
    })
}

/// The header with its CRC32 computed over itself (CRC field zeroed first).
fn seal(header: &[u8]) -> Vec<u8> {
    let mut h = header.to_vec();
    h[16..20].fill(0);
    let crc = crc32fast::hash(&h);
    h[16..20].copy_from_slice(&crc.to_le_bytes());
    h
}

fn mbr_add(
    disk: &impl FileExt,
    disk_size: u64,
    sector: u64,
    size: u64,
    head: &[u8],
) -> Result<Span, PartitionError> {
    let mut used_end = ALIGN;
    let mut free = None;
    for i in 0..4 {
        let e = &head[446 + 16 * i..462 + 16 * i];
        if e[4] == 0 {
            free = free.or(Some(i));
        } else {
            used_end = used_end.max((u64::from(le32(e, 8)) + u64::from(le32(e, 12))) * sector);
        }
    }
    let Some(slot) = free else {
        return Err(PartitionError::Layout(
            "all four MBR partition slots are in use".into(),
        ));
    };
    let end = disk_size.min(u64::from(u32::MAX) * sector);
    let start = place(end, used_end, size)?;
    let first = u32::try_from(start / sector).expect("below 2^32 sectors");
    let count = u32::try_from((end - start) / sector).expect("below 2^32 sectors");
    let mut e = [0u8; 16];
    // CHS fields say "beyond CHS" (as fdisk writes for large disks); LBA fields are the truth.
    e[1..4].copy_from_slice(&[0xFE, 0xFF, 0xFF]);
    e[4] = 0x83;
    e[5..8].copy_from_slice(&[0xFE, 0xFF, 0xFF]);
    e[8..12].copy_from_slice(&first.to_le_bytes());
    e[12..16].copy_from_slice(&count.to_le_bytes());
    disk.write_all_at(&e, 446 + 16 * slot as u64)?;
    Ok(Span {
        start,
        len: u64::from(count) * sector,
        number: slot as u32 + 1,
    })
}

/// The device's logical block size (512 when sysfs does not say).
pub fn logical_block_size(sys_root: &Path, dev: &str) -> u64 {
    let name = dev.trim_start_matches("/dev/");
    std::fs::read_to_string(sys_root.join(format!("sys/block/{name}/queue/logical_block_size")))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(512)
}

/// A random (version 4) GUID in its on-disk byte order.
/// A GUID of zeros would make every config drive partition alike, so no randomness is an
/// error, not a fallback.
pub fn random_guid() -> std::io::Result<[u8; 16]> {
    let mut g = [0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut g)?;
    g[7] = (g[7] & 0x0f) | 0x40;
    g[8] = (g[8] & 0x3f) | 0x80;
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_are_stored_mixed_endian() {
        // 0FC63DAF-8483-4772-8E79-3D69D8477DE4 as it appears on disk.
        assert_eq!(
            LINUX_DATA,
            [
                0xAF, 0x3D, 0xC6, 0x0F, 0x83, 0x84, 0x72, 0x47, 0x8E, 0x79, 0x3D, 0x69, 0xD8, 0x47,
                0x7D, 0xE4
            ]
        );
    }

    #[test]
    fn the_partition_goes_last_aligned_and_only_where_there_is_room() {
        assert_eq!(place(100 << 20, 10 << 20, 64 << 20).unwrap(), 36 << 20);
        // Not aligned at the end: rounded down to a MiB boundary.
        assert_eq!(
            place((100 << 20) - 512, 10 << 20, 64 << 20).unwrap(),
            35 << 20
        );
        let err = place(100 << 20, 50 << 20, 64 << 20).unwrap_err();
        assert!(
            err.to_string()
                .contains("they end at 50 MiB of a 100 MiB disk"),
            "{err}"
        );
    }

    #[test]
    fn a_written_gpt_reads_back_and_takes_a_config_drive() {
        let f = tempfile::tempfile().unwrap();
        let size = 64u64 << 20;
        f.set_len(size).unwrap();
        let entries = [
            GptEntry::new(1, LINUX_DATA, [2; 16], 2048, 4095, "esp"),
            GptEntry::new(4, LINUX_DATA, [3; 16], 8192, 16383, "raid"),
        ];
        write_gpt(&f, size, 512, &entries, [9; 16], &[0x33; 440]).unwrap();
        let back = read_gpt(&f, 512).unwrap().unwrap();
        assert_eq!(back, entries.to_vec());
        let mut mbr = [0u8; 512];
        f.read_exact_at(&mut mbr, 0).unwrap();
        assert_eq!(
            (mbr[0], mbr[439], mbr[450], mbr[510], mbr[511]),
            (0x33, 0x33, 0xEE, 0x55, 0xAA)
        );
        // The table is valid for the code that adds to it: the new partition takes slot 0.
        let span = add_at_end(&f, size, 512, 1 << 20, "config-2", [4; 16]).unwrap();
        assert_eq!(
            (span.number, span.start),
            (1, (size >> 20) * (1 << 20) - (2 << 20))
        );
        // An entry beyond the usable LBAs is refused, naming it.
        let bad = [GptEntry::new(0, LINUX_DATA, [2; 16], 2048, size / 512, "x")];
        let err = write_gpt(&f, size, 512, &bad, [9; 16], &[0; 440]).unwrap_err();
        assert!(err.to_string().contains("partition 1"), "{err}");
    }

    #[test]
    fn a_disk_without_a_table_is_refused() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(8 << 20).unwrap();
        let err = add_at_end(&f, 8 << 20, 512, 1 << 20, "config-2", [1; 16]).unwrap_err();
        assert!(err.to_string().contains("no partition table"), "{err}");
    }
}
