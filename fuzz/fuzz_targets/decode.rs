//! Request bodies decoded as the API server decodes them (JSON, YAML, protobuf, by media
//! type), and multi-document YAML as `kubectl apply -f` sends it.
//!
//! The body is `ferrometal_fuzz_targets::decode` (crates/fuzz-targets), which the test suite
//! also replays on every seed and regression.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrometal_fuzz_targets::decode::run(data));
