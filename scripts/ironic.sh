#!/usr/bin/env bash
# Starts or stops a standalone OpenStack Ironic on 127.0.0.1: one all-in-one `ironic` process
# (API + conductor), SQLite, no message bus, fresh state under DIR; and a web server for what
# Ironic publishes to BMCs (DIR/http at its http_url, e.g. the virtual media it attaches), as
# metal3 runs an httpd beside Ironic.
#
#   scripts/ironic.sh start DIR [--auth http_basic USER:PASSWORD] [--port P] [--keep-db]
#       -> prints the API port; DIR/port, DIR/pid, DIR/http.pid, DIR/ironic.log, DIR/ironic.conf
#   scripts/ironic.sh stop DIR
#
# Without --keep-db the database starts empty (a restart with --port P and no --keep-db is
# "Ironic lost its database"). Install Ironic first with scripts/setup-ironic.sh.
source "$(dirname "$0")/lib.sh"

cmd=${1:?usage: ironic.sh start|stop DIR [options]}
dir=${2:?usage: ironic.sh start|stop DIR [options]}
shift 2

stop() {
  if [ -f "$dir/http.pid" ]; then
    kill "$(cat "$dir/http.pid")" 2>/dev/null || true
    rm -f "$dir/http.pid"
  fi
  if [ -f "$dir/pid" ]; then
    local pid
    pid=$(cat "$dir/pid")
    kill "$pid" 2>/dev/null || true
    # Ironic shuts its conductor down gracefully; give it a moment before forcing it.
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
  fi
}

case "$cmd" in
start)
  auth=noauth
  user_pass=""
  port=""
  keep_db=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --auth) auth=$2; user_pass=${3:?--auth http_basic needs USER:PASSWORD}; shift 3 ;;
      --port) port=$2; shift 2 ;;
      --keep-db) keep_db=1; shift ;;
      *) echo "unknown option $1" >&2; exit 2 ;;
    esac
  done
  [ "$auth" = noauth ] || [ "$auth" = http_basic ] || { echo "unknown auth $auth" >&2; exit 2; }
  [ -x "$VENV/bin/ironic" ] || { echo "ironic missing: run scripts/setup-ironic.sh" >&2; exit 1; }
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  stop
  mkdir -p "$dir/http" "$dir/tftp" "$dir/locks"
  [ -n "$port" ] || port=$(free_port)
  http_port=$(free_port)
  python3 -m http.server --bind 127.0.0.1 --directory "$dir/http" "$http_port" \
    </dev/null >"$dir/http.log" 2>&1 &
  echo $! >"$dir/http.pid"
  stop_with_owner "$dir/http.pid"
  if [ "$keep_db" = 0 ]; then rm -f "$dir/ironic.sqlite"; fi
  auth_lines=""
  if [ "$auth" = http_basic ]; then
    # Ironic's http_basic accepts bcrypt entries only.
    "$VENV/bin/python" - "${user_pass%%:*}" "${user_pass#*:}" >"$dir/htpasswd" <<'PY'
import sys, bcrypt
print("%s:%s" % (sys.argv[1], bcrypt.hashpw(sys.argv[2].encode(), bcrypt.gensalt(4)).decode()))
PY
    chmod 600 "$dir/htpasswd"
    auth_lines="http_basic_auth_user_file = $dir/htpasswd"
  fi
  cat >"$dir/ironic.conf" <<CONF
[DEFAULT]
auth_strategy = $auth
$auth_lines
rpc_transport = none
host = ferrometal-test
use_stderr = true
debug = false
enabled_hardware_types = fake-hardware,redfish,ipmi,idrac
enabled_boot_interfaces = fake,ipxe,pxe,redfish-virtual-media,redfish-https,idrac-redfish-virtual-media
enabled_deploy_interfaces = fake,direct,ramdisk,custom-agent
enabled_power_interfaces = fake,redfish,ipmitool,idrac-redfish
enabled_management_interfaces = fake,redfish,ipmitool,idrac-redfish
enabled_inspect_interfaces = fake,no-inspect,redfish,idrac-redfish,agent
enabled_bios_interfaces = fake,no-bios,redfish,idrac-redfish
enabled_raid_interfaces = fake,no-raid,agent,redfish,idrac-redfish
enabled_vendor_interfaces = fake,no-vendor,ipmitool,redfish,idrac-redfish
enabled_firmware_interfaces = fake,no-firmware,redfish
enabled_console_interfaces = fake,no-console
enabled_rescue_interfaces = fake,no-rescue,agent
enabled_network_interfaces = noop
default_network_interface = noop
[api]
host_ip = 127.0.0.1
port = $port
[conductor]
automated_clean = false
[ipmi]
# Ironic spaces IPMI commands to one BMC 5 s apart by default; the simulator needs no pause.
min_command_interval = 1
[database]
connection = sqlite:///$dir/ironic.sqlite
[dhcp]
dhcp_provider = none
[service_catalog]
# Agent-based steps look Ironic's own URL up here instead of in a Keystone catalog.
endpoint_override = http://127.0.0.1:$port
[deploy]
http_root = $dir/http
http_url = http://127.0.0.1:$http_port
[pxe]
tftp_root = $dir/tftp
[oslo_concurrency]
lock_path = $dir/locks
CONF
  if [ ! -f "$dir/ironic.sqlite" ]; then
    if ! "$VENV/bin/ironic-dbsync" --config-file "$dir/ironic.conf" create_schema >"$dir/dbsync.log" 2>&1; then
      echo "ironic-dbsync create_schema failed; log follows" >&2
      cat "$dir/dbsync.log" >&2
      exit 1
    fi
  fi
  "$VENV/bin/ironic" --config-file "$dir/ironic.conf" </dev/null >>"$dir/ironic.log" 2>&1 &
  echo $! >"$dir/pid"
  stop_with_owner "$dir/pid"
  echo "$port" >"$dir/port"
  for _ in $(seq 1 600); do
    if curl -sf -o /dev/null "http://127.0.0.1:$port/v1"; then
      wait_port "$http_port" 20 || { echo "ironic's web server did not start" >&2; stop; exit 1; }
      echo "$port"
      exit 0
    fi
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "ironic did not start; log follows" >&2
  tail -n 100 "$dir/ironic.log" >&2
  stop
  exit 1
  ;;
stop)
  stop
  ;;
*)
  echo "unknown command $cmd" >&2
  exit 2
  ;;
esac
