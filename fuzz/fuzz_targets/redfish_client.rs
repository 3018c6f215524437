//! The Redfish client against a BMC whose answers are the fuzz input: every operation a host
//! goes through (session login, system, power, boot, virtual media, inventory, secure boot,
//! logout) reads them. Nothing may panic, hang or keep an unbounded error text.
//!
//! Input: answers separated by 0xFF; each answer's first byte picks its HTTP status, the rest
//! is its body. A request beyond the last answer gets a 404.
//!
//! The body is `ferrometal_fuzz_targets::redfish_client` (crates/fuzz-targets), which the test suite
//! also replays on every seed and regression.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrometal_fuzz_targets::redfish_client::run(data));
