#!/usr/bin/env bash
# A lab of virtual servers (QEMU, software emulation) behind sushy-tools' libvirt driver, so that
# tests can prove real boots through Redfish. Needs root (libvirt's qemu:///system as root).
#
#   scripts/vmlab.sh up N [--uefi|--legacy] [--disk 4G] [--disks 1] [--ram 1024] [--cpus 1]
#                         [--nics 2] [--name PREFIX] [--namespace default]
#                         [--scheme redfish-virtualmedia] [--switch-port] [--prov-network]
#                         [--state DIR]
#       Installs what it needs (Debian packages, a sushy-tools venv), starts libvirtd and virtlogd
#       if they are not running, defines N powered-off VMs named fmlab-PREFIX-0..N-1 (PREFIX
#       random unless given), starts sushy-tools on 127.0.0.1 (free port, basic auth, a random
#       password) showing only those VMs, and prints key=value lines: state, summary (lab.json),
#       manifests (Secret + BareMetalHost for every VM), sushy (its URL).
#       --switch-port gives each VM one more NIC (after the others) whose wire is a UDP socket:
#       every datagram sent to 127.0.0.1:PORT (lab.json: switch_port) arrives on it as an
#       Ethernet frame, as a switch's LLDP frames would.
#       --prov-network puts each VM's first NIC (its boot MAC) on a provisioning network of its
#       own instead of QEMU's user-mode network: a Linux bridge with a /24 from 172.22.0.0/16
#       (lab.json: provisioning.address is the host's address on it) and a dnsmasq answering
#       DHCP only there, so services on the host bound to that address reach the VMs' ramdisks
#       and the ramdisks reach them (an Ironic conductor connects to its agent on the VM).
#       Running it again on the same state reuses a healthy lab with the same shape, and refuses
#       anything else; a failed `up` removes what it had made.
#   scripts/vmlab.sh down [--state DIR]       destroys and undefines the VMs, deletes their volumes
#       (and the images sushy-tools uploaded for them), stops sushy-tools; keeps console/ logs
#       (NAME.log, the serial console; NAME.qemu.log, libvirt's log of the QEMU process).
#   scripts/vmlab.sh status [--state DIR]     the VMs, their power state, the sushy-tools URL.
#   scripts/vmlab.sh write-disk [--state DIR] VM IMAGE
#       copies a raw or qcow2 image onto VM's first disk (VM powered off).
#   scripts/vmlab.sh attach-disk [--state DIR] VM FILE
#       attaches FILE (e.g. a config-2 ISO) to VM as an extra read-only virtio disk.
#   scripts/vmlab.sh wait [--state DIR] [--timeout 120] [--after BYTES] VM TEXT
#       waits for a console line holding TEXT (past the first BYTES of the log) and prints it
#       (CR stripped). VM is a name or a UUID.
#   scripts/vmlab.sh setup     only installs and starts what labs need (as `up` does first).
#
# The default state is $REPO_ROOT/.peers/vmlab. With FERROMETAL_PEER_OWNER set (a test's pid),
# sushy-tools is stopped by lib.sh's owner-watch and a second watcher runs `down` for the lab
# when that process is gone, however it ended. libvirtd and virtlogd are shared by every lab and
# stay running; they are started without the test-run mark, so QEMU never carries it:
# scripts/leftovers.sh finds a run's domains and QEMU processes by the run mark recorded in each
# domain's metadata (namespace urn:ferrometal:vmlab).
source "$(dirname "$0")/lib.sh"
SELF="$REPO_ROOT/scripts/vmlab.sh"
VMLAB_VENV="${FERROMETAL_VMLAB_VENV:-$REPO_ROOT/.venv-vmlab}"
URI=qemu:///system
POOL=default
POOL_DIR=/var/lib/libvirt/images
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
# libvirt 9 refuses <loader type='rom'/> without a path (what sushy-tools writes for Legacy
# with no loader configured): name SeaBIOS, QEMU's own default for q35.
SEABIOS=/usr/share/seabios/bios-256k.bin
HOST_LOCK=/run/lock/ferrometal-vmlab.lock
META_NS=urn:ferrometal:vmlab
# Daemons shared by all labs must not carry a test run's marks (leftovers.sh would kill them).
NOMARK=(env -u FERROMETAL_TEST_RUN -u FERROMETAL_PEER_OWNER)

die() { echo "vmlab: $*" >&2; exit 1; }
say() { echo "vmlab: $*" >&2; }
vsh() { virsh -q -c "$URI" "$@"; }

# --- the host: packages, libvirt, the pool, the venv (serialised: labs may start in parallel) ---

