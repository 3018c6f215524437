#!/usr/bin/env bash
# Makes a config drive (an ISO 9660 image) for the disk image of scripts/guest-images.sh, or for
# any cloud-init guest.
#
#   scripts/config-drive.sh OUT.iso [--nocloud] [--hostname NAME] [--uuid ID]
#                                   [--meta-data FILE] [--user-data FILE] [--network-data FILE]
#
# Default: OpenStack layout, label config-2: openstack/latest/meta_data.json (FILE as given, or
# {"uuid", "hostname", "name"} from --uuid/--hostname), user_data, network_data.json.
# --nocloud: NoCloud layout, label cidata: meta-data (FILE, or instance-id and local-hostname),
# user-data, network-config. Prints the SHA-256 of the user data (what the guest reports).
set -euo pipefail
out=${1:?usage: config-drive.sh OUT.iso [options]}
shift
nocloud=0 hostname="" uuid="" meta="" user="" net=""
while [ $# -gt 0 ]; do
  case "$1" in
    --nocloud) nocloud=1; shift ;;
    --hostname) hostname=$2; shift 2 ;;
    --uuid) uuid=$2; shift 2 ;;
    --meta-data) meta=$2; shift 2 ;;
    --user-data) user=$2; shift 2 ;;
    --network-data) net=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v xorriso >/dev/null || { echo "xorriso missing: run scripts/guest-images.sh (it installs it)" >&2; exit 1; }
[ -n "$uuid" ] || uuid=$(cat /proc/sys/kernel/random/uuid)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
if [ $nocloud = 0 ]; then
  label=config-2
  d="$dir/openstack/latest"
  mkdir -p "$d"
  if [ -n "$meta" ]; then
    cp "$meta" "$d/meta_data.json"
  else
    HN="$hostname" ID="$uuid" python3 -c 'import json, os
m = {"uuid": os.environ["ID"]}
if os.environ["HN"]:
    m["hostname"] = m["name"] = os.environ["HN"]
print(json.dumps(m))' >"$d/meta_data.json"
  fi
  [ -z "$user" ] || cp "$user" "$d/user_data"
  [ -z "$net" ] || cp "$net" "$d/network_data.json"
else
  label=cidata
  if [ -n "$meta" ]; then
    cp "$meta" "$dir/meta-data"
  else
    { echo "instance-id: $uuid"; [ -z "$hostname" ] || echo "local-hostname: $hostname"; } >"$dir/meta-data"
  fi
  [ -z "$user" ] || cp "$user" "$dir/user-data"
  [ -z "$net" ] || cp "$net" "$dir/network-config"
fi
xorriso -as mkisofs -quiet -o "$out" -V "$label" -J -r "$dir" 2>/dev/null
if [ -n "$user" ]; then sha256sum "$user" | cut -d' ' -f1; else echo; fi
