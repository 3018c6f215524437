#!/usr/bin/env bash
# leftovers.sh NAME=VALUE: lists (and then kills) every process whose environment holds
# NAME=VALUE, other than this script and its parent; exits 1 if there were any. test.sh marks
# every process the tests start this way, so anything found outlived its test.
set -uo pipefail
mark=${1:?usage: leftovers.sh NAME=VALUE}
found=()
# Processes still shutting down get a moment (a test's Drop may have just signalled them).
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  found=()
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}; pid=${pid%/environ}
    [ "$pid" = "$$" ] || [ "$pid" = "$PPID" ] && continue
    if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qxF "$mark"; then
      found+=("$pid")
    fi
  done
  [ ${#found[@]} -eq 0 ] && exit 0
  sleep 0.5
done
echo "processes started by the tests are still running:" >&2
for pid in "${found[@]}"; do
  echo "  $pid (parent $(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ')): $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" >&2
done
kill -9 "${found[@]}" 2>/dev/null
exit 1