install_packages() {
  local need=() qemu=0
  command -v qemu-system-x86_64 >/dev/null || { need+=(qemu-system-x86); qemu=1; }
  command -v qemu-img >/dev/null || [ $qemu = 1 ] || need+=(qemu-utils)
  [ -f "$OVMF_CODE" ] && [ -f "$OVMF_VARS" ] || need+=(ovmf)
  command -v libvirtd >/dev/null || need+=(libvirt-daemon)
  [ -f /usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so ] || need+=(libvirt-daemon-driver-qemu)
  command -v virsh >/dev/null || need+=(libvirt-clients)
  /usr/bin/python3 -c 'import libvirt' 2>/dev/null || need+=(python3-libvirt)
  command -v htpasswd >/dev/null || need+=(apache2-utils)
  command -v curl >/dev/null || need+=(curl)
  command -v dnsmasq >/dev/null || need+=(dnsmasq-base)
  [ ${#need[@]} -gt 0 ] || return 0
  say "installing ${need[*]}"
  apt-get update -qq
  if [ $qemu = 1 ]; then
    # The image may ship a backported qemu-utils that conflicts with Debian 12's
    # qemu-system-x86: take qemu-utils at the very version of qemu-system-x86.
    local v
    v=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/ {print $2}')
    if apt-cache madison qemu-utils | awk '{print $3}' | grep -qxF "$v"; then
      need+=("qemu-utils=$v")
    else
      need+=(qemu-utils)
    fi
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades \
    "${need[@]}" >/dev/null
}

QEMU_CONF_MARK="# Written by ferrometal scripts/vmlab.sh"
configure_libvirt() {
  id libvirt-qemu >/dev/null 2>&1 || useradd -r -M -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
  mkdir -p /var/log/libvirt /var/run/libvirt /var/lib/libvirt/qemu/nvram "$POOL_DIR"
  local conf=/etc/libvirt/qemu.conf
  if [ ! -f "$conf" ] || head -1 "$conf" | grep -qxF "$QEMU_CONF_MARK"; then
    local want
    want=$(printf '%s\n' "$QEMU_CONF_MARK (libvirt as root without systemd)" \
      'user = "root"' 'group = "root"' 'security_driver = "none"' 'dynamic_ownership = 0')
    if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
      if pgrep -x libvirtd >/dev/null; then
        die "$conf was missing or stale while libvirtd runs: stop libvirtd, then run this again"
      fi
      echo "$want" >"$conf"
    fi
  else
    local key
    for key in 'user = "root"' 'group = "root"' 'security_driver = "none"' 'dynamic_ownership = 0'; do
      grep -qxF "$key" "$conf" || die "$conf is not ours and lacks '$key' (libvirt as root needs it)"
    done
  fi
}

start_daemons() {
  if ! pgrep -x virtlogd >/dev/null; then
    "${NOMARK[@]}" setsid virtlogd -d </dev/null >/dev/null 2>&1 8>&- 9>&-
  fi
  if ! pgrep -x libvirtd >/dev/null; then
    "${NOMARK[@]}" setsid libvirtd -d </dev/null >/dev/null 2>&1 8>&- 9>&-
  fi
  local i
  for ((i = 0; i < 100; i++)); do
    vsh version >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "libvirtd does not answer on $URI"
}

ensure_pool() {
  if ! vsh pool-info "$POOL" >/dev/null 2>&1; then
    vsh pool-define-as "$POOL" dir --target "$POOL_DIR" >/dev/null
    vsh pool-autostart "$POOL" >/dev/null
  fi
  if [ "$(vsh pool-info "$POOL" | awk '$1 == "State:" {print $2}')" != running ]; then
    vsh pool-start "$POOL" >/dev/null
  fi
}

ensure_venv() {
  if [ ! -x "$VMLAB_VENV/bin/python" ]; then
    # Debian's python3-libvirt lives in /usr/bin/python3's site-packages (the python3 first on
    # PATH may be another build without it).
    /usr/bin/python3 -m venv --system-site-packages "$VMLAB_VENV"
  fi
  if ! "$VMLAB_VENV/bin/python" -c 'import libvirt' 2>/dev/null; then
    die "$VMLAB_VENV cannot import libvirt: it must be made from /usr/bin/python3 with --system-site-packages"
  fi
  if ! "$VMLAB_VENV/bin/python" -c 'import sushy_tools' 2>/dev/null; then
    "$VMLAB_VENV/bin/pip" install -q --disable-pip-version-check 'sushy-tools==2.2.0'
  fi
}

ensure_host() {
  [ "$(id -u)" -eq 0 ] || die "needs root (libvirt's qemu:///system as root, no systemd)"
  exec 8>"$HOST_LOCK"
  flock -w 600 8 || die "another vmlab holds $HOST_LOCK"
  install_packages
  configure_libvirt
  start_daemons
  ensure_pool
  ensure_venv
  exec 8>&-
}

# --- the lab's record in its state dir ---
# lab.env   shell variables (LAB_*), LAB_COMPLETE=1 once everything is up
# vms.tsv   name uuid macs(comma) disks(comma, volume names) console-log, written before defining
# switch.tsv  name port mac, with --switch-port: the UDP port feeding the VM's last NIC
# prov/     with --prov-network: dnsmasq's pid, leases and log (the bridge is LAB_PROV_BRIDGE)
# sushy/    config.py, htpasswd, password (0600), pid, port, sushy.log, tmp/ (its downloads)
# console/  NAME.log (serial console, appended across power cycles; kept by down)
# nvram/    UEFI variable stores; xml/ the domain XML as defined; hosts/ + hosts.yaml; lab.json

parse_state() {
  STATE=${STATE:-$REPO_ROOT/.peers/vmlab}
  mkdir -p "$STATE"
  STATE=$(cd "$STATE" && pwd)
}

lock_state() {
  exec 9>"$STATE/.lock"
  flock -w "${1:-120}" 9 || die "another vmlab command holds $STATE/.lock"
}

write_env() {
  local tmp="$STATE/lab.env.tmp"
  {
    printf 'LAB_ID=%q\nLAB_PREFIX=%q\nLAB_COUNT=%q\nLAB_MODE=%q\nLAB_DISK=%q\nLAB_DISKS=%q\n' \
      "$LAB_ID" "$LAB_PREFIX" "$LAB_COUNT" "$LAB_MODE" "$LAB_DISK" "$LAB_DISKS"
    printf 'LAB_RAM=%q\nLAB_CPUS=%q\nLAB_NICS=%q\nLAB_NAMESPACE=%q\nLAB_SCHEME=%q\n' \
      "$LAB_RAM" "$LAB_CPUS" "$LAB_NICS" "$LAB_NAMESPACE" "$LAB_SCHEME"
    printf 'LAB_SWITCH=%q\nLAB_PROV=%q\nLAB_PROV_BRIDGE=%q\nLAB_PROV_NET=%q\n' "${LAB_SWITCH:-0}" \
      "${LAB_PROV:-0}" "${LAB_PROV_BRIDGE:-}" "${LAB_PROV_NET:-}"
    printf 'LAB_PORT=%q\nLAB_USER=%q\nLAB_RUN=%q\nLAB_COMPLETE=%q\n' \
      "${LAB_PORT:-}" "${LAB_USER:-admin}" "${LAB_RUN:-}" "${LAB_COMPLETE:-0}"
  } >"$tmp"
  mv "$tmp" "$STATE/lab.env"
}

sushy_alive() {
  [ -f "$STATE/sushy/pid" ] && kill -0 "$(cat "$STATE/sushy/pid")" 2>/dev/null
}

domain_xml() { # name uuid mode ram cpus macs disks console [switch-port switch-mac [bridge]]
  local name=$1 uuid=$2 mode=$3 ram=$4 cpus=$5 macs=$6 disks=$7 console=$8 mac vol k=0 loader
  local sport=${9:-} smac=${10:-} bridge=${11:-} first=1
  if [ "$mode" = UEFI ]; then
    loader="<loader readonly='yes' type='pflash'>$OVMF_CODE</loader>
    <nvram template='$OVMF_VARS'>$STATE/nvram/${name}_VARS.fd</nvram>"
  else
    loader="<loader type='rom'>$SEABIOS</loader>"
  fi
  cat <<XML
<domain type='qemu'>
  <name>$name</name>
  <uuid>$uuid</uuid>
  <metadata>
    <fmlab:lab xmlns:fmlab='$META_NS' run='${LAB_RUN:-}' state='$STATE' id='$LAB_ID'/>
  </metadata>
  <memory unit='MiB'>$ram</memory>
  <vcpu>$cpus</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    $loader
  </os>
  <features><acpi/><apic/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
XML
  for vol in ${disks//,/ }; do
    cat <<XML
    <disk type='volume' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source pool='$POOL' volume='$vol'/>
      <target dev='vd$(printf "\\x$(printf %x $((97 + k)))")' bus='virtio'/>
      $([ $k = 0 ] && echo "<boot order='1'/>")
    </disk>
XML
    k=$((k + 1))
  done
  cat <<XML
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <target dev='sda' bus='sata'/>
      <readonly/>
    </disk>
XML
  for mac in ${macs//,/ }; do
    if [ $first = 1 ] && [ -n "$bridge" ]; then
      cat <<XML
    <interface type='bridge'>
      <mac address='$mac'/>
      <source bridge='$bridge'/>
      <model type='virtio'/>
    </interface>
XML
    else
      cat <<XML
    <interface type='user'>
      <mac address='$mac'/>
      <model type='virtio'/>
    </interface>
XML
    fi
    first=0
  done
  if [ -n "$sport" ]; then
    # Frames the guest sends go to a port nobody reads (the discard port's neighbour).
    cat <<XML
    <interface type='udp'>
      <mac address='$smac'/>
      <source address='127.0.0.1' port='$((sport + 1))'>
        <local address='127.0.0.1' port='$sport'/>
      </source>
      <model type='virtio'/>
    </interface>
XML
  fi
  cat <<XML
    <serial type='file'>
      <source path='$console' append='on'/>
      <target port='0'/>
    </serial>
    <console type='file'>
      <source path='$console' append='on'/>
      <target type='serial' port='0'/>
    </console>
    <video><model type='none'/></video>
    <memballoon model='none'/>
  </devices>
</domain>
XML
}

write_outputs() {
  local pw
  pw=$(cat "$STATE/sushy/password")
  mkdir -p "$STATE/hosts"
  LAB_PW="$pw" STATE="$STATE" /usr/bin/python3 - <<'PY'
import json, os
state = os.environ["STATE"]
env = {}
for line in open(os.path.join(state, "lab.env")):
    k, _, v = line.rstrip("\n").partition("=")
    env[k] = v.strip("'")
port = env["LAB_PORT"]
url = f"http://127.0.0.1:{port}"
mode = env["LAB_MODE"]
vms, docs = [], []
switches = {}
if os.path.exists(os.path.join(state, "switch.tsv")):
    for line in open(os.path.join(state, "switch.tsv")):
        vm, port, mac = line.rstrip("\n").split("\t")
        switches[vm] = (port, mac)
old = os.umask(0o077)
for line in open(os.path.join(state, "vms.tsv")):
    name, uuid, macs, disks, console = line.rstrip("\n").split("\t")
    macs = macs.split(",")
    address = f"{env['LAB_SCHEME']}+{url}/redfish/v1/Systems/{uuid}"
    switch = switches.get(name)
    vms.append({
        "switch_port": switch and {"port": int(switch[0]), "mac": switch[1]},
        "name": name, "uuid": uuid, "macs": macs, "boot_mac": macs[0],
        "volumes": disks.split(","), "console_log": console,
        "boot_mode": mode, "bmc_address": address,
        "redfish_system": f"{url}/redfish/v1/Systems/{uuid}",
        "manifest": os.path.join(state, "hosts", name + ".yaml"),
    })
    ns = env["LAB_NAMESPACE"]
    doc = f"""apiVersion: v1
kind: Secret
metadata:
  name: {name}-bmc
  namespace: {ns}
type: Opaque
stringData:
  username: {env['LAB_USER']}
  password: {os.environ['LAB_PW']}
---
apiVersion: metal3.io/v1alpha1
kind: BareMetalHost
metadata:
  name: {name}
  namespace: {ns}
spec:
  online: false
  bootMACAddress: "{macs[0]}"
  bootMode: {mode}
  bmc:
    address: {address}
    credentialsName: {name}-bmc
"""
    with open(os.path.join(state, "hosts", name + ".yaml"), "w") as f:
        f.write(doc)
    docs.append(doc)
with open(os.path.join(state, "hosts.yaml"), "w") as f:
    f.write("---\n".join(docs))
os.umask(old)
summary = {
    "state": state,
    "prefix": env["LAB_PREFIX"],
    "sushy": {
        "url": url, "port": int(port), "username": env["LAB_USER"],
        "password_file": os.path.join(state, "sushy", "password"),
        "pid_file": os.path.join(state, "sushy", "pid"),
        "log": os.path.join(state, "sushy", "sushy.log"),
    },
    "libvirt_uri": "qemu:///system",
    "pool": "default",
    "guest_host_loopback": "10.0.2.2",
    "provisioning": env.get("LAB_PROV") == "1" and {
        "bridge": env["LAB_PROV_BRIDGE"],
        "address": env["LAB_PROV_NET"] + ".1",
        "cidr": env["LAB_PROV_NET"] + ".0/24",
        "leases": os.path.join(state, "prov", "leases"),
    } or None,
    "manifests": os.path.join(state, "hosts.yaml"),
    "vms": vms,
}
tmp = os.path.join(state, "lab.json.tmp")
with open(tmp, "w") as f:
    json.dump(summary, f, indent=2)
    f.write("\n")
os.rename(tmp, os.path.join(state, "lab.json"))
PY
}

print_outputs() {
  echo "state=$STATE"
  echo "summary=$STATE/lab.json"
  echo "manifests=$STATE/hosts.yaml"
  echo "sushy=http://127.0.0.1:$LAB_PORT"
}

start_sushy() {
  local sdir="$STATE/sushy" pw port allowed="" name uuid rest
  mkdir -p "$sdir/state" "$sdir/tmp"
  ( umask 077
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$sdir/password"
    htpasswd -nbB -C 4 "$LAB_USER" "$(cat "$sdir/password")" >"$sdir/htpasswd" )
  while IFS=$'\t' read -r name uuid rest; do
    allowed+="'$name', '$uuid', "
  done <"$STATE/vms.tsv"
  port=$(free_port)
  cat >"$sdir/config.py" <<PY
SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'
SUSHY_EMULATOR_LIBVIRT_URI = '$URI'
SUSHY_EMULATOR_STATE_DIR = '$sdir/state'
SUSHY_EMULATOR_AUTH_FILE = '$sdir/htpasswd'
SUSHY_EMULATOR_STORAGE_POOL = '$POOL'
SUSHY_EMULATOR_BOOT_LOADER_MAP = {'UEFI': {'x86_64': '$OVMF_CODE'}, 'Legacy': {'x86_64': '$SEABIOS'}}
# Variable stores that match the 4M code (sushy-tools' defaults are the 2M ones).
SUSHY_EMULATOR_SECURE_BOOT_DISABLED_NVRAM = '$OVMF_VARS'
SUSHY_EMULATOR_SECURE_BOOT_ENABLED_NVRAM = '/usr/share/OVMF/OVMF_VARS_4M.ms.fd'
# Only this lab's domains (its libvirt driver would list every domain on the host).
SUSHY_EMULATOR_ALLOWED_INSTANCES = [$allowed]
PY
  # InsertMedia downloads into TMPDIR: keep that inside the lab.
  TMPDIR="$sdir/tmp" "$VMLAB_VENV/bin/sushy-emulator" --config "$sdir/config.py" --port "$port" \
    </dev/null >"$sdir/sushy.log" 2>&1 8>&- 9>&- &
  echo $! >"$sdir/pid"
  # (Without the state lock: the watcher lives as long as the owner.)
  stop_with_owner "$sdir/pid" 8>&- 9>&-
  echo "$port" >"$sdir/port"
  LAB_PORT=$port
  if ! wait_port "$port" 30; then
    cat "$sdir/sushy.log" >&2
    die "sushy-tools did not start"
  fi
  local i n=0
  for ((i = 0; i < 100; i++)); do
    n=$(curl -fsS -u "$LAB_USER:$(cat "$sdir/password")" "http://127.0.0.1:$port/redfish/v1/Systems" 2>/dev/null |
      /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["Members@odata.count"])' 2>/dev/null) || n=0
    [ "$n" = "$LAB_COUNT" ] && return 0
    sleep 0.1
  done
  cat "$sdir/sushy.log" >&2
  die "sushy-tools lists $n systems, not $LAB_COUNT"
}

# The provisioning network: a bridge with the first free 172.22.X.0/24 and a dnsmasq serving
# DHCP on it alone (no DNS, no router option: the VMs keep QEMU's user-mode default route on
# their other NICs). Chosen and created under the host lock: labs may start in parallel.
start_prov_network() {
  local x used br="fmp-${LAB_ID:0:10}" sdir="$STATE/prov"
  mkdir -p "$sdir"
  exec 8>"$HOST_LOCK"
  flock -w 120 8 || die "another vmlab holds $HOST_LOCK"
  used=$(ip -4 -o addr show | awk '{print $4}')
  for ((x = 100; x < 250; x++)); do
    grep -q "^172\.22\.$x\." <<<"$used" || break
  done
  [ $x -lt 250 ] || die "no free 172.22.X.0/24 for the provisioning network"
  ip link add "$br" type bridge || die "cannot create bridge $br"
  LAB_PROV_BRIDGE=$br LAB_PROV_NET="172.22.$x"
  write_env
  ip addr add "$LAB_PROV_NET.1/24" dev "$br"
  ip link set "$br" up
  exec 8>&-
  : >"$sdir/leases"
  dnsmasq --keep-in-foreground --conf-file=/dev/null --port=0 --interface="$br" \
    --bind-interfaces --except-interface=lo --dhcp-range="$LAB_PROV_NET.100,$LAB_PROV_NET.250,255.255.255.0,1h" \
    --dhcp-option=3 --dhcp-option=6 --dhcp-leasefile="$sdir/leases" --dhcp-authoritative \
    --log-dhcp --log-facility="$sdir/dnsmasq.log" --pid-file= --user=root --group=root \
    </dev/null >>"$sdir/dnsmasq.log" 2>&1 8>&- 9>&- &
  echo $! >"$sdir/pid"
  stop_with_owner "$sdir/pid" 8>&- 9>&-
  sleep 0.2
  kill -0 "$(cat "$sdir/pid")" 2>/dev/null || { cat "$sdir/dnsmasq.log" >&2; die "dnsmasq did not start"; }
}

stop_prov_network() {
  local sdir="$STATE/prov" pid
  if [ -f "$sdir/pid" ]; then
    pid=$(cat "$sdir/pid")
    kill "$pid" 2>/dev/null || true
    rm -f "$sdir/pid"
  fi
  if [ -n "${LAB_PROV_BRIDGE:-}" ] && ip link show "$LAB_PROV_BRIDGE" >/dev/null 2>&1; then
    ip link del "$LAB_PROV_BRIDGE" || say "could not delete bridge $LAB_PROV_BRIDGE"
  fi
}

# When the owner (a test) is gone, however it ended, take the whole lab down.
watch_owner() {
  local owner=${FERROMETAL_PEER_OWNER:-}
  [ -n "$owner" ] || return 0
  setsid bash -c '
    owner=$0 state=$1 id=$2 self=$3 sushy=$4
    while kill -0 "$owner" 2>/dev/null; do
      grep -qxF "LAB_ID=$id" "$state/lab.env" 2>/dev/null || break
      sleep 0.5
    done
    if grep -qxF "LAB_ID=$id" "$state/lab.env" 2>/dev/null; then
      exec bash "$self" down --state "$state"
    fi
    # down ran (then nothing is left), or the state went away without it: whatever of this
    # lab is still there goes.
    if tr "\0" " " <"/proc/$sushy/cmdline" 2>/dev/null | grep -q "sushy-emulator --config $state/"; then
      kill "$sushy"
    fi
    exec bash "$self" purge "$id"' "$owner" "$STATE" "$LAB_ID" "$SELF" "$(cat "$STATE/sushy/pid")" \
    </dev/null >>"$STATE/watch.log" 2>&1 8>&- 9>&- &
}

# purge ID: destroys and undefines the domains whose metadata carries lab id ID, with their
# volumes: the owner-watch's fallback when a lab's state went away without `down`.
cmd_purge() {
  local id=${1:?usage: vmlab.sh purge LAB_ID} d uuid vol vols doms=""
  ip link del "fmp-${id:0:10}" >/dev/null 2>&1 || true
  command -v virsh >/dev/null && pgrep -x libvirtd >/dev/null || return 0
  for d in $(vsh list --all --name | grep '^fmlab-'); do
    vsh metadata "$d" "$META_NS" 2>/dev/null | grep -q "id=[\"']${id}[\"']" && doms+=" $d"
  done
  [ -n "$doms" ] || return 0
  say "purging$doms (lab $id: its state went away without down)"
  for d in $doms; do vsh destroy "$d" >/dev/null 2>&1 & done
  wait
  vols=$(vsh vol-list "$POOL" | awk '{print $1}')
  for d in $doms; do
    uuid=$(vsh domuuid "$d")
    vsh undefine --nvram "$d" >/dev/null 2>&1 || vsh undefine "$d" >/dev/null 2>&1 || true
    for vol in $vols; do
      case "$vol" in
        "$d"-disk*|*"-$uuid.img") vsh vol-delete --pool "$POOL" "$vol" >/dev/null 2>&1 || true ;;
      esac
    done
    rm -f "/var/log/libvirt/qemu/$d.log"*
  done
}

cmd_up() {
  local count=${1:-}
  [[ "$count" =~ ^[0-9]+$ ]] && [ "$count" -ge 1 ] && [ "$count" -le 256 ] || die "usage: vmlab.sh up N [options] (1 <= N <= 256)"
  shift
  local mode=UEFI disk=4G disks=1 ram=1024 cpus=1 nics=2 name="" ns=default scheme=redfish-virtualmedia
  local switch=0 prov=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --uefi) mode=UEFI; shift ;;
      --legacy) mode=legacy; shift ;;
      --disk) disk=$2; shift 2 ;;
      --disks) disks=$2; shift 2 ;;
      --ram) ram=$2; shift 2 ;;
      --cpus) cpus=$2; shift 2 ;;
      --nics) nics=$2; shift 2 ;;
      --name) name=$2; shift 2 ;;
      --namespace) ns=$2; shift 2 ;;
      --scheme) scheme=$2; shift 2 ;;
      --switch-port) switch=1; shift ;;
      --prov-network) prov=1; shift ;;
      --state) STATE=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ "$disk" =~ ^[0-9]+[KMGT]?$ ]] || die "--disk takes a size like 4G"
  [[ "$disks" =~ ^[1-9]$ ]] || die "--disks takes 1..9"
  [[ "$ram" =~ ^[0-9]+$ ]] && [ "$ram" -ge 128 ] || die "--ram takes MiB (>= 128)"
  [[ "$cpus" =~ ^[1-9][0-9]*$ ]] || die "--cpus takes a count"
  [[ "$nics" =~ ^[0-9]+$ ]] && [ "$nics" -ge 1 ] && [ "$nics" -le 255 ] || die "--nics takes 1..255"
  [[ "$scheme" =~ ^(redfish|redfish-virtualmedia|redfish-uefihttp)$ ]] || die "--scheme: redfish, redfish-virtualmedia or redfish-uefihttp"
  if [ -n "$name" ]; then
    name=${name#fmlab-}
    [[ "$name" =~ ^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$ ]] || die "--name takes [a-z0-9-], at most 32"
  fi
  parse_state
  lock_state 600

  if [ -f "$STATE/lab.env" ]; then
    source "$STATE/lab.env"
    local healthy=1 n
    if [ "$LAB_COMPLETE" != 1 ]; then
      die "$STATE holds a half-made lab: run scripts/vmlab.sh down --state $STATE"
    fi
    if [ "$LAB_COUNT" != "$count" ] || [ "$LAB_MODE" != "$mode" ] || [ "$LAB_DISK" != "$disk" ] ||
      [ "$LAB_DISKS" != "$disks" ] || [ "$LAB_RAM" != "$ram" ] || [ "$LAB_CPUS" != "$cpus" ] ||
      [ "$LAB_NICS" != "$nics" ] || [ "$LAB_NAMESPACE" != "$ns" ] || [ "$LAB_SCHEME" != "$scheme" ] ||
      [ "${LAB_SWITCH:-0}" != "$switch" ] || [ "${LAB_PROV:-0}" != "$prov" ] ||
      { [ -n "$name" ] && [ "$LAB_PREFIX" != "fmlab-$name" ]; }; then
      die "$STATE already holds another lab ($LAB_PREFIX: $LAB_COUNT x $LAB_MODE): run scripts/vmlab.sh down --state $STATE first"
    fi
    sushy_alive || healthy=0
    if [ "${LAB_PROV:-0}" = 1 ]; then
      kill -0 "$(cat "$STATE/prov/pid" 2>/dev/null)" 2>/dev/null || healthy=0
    fi
    for n in $(cut -f1 "$STATE/vms.tsv"); do
      vsh dominfo "$n" >/dev/null 2>&1 || healthy=0
    done
    [ $healthy = 1 ] || die "the lab in $STATE is broken (sushy-tools or a domain is gone): run scripts/vmlab.sh down --state $STATE"
    say "reusing the lab already up in $STATE"
    print_outputs
    return 0
  fi

  local t0=$SECONDS
  ensure_host
  LAB_ID=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
  LAB_PREFIX="fmlab-${name:-${LAB_ID:0:6}}"
  LAB_COUNT=$count LAB_MODE=$mode LAB_DISK=$disk LAB_DISKS=$disks LAB_RAM=$ram LAB_CPUS=$cpus
  LAB_NICS=$nics LAB_NAMESPACE=$ns LAB_SCHEME=$scheme LAB_USER=admin LAB_COMPLETE=0
  LAB_SWITCH=$switch LAB_PROV=$prov LAB_PROV_BRIDGE="" LAB_PROV_NET=""
  LAB_RUN=${FERROMETAL_TEST_RUN:-}
  local existing
  existing=$(vsh list --all --name)
  if grep -q "^$LAB_PREFIX-[0-9]*$" <<<"$existing"; then
    die "domains named $LAB_PREFIX-* exist already (another lab?): pick another --name"
  fi
  existing=$(vsh vol-list "$POOL" | awk '{print $1}')
  if grep -q "^$LAB_PREFIX-[0-9]*-disk" <<<"$existing"; then
    die "volumes named $LAB_PREFIX-*-disk* exist already in pool $POOL: pick another --name"
  fi
  # From here on a failure removes whatever this `up` made.
  write_env
  : >"$STATE/vms.tsv"
  rm -f "$STATE/switch.tsv"
  # shellcheck disable=SC2154 # status is set by the trap itself
  trap 'status=$?; if [ "$LAB_COMPLETE" != 1 ]; then say "up failed: taking the half-made lab down"; exec 9>&-; "$SELF" down --state "$STATE" >&2 || true; fi; exit $status' EXIT
  mkdir -p "$STATE/console" "$STATE/nvram" "$STATE/xml"
  [ "$prov" = 0 ] || start_prov_network
  local r1 r2 i j k vm uuid macs vols console sport smac
  r1=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
  r2=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
  for ((i = 0; i < count; i++)); do
    vm="$LAB_PREFIX-$i"
    uuid=$(cat /proc/sys/kernel/random/uuid)
    macs=""
    for ((j = 0; j < nics; j++)); do
      macs+=$(printf '52:54:%02x:%02x:%02x:%02x,' "$r1" "$r2" "$i" "$j")
    done
    macs=${macs%,}
    vols=""
    for ((k = 0; k < disks; k++)); do vols+="$vm-disk$k.qcow2,"; done
    vols=${vols%,}
    console="$STATE/console/$vm.log"
    : >"$console"
    printf '%s\t%s\t%s\t%s\t%s\n' "$vm" "$uuid" "$macs" "$vols" "$console" >>"$STATE/vms.tsv"
    for k in ${vols//,/ }; do
      vsh vol-create-as "$POOL" "$k" "$disk" --format qcow2 >/dev/null
    done
    sport="" smac=""
    if [ "$switch" = 1 ]; then
      sport=$(free_udp_port_pair)
      smac=$(printf '52:54:%02x:%02x:%02x:fe' "$r1" "$r2" "$i")
      printf '%s\t%s\t%s\n' "$vm" "$sport" "$smac" >>"$STATE/switch.tsv"
    fi
    domain_xml "$vm" "$uuid" "$mode" "$ram" "$cpus" "$macs" "$vols" "$console" "$sport" "$smac" \
      "$LAB_PROV_BRIDGE" >"$STATE/xml/$vm.xml"
    vsh define "$STATE/xml/$vm.xml" >/dev/null
  done
  start_sushy
  write_env
  write_outputs
  LAB_COMPLETE=1
  write_env
  watch_owner
  trap - EXIT
  say "up: $count VMs ($mode) in $((SECONDS - t0)) s"
  print_outputs
}

cmd_down() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --state) STATE=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  STATE=${STATE:-$REPO_ROOT/.peers/vmlab}
  if [ ! -f "$STATE/lab.env" ]; then
    echo "vmlab: no lab in $STATE" >&2
    return 0
  fi
  STATE=$(cd "$STATE" && pwd)
  lock_state 120
  [ -f "$STATE/lab.env" ] || return 0
  source "$STATE/lab.env"
  # Stop the BMC first (nothing may power a VM on again while it is taken down); it takes a
  # second or two to exit: killed after the domains are gone.
  local pid=""
  if [ -f "$STATE/sushy/pid" ]; then
    pid=$(cat "$STATE/sushy/pid")
    kill "$pid" 2>/dev/null || pid=""
  fi
  if command -v virsh >/dev/null && [ -s "$STATE/vms.tsv" ]; then
    [ "$(id -u)" -eq 0 ] || die "needs root"
    start_daemons
    local vm uuid rest vol vols
    vols=$(vsh vol-list "$POOL" 2>/dev/null | awk '{print $1}') || vols=""
    # A destroy takes ~2 s (libvirt waits for QEMU to go): all at once.
    while IFS=$'\t' read -r vm uuid rest; do
      vsh destroy "$vm" >/dev/null 2>&1 8>&- 9>&- &
    done <"$STATE/vms.tsv"
    wait
    while IFS=$'\t' read -r vm uuid rest; do
      if vsh dominfo "$vm" >/dev/null 2>&1; then
        vsh undefine --nvram "$vm" >/dev/null 2>&1 || vsh undefine "$vm" >/dev/null
      fi
      # libvirt's log of the QEMU process (its command line, its errors) joins the console log.
      if [ -f "/var/log/libvirt/qemu/$vm.log" ]; then
        mkdir -p "$STATE/console"
        cat "/var/log/libvirt/qemu/$vm.log"* >"$STATE/console/$vm.qemu.log" 2>/dev/null
        rm -f "/var/log/libvirt/qemu/$vm.log"*
      fi
      # The lab's disks and every image sushy-tools uploaded for this VM (NAME-UUID.img).
      for vol in $vols; do
        case "$vol" in
          "$vm"-disk*|*"-$uuid.img") vsh vol-delete --pool "$POOL" "$vol" >/dev/null || say "could not delete volume $vol" ;;
        esac
      done
    done <"$STATE/vms.tsv"
    # VMs that ferrometal made in the lab for HostClaims of a libvirt HostClass whose name
    # prefix is the lab's (LAB_PREFIX-claim-): they go with the lab, whatever became of serve.
    local d
    for d in $(vsh list --all --name 2>/dev/null | grep "^$LAB_PREFIX-claim-" || true); do
      vsh destroy "$d" >/dev/null 2>&1 || true
      vsh undefine --nvram "$d" >/dev/null 2>&1 || vsh undefine "$d" >/dev/null 2>&1 || true
      if [ -f "/var/log/libvirt/qemu/$d.log" ]; then
        mkdir -p "$STATE/console"
        cat "/var/log/libvirt/qemu/$d.log"* >"$STATE/console/$d.qemu.log" 2>/dev/null
        rm -f "/var/log/libvirt/qemu/$d.log"*
      fi
    done
    for vol in $vols; do
      case "$vol" in
        "$LAB_PREFIX"-claim-*) vsh vol-delete --pool "$POOL" "$vol" >/dev/null || say "could not delete volume $vol" ;;
      esac
    done
  fi
  if [ -n "$pid" ]; then
    local i
    # Its state (virtual media records) is deleted below: no need to wait long.
    for ((i = 0; i < 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  stop_prov_network
  rm -rf "$STATE/sushy" "$STATE/nvram" "$STATE/xml" "$STATE/hosts" "$STATE/hosts.yaml" \
    "$STATE/lab.json" "$STATE/vms.tsv"
  rm -f "$STATE/lab.env"
  say "down: $LAB_PREFIX ($LAB_COUNT VMs) removed; console logs kept in $STATE/console"
}

cmd_status() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --state) STATE=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  STATE=${STATE:-$REPO_ROOT/.peers/vmlab}
  if [ ! -f "$STATE/lab.env" ]; then
    echo "no lab in $STATE"
    return 1
  fi
  STATE=$(cd "$STATE" && pwd)
  source "$STATE/lab.env"
  local s="not running"
  sushy_alive && s="running, pid $(cat "$STATE/sushy/pid")"
  echo "lab $LAB_PREFIX in $STATE$([ "$LAB_COMPLETE" = 1 ] || echo ' (half-made)')"
  echo "sushy-tools http://127.0.0.1:${LAB_PORT:-?} ($s), user $LAB_USER, password in $STATE/sushy/password"
  local vm uuid macs vols console st
  while IFS=$'\t' read -r vm uuid macs vols console; do
    st=$(vsh domstate "$vm" 2>/dev/null) || st="undefined"
    printf '%-20s %s  %-8s %-8s %s  %s\n' "$vm" "$uuid" "$LAB_MODE" "$st" "${macs%%,*}" "$console"
  done <"$STATE/vms.tsv"
}

