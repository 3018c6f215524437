#!/usr/bin/env bash
# The tests' real peers, installed and cached: sushy-tools, ipmi_sim, ipmitool, kubectl and the
# Python kubernetes client (setup-python.sh), Ironic (setup-ironic.sh), the VM lab (QEMU,
# libvirt, sushy-tools' libvirt driver) and its guest images, then Ironic's agent ramdisk. Run
# again, each step checks its cache and returns. Mostly downloads and unpacking: test.sh runs it
# while the tests compile. Needs scripts/setup-debian.sh first.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
# One at a time (CI starts one before clippy and test.sh another): the second waits, then finds
# everything cached. The steps do not inherit the lock: a daemon one starts (libvirtd) would
# hold it for good.
mkdir -p .cache
exec 9>.cache/setup-peers.lock
flock 9
bash scripts/setup-python.sh 9>&-
bash scripts/setup-ironic.sh 9>&-
bash scripts/vmlab.sh setup 9>&-
bash scripts/guest-images.sh >/dev/null 9>&-
# Ironic's agent ramdisk (debootstrap and PyPI, ~2.5 min cold): a failure here is not the end of
# the run. The Ironic lab tests wait for it (the script's lock) and build it themselves, so the
# failure shows in those tests.
bash scripts/ipa-ramdisk.sh >.cache/ipa-ramdisk.log 2>&1 9>&- ||
  echo "the agent ramdisk did not build (.cache/ipa-ramdisk.log); the Ironic lab tests will retry" >&2
