#!/usr/bin/env bash
# The whole test suite: installs the real peers (sushy-tools, ipmi_sim, ipmitool, kubectl and the
# Python kubernetes client), then runs every Rust test, unit and end-to-end.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
bash scripts/setup-debian.sh
bash scripts/setup-python.sh
bash scripts/setup-ironic.sh
export FERROMETAL_VENV="$VENV"
if command -v cargo-nextest >/dev/null; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