# vm_field VM COLUMN: a column of vms.tsv for VM (a name or UUID).
vm_field() {
  awk -F'\t' -v vm="$1" -v col="$2" '$1 == vm || $2 == vm {print $col}' "$STATE/vms.tsv"
}

cmd_write_disk() {
  local args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --state) STATE=$2; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  [ ${#args[@]} = 2 ] || die "usage: vmlab.sh write-disk [--state DIR] VM IMAGE"
  STATE=${STATE:-$REPO_ROOT/.peers/vmlab}
  [ -f "$STATE/lab.env" ] || die "no lab in $STATE"
  source "$STATE/lab.env"
  local vm vol path image=${args[1]}
  vm=$(vm_field "${args[0]}" 1)
  [ -n "$vm" ] || die "no VM ${args[0]} in this lab"
  [ -f "$image" ] || die "no image $image"
  [ "$(vsh domstate "$vm")" = "shut off" ] || die "$vm must be powered off"
  vol=$(vm_field "$vm" 4); vol=${vol%%,*}
  path=$(vsh vol-path --pool "$POOL" "$vol")
  qemu-img convert -O qcow2 "$image" "$path.new"
  qemu-img resize -q "$path.new" "$LAB_DISK"
  mv "$path.new" "$path"
  vsh pool-refresh "$POOL" >/dev/null
  echo "$path"
}

cmd_attach_disk() {
  local args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --state) STATE=$2; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  [ ${#args[@]} = 2 ] || die "usage: vmlab.sh attach-disk [--state DIR] VM FILE"
  STATE=${STATE:-$REPO_ROOT/.peers/vmlab}
  [ -f "$STATE/lab.env" ] || die "no lab in $STATE"
  source "$STATE/lab.env"
  local vm file dev
  vm=$(vm_field "${args[0]}" 1)
  [ -n "$vm" ] || die "no VM ${args[0]} in this lab"
  file=$(cd "$(dirname "${args[1]}")" && pwd)/$(basename "${args[1]}")
  [ -f "$file" ] || die "no file $file"
  # The next free virtio name after the lab's own disks.
  dev=vd$(printf "\\x$(printf %x $((97 + LAB_DISKS)))")
  while vsh domblklist "$vm" | awk '{print $1}' | grep -qx "$dev"; do
    dev=vd$(printf "\\x$(printf %x $(($(printf %d "'${dev:2}") + 1)))")
  done
  vsh attach-disk "$vm" "$file" "$dev" --targetbus virtio --driver qemu --subdriver raw --mode readonly --config >/dev/null
  echo "$dev"
}

cmd_wait() {
  local args=() timeout=120 after=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --state) STATE=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      --after) after=$2; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  [ ${#args[@]} = 2 ] || die "usage: vmlab.sh wait [--state DIR] [--timeout S] [--after BYTES] VM TEXT"
  STATE=${STATE:-$REPO_ROOT/.peers/vmlab}
  [ -f "$STATE/lab.env" ] || die "no lab in $STATE"
  local log line end=$((SECONDS + timeout))
  log=$(vm_field "${args[0]}" 5)
  [ -n "$log" ] || die "no VM ${args[0]} in this lab"
  while :; do
    # Complete lines only: a line the VM is still printing would be read without its end.
    line=$(tail -c +$((after + 1)) "$log" 2>/dev/null | tr -d '\r' |
      TEXT=${args[1]} perl -ne 'if (/\n\z/ && index($_, $ENV{TEXT}) >= 0) { print; exit }') || true
    [ -n "$line" ] && { echo "$line"; return 0; }
    [ $SECONDS -lt $end ] || die "no '${args[1]}' in $log after ${timeout}s"
    [ -f "$STATE/lab.env" ] || die "the lab in $STATE was taken down"
    sleep 0.2
  done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  setup) ensure_host ;;
  up) cmd_up "$@" ;;
  wait) cmd_wait "$@" ;;
  purge) cmd_purge "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  write-disk) cmd_write_disk "$@" ;;
  attach-disk) cmd_attach_disk "$@" ;;
  *) die "usage: vmlab.sh setup | up N [options] | down | status | write-disk VM IMAGE | attach-disk VM FILE | wait VM TEXT  [--state DIR]" ;;
esac
