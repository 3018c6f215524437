//! An image deploy on the host: choose the root disk, stream the image onto it while checking
//! its checksum, then add the config drive partition.
//!
//! Nothing half-written may boot: the image's first MiB (its partition table and boot code) is
//! held in memory and written only once the whole image arrived with the right checksum; before
//! the first byte, the disk's first MiB is zeroed. A failed deploy leaves a disk with no table
//! at its start.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use crate::api::{Api, error_chain};
use crate::checksum::{Algorithm, digest_from_file};
use crate::hints::choose_root_disk;
use crate::image::{Sink, Writer};
use crate::partition::{self, logical_block_size, random_guid};
use crate::protocol::{DeploySpec, Disk};
use crate::raid;

/// Config drives are at most 64 MiB, as in Ironic; the partition is never smaller.
pub const CONFIG_DRIVE_MAX: usize = 64 << 20;
const HEAD: u64 = 1 << 20;

/// What a finished deploy reports.
pub struct Deployed {
    pub root_disk: String,
    /// The software RAID arrays built, one line each.
    pub software_raid: Vec<String>,
    pub timings: BTreeMap<String, f64>,
    pub mb_per_s: f64,
}

/// Where the image goes: a disk, or the root of software RAID arrays still to be built.
enum Target {
    Disk(Disk),
    Raid(raid::Plan),
}

/// Writes to the disk, keeping the first MiB back until `commit`.
struct HeldHead<'a> {
    disk: &'a File,
    head: Vec<u8>,
}

impl Sink for HeldHead<'_> {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let split = HEAD.saturating_sub(offset).min(data.len() as u64) as usize;
        if split > 0 {
            let at = offset as usize;
            if self.head.len() < at + split {
                self.head.resize(at + split, 0);
            }
            self.head[at..at + split].copy_from_slice(&data[..split]);
        }
        if split < data.len() {
            self.disk
                .write_all_at(&data[split..], offset + split as u64)?;
        }
        Ok(())
    }
}

pub async fn deploy(
    api: &Api,
    http: &reqwest::Client,
    spec: &DeploySpec,
    disks: &[Disk],
    sys_root: &Path,
) -> Result<Deployed, String> {
    let mut timings = BTreeMap::new();
    // The root disk is chosen, or the software RAID planned (and refused), before anything is
    // fetched or written.
    let target = if spec.software_raid.is_empty() {
        Target::Disk(
            choose_root_disk(disks, &spec.root_device_hints)
                .map_err(|e| e.to_string())?
                .clone(),
        )
    } else {
        Target::Raid(raid::plan(
            &spec.software_raid,
            disks,
            &spec.root_device_hints,
        )?)
    };

    let checksum = spec.checksum.trim();
    let expected = if checksum.starts_with("http://") || checksum.starts_with("https://") {
        let text = fetch_small(http, checksum, 1 << 20).await?;
        digest_from_file(&String::from_utf8_lossy(&text), &spec.image_url)
            .map_err(|e| format!("checksum file {checksum}: {e}"))?
    } else {
        checksum.to_ascii_lowercase()
    };
    let algorithm = Algorithm::parse(&spec.checksum_type, &expected)?;

    let started = Instant::now();
    let mut response = http
        .get(&spec.image_url)
        .send()
        .await
        .map_err(|e| format!("downloading image {}: {}", spec.image_url, error_chain(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "downloading image {}: HTTP {status}",
            spec.image_url
        ));
    }
    // The arrays are built once the image is known to be there.
    let (root, mut built) = match target {
        Target::Disk(disk) => (disk, None),
        Target::Raid(plan) => {
            let t = Instant::now();
            let built = raid::build(plan, disks, &spec.root_device_hints, sys_root)?;
            timings.insert("softwareRAID".to_string(), t.elapsed().as_secs_f64());
            (built.root.clone(), Some(built))
        }
    };
    let disk_size = u64::try_from(root.size_bytes).unwrap_or(0);
    let mut writer = Writer::new(&spec.format, &root.name, disk_size).map_err(|e| e.to_string())?;
    if let Some(length) = response.content_length() {
        writer.check_length(length).map_err(|e| e.to_string())?;
    }
    let disk = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&root.name)
        .map_err(|e| format!("opening {}: {e}", root.name))?;
    disk.write_all_at(&vec![0u8; HEAD.min(disk_size) as usize], 0)
        .map_err(|e| format!("clearing the start of {}: {e}", root.name))?;
    let mut sink = HeldHead {
        disk: &disk,
        head: Vec::new(),
    };
    let mut hasher = algorithm.hasher();
    let mut downloaded: u64 = 0;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("downloading image {}: {}", spec.image_url, error_chain(&e)))?
    {
        hasher.update(&chunk);
        downloaded += chunk.len() as u64;
        writer
            .feed(&chunk, &mut sink)
            .map_err(|e| format!("writing image {} to {}: {e}", spec.image_url, root.name))?;
    }
    writer
        .finish()
        .map_err(|e| format!("writing image {} to {}: {e}", spec.image_url, root.name))?;
    let actual = hasher.finish();
    if actual != expected {
        return Err(format!(
            "image {} has {} checksum {actual}, not the expected {expected}; nothing bootable was left on {}",
            spec.image_url,
            algorithm.name(),
            root.name
        ));
    }
    disk.write_all_at(&sink.head, 0)
        .and_then(|()| disk.sync_all())
        .map_err(|e| format!("writing to {}: {e}", root.name))?;
    let seconds = started.elapsed().as_secs_f64();
    timings.insert("download+write".to_string(), seconds);
    let mb_per_s = downloaded as f64 / 1e6 / seconds.max(1e-6);

    if let Some(url) = &spec.config_drive_url {
        let t = Instant::now();
        let drive = api.file(url, CONFIG_DRIVE_MAX).await?;
        let sector = logical_block_size(sys_root, &root.name);
        let size = (CONFIG_DRIVE_MAX as u64).max(drive.len() as u64);
        let guid = random_guid().map_err(|e| format!("reading /dev/urandom: {e}"))?;
        let span = partition::add_at_end(&disk, disk_size, sector, size, "config-2", guid)
            .map_err(|e| format!("adding the config drive partition to {}: {e}", root.name))?;
        disk.write_all_at(&drive, span.start)
            .and_then(|()| disk.sync_all())
            .map_err(|e| format!("writing the config drive to {}: {e}", root.name))?;
        timings.insert("configDrive".to_string(), t.elapsed().as_secs_f64());
    }
    // The arrays stop next: nothing may hold them open.
    drop(disk);
    let software_raid = match &mut built {
        Some(built) => {
            raid::install_boot(built, sys_root)?;
            built.describe()
        }
        None => Vec::new(),
    };
    Ok(Deployed {
        software_raid,
        root_disk: root.name.clone(),
        timings,
        mb_per_s,
    })
}

async fn fetch_small(http: &reqwest::Client, url: &str, limit: usize) -> Result<Vec<u8>, String> {
    let mut response = http
        .get(url)
        .send()
        .await
        .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
    if !response.status().is_success() {
        return Err(format!("GET {url}: HTTP {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?
    {
        if body.len() + chunk.len() > limit {
            return Err(format!("GET {url}: larger than {limit} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
