//! CEL validation rules: compiled against a schema (with its cost estimate) and evaluated on
//! an object, as a create and as an update (transition rules).
//!
//! The body is `ferrometal_fuzz_targets::cel_rules` (crates/fuzz-targets), which the test suite
//! also replays on every seed and regression.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrometal_fuzz_targets::cel_rules::run(data));
