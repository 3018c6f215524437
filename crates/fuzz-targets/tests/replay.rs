//! Every checked-in seed and every input that once crashed a fuzz target, through that
//! target's body: a crash that was fixed stays fixed, and the seeds still run clean.

use std::path::{Path, PathBuf};

/// The inputs of `target` under fuzz/seeds and fuzz/regressions, sorted by path.
fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut out = Vec::new();
    for dir in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_file() {
                let data = std::fs::read(&path).unwrap();
                out.push((path, data));
            }
        }
    }
    out.sort();
    out
}

fn replay(target: &str, run: impl Fn(&[u8])) {
    let inputs = inputs(target);
    assert!(!inputs.is_empty(), "no seeds for {target}");
    for (path, data) in inputs {
        eprintln!("{target}: {}", path.display());
        run(&data);
    }
}

#[test]
fn api_bodies() {
    let dir = tempfile::tempdir().unwrap();
    ferrometal_fuzz_targets::api_bodies::store_in(dir.path());
    replay("api_bodies", ferrometal_fuzz_targets::api_bodies::run);
}

#[test]
fn bmc_address() {
    replay("bmc_address", ferrometal_fuzz_targets::bmc_address::run);
}

#[test]
fn cel_rules() {
    replay("cel_rules", ferrometal_fuzz_targets::cel_rules::run);
}

#[test]
fn decode() {
    replay("decode", ferrometal_fuzz_targets::decode::run);
}

#[test]
fn redfish_client() {
    replay(
        "redfish_client",
        ferrometal_fuzz_targets::redfish_client::run,
    );
}

#[test]
fn selectors() {
    replay("selectors", ferrometal_fuzz_targets::selectors::run);
}
