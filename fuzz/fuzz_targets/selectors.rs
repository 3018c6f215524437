//! Label and field selectors (`-l`, `--field-selector`, and the JSON LabelSelector of
//! policies): parse and match against an object.
//!
//! The body is `ferrometal_fuzz_targets::selectors` (crates/fuzz-targets), which the test suite
//! also replays on every seed and regression.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrometal_fuzz_targets::selectors::run(data));
