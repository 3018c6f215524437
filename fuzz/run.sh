#!/usr/bin/env bash
# Runs one fuzz target for SECONDS (libFuzzer through cargo-fuzz, nightly toolchain), with its
# corpus in fuzz/corpus/TARGET. A crash leaves its input in fuzz/artifacts/TARGET and fails.
#   fuzz/run.sh TARGET SECONDS [libFuzzer flags...]
#   fuzz/run.sh --list
set -euo pipefail
cd "$(dirname "$0")"
if [[ "${1:-}" == "--list" ]]; then
  grep -E '^name = ' Cargo.toml | sed -n '2,$p' | cut -d'"' -f2
  exit 0
fi
target="${1:?usage: fuzz/run.sh TARGET SECONDS}"
seconds="${2:?usage: fuzz/run.sh TARGET SECONDS}"
shift 2
bash ../scripts/setup-fuzz.sh >&2
mkdir -p "corpus/$target"
# Seeds and past crashes (checked in) start every run; new inputs go to corpus/ (not checked in).
extra=()
for dir in "seeds/$target" "regressions/$target"; do
  [[ -d "$dir" ]] && extra+=("$dir")
done
exec cargo +nightly fuzz run --sanitizer none "$target" "corpus/$target" "${extra[@]}" -- \
  -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 -timeout=30 "$@"
