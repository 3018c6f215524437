//! Disk images turned into disk contents as they stream in, never held whole in memory.
//!
//! `raw` is written as it arrives. `qcow2` is converted on the fly: a qcow2 file written by
//! `qemu-img` puts its header and L1 table first and each L2 table near the clusters it maps
//! (before them, or a little after when qemu-img wrote with several coroutines), so one pass in
//! file order, keeping the last 32 MiB it read, knows where every data cluster goes (and
//! inflates compressed ones). A file laid out otherwise is refused with a message that says so,
//! as are the features a disk image has no business using here (a backing file, encryption, an
//! external data file, zstd compression,
//! extended L2 entries). Unallocated clusters are not written: cleaning wiped the metadata the
//! old contents could be mistaken by.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Where the converted bytes go (a block device, or a file in tests).
pub trait Sink {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()>;
}

impl Sink for File {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_all_at(data, offset)
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ImageError {
    #[error("{0}")]
    Format(String),
    #[error("the image needs {need} bytes, more than the {have} bytes of {disk}")]
    TooLarge { need: u64, have: u64, disk: String },
    #[error("writing to the disk at byte {offset}: {message}")]
    Write { offset: u64, message: String },
}

/// One image being written: feed it the downloaded bytes in order, then `finish`.
pub enum Writer {
    Raw(RawWriter),
    Qcow2(Box<Qcow2Writer>),
}

impl Writer {
    /// `format`: `raw` or `qcow2`; `disk_size` bounds what may be written.
    pub fn new(format: &str, disk: &str, disk_size: u64) -> Result<Writer, ImageError> {
        match format {
            "raw" => Ok(Writer::Raw(RawWriter {
                pos: 0,
                disk: disk.to_string(),
                disk_size,
            })),
            "qcow2" => Ok(Writer::Qcow2(Box::new(Qcow2Writer::new(disk, disk_size)))),
            other => Err(ImageError::Format(format!(
                "image format {other:?} cannot be written by the agent (raw or qcow2)"
            ))),
        }
    }

    /// Checked before the first byte is written when the download's length is known.
    pub fn check_length(&self, length: u64) -> Result<(), ImageError> {
        match self {
            Writer::Raw(w) if length > w.disk_size => Err(ImageError::TooLarge {
                need: length,
                have: w.disk_size,
                disk: w.disk.clone(),
            }),
            _ => Ok(()),
        }
    }

    pub fn feed(&mut self, data: &[u8], sink: &mut dyn Sink) -> Result<(), ImageError> {
        match self {
            Writer::Raw(w) => w.feed(data, sink),
            Writer::Qcow2(w) => w.feed(data, sink),
        }
    }

