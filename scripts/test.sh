#!/usr/bin/env bash
# The whole test suite: installs the real peers (sushy-tools, ipmi_sim, ipmitool, kubectl, the
# Python kubernetes client, Ironic, and a lab of QEMU VMs behind sushy-tools' libvirt driver),
# then runs every Rust test, unit and end-to-end (every fuzz target's seeds and past crashes
# among them), and finally checks that no process (or VM) the tests started is still running.
# Fuzzing itself (fuzz/smoke.sh, fuzz/run.sh) is a second, instrumented build of everything, run
# by hand.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
NEXTEST_VERSION=0.9.143
bash scripts/setup-debian.sh
# The peers (scripts/setup-peers.sh: downloads and unpacking, mostly) install while the tests
# compile; the tests start once both are done.
mkdir -p .cache
bash scripts/setup-peers.sh >.cache/setup-peers.log 2>&1 &
peers=$!
build=0
# The runner: .config/nextest.toml holds the time limits and runs the lab's VM tests one at a
# time, which `cargo test` cannot. Built from its crate once per machine (unoptimised: it only
# starts and watches the tests, and builds in a few minutes).
if ! command -v cargo-nextest >/dev/null; then
  cargo install --locked --debug cargo-nextest --version "$NEXTEST_VERSION" \
    --no-default-features --features default-no-update
fi
cargo nextest run --workspace --no-run "$@" || build=$?
peers_status=0
wait "$peers" || peers_status=$?
cat .cache/setup-peers.log
if [ "$peers_status" != 0 ]; then
  echo "installing the test peers failed (scripts/setup-peers.sh, output above)" >&2
  exit 1
fi
[ "$build" = 0 ] || exit "$build"
export FERROMETAL_VENV="$VENV"
# Every process the tests start inherits this mark, however it is started and whoever its
# parent ends up being; it is how the check below finds leftovers.
run_mark="FERROMETAL_TEST_RUN=$$-$RANDOM$RANDOM"
export "${run_mark?}"
status=0
cargo nextest run --workspace --no-fail-fast "$@" || status=$?
bash scripts/leftovers.sh "$run_mark" || status=1
exit "$status"
