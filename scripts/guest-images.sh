#!/usr/bin/env bash
# Builds ferrometal's test guest images from Debian packages only (a kernel unpacked from
# linux-image-*, busybox-static, grub), cached: a second run with the same inputs only prints.
#
#   scripts/guest-images.sh [OUTDIR]      (default $FERROMETAL_GUEST_CACHE or $REPO_ROOT/.cache/guest)
#
# Prints key=value lines (paths in OUTDIR):
#   live_iso     live.iso: boots on BIOS and UEFI (grub-mkrescue); its init prints
#                "FERROMETAL-LIVE-ISO booted {"uuid":…,"boot":…,"macs":[…]}" on ttyS0.
#   disk_raw     disk.raw and disk_qcow2 disk.qcow2: one GPT disk for BIOS and UEFI (a BIOS boot
#                partition with grub's core.img, an ESP labelled FMBOOT with grub's
#                BOOTX64.EFI, the kernel and the initramfs); its init does cloud-init's
#                essentials and prints "FERROMETAL-FIRSTBOOT {…}" (see scripts/guest/init).
#   kernel, initrd   the live ISO's kernel and initramfs (for direct kernel boots).
#
# Kernels: the live ISO boots Debian's cloud kernel (linux-image-cloud-amd64: LZ4, few drivers;
# ~3 s faster to the marker under TCG than the generic one), the disk image the generic kernel
# (linux-image-amd64), because the cloud kernel has no AHCI driver and so cannot read a config
# drive on q35's SATA CD-ROM, the virtual-media drive. FERROMETAL_GUEST_KERNEL_LIVE and
# FERROMETAL_GUEST_KERNEL_DISK (or FERROMETAL_GUEST_KERNEL for both) take `cloud` or `generic`.
# scripts/config-drive.sh makes config drives for the disk image.
source "$(dirname "$0")/lib.sh"
OUT=${1:-${FERROMETAL_GUEST_CACHE:-$REPO_ROOT/.cache/guest}}
LIVE_KERNEL=${FERROMETAL_GUEST_KERNEL_LIVE:-${FERROMETAL_GUEST_KERNEL:-cloud}}
DISK_KERNEL=${FERROMETAL_GUEST_KERNEL_DISK:-${FERROMETAL_GUEST_KERNEL:-generic}}
SRC="$REPO_ROOT/scripts/guest"
source "$REPO_ROOT/scripts/debian-boot.sh"
GRUB_MODULES="normal linux search search_label part_gpt part_msdos fat iso9660 echo serial terminal test configfile boot"
CMDLINE="console=ttyS0,115200 panic=30"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec 9>"$OUT/.lock"
flock -w 900 9 || { echo "another guest-images.sh holds $OUT/.lock" >&2; exit 1; }
t0=$(date +%s.%N)

meta_package "$LIVE_KERNEL" >/dev/null
meta_package "$DISK_KERNEL" >/dev/null

# --- tools (Debian packages; installed once) ---
need=()
command -v grub-mkimage >/dev/null || need+=(grub-common)
[ -f /usr/lib/grub/i386-pc/boot.img ] || need+=(grub-pc-bin)
[ -d /usr/lib/grub/x86_64-efi ] || need+=(grub-efi-amd64-bin)
command -v xorriso >/dev/null || need+=(xorriso)
command -v mcopy >/dev/null || need+=(mtools)
command -v mkfs.vfat >/dev/null || need+=(dosfstools)
command -v sgdisk >/dev/null || need+=(gdisk)
command -v depmod >/dev/null || need+=(kmod)
if ! command -v qemu-img >/dev/null; then
  # qemu-utils at the very version of an installed qemu-system-x86 (see vmlab.sh).
  v=$(dpkg-query -W -f '${Version}' qemu-system-x86 2>/dev/null || true)
  need+=("qemu-utils${v:+=$v}")
fi
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "missing ${need[*]}: run as root or install them" >&2; exit 1; }
  echo "guest-images: installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades "${need[@]}" >/dev/null
fi

# --- the packages the guests are made of ---
live_kpkg=$(kernel_package "$LIVE_KERNEL")
disk_kpkg=$(kernel_package "$DISK_KERNEL")
if [ -z "$live_kpkg" ] || [ -z "$disk_kpkg" ]; then
  apt-get update -qq
  live_kpkg=$(kernel_package "$LIVE_KERNEL")
  disk_kpkg=$(kernel_package "$DISK_KERNEL")
