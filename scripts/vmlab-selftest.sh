#!/usr/bin/env bash
# Proves the VM lab end to end through Redfish only (curl against sushy-tools), and prints
# what it measured:
#   - a UEFI lab of 2 VMs and a legacy lab of 1 VM (scripts/vmlab.sh up);
#   - the live ISO (scripts/guest-images.sh), served by an HTTP server on 127.0.0.1, inserted
#     as virtual media, boot override Cd, power on: its marker line with the VM's UUID appears
#     in that VM's console log and in no other (UEFI and BIOS);
#   - the disk image written onto a VM's disk with a config drive: config-2 as virtual media
#     (UEFI), NoCloud with static network configuration for the second NIC as an extra disk
#     (BIOS): the first-boot line carries the host name, the user data's SHA-256 and the address;
#   - GracefulShutdown powers a guest off (ACPI power button);
#   - down leaves no domain, volume or QEMU process of either lab.
#
#   scripts/vmlab-selftest.sh [WORKDIR]     (default: a fresh temporary directory)
source "$(dirname "$0")/lib.sh"
LAB="$REPO_ROOT/scripts/vmlab.sh"
WORK=${1:-$(mktemp -d /tmp/vmlab-selftest.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
# Whatever happens to this script, its labs go (vmlab's owner-watch).
export FERROMETAL_PEER_OWNER=$$
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
fail() { echo "SELFTEST FAILED: $*" >&2; exit 1; }
results=()
note() { results+=("$1"); echo "  $1" >&2; }

http_pid=""
cleanup() {
  [ -z "$http_pid" ] || kill "$http_pid" 2>/dev/null
  "$LAB" down --state "$WORK/uefi" >/dev/null 2>&1
  "$LAB" down --state "$WORK/bios" >/dev/null 2>&1
}
trap cleanup EXIT

echo "guest images" >&2
t=$(now)
images=$("$REPO_ROOT/scripts/guest-images.sh")
note "guest-images.sh: $(since "$t") s"
live=$(sed -n 's/^live_iso=//p' <<<"$images")
disk_raw=$(sed -n 's/^disk_raw=//p' <<<"$images")
disk_qcow2=$(sed -n 's/^disk_qcow2=//p' <<<"$images")
note "sizes: live.iso $(du -m --apparent-size "$live" | cut -f1) MiB, disk.raw $(du -m --apparent-size "$disk_raw" | cut -f1) MiB, disk.qcow2 $(du -m --apparent-size "$disk_qcow2" | cut -f1) MiB"

echo "labs" >&2
t=$(now)
"$LAB" up 2 --uefi --state "$WORK/uefi" >/dev/null
note "up 2 (UEFI): $(since "$t") s"
t=$(now)
"$LAB" up 1 --legacy --state "$WORK/bios" >/dev/null
note "up 1 --legacy: $(since "$t") s"

# The HTTP server virtual media is fetched from.
mkdir -p "$WORK/www"
ln -sf "$live" "$WORK/www/live.iso"
hport=$(free_port)
(cd "$WORK/www" && exec /usr/bin/python3 -m http.server --bind 127.0.0.1 "$hport") >"$WORK/http.log" 2>&1 &
http_pid=$!
echo "$http_pid" >"$WORK/http.pid"
stop_with_owner "$WORK/http.pid"
wait_port "$hport" 10

# field STATE INDEX KEY: a value from the lab's summary.
field() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["vms"][int(sys.argv[2])][sys.argv[3]])' "$1/lab.json" "$2" "$3"; }
# rf STATE METHOD PATH [BODY]: a Redfish request to the lab's sushy-tools; prints the status.
rf() {
  local state=$1 method=$2 path=$3 body=${4:-}
  local port pw
  port=$(cat "$state/sushy/port"); pw=$(cat "$state/sushy/password")
  curl -sS -o "$WORK/rf.out" -w '%{http_code}' -u "admin:$pw" -X "$method" \
    -H 'Content-Type: application/json' ${body:+-d "$body"} "http://127.0.0.1:$port$path"
}
expect() { # STATE METHOD PATH BODY
  local code
  code=$(rf "$@")
  case "$code" in 2*) ;; *) fail "$2 $3 answered $code: $(cat "$WORK/rf.out")" ;; esac
}
power_state() { rf "$1" GET "/redfish/v1/Systems/$2" >/dev/null; /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["PowerState"])' "$WORK/rf.out"; }
# boot STATE UUID TARGET [IMAGE_URL]: insert media (if any), override the boot target, power on.
boot() {
  local state=$1 uuid=$2 target=$3 url=${4:-}
  local sys="/redfish/v1/Systems/$uuid"
  [ -z "$url" ] || expect "$state" POST "$sys/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia" "{\"Image\": \"$url\", \"Inserted\": true, \"WriteProtected\": true}"
  expect "$state" PATCH "$sys" "{\"Boot\": {\"BootSourceOverrideTarget\": \"$target\", \"BootSourceOverrideEnabled\": \"Once\"}}"
  expect "$state" POST "$sys/Actions/ComputerSystem.Reset" '{"ResetType": "On"}'
}
force_off() {
  expect "$1" POST "/redfish/v1/Systems/$2/Actions/ComputerSystem.Reset" '{"ResetType": "ForceOff"}'
  for _ in $(seq 50); do [ "$(power_state "$1" "$2")" = Off ] && return 0; sleep 0.2; done
  fail "$2 did not power off"
}
json_of() { sed 's/^[^{]*//' <<<"$1"; }
jget() { /usr/bin/python3 -c 'import json, sys; v = json.loads(sys.argv[1])[sys.argv[2]]; print(v if isinstance(v, str) else json.dumps(v))' "$1" "$2"; }

