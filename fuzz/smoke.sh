#!/usr/bin/env bash
# The fuzz smoke of the test command: builds every target (dev profile, quick to build), replays
# the checked-in seeds and every input that once crashed (fuzz/regressions), then fuzzes each
# target for SECONDS (default 8). New inputs go to a scratch directory, not into the tree.
#   fuzz/smoke.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-8}"
bash ../scripts/setup-fuzz.sh
cargo +nightly fuzz build --dev --sanitizer none
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# api_bodies keeps its store here, gone with the scratch directory.
export FERROMETAL_FUZZ_DIR="$scratch"
for target in $(bash run.sh --list); do
  dirs=("$scratch/$target")
  mkdir -p "${dirs[0]}"
  for extra in "seeds/$target" "regressions/$target"; do
    [[ -d "$extra" ]] && dirs+=("$extra")
  done
  echo "fuzz smoke: $target (${seconds}s)"
  # libFuzzer's status decides, not grep's: read it before anything else runs (an `|| true`
  # after the pipeline would replace PIPESTATUS with its own and hide every crash).
  set +e
  cargo +nightly fuzz run --dev --sanitizer none "$target" "${dirs[@]}" -- \
    -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 2>&1 \
    | grep -E '^stat::number_of_executed_units|^==|panicked|SUMMARY|Test unit written|ERROR'
  status="${PIPESTATUS[0]}"
  set -e
  if [[ "$status" != 0 ]]; then
    echo "fuzz smoke: $target failed (exit $status); its input is in fuzz/artifacts/$target" >&2
    exit 1
  fi
done
