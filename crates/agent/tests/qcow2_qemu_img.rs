//! qcow2 files made by the real `qemu-img` (plain, compressed, small and large clusters) stream
//! through the agent's writer into exactly the bytes of the raw disk they came from, whatever
//! the download's chunk sizes.

use std::path::Path;
use std::process::Command;

use ferrometal_agent::image::{Sink, Writer};

struct Memory(Vec<u8>);

impl Sink for Memory {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let end = offset as usize + data.len();
        if self.0.len() < end {
            self.0.resize(end, 0);
        }
        self.0[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
}

/// A 3 MiB + 1 KiB disk (qemu-img keeps sizes in whole sectors): text, pseudo-random bytes, and zero runs between them.
fn raw_disk() -> Vec<u8> {
    let mut disk = vec![0u8; 3 * 1024 * 1024 + 1024];
    let mut x: u32 = 12345;
    for (i, b) in disk.iter_mut().enumerate() {
        let block = i / 65536;
        if block % 3 == 1 {
            continue; // zeros
        }
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        *b = if block % 3 == 0 {
            b"ferrometal "[i % 11]
        } else {
            (x >> 16) as u8
        };
    }
    let n = disk.len();
    disk[n - 10..].copy_from_slice(b"LAST BYTES");
    disk
}

fn qemu_img(args: &[&str]) {
    let out = Command::new("qemu-img")
        .args(args)
        .output()
        .expect("qemu-img runs (scripts/vmlab.sh setup installs qemu-utils)");
    assert!(
        out.status.success(),
        "qemu-img {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stream(file: &Path, chunk: usize, disk_size: u64) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(file).unwrap();
    let mut w = Writer::new("qcow2", "/dev/test", disk_size).map_err(|e| e.to_string())?;
    let mut sink = Memory(Vec::new());
    for piece in bytes.chunks(chunk) {
        w.feed(piece, &mut sink).map_err(|e| e.to_string())?;
    }
    let size = w.finish().map_err(|e| e.to_string())?;
    sink.0.resize(size as usize, 0);
    Ok(sink.0)
}

#[test]
fn qemu_img_output_streams_into_the_raw_disk_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("disk.raw");
    let disk = raw_disk();
    std::fs::write(&raw, &disk).unwrap();
    let raw_s = raw.to_str().unwrap();
    for (name, extra) in [
        ("plain.qcow2", vec![]),
        ("compressed.qcow2", vec!["-c"]),
        ("small.qcow2", vec!["-o", "cluster_size=512"]),
        (
            "small-compressed.qcow2",
            vec!["-c", "-o", "cluster_size=4096"],
        ),
        ("big.qcow2", vec!["-o", "cluster_size=2M"]),
        ("v2.qcow2", vec!["-o", "compat=0.10"]),
    ] {
        let out = dir.path().join(name);
        let mut args = vec!["convert", "-q", "-f", "raw", "-O", "qcow2"];
        args.extend(extra.iter().copied());
        args.extend([raw_s, out.to_str().unwrap()]);
        qemu_img(&args);
        for chunk in [1, 511, 4096, 65536, 1 << 20] {
            if chunk == 1 && name != "compressed.qcow2" {
                continue; // byte by byte once is enough
            }
            let got = stream(&out, chunk, disk.len() as u64)
                .unwrap_or_else(|e| panic!("{name} in {chunk}-byte chunks: {e}"));
            assert!(
                got == disk,
                "{name} in {chunk}-byte chunks differs from the raw disk"
            );
        }
    }
}

#[test]
fn a_disk_too_small_or_a_truncated_download_is_refused_before_or_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("disk.raw");
    std::fs::write(&raw, raw_disk()).unwrap();
    let q = dir.path().join("disk.qcow2");
    qemu_img(&[
        "convert",
        "-q",
        "-f",
        "raw",
        "-O",
        "qcow2",
        raw.to_str().unwrap(),
        q.to_str().unwrap(),
    ]);
    let err = stream(&q, 65536, 1 << 20).unwrap_err();
    assert!(
        err.contains("more than the 1048576 bytes of /dev/test"),
        "{err}"
    );

    let bytes = std::fs::read(&q).unwrap();
    let cut = dir.path().join("cut.qcow2");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = stream(&cut, 65536, 1 << 30).unwrap_err();
    assert!(err.contains("truncated"), "{err}");
}