echo "live ISO through virtual media" >&2
for lab in uefi bios; do
  S="$WORK/$lab"
  uuid=$(field "$S" 0 uuid)
  t=$(now)
  boot "$S" "$uuid" Cd "http://127.0.0.1:$hport/live.iso"
  line=$("$LAB" wait --state "$S" --timeout 300 "$uuid" "FERROMETAL-LIVE-ISO booted") || fail "no live ISO marker on $lab VM 0"
  took=$(since "$t")
  [ "$(jget "$(json_of "$line")" uuid)" = "$uuid" ] || fail "marker names another UUID: $line"
  mode=$(jget "$(json_of "$line")" boot)
  note "live ISO, $lab: power-on to marker $took s (guest says boot=$mode)"
  [ "$lab" = uefi ] && [ "$mode" != uefi ] && fail "UEFI VM booted $mode"
  [ "$lab" = bios ] && [ "$mode" != bios ] && fail "legacy VM booted $mode"
done
other=$(field "$WORK/uefi" 1 console_log)
grep -q FERROMETAL "$other" && fail "the marker also appeared in the other VM's console"
note "the other UEFI VM's console has no marker ($(stat -c %s "$other") bytes)"

echo "disk image with a config drive (UEFI: config-2 as virtual media)" >&2
S="$WORK/uefi"
uuid=$(field "$S" 1 uuid)
name=$(field "$S" 1 name)
printf '#!/bin/sh\necho "user data ran on $(hostname)"\n' >"$WORK/user-data"
sha=$("$REPO_ROOT/scripts/config-drive.sh" "$WORK/www/config-uefi.iso" --hostname selftest-uefi --uuid "$uuid" --user-data "$WORK/user-data")
"$LAB" write-disk --state "$S" "$name" "$disk_qcow2" >/dev/null
t=$(now)
boot "$S" "$uuid" Hdd "http://127.0.0.1:$hport/config-uefi.iso"
line=$("$LAB" wait --state "$S" --timeout 300 "$uuid" "FERROMETAL-FIRSTBOOT") || fail "no first-boot line"
took=$(since "$t")
j=$(json_of "$line")
[ "$(jget "$j" hostname)" = selftest-uefi ] || fail "hostname: $line"
[ "$(jget "$j" userdata_sha256)" = "$sha" ] || fail "user data hash: $line"
[ "$(jget "$j" uuid)" = "$uuid" ] || fail "uuid: $line"
[ "$(jget "$j" userdata_exit)" = 0 ] || fail "user data exit: $line"
note "disk image, UEFI, config-2 on the virtual CD: power-on to first-boot line $took s"
note "  $line"