    /// The number of bytes the disk now holds from the image (its virtual size for qcow2).
    pub fn finish(self) -> Result<u64, ImageError> {
        match self {
            Writer::Raw(w) => Ok(w.pos),
            Writer::Qcow2(w) => w.finish(),
        }
    }
}

pub struct RawWriter {
    pos: u64,
    disk: String,
    disk_size: u64,
}

impl RawWriter {
    fn feed(&mut self, data: &[u8], sink: &mut dyn Sink) -> Result<(), ImageError> {
        let end = self.pos + data.len() as u64;
        if end > self.disk_size {
            return Err(ImageError::TooLarge {
                need: end,
                have: self.disk_size,
                disk: self.disk.clone(),
            });
        }
        write(sink, self.pos, data)?;
        self.pos = end;
        Ok(())
    }
}

fn write(sink: &mut dyn Sink, offset: u64, data: &[u8]) -> Result<(), ImageError> {
    sink.write_at(offset, data).map_err(|e| ImageError::Write {
        offset,
        message: e.to_string(),
    })
}

const QCOW2_MAGIC: &[u8; 4] = b"QFI\xfb";
/// Bits 9-55 of L1 and standard L2 entries: the host offset.
const OFFSET_MASK: u64 = 0x00ff_ffff_ffff_fe00;
const COMPRESSED: u64 = 1 << 62;
/// Largest L1 table accepted (32 MiB: 4 M entries, a 2 PiB disk at 64 KiB clusters).
const MAX_L1_BYTES: u64 = 32 << 20;
/// The file's last bytes kept in memory: `qemu-img convert` writes with several coroutines at
/// once, so a cluster may land in the file a little before the L2 table that maps it.
const WINDOW: u64 = 32 << 20;

/// What a span of the file is, once it has arrived.
enum Region {
    L1,
    /// An L2 table covering guest clusters from `first_cluster` on.
    L2 {
        first_cluster: u64,
    },
    /// An uncompressed cluster, written through as it arrives.
    Data {
        guest: u64,
    },
    /// A compressed cluster, inflated once whole.
    Compressed {
        guest: u64,
        bytes: Vec<u8>,
    },
}

struct Pending {
    len: u64,
    region: Region,
    /// Bytes of the span taken so far.
    got: u64,
    /// Collected bytes of a table (L1, L2).
    buf: Vec<u8>,
}

pub struct Qcow2Writer {
    disk: String,
    disk_size: u64,
    /// File offset of the next byte fed.
    pos: u64,
    header: Vec<u8>,
    cluster_bits: u32,
    size: u64,
    /// Spans still to come, by file offset (and a sequence number: compressed clusters may
    /// share bytes, so two spans can start at the same offset).
    pending: BTreeMap<(u64, u64), Pending>,
    seq: u64,
    /// The last bytes fed (at most `WINDOW`), from file offset `window_start`.
    window: VecDeque<u8>,
    window_start: u64,
}

impl Qcow2Writer {
    fn new(disk: &str, disk_size: u64) -> Qcow2Writer {
        Qcow2Writer {
            disk: disk.to_string(),
            disk_size,
            pos: 0,
            header: Vec::new(),
            cluster_bits: 0,
            size: 0,
            pending: BTreeMap::new(),
            seq: 0,
            window: VecDeque::new(),
            window_start: 0,
        }
    }

    fn cluster_size(&self) -> u64 {
        1 << self.cluster_bits
    }

    fn expect(&mut self, offset: u64, len: u64, region: Region) -> Result<(), ImageError> {
        if offset < self.window_start {
            return Err(ImageError::Format(format!(
                "this qcow2 file maps data at byte {offset} more than {} MiB before the place it is mapped from (byte {}): it cannot be written as it downloads; write it again with `qemu-img convert -O qcow2` or use a raw image",
                WINDOW >> 20,
                self.pos
            )));
        }
        self.seq += 1;
        self.pending.insert(
            (offset, self.seq),
            Pending {
                len,
                region,
                got: 0,
                buf: Vec::new(),
            },
        );
        Ok(())
    }

    fn feed(&mut self, data: &[u8], sink: &mut dyn Sink) -> Result<(), ImageError> {
        self.take(data, sink)?;
        // Kept for spans mapped after they passed (see WINDOW).
        self.window.extend(data);
        let excess = self.window.len().saturating_sub(WINDOW as usize);
        if excess > 0 {
            self.window.drain(..excess);
            self.window_start += excess as u64;
        }
        Ok(())
    }

    fn take(&mut self, mut data: &[u8], sink: &mut dyn Sink) -> Result<(), ImageError> {
        if self.cluster_bits == 0 {
            // The header: 104 bytes at most are read (v3's fixed part), the rest is skipped.
            let want = 104usize.saturating_sub(self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..want]);
            self.pos += want as u64;
            data = &data[want..];
            if self.header.len() < 104 {
                return Ok(());
            }
            self.parse_header()?;
        }
        let start = self.pos;
        let end = start + data.len() as u64;
        // Spans with bytes in this chunk (or, mapped late, in the window of bytes before it),
        // taken in file order; completing one may add more (an L2 table's clusters), possibly
        // inside this chunk too.
        while let Some((&key, _)) = self
            .pending
            .range(..(end, 0))
            .find(|((off, _), p)| off + p.got < end)
        {
            let (off, _) = key;
            let mut p = self.pending.remove(&key).expect("found above");
            let from = off + p.got;
            let kept: Vec<u8>;
            let (slice, to) = if from < start {
                let to = (off + p.len).min(start);
                let at = (from - self.window_start) as usize;
                kept = self
                    .window
                    .range(at..at + (to - from) as usize)
                    .copied()
                    .collect();
                (&kept[..], to)
            } else {
                let to = (off + p.len).min(end);
                (&data[(from - start) as usize..(to - start) as usize], to)
            };
            match &mut p.region {
                Region::Data { guest } => write(sink, *guest + p.got, slice)?,
                Region::Compressed { bytes, .. } => bytes.extend_from_slice(slice),
                Region::L1 | Region::L2 { .. } => p.buf.extend_from_slice(slice),
            }
            p.got = to - off;
            if p.got < p.len {
                self.pending.insert(key, p);
            } else {
                self.complete(p, sink)?;
            }
        }
        self.pos = end;
        Ok(())
    }

