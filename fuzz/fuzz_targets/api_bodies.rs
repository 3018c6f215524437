//! API request bodies into the store: create (JSON, YAML), replace, merge patch, JSON patch,
//! strategic merge patch and server-side apply of a ConfigMap, a BareMetalHost (CRD schema,
//! CEL, webhook checks) and a BMCJob. No request may end in a 500 (the server turns a panic
//! into one). Every 256 inputs the server is shut down and reopened on the same directory:
//! it must start, and hold exactly what it acknowledged before.
//!
//! The body is `ferrometal_fuzz_targets::api_bodies` (crates/fuzz-targets), which the test suite
//! also replays on every seed and regression.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrometal_fuzz_targets::api_bodies::run(data));