echo "disk image with a config drive (BIOS: NoCloud on an extra disk, static address on NIC 2)" >&2
S="$WORK/bios"
uuid=$(field "$S" 0 uuid)
name=$(field "$S" 0 name)
mac2=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["vms"][0]["macs"][1])' "$S/lab.json")
force_off "$S" "$uuid"
cat >"$WORK/network-config" <<EOF
version: 2
ethernets:
  second:
    match:
      macaddress: "$mac2"
    addresses: [10.0.2.44/24]
EOF
sha=$("$REPO_ROOT/scripts/config-drive.sh" "$WORK/nocloud.iso" --nocloud --hostname selftest-bios --uuid "$uuid" --user-data "$WORK/user-data" --network-data "$WORK/network-config")
"$LAB" write-disk --state "$S" "$name" "$disk_raw" >/dev/null
"$LAB" attach-disk --state "$S" "$name" "$WORK/nocloud.iso" >/dev/null
after=$(stat -c %s "$(field "$S" 0 console_log)")
t=$(now)
boot "$S" "$uuid" Hdd
line=$("$LAB" wait --state "$S" --timeout 300 --after "$after" "$uuid" "FERROMETAL-FIRSTBOOT") || fail "no first-boot line"
took=$(since "$t")
j=$(json_of "$line")
[ "$(jget "$j" hostname)" = selftest-bios ] || fail "hostname: $line"
[ "$(jget "$j" userdata_sha256)" = "$sha" ] || fail "user data hash: $line"
[ "$(jget "$j" addresses)" = '["10.0.2.44/24"]' ] || fail "addresses: $line"
[ "$(jget "$j" boot)" = bios ] || fail "boot mode: $line"
note "disk image, BIOS, NoCloud on a virtio disk: power-on to first-boot line $took s"
note "  $line"

t=$(now)
expect "$S" POST "/redfish/v1/Systems/$uuid/Actions/ComputerSystem.Reset" '{"ResetType": "GracefulShutdown"}'
for _ in $(seq 150); do [ "$(power_state "$S" "$uuid")" = Off ] && break; sleep 0.2; done
[ "$(power_state "$S" "$uuid")" = Off ] || fail "GracefulShutdown did not power off"
note "GracefulShutdown to Off: $(since "$t") s"

echo "down" >&2
prefixes="$(sed -n 's/^LAB_PREFIX=//p' "$WORK/uefi/lab.env") $(sed -n 's/^LAB_PREFIX=//p' "$WORK/bios/lab.env")"
uuids=$(cut -f2 "$WORK/uefi/vms.tsv" "$WORK/bios/vms.tsv")
t=$(now)
"$LAB" down --state "$WORK/uefi"
"$LAB" down --state "$WORK/bios"
note "down (both labs): $(since "$t") s"
for p in $prefixes; do
  virsh -q -c qemu:///system list --all --name | grep -q "^$p-" && fail "domains of $p remain"
  virsh -q -c qemu:///system vol-list default | grep -q "$p-" && fail "volumes of $p remain"
  pgrep -f "guest=$p-" >/dev/null && fail "QEMU processes of $p remain"
done
for u in $uuids; do
  virsh -q -c qemu:///system vol-list default | grep -q -- "-$u.img" && fail "media uploaded for $u remain"
done
note "no domain, volume or QEMU process of $prefixes remains"
echo
echo "VMLAB SELFTEST PASSED"
printf '%s\n' "${results[@]}"
