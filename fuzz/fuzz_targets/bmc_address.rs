//! BMC addresses as users write them: parse, and what we print parses back the same.
//!
//! The body is `ferrometal_fuzz_targets::bmc_address` (crates/fuzz-targets), which the test suite
//! also replays on every seed and regression.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrometal_fuzz_targets::bmc_address::run(data));
