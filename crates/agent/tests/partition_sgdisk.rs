//! The config drive partition added after an image, checked by the real `sgdisk`: the table is
//! sound for the whole disk, the image's partitions are untouched, and the new one is where it
//! was said to be.

use std::fs::OpenOptions;
use std::process::Command;

use ferrometal_agent::partition::add_at_end;

fn sgdisk(args: &[&str]) -> String {
    let out = Command::new("sgdisk")
        .args(args)
        .output()
        .expect("sgdisk runs (the gdisk package; scripts/guest-images.sh installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "sgdisk {args:?}: {text}");
    text
}

#[test]
fn a_gpt_image_written_to_a_larger_disk_gets_its_config_drive_last() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    let p = path.to_str().unwrap();
    // The image: 20 MiB, two partitions, as a disk image is made.
    std::fs::File::create(&path)
        .unwrap()
        .set_len(20 << 20)
        .unwrap();
    sgdisk(&[
        "-o",
        "-a",
        "2048",
        "-n",
        "1:2048:+4M",
        "-t",
        "1:EF00",
        "-n",
        "2:0:+8M",
        p,
    ]);
    let before = sgdisk(&["-i", "2", p]);
    // Written to a 100 MiB disk.
    let disk = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    disk.set_len(100 << 20).unwrap();
    let span = add_at_end(&disk, 100 << 20, 512, 64 << 20, "config-2", [7; 16]).unwrap();
    drop(disk);
    assert_eq!(span.number, 3);
    assert_eq!(span.start, 35 << 20, "{span:?}");
    assert_eq!(span.start + span.len, (100 << 20) - 33 * 512, "{span:?}");

    let verify = sgdisk(&["-v", p]);
    assert!(verify.contains("No problems found"), "{verify}");
    let third = sgdisk(&["-i", "3", p]);
    assert!(third.contains("Partition name: 'config-2'"), "{third}");
    assert!(
        third.contains(&format!("First sector: {} ", 35 * 2048)),
        "{third}"
    );
    assert!(
        third.contains("0FC63DAF-8483-4772-8E79-3D69D8477DE4"),
        "{third}"
    );
    assert_eq!(
        sgdisk(&["-i", "2", p]),
        before,
        "the image's partitions are untouched"
    );

    // A second config drive does not fit after the first.
    let disk = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let err = add_at_end(&disk, 100 << 20, 512, 64 << 20, "config-2", [8; 16]).unwrap_err();
    assert!(err.to_string().contains("no room"), "{err}");
}
