#!/usr/bin/env bash
# Builds ferrometal's deploy agent ramdisk from Debian packages (the generic kernel unpacked from
# linux-image-amd64, busybox-static, mdadm) and the ferrometal-agent binary, cached: a second run with
# the same inputs only prints.
#
#   scripts/agent-ramdisk.sh [OUTDIR] [--agent PATH]
#
# OUTDIR defaults to $FERROMETAL_RAMDISK_CACHE or $REPO_ROOT/.cache/ramdisk. Without --agent it
# builds the agent (`cargo build --release -p ferrometal-agent`). Prints key=value lines:
#   kernel, initrd   vmlinuz and initrd.img: busybox, the agent and mdadm with the shared
#                    libraries they link (ldd), the CA bundle of this machine (for HTTPS image URLs), and the
#                    storage/NIC/md drivers in scripts/agent-ramdisk/modules.
#   iso              agent.iso, BIOS and UEFI (grub-mkrescue), whose grub loads
#                    /boot/initrd.img and /boot/config.img: ferrometal replaces config.img (an
#                    empty cpio here) with each boot's configuration (`serve --agent-ramdisk`).
source "$(dirname "$0")/lib.sh"
OUT="" AGENT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --agent) AGENT=$2; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) OUT=$1; shift ;;
  esac
done
OUT=${OUT:-${FERROMETAL_RAMDISK_CACHE:-$REPO_ROOT/.cache/ramdisk}}
SRC="$REPO_ROOT/scripts/agent-ramdisk"
source "$REPO_ROOT/scripts/debian-boot.sh"
GRUB_MODULES="normal linux search part_gpt part_msdos fat iso9660 echo serial terminal test configfile boot"
CMDLINE="console=tty0 console=ttyS0,115200 panic=30"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec 9>"$OUT/.lock"
flock -w 900 9 || { echo "another agent-ramdisk.sh holds $OUT/.lock" >&2; exit 1; }
t0=$(date +%s.%N)

if [ -z "$AGENT" ]; then
  (cd "$REPO_ROOT" && cargo build --release -q -p ferrometal-agent)
  AGENT="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/ferrometal-agent"
fi
[ -x "$AGENT" ] || { echo "no agent binary at $AGENT" >&2; exit 1; }

need=()
command -v grub-mkrescue >/dev/null || need+=(grub-common)
[ -d /usr/lib/grub/i386-pc ] || need+=(grub-pc-bin)
[ -d /usr/lib/grub/x86_64-efi ] || need+=(grub-efi-amd64-bin)
command -v xorriso >/dev/null || need+=(xorriso)
command -v mformat >/dev/null || need+=(mtools)
command -v depmod >/dev/null || need+=(kmod)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
# mdadm's one library beyond libc (Debian's mdadm package is unpacked, not installed).
ldconfig -p | grep -q 'libudev\.so\.1 ' || need+=(libudev1)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "missing ${need[*]}: run as root or install them" >&2; exit 1; }
  echo "agent-ramdisk: installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

kpkg=$(kernel_package generic)
[ -n "$kpkg" ] || { apt-get update -qq; kpkg=$(kernel_package generic); }
[ -n "$kpkg" ] || { echo "no kernel package behind $(meta_package generic)" >&2; exit 1; }
candidates "$kpkg" busybox-static mdadm
mkdir -p "$OUT/debs"
kdeb=$(fetch "$kpkg")
bdeb=$(fetch busybox-static)
mdeb=$(fetch mdadm)
for deb in "$OUT/debs"/*.deb; do
  [ "$deb" = "$kdeb" ] || [ "$deb" = "$bdeb" ] || [ "$deb" = "$mdeb" ] || rm -f "$deb"
done

key=$( {
  echo "kernel=$(basename "$kdeb") busybox=$(basename "$bdeb") mdadm=$(basename "$mdeb") cmdline=$CMDLINE modules=$GRUB_MODULES"
  sha256sum "$AGENT" /etc/ssl/certs/ca-certificates.crt | cut -d' ' -f1
  dpkg-query -W grub-common grub-pc-bin grub-efi-amd64-bin xorriso
  cat "$0" "$REPO_ROOT/scripts/debian-boot.sh" "$SRC"/*
} | sha256sum | cut -d' ' -f1)

print() {
  echo "kernel=$OUT/vmlinuz"
  echo "initrd=$OUT/initrd.img"
  echo "iso=$OUT/agent.iso"
}
if [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$key" ] && [ -f "$OUT/agent.iso" ] && [ -f "$OUT/initrd.img" ]; then
  echo "agent-ramdisk: up to date in $OUT" >&2
  print
  exit 0
fi

B="$OUT/build"
rm -rf "$B" "$OUT/stamp"
mkdir -p "$B"
dpkg-deb -x "$bdeb" "$B/busybox"
dpkg-deb -x "$mdeb" "$B/mdadm"

# The agent and mdadm (software RAID), the libraries they link and the loader, at their own
# paths; the CA bundle.
initramfs_extra() {
  local R=$1 lib
  mkdir -p "$R/usr/bin" "$R/sbin" "$R/etc/ssl/certs" "$R/etc/ferrometal-agent"
  install -m 0755 "$AGENT" "$R/usr/bin/ferrometal-agent"
  install -m 0755 "$B/mdadm/sbin/mdadm" "$R/sbin/mdadm"
  if (ldd "$AGENT"; ldd "$B/mdadm/sbin/mdadm") | grep 'not found' >&2; then
    echo "agent-ramdisk: a library the agent or mdadm links is missing here" >&2
    exit 1
  fi
  for lib in $( (ldd "$AGENT"; ldd "$B/mdadm/sbin/mdadm") | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u); do
    mkdir -p "$R$(dirname "$lib")"
    cp -L "$lib" "$R$lib"
  done
  cp -L /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/"
}
initramfs "$kdeb" "$B/ramdisk"

I="$B/iso"
mkdir -p "$I/boot/grub"
cp "$B/ramdisk/vmlinuz" "$I/boot/vmlinuz"
cp "$B/ramdisk/initrd.img" "$I/boot/initrd.img"
# An empty newc archive (just its trailer) until a boot's configuration replaces it.
(cd "$B" && : | "$B/busybox/bin/busybox" cpio -o -H newc 2>/dev/null) >"$I/boot/config.img"
cat >"$I/boot/grub/grub.cfg" <<CFG
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=0
menuentry "ferrometal deploy agent" {
  linux /boot/vmlinuz $CMDLINE
  initrd /boot/initrd.img /boot/config.img
}
CFG
grub-mkrescue -o "$B/agent.iso" --install-modules="$GRUB_MODULES" --fonts= --locales= --themes= \
  --compress=xz "$I" -- -volid FMAGENT >"$B/mkrescue.log" 2>&1 || { cat "$B/mkrescue.log" >&2; exit 1; }

mv "$B/agent.iso" "$B/ramdisk/vmlinuz" "$B/ramdisk/initrd.img" "$OUT/"
rm -rf "$B"
echo "$key" >"$OUT/stamp"
echo "agent-ramdisk: built in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s ($kpkg, $(basename "$bdeb"), $(du -h "$OUT/agent.iso" | cut -f1) ISO)" >&2
print
