#!/usr/bin/env bash
# The fuzzing tools: the nightly toolchain (libFuzzer needs it) and cargo-fuzz from the Rust
# package registry (a debug build: it only drives cargo, and builds in seconds). Idempotent.
set -euo pipefail
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --version 0.13.2 --debug
fi
