#!/usr/bin/env bash
# What every commit must pass before it is made: rustfmt on the workspace and the fuzz crate,
# and clippy with every warning an error. CI runs the formatting checks only: clippy is a
# second, check-only compile of every crate (six minutes on two cores) that CI's time budget
# keeps for the tests.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --workspace --all-targets -- -D warnings