    fn parse_header(&mut self) -> Result<(), ImageError> {
        let h = &self.header;
        let be32 = |at: usize| u32::from_be_bytes(h[at..at + 4].try_into().expect("4 bytes"));
        let be64 = |at: usize| u64::from_be_bytes(h[at..at + 8].try_into().expect("8 bytes"));
        if &h[..4] != QCOW2_MAGIC {
            return Err(ImageError::Format(
                "the image is not qcow2 (no QFI\\xfb magic at its start); is its format raw?"
                    .into(),
            ));
        }
        let version = be32(4);
        if !(2..=3).contains(&version) {
            return Err(ImageError::Format(format!(
                "qcow2 version {version} is not supported (2 or 3)"
            )));
        }
        if be64(8) != 0 {
            return Err(ImageError::Format(
                "the qcow2 image has a backing file; flatten it (`qemu-img convert`) first".into(),
            ));
        }
        let cluster_bits = be32(20);
        if !(9..=21).contains(&cluster_bits) {
            return Err(ImageError::Format(format!(
                "qcow2 cluster_bits {cluster_bits} is out of range (9-21)"
            )));
        }
        let size = be64(24);
        if be32(32) != 0 {
            return Err(ImageError::Format(
                "the qcow2 image is encrypted; the agent writes unencrypted images only".into(),
            ));
        }
        let l1_size = u64::from(be32(36));
        let l1_offset = be64(40);
        if version == 3 {
            let incompatible = be64(72);
            let known_harmless = 1; // dirty bit: refcounts may be stale, mapping is sound
            let refused = [
                (1 << 1, "is marked corrupt"),
                (1 << 2, "keeps its data in an external file"),
                (1 << 3, "uses a compression type other than zlib"),
                (1 << 4, "uses extended L2 entries"),
            ];
            for (bit, what) in refused {
                if incompatible & bit != 0 {
                    return Err(ImageError::Format(format!(
                        "the qcow2 image {what}; write it again with `qemu-img convert -O qcow2`"
                    )));
                }
            }
            let unknown = incompatible & !(known_harmless | 0b11110);
            if unknown != 0 {
                return Err(ImageError::Format(format!(
                    "the qcow2 image has incompatible features {unknown:#x} the agent does not know"
                )));
            }
        }
        if size > self.disk_size {
            return Err(ImageError::TooLarge {
                need: size,
                have: self.disk_size,
                disk: self.disk.clone(),
            });
        }
        self.cluster_bits = cluster_bits;
        self.size = size;
        let clusters = size.div_ceil(self.cluster_size());
        let l2_entries = self.cluster_size() / 8;
        let need = clusters.div_ceil(l2_entries);
        if l1_size < need || l1_size * 8 > MAX_L1_BYTES {
            return Err(ImageError::Format(format!(
                "qcow2 L1 table of {l1_size} entries does not fit an image of {size} bytes"
            )));
        }
        self.expect(l1_offset, need * 8, Region::L1)
    }

