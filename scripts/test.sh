#!/usr/bin/env bash
# The whole test suite: installs the real peers (sushy-tools, ipmi_sim, ipmitool, kubectl, the
# Python kubernetes client, Ironic, and a lab of QEMU VMs behind sushy-tools' libvirt driver),
# then runs every Rust test, unit and end-to-end (every fuzz target's seeds and past crashes
# among them), and finally checks that no process (or VM) the tests started is still running.
# Fuzzing itself (fuzz/smoke.sh, fuzz/run.sh) is a second, instrumented build of everything, run
# by hand.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
bash scripts/setup-debian.sh
bash scripts/setup-python.sh
bash scripts/setup-ironic.sh
# The VM lab (QEMU, libvirt, sushy-tools' libvirt driver) and its guest images, built from
# Debian packages and cached: the lab tests boot real (virtual) machines.
bash scripts/vmlab.sh setup
bash scripts/guest-images.sh >/dev/null
# Ironic's agent ramdisk (debootstrap and PyPI, ~2.5 min cold, cached) builds while the tests
# compile; the Ironic lab tests wait for it (the script's lock) and build it themselves if this
# failed, so a failure shows in those tests.
mkdir -p .cache
bash scripts/ipa-ramdisk.sh >.cache/ipa-ramdisk.log 2>&1 &
export FERROMETAL_VENV="$VENV"
# Every process the tests start inherits this mark, however it is started and whoever its
# parent ends up being; it is how the check below finds leftovers.
run_mark="FERROMETAL_TEST_RUN=$$-$RANDOM$RANDOM"
export "${run_mark?}"
status=0
if command -v cargo-nextest >/dev/null; then
  cargo nextest run --workspace --no-fail-fast "$@" || status=$?
else
  cargo test --workspace --no-fail-fast "$@" || status=$?
fi
wait # the ramdisk build, if no test waited for it
bash scripts/leftovers.sh "$run_mark" || status=1
exit "$status"
