//! Boot media for one boot: the ramdisk's ISO with this boot's configuration as its
//! `/boot/config.img`, and config drives. Both are written by xorriso, the tool Ironic uses for
//! the same jobs (no maintained Rust crate writes El Torito boot records); an ISO takes ~0.1 s.

use std::path::Path;

use tokio::process::Command;

/// A newc cpio archive holding `files` (path, mode, contents) and the directories above them;
/// the kernel unpacks it over the ramdisk's own archive.
pub fn cpio(files: &[(&str, u32, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ino = 1;
    let mut dirs: Vec<String> = Vec::new();
    for (path, _, _) in files {
        let mut parent = String::new();
        for part in path
            .split('/')
            .rev()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            parent = if parent.is_empty() {
                part.to_string()
            } else {
                format!("{parent}/{part}")
            };
            if !dirs.contains(&parent) {
                dirs.push(parent.clone());
            }
        }
    }
    for dir in &dirs {
        entry(&mut out, ino, dir, 0o040_755, &[]);
        ino += 1;
    }
    for (path, mode, data) in files {
        entry(&mut out, ino, path, 0o100_000 | mode, data);
        ino += 1;
    }
    entry(&mut out, 0, "TRAILER!!!", 0, &[]);
    out
}

fn entry(out: &mut Vec<u8>, ino: u32, name: &str, mode: u32, data: &[u8]) {
    let fields = [
        ino,
        mode,
        0,
        0,
        if mode & 0o040_000 != 0 { 2 } else { 1 },
        0,
        data.len() as u32,
        0,
        0,
        0,
        0,
        name.len() as u32 + 1,
        0,
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

async fn xorriso(args: &[&str]) -> Result<(), String> {
    let out = Command::new("xorriso")
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("running xorriso (the Debian package xorriso): {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!(
            "xorriso failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    }
    Ok(())
}

/// Unpacks the ramdisk ISO's files into `tree` (once per process), less its empty
/// `/boot/config.img`.
pub async fn extract(iso: &Path, tree: &Path) -> Result<(), String> {
    xorriso(&[
        "-abort_on",
        "FAILURE",
        "-osirrox",
        "on",
        "-indev",
        &iso.to_string_lossy(),
        "-extract",
        "/",
        &tree.to_string_lossy(),
    ])
    .await
    .map_err(|e| format!("unpacking the agent ramdisk {}: {e}", iso.display()))?;
    for needed in [ELTORITO_BIOS, ELTORITO_EFI] {
        if !tree.join(needed).exists() {
            return Err(format!(
                "the agent ramdisk {} has no {needed}: build it with scripts/agent-ramdisk.sh",
                iso.display()
            ));
        }
    }
    let _ = tokio::fs::remove_file(tree.join("boot/config.img")).await;
    Ok(())
}

/// grub-mkrescue's El Torito images in the ramdisk ISO: BIOS, and UEFI (a FAT image).
const ELTORITO_BIOS: &str = "boot/grub/i386-pc/eltorito.img";
const ELTORITO_EFI: &str = "efi.img";

/// Writes `out`: the ramdisk's `tree` with `config` (a cpio archive) as `/boot/config.img`,
/// bootable from a CD on BIOS and UEFI (El Torito; no hybrid disk layout: virtual media is a CD).
pub async fn boot_iso(tree: &Path, config: &[u8], out: &Path) -> Result<(), String> {
    let cpio_path = out.with_extension("cpio");
    tokio::fs::write(&cpio_path, config)
        .await
        .map_err(|e| format!("writing {}: {e}", cpio_path.display()))?;
    let result = xorriso(&[
        "-abort_on",
        "FAILURE",
        "-as",
        "mkisofs",
        "-quiet",
        "-o",
        &out.to_string_lossy(),
        "-V",
        "FMAGENT",
        "-r",
        "-graft-points",
        "-b",
        ELTORITO_BIOS,
        "-no-emul-boot",
        "-boot-load-size",
        "4",
        "-boot-info-table",
        "--grub2-boot-info",
        "-eltorito-alt-boot",
        "-e",
        ELTORITO_EFI,
        "-no-emul-boot",
        &format!("/={}", tree.display()),
        &format!("/boot/config.img={}", cpio_path.display()),
    ])
    .await;
    let _ = tokio::fs::remove_file(&cpio_path).await;
    result
}

/// An OpenStack config drive: an ISO 9660 image labelled `config-2` holding
/// `openstack/latest/{meta_data.json, user_data, network_data.json}`.
pub async fn config_drive(
    work: &Path,
    meta_data: &serde_json::Value,
    user_data: Option<&str>,
    network_data: Option<&serde_json::Value>,
) -> Result<Vec<u8>, String> {
    let dir = work.join("tree");
    let latest = dir.join("openstack/latest");
    let io = |e: std::io::Error| format!("writing the config drive under {}: {e}", work.display());
    let _ = tokio::fs::remove_dir_all(&dir).await;
    tokio::fs::create_dir_all(&latest).await.map_err(io)?;
    tokio::fs::write(latest.join("meta_data.json"), meta_data.to_string())
        .await
        .map_err(io)?;
    if let Some(user) = user_data {
        tokio::fs::write(latest.join("user_data"), user)
            .await
            .map_err(io)?;
    }
    if let Some(net) = network_data {
        tokio::fs::write(latest.join("network_data.json"), net.to_string())
            .await
            .map_err(io)?;
    }
    let iso = work.join("config-drive.iso");
    let _ = tokio::fs::remove_file(&iso).await;
    xorriso(&[
        "-abort_on",
        "FAILURE",
        "-as",
        "mkisofs",
        "-quiet",
        "-o",
        &iso.to_string_lossy(),
        "-V",
        "config-2",
        "-J",
        "-r",
        &dir.to_string_lossy(),
    ])
    .await?;
    let bytes = tokio::fs::read(&iso).await.map_err(io)?;
    let _ = tokio::fs::remove_dir_all(&dir).await;
    let _ = tokio::fs::remove_file(&iso).await;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpio_archive_reads_back_with_the_standard_tool() {
        let archive = cpio(&[("etc/ferrometal-agent/config.json", 0o600, b"{\"a\":1}")]);
        assert_eq!(archive.len() % 4, 0);
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("cpio")
            .args(["-idm", "--quiet"])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("cpio (Debian's cpio package) runs");
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&archive).unwrap();
        assert!(child.wait().unwrap().success());
        let file = dir.path().join("etc/ferrometal-agent/config.json");
        assert_eq!(std::fs::read(&file).unwrap(), b"{\"a\":1}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