    fn complete(&mut self, p: Pending, sink: &mut dyn Sink) -> Result<(), ImageError> {
        match p.region {
            Region::Data { .. } => Ok(()),
            Region::L1 => {
                let l2_entries = self.cluster_size() / 8;
                for (i, entry) in p.buf.chunks_exact(8).enumerate() {
                    let offset =
                        u64::from_be_bytes(entry.try_into().expect("8 bytes")) & OFFSET_MASK;
                    if offset != 0 {
                        let first_cluster = i as u64 * l2_entries;
                        self.expect(offset, self.cluster_size(), Region::L2 { first_cluster })?;
                    }
                }
                Ok(())
            }
            Region::L2 { first_cluster } => {
                let cs = self.cluster_size();
                let clusters = self.size.div_ceil(cs);
                for (i, entry) in p.buf.chunks_exact(8).enumerate() {
                    let cluster = first_cluster + i as u64;
                    if cluster >= clusters {
                        break;
                    }
                    let entry = u64::from_be_bytes(entry.try_into().expect("8 bytes"));
                    let guest = cluster * cs;
                    let len = cs.min(self.size - guest);
                    if entry & COMPRESSED != 0 {
                        // Offset in the low (62 - (cluster_bits - 8)) bits, then the count of
                        // 512-byte sectors beyond the first that the compressed data spans.
                        let x = 62 - (self.cluster_bits - 8);
                        let offset = entry & ((1u64 << x) - 1);
                        let sectors = (entry & !COMPRESSED & ((1u64 << 62) - 1)) >> x;
                        let span = (sectors + 1) * 512 - (offset & 511);
                        self.expect(
                            offset,
                            span,
                            Region::Compressed {
                                guest,
                                bytes: Vec::new(),
                            },
                        )?;
                    } else {
                        let offset = entry & OFFSET_MASK;
                        // Offset 0: unallocated (bit 0 set or not, it reads as zeros).
                        if offset != 0 {
                            self.expect(offset, len, Region::Data { guest })?;
                        }
                    }
                }
                Ok(())
            }
            Region::Compressed { guest, bytes } => {
                let cs = self.cluster_size() as usize;
                let len = (self.size - guest).min(cs as u64) as usize;
                let mut out = vec![0u8; cs];
                let mut inflate = flate2::Decompress::new(false);
                inflate
                    .decompress(&bytes, &mut out, flate2::FlushDecompress::Finish)
                    .map_err(|e| {
                        ImageError::Format(format!(
                            "a compressed qcow2 cluster (guest byte {guest}) does not inflate: {e}"
                        ))
                    })?;
                if (inflate.total_out() as usize) < len {
                    return Err(ImageError::Format(format!(
                        "a compressed qcow2 cluster (guest byte {guest}) inflates to {} bytes, not {len}",
                        inflate.total_out()
                    )));
                }
                write(sink, guest, &out[..len])
            }
        }
    }

    fn finish(self) -> Result<u64, ImageError> {
        if self.cluster_bits == 0 {
            return Err(ImageError::Format(format!(
                "the image ended after {} bytes, inside its qcow2 header",
                self.pos
            )));
        }
        if let Some((&(offset, _), _)) = self.pending.iter().next() {
            return Err(ImageError::Format(format!(
                "the qcow2 image ended at byte {} before the data it maps at byte {offset}: the download is truncated",
                self.pos
            )));
        }
        Ok(self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that remembers what was written where.
    struct Memory(Vec<u8>);

    impl Sink for Memory {
        fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
            let end = offset as usize + data.len();
            if self.0.len() < end {
                self.0.resize(end, 0);
            }
            self.0[offset as usize..end].copy_from_slice(data);
            Ok(())
        }
    }

    #[test]
    fn raw_images_are_written_as_they_come_and_bounded_by_the_disk() {
        let mut w = Writer::new("raw", "/dev/vda", 10).unwrap();
        let mut sink = Memory(Vec::new());
        w.feed(b"hello", &mut sink).unwrap();
        w.feed(b"world", &mut sink).unwrap();
        let err = w.feed(b"!", &mut sink).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the image needs 11 bytes, more than the 10 bytes of /dev/vda"
        );
        assert_eq!(sink.0, b"helloworld");
        let w = Writer::new("raw", "/dev/vda", 10).unwrap();
        assert!(w.check_length(11).is_err());
        assert!(w.check_length(10).is_ok());
        assert!(Writer::new("vmdk", "/dev/vda", 10).is_err());
    }

    #[test]
    fn what_is_not_qcow2_is_refused_with_its_reason() {
        let mut sink = Memory(Vec::new());
        let mut w = Writer::new("qcow2", "/dev/vda", 1 << 30).unwrap();
        let err = w.feed(&[0u8; 200], &mut sink).unwrap_err();
        assert!(err.to_string().contains("not qcow2"), "{err}");
        let w = Writer::new("qcow2", "/dev/vda", 1 << 30).unwrap();
        let err = w.finish().unwrap_err();
        assert!(err.to_string().contains("inside its qcow2 header"), "{err}");
    }
}
