//! The fuzz targets' bodies, one module per target, each with `run(data)` for one input.
//!
//! `fuzz/` wraps each in libFuzzer's `fuzz_target!` (nightly, its own workspace, built with
//! coverage instrumentation); here they build with the rest of the workspace, so the test
//! suite replays every checked-in seed (`fuzz/seeds/`) and every input that once crashed
//! (`fuzz/regressions/`) without a second build of every dependency.

pub mod api_bodies;
pub mod bmc_address;
pub mod cel_rules;
pub mod decode;
pub mod redfish_client;
pub mod selectors;