fi
[ -n "$live_kpkg" ] && [ -n "$disk_kpkg" ] || { echo "no kernel package behind $(meta_package "$LIVE_KERNEL") or $(meta_package "$DISK_KERNEL")" >&2; exit 1; }
candidates "$live_kpkg" "$disk_kpkg" busybox-static
mkdir -p "$OUT/debs"
live_kdeb=$(fetch "$live_kpkg")
disk_kdeb=$(fetch "$disk_kpkg")
bdeb=$(fetch busybox-static)
# Packages of earlier kernels (another ABI, another name) are not needed any more.
for deb in "$OUT/debs"/*.deb; do
  [ "$deb" = "$live_kdeb" ] || [ "$deb" = "$disk_kdeb" ] || [ "$deb" = "$bdeb" ] || rm -f "$deb"
done

key=$( {
  echo "live=$(basename "$live_kdeb") disk=$(basename "$disk_kdeb") busybox=$(basename "$bdeb") cmdline=$CMDLINE modules=$GRUB_MODULES"
  dpkg-query -W grub-common grub-pc-bin grub-efi-amd64-bin xorriso
  cat "$0" "$REPO_ROOT/scripts/debian-boot.sh" "$SRC"/*
} | sha256sum | cut -d' ' -f1)

print() {
  echo "live_iso=$OUT/live.iso"
  echo "disk_raw=$OUT/disk.raw"
  echo "disk_qcow2=$OUT/disk.qcow2"
  echo "kernel=$OUT/vmlinuz"
  echo "initrd=$OUT/initrd.img"
}
if [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$key" ] &&
  [ -f "$OUT/live.iso" ] && [ -f "$OUT/disk.raw" ] && [ -f "$OUT/disk.qcow2" ]; then
  echo "guest-images: up to date in $OUT" >&2
  print
  exit 0
fi

B="$OUT/build"
rm -rf "$B" "$OUT/stamp"
mkdir -p "$B"
dpkg-deb -x "$bdeb" "$B/busybox"

initramfs "$live_kdeb" "$B/live"
if [ "$disk_kdeb" = "$live_kdeb" ]; then
  cp -r "$B/live" "$B/disk"
else
  initramfs "$disk_kdeb" "$B/disk"
fi

grub_cfg() { # MODE
  cat <<CFG
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=0
menuentry "ferrometal test guest ($1)" {
  linux /boot/vmlinuz $CMDLINE fm.mode=$1
  initrd /boot/initrd.img
}
CFG
}

# --- live ISO (BIOS and UEFI) ---
I="$B/iso"
mkdir -p "$I/boot/grub"
cp "$B/live/vmlinuz" "$I/boot/vmlinuz"
cp "$B/live/initrd.img" "$I/boot/initrd.img"
grub_cfg live >"$I/boot/grub/grub.cfg"
grub-mkrescue -o "$B/live.iso" --install-modules="$GRUB_MODULES" --fonts= --locales= --themes= \
  --compress=xz "$I" -- -volid FMLIVE >"$B/mkrescue.log" 2>&1 || { cat "$B/mkrescue.log" >&2; exit 1; }

# --- disk image: GPT, BIOS boot partition (grub core.img) + ESP (grub EFI, kernel, initramfs) ---
cat >"$B/early.cfg" <<'CFG'
search --no-floppy --label FMBOOT --set=root
set prefix=($root)/boot/grub
CFG
grub-mkimage -O x86_64-efi -o "$B/BOOTX64.EFI" -c "$B/early.cfg" -p /boot/grub $GRUB_MODULES
grub-mkimage -O i386-pc -o "$B/core.img" -c "$B/early.cfg" -p /boot/grub biosdisk $GRUB_MODULES
core_sectors=$(( ($(stat -c %s "$B/core.img") + 511) / 512 ))
[ "$core_sectors" -le 2048 ] || { echo "core.img is larger than the 1 MiB BIOS boot partition" >&2; exit 1; }
content=$(du -ck "$B/disk/vmlinuz" "$B/disk/initrd.img" "$B/BOOTX64.EFI" | tail -1 | cut -f1)
esp_mib=$(( content / 1024 * 11 / 10 + 4 ))
export MTOOLS_SKIP_CHECK=1
mkfs.vfat -C -n FMBOOT "$B/esp.img" $((esp_mib * 1024)) >/dev/null
mmd -i "$B/esp.img" ::/EFI ::/EFI/BOOT ::/boot ::/boot/grub
mcopy -i "$B/esp.img" "$B/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
mcopy -i "$B/esp.img" "$B/disk/vmlinuz" "$B/disk/initrd.img" ::/boot/
grub_cfg firstboot >"$B/grub.cfg"
mcopy -i "$B/esp.img" "$B/grub.cfg" ::/boot/grub/grub.cfg
# 1 MiB (GPT, alignment) + 1 MiB BIOS boot + ESP + 1 MiB (backup GPT).
disk="$B/disk.raw"
truncate -s $(( (esp_mib + 3) * 1024 * 1024 )) "$disk"
# (sgdisk -q on a blank file exits 0 and writes nothing: no -q.)
sgdisk -o -a 2048 -n 1:2048:4095 -t 1:EF02 -c 1:bios-boot -n 2:4096:+${esp_mib}M -t 2:EF00 -c 2:esp "$disk" >/dev/null
[ "$(sgdisk -p "$disk" | grep -c ' EF0[02] ')" = 2 ] || { echo "sgdisk did not partition $disk" >&2; exit 1; }
dd if="$B/esp.img" of="$disk" bs=512 seek=4096 conv=notrunc status=none
# le64 N: N as 8 little-endian bytes.
le64() { local n=$1 i; for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (n >> (8 * i)) & 255 )))"; done; }
# What grub-bios-setup does: boot.img's code (not the partition table) into the MBR, pointing
# at core.img's first sector (offset 0x5c); core.img's first sector (diskboot) reads the rest,
# from the blocklist at its end (start sector at offset 0x1f4; the length is set by
# grub-mkimage); no drive check jump (0x66) for a hard disk.
dd if=/usr/lib/grub/i386-pc/boot.img of="$disk" bs=440 count=1 conv=notrunc status=none
le64 2048 | dd of="$disk" bs=1 seek=$((0x5c)) conv=notrunc status=none
printf '\x90\x90' | dd of="$disk" bs=1 seek=$((0x66)) conv=notrunc status=none
le64 2049 | dd of="$B/core.img" bs=1 seek=$((0x1f4)) conv=notrunc status=none
dd if="$B/core.img" of="$disk" bs=512 seek=2048 conv=notrunc status=none
qemu-img convert -c -f raw -O qcow2 "$disk" "$B/disk.qcow2"

mv "$B/live.iso" "$B/disk.qcow2" "$B/disk.raw" "$B/live/vmlinuz" "$B/live/initrd.img" "$OUT/"
rm -rf "$B"
echo "$key" >"$OUT/stamp"
echo "guest-images: built in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s (live: $live_kpkg, disk: $disk_kpkg, $(basename "$bdeb"))" >&2
print
