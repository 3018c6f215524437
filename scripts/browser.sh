#!/usr/bin/env bash
# Starts or stops a WebDriver for headless Chromium (Debian's chromium and chromium-driver) on
# 127.0.0.1 with a fresh profile, for the web console's browser tests.
#
#   scripts/browser.sh start DIR   -> prints the WebDriver port; DIR/pid holds chromedriver's pid
#   scripts/browser.sh stop DIR
#
# The browsers chromedriver opens are its children: stopping it (or the test that started it
# ending, however it ends) stops them too.
source "$(dirname "$0")/lib.sh"

cmd=${1:?usage: browser.sh start|stop DIR}
dir=${2:?usage: browser.sh start|stop DIR}

case "$cmd" in
start)
  command -v chromedriver >/dev/null || { echo "chromedriver not found: run scripts/setup-debian.sh" >&2; exit 1; }
  command -v chromium >/dev/null || { echo "chromium not found: run scripts/setup-debian.sh" >&2; exit 1; }
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  port=$(free_port)
  chromedriver --port="$port" --allowed-ips=127.0.0.1 </dev/null >"$dir/chromedriver.log" 2>&1 &
  echo $! >"$dir/pid"
  stop_with_owner "$dir/pid"
  wait_port "$port" 30
  echo "$port"
  ;;
stop)
  [ -f "$dir/pid" ] || exit 0
  pid=$(cat "$dir/pid")
  # The browsers first (chromedriver's children, and theirs), then chromedriver.
  for child in $(pgrep -P "$pid" 2>/dev/null); do
    pkill -9 -P "$child" 2>/dev/null || true
    kill -9 "$child" 2>/dev/null || true
  done
  kill "$pid" 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  ;;
*)
  echo "usage: browser.sh start|stop DIR" >&2
  exit 2
  ;;
esac
