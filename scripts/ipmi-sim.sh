#!/usr/bin/env bash
# Starts or stops an OpenIPMI ipmi_sim BMC on 127.0.0.1 with fresh state.
#
#   scripts/ipmi-sim.sh start DIR [USER PASSWORD]   -> DIR/port holds the UDP port, DIR/pid the pid
#   scripts/ipmi-sim.sh stop DIR
#
# The simulated chassis keeps its state in plain files so tests can observe what the BMC did:
# DIR/chassis/power ("0"/"1"), DIR/chassis/boot (pxe, default, cdrom, bios, ...), and
# DIR/chassis/calls.log (every request ipmi_sim forwarded to the chassis).
source "$(dirname "$0")/lib.sh"

cmd=${1:?usage: ipmi-sim.sh start|stop DIR [USER PASSWORD]}
dir=${2:?usage: ipmi-sim.sh start|stop DIR [USER PASSWORD]}

case "$cmd" in
start)
  user=${3:-admin}
  password=${4:-password}
  command -v ipmi_sim >/dev/null || { echo "ipmi_sim not found: run scripts/setup-debian.sh" >&2; exit 1; }
  mkdir -p "$dir/state" "$dir/chassis"
  dir=$(cd "$dir" && pwd)
  echo 0 >"$dir/chassis/power"
  echo default >"$dir/chassis/boot"
  : >"$dir/chassis/calls.log"
  # ipmi_sim runs this program as `PROG get PARAM...` (answers `PARAM:VALUE` lines) and
  # `PROG set PARAM VALUE...`; without it the simulator cannot change power.
  cat >"$dir/chassis/control" <<CTL
#!/bin/sh
state="$dir/chassis"
echo "\$@" >>"\$state/calls.log"
verb=\$1; shift
if [ "\$verb" = get ]; then
  for p in "\$@"; do
    case \$p in
      power|boot) echo "\$p:\$(cat "\$state/\$p")" ;;
    esac
  done
elif [ "\$verb" = set ]; then
  while [ \$# -ge 2 ]; do
    case \$1 in
      power|boot) echo "\$2" >"\$state/\$1" ;;
      shutdown) [ "\$2" = 1 ] && echo 0 >"\$state/power" ;;
    esac
    shift 2
  done
fi
CTL
  chmod +x "$dir/chassis/control"
  port=$(free_port)
  cat >"$dir/lan.conf" <<CONF
name "ferrometal-test"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 $port
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "$dir/chassis/control"
  user 2 true "$user" "$password" admin 10 none md2 md5 straight
CONF
  cat >"$dir/bmc.emu" <<'EMU'
mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
mc_enable 0x20
EMU
  ipmi_sim -c "$dir/lan.conf" -f "$dir/bmc.emu" -s "$dir/state" -n </dev/null >"$dir/ipmi_sim.log" 2>&1 &
  echo $! >"$dir/pid"
  stop_with_owner "$dir/pid"
  echo "$port" >"$dir/port"
  # UDP: no listener to probe; ask the simulator itself until it answers.
  for _ in $(seq 1 50); do
    if IPMI_PASSWORD="$password" timeout 3 ipmitool -I lanplus -H 127.0.0.1 -p "$port" -U "$user" -E -C 3 -N 1 -R 1 \
      chassis power status >/dev/null 2>&1; then
      echo "$port"
      exit 0
    fi
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "ipmi_sim did not start; log follows" >&2
  cat "$dir/ipmi_sim.log" >&2
  exit 1
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
