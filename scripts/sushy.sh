#!/usr/bin/env bash
# Starts or stops a sushy-tools Redfish emulator (fake driver, no libvirt) on 127.0.0.1.
#
#   scripts/sushy.sh start DIR [--systems N] [--auth USER:PASSWORD] [--keep-delay]
#       -> prints the port; DIR/port, DIR/pid; systems are named node-0..node-N-1, powered Off
#   scripts/sushy.sh stop DIR
#
# sushy-tools' fake driver lands power changes 1-11 s late; unless --keep-delay, a wrapper
# removes that delay so tests run fast (they still poll, as against a real BMC).
source "$(dirname "$0")/lib.sh"

cmd=${1:?usage: sushy.sh start|stop DIR [options]}
dir=${2:?usage: sushy.sh start|stop DIR [options]}
shift 2

case "$cmd" in
start)
  systems=2
  auth=""
  keep_delay=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --systems) systems=$2; shift 2 ;;
      --auth) auth=$2; shift 2 ;;
      --keep-delay) keep_delay=1; shift ;;
      *) echo "unknown option $1" >&2; exit 2 ;;
    esac
  done
  [ -x "$VENV/bin/sushy-emulator" ] || { echo "sushy-tools missing: run scripts/setup-python.sh" >&2; exit 1; }
  mkdir -p "$dir/state"
  dir=$(cd "$dir" && pwd)
  port=$(free_port)
  {
    echo "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'"
    echo "SUSHY_EMULATOR_FAKE_DRIVER = True"
    echo "SUSHY_EMULATOR_STATE_DIR = '$dir/state'"
    echo "SUSHY_EMULATOR_FAKE_SYSTEMS = ["
    for ((i = 0; i < systems; i++)); do
      printf "  {'uuid': '00000000-0000-4000-8000-%012d', 'name': 'node-%d', 'power_state': 'Off',\n" "$i" "$i"
      printf "   'nics': [{'mac': '52:54:00:%02x:%02x:%02x', 'ip': '192.0.2.%d'}]},\n" $((i >> 16 & 255)) $((i >> 8 & 255)) $((i & 255)) $((i % 250 + 1))
    done
    echo "]"
    if [ -n "$auth" ]; then
      command -v htpasswd >/dev/null || { echo "htpasswd missing: run scripts/setup-debian.sh" >&2; exit 1; }
      # sushy-tools accepts bcrypt entries only.
      htpasswd -nbB -C 4 "${auth%%:*}" "${auth#*:}" >"$dir/htpasswd"
      echo "SUSHY_EMULATOR_AUTH_FILE = '$dir/htpasswd'"
    fi
  } >"$dir/config.py"
  cat >"$dir/run.py" <<PY
import sys
if not $keep_delay:
    from sushy_tools.emulator.resources.systems import fakedriver
    fakedriver.random.randint = lambda a, b: 0
from sushy_tools.emulator import main
sys.argv = ["sushy-emulator", "--config", "$dir/config.py", "--port", "$port"]
sys.exit(main.main())
PY
  "$VENV/bin/python" "$dir/run.py" </dev/null >"$dir/sushy.log" 2>&1 &
  echo $! >"$dir/pid"
  stop_with_owner "$dir/pid"
  echo "$port" >"$dir/port"
  if ! wait_port "$port" 20; then
    echo "sushy-emulator did not start; log follows" >&2
    cat "$dir/sushy.log" >&2
    exit 1
  fi
  echo "$port"
  ;;
stop)
  if [ -f "$dir/pid" ]; then
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    rm -f "$dir/pid"
  fi
  ;;
*)
  echo "unknown command $cmd" >&2
  exit 2
  ;;
esac
