#!/usr/bin/env bash
# Builds an OpenStack ironic-python-agent (IPA) ramdisk: a Debian minbase root (debootstrap from
# the mirror apt uses) with IPA from PyPI in a venv, Debian's generic kernel, and a small /init
# instead of systemd (scripts/ipa-ramdisk/init). Cached: a second run with the same inputs only
# prints. Needs root (debootstrap, chroot); installs the missing host packages it needs.
#
#   scripts/ipa-ramdisk.sh [OUTDIR]
#
# OUTDIR defaults to $FERROMETAL_IPA_CACHE or $REPO_ROOT/.cache/ipa. Prints key=value lines (and
# nothing else on stdout):
#   kernel   vmlinuz: Debian's generic kernel (the package behind linux-image-amd64).
#   initrd   initrd.img: the whole root as a newc cpio, zstd -9 (FERROMETAL_IPA_ZSTD_LEVEL;
#            -19 is ~10 MiB smaller and costs ~70 s more of two cores); the kernel unpacks it and
#            runs /init, which starts udev, takes DHCP leases on every Ethernet NIC and runs
#            ironic-python-agent, its log on the console. IPA's options come from the kernel
#            command line: ipa-api-url=URL (Ironic's API), ipa-insecure=1, ipa-debug=1, ...
#   iso      ipa.iso, BIOS and UEFI (grub-mkrescue), booting the two with
#            "console=tty0 console=ttyS0,115200 $FERROMETAL_IPA_ISO_APPEND". Ironic normally
#            builds its own ISO from kernel and initrd; this one is for manual use.
#
# IPA version: FERROMETAL_IPA_VERSION, default 13.0.0, the release of the same OpenStack series
# as ironic 39.0.0 (scripts/setup-ironic.sh): both went to PyPI on 2026-09-21, as the series'
# pairs before them did (ironic 35.0.0 / IPA 11.5.0 on 2026-03-19, 32.0.0 / 11.2.0 in 2025-09).
# Its dependencies are PyPI's newest wheels for the root's Python, resolved once per version
# (OUTDIR/wheels); FERROMETAL_IPA_CONSTRAINTS names a pip constraints file (e.g. OpenStack's
# upper-constraints of the series) to pin them instead. FERROMETAL_IPA_SUITE picks the Debian
# release of the root (default bookworm; the kernel is the host's candidate, as in
# agent-ramdisk.sh). Drivers kept: scripts/ipa-ramdisk/modules; packages:
# scripts/ipa-ramdisk/packages. No firmware files (Debian's are in non-free-firmware): drivers
# that need them at probe time (bnx2, some Broadcom/QLogic NICs) stay down; ice runs in its
# safe mode.
source "$(dirname "$0")/lib.sh"
exec 3>&1 1>&2 # stdout is for the key=value lines only
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) OUT=$1; shift ;;
  esac
done
OUT=${OUT:-${FERROMETAL_IPA_CACHE:-$REPO_ROOT/.cache/ipa}}
IPA_VERSION=${FERROMETAL_IPA_VERSION:-13.0.0}
SUITE=${FERROMETAL_IPA_SUITE:-bookworm}
CONSTRAINTS=${FERROMETAL_IPA_CONSTRAINTS:-}
SRC="$REPO_ROOT/scripts/ipa-ramdisk"
source "$REPO_ROOT/scripts/debian-boot.sh"
GRUB_MODULES="normal linux search part_gpt part_msdos fat iso9660 echo serial terminal test configfile boot"
CMDLINE="console=tty0 console=ttyS0,115200 ${FERROMETAL_IPA_ISO_APPEND:-}"
ZSTD_LEVEL=${FERROMETAL_IPA_ZSTD_LEVEL:-9}
[ "$(id -u)" -eq 0 ] || { echo "ipa-ramdisk: run as root (debootstrap and chroot need it)" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec 9>"$OUT/.lock"
flock -w 1800 9 || { echo "another ipa-ramdisk.sh holds $OUT/.lock" >&2; exit 1; }
t0=$(date +%s.%N)
say() { echo "ipa-ramdisk: [$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%5.1f", b - a }') s] $*" >&2; }

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v grub-mkrescue >/dev/null || need+=(grub-common)
[ -d /usr/lib/grub/i386-pc ] || need+=(grub-pc-bin)
[ -d /usr/lib/grub/x86_64-efi ] || need+=(grub-efi-amd64-bin)
command -v xorriso >/dev/null || need+=(xorriso)
command -v mformat >/dev/null || need+=(mtools)
command -v depmod >/dev/null || need+=(kmod)
command -v zstd >/dev/null || need+=(zstd)
command -v cpio >/dev/null || need+=(cpio)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# apt_mirror SUITE: the URI apt fetches SUITE from (one-line .list or deb822 .sources).
apt_mirror() {
  { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } |
    awk -v s="$1" '
      function flush() { if (found && uri != "" && !done) { print uri; done = 1 } uri = ""; found = 0 }
      /^[ \t]*#/ { next }
      /^deb[ \t]/ { sub(/\[[^]]*\][ \t]*/, ""); if ($3 == s && !done) { print $2; done = 1 } next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) found = 1 }
      /^[ \t]*$/ { flush() }
      END { flush() }'
}
MIRROR=$(apt_mirror "$SUITE"); MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=$(apt_mirror "$SUITE-security"); SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
# apt's proxy, if it has one, for debootstrap and apt in the chroot (pip uses its own settings).
APT_HTTP_PROXY=""
eval "$(apt-config shell APT_HTTP_PROXY Acquire::http::Proxy)"
if [ -n "$APT_HTTP_PROXY" ] && [ "$APT_HTTP_PROXY" != DIRECT ] && [ -z "${http_proxy:-}" ]; then
  export http_proxy=$APT_HTTP_PROXY
fi

PACKAGES=$(grep -v -e '^#' -e '^$' "$SRC/packages" | tr '\n' ' ')
kpkg=$(kernel_package generic)
[ -n "$kpkg" ] || { apt-get update -qq; kpkg=$(kernel_package generic); }
[ -n "$kpkg" ] || { echo "no kernel package behind $(meta_package generic)" >&2; exit 1; }
# shellcheck disable=SC2086
candidates "$kpkg" $PACKAGES
mkdir -p "$OUT/debs"
kdeb=$(fetch "$kpkg")
for deb in "$OUT/debs"/*.deb; do [ "$deb" = "$kdeb" ] || rm -f "$deb"; done

key=$( {
  echo "ipa=$IPA_VERSION suite=$SUITE mirror=$MIRROR security=$SECURITY kernel=$(basename "$kdeb")"
  echo "cmdline=$CMDLINE modules=$GRUB_MODULES zstd=$ZSTD_LEVEL"
  echo "$policy"
  [ -z "$CONSTRAINTS" ] || cat "$CONSTRAINTS"
  dpkg-query -W grub-common grub-pc-bin grub-efi-amd64-bin xorriso
  cat "$0" "$REPO_ROOT/scripts/debian-boot.sh" "$SRC"/*
} | sha256sum | cut -d' ' -f1)

print() {
  echo "kernel=$OUT/vmlinuz" >&3
  echo "initrd=$OUT/initrd.img" >&3
  echo "iso=$OUT/ipa.iso" >&3
  echo "esp=$OUT/esp.img" >&3
}
if [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$key" ] && [ -f "$OUT/ipa.iso" ] && [ -f "$OUT/initrd.img" ] &&
  [ -f "$OUT/vmlinuz" ] && [ -f "$OUT/esp.img" ]; then
  echo "ipa-ramdisk: up to date in $OUT" >&2
  print
  exit 0
fi

B="$OUT/build"
R="$B/root"
in_root() { chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive ${http_proxy:+http_proxy=$http_proxy} "$@"; }
unmount_root() {
  local m
  for m in "$R/tmp/wheels" "$R/dev/pts" "$R/proc" "$R/sys"; do
    ! mountpoint -q "$m" 2>/dev/null || umount -l "$m"
  done
}
trap unmount_root EXIT
if [ -d "$R" ]; then unmount_root; fi
rm -rf "$B" "$OUT/stamp"
mkdir -p "$B"

# 1. The root: minbase, then the packages from the suite, its updates and security updates.
say "debootstrap $SUITE from $MIRROR"
debootstrap --variant=minbase --arch=amd64 --components=main "$SUITE" "$R" "$MIRROR" >"$B/debootstrap.log" 2>&1 ||
  { tail -n 30 "$B/debootstrap.log" >&2; exit 1; }
cat >"$R/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY $SUITE-security main
EOF
# Nothing starts services in the root; dpkg leaves out documentation (copyrights stay).
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
chmod 0755 "$R/usr/sbin/policy-rc.d"
cat >"$R/etc/dpkg/dpkg.cfg.d/ipa-ramdisk" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-exclude=/usr/share/lintian/*
EOF
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
mount -t proc proc "$R/proc"
mount -t sysfs sysfs "$R/sys"
mount -t devpts devpts "$R/dev/pts"
say "installing $(wc -w <<<"$PACKAGES") packages"
{
  in_root apt-get update -q &&
  in_root apt-get -y -q -o Dpkg::Options::=--force-confold upgrade &&
  # shellcheck disable=SC2086
  in_root apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold $PACKAGES
} >"$B/apt.log" 2>&1 || { tail -n 30 "$B/apt.log" >&2; exit 1; }
in_root apt-get clean

# 2. IPA's wheels, downloaded on the host (pip cannot reach PyPI from the root) for the root's
# Python, once per version; then a venv in the root from them alone.
PYVER=$(in_root python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
W="$OUT/wheels"
want="ironic-python-agent==$IPA_VERSION python=$PYVER constraints=$([ -z "$CONSTRAINTS" ] || sha256sum <"$CONSTRAINTS" | cut -c1-16)"
if [ "$(cat "$W/.for" 2>/dev/null)" != "$want" ]; then
  say "downloading wheels for $want"
  rm -rf "$W"
  mkdir -p "$W"
  pipargs=(--disable-pip-version-check -q --dest "$W")
  [ -z "$CONSTRAINTS" ] || pipargs+=(-c "$CONSTRAINTS")
  if ! /usr/bin/python3 -m pip download "${pipargs[@]}" --only-binary=:all: --python-version "$PYVER" \
    --implementation cp --abi "cp${PYVER/./}" --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any \
    "ironic-python-agent==$IPA_VERSION" >"$B/pip.log" 2>&1; then
    # Some dependency has no wheel: build wheels with the host's Python when it is the root's.
    hostver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [ "$hostver" = "$PYVER" ] || { cat "$B/pip.log" >&2; echo "ipa-ramdisk: no wheels for all of IPA's dependencies, and the host's Python ($hostver) cannot build them for the root's ($PYVER)" >&2; exit 1; }
    say "some dependency has no wheel; building wheels with /usr/bin/python3"
    rm -rf "$W"; mkdir -p "$W"
    /usr/bin/python3 -m pip wheel --disable-pip-version-check -q --wheel-dir "$W" \
      ${CONSTRAINTS:+-c "$CONSTRAINTS"} "ironic-python-agent==$IPA_VERSION" >>"$B/pip.log" 2>&1 ||
      { tail -n 30 "$B/pip.log" >&2; exit 1; }
  fi
  echo "$want" >"$W/.for"
fi
say "installing ironic-python-agent $IPA_VERSION ($(ls "$W"/*.whl | wc -l) wheels) into /opt/ipa"
mkdir -p "$R/tmp/wheels"
mount --bind -o ro "$W" "$R/tmp/wheels"
{
  in_root python3 -m venv /opt/ipa &&
  in_root /opt/ipa/bin/pip install --disable-pip-version-check --no-cache-dir --no-index \
    --find-links /tmp/wheels "ironic-python-agent==$IPA_VERSION" &&
  in_root /opt/ipa/bin/pip uninstall -y -q pip
} >"$B/venv.log" 2>&1 || { tail -n 30 "$B/venv.log" >&2; exit 1; }
umount "$R/tmp/wheels"
rmdir "$R/tmp/wheels"

# 3. Kernel modules: those listed in SRC/modules and their dependencies.
say "kernel $kpkg"
K="$B/kernel"
dpkg-deb -x "$kdeb" "$K"
kver=$(ls "$K/lib/modules")
cp "$K/boot/vmlinuz-$kver" "$B/vmlinuz"
M="$K/lib/modules/$kver"
D="$R/usr/lib/modules/$kver"
depmod -b "$K" "$kver"
mkdir -p "$D"
for m in $(grep -v -e '^#' -e '^$' "$SRC/modules"); do
  # modules.dep: "kernel/…/NAME.ko: DEP.ko …"; '-' and '_' are the same in module names.
  pat=$(echo "$m" | sed 's/[-_]/[-_]/g')
  line=$(grep -E "(^|/)$pat\.ko(\.[a-z]+)?:" "$M/modules.dep" || true)
  if [ -z "$line" ]; then
    grep -qE "(^|/)$pat\.ko" "$M/modules.builtin" || echo "ipa-ramdisk: module $m is not in $kpkg (skipped)" >&2
    continue
  fi
  for f in $(echo "$line" | tr -d ':'); do
    [ -f "$D/$f" ] && continue
    mkdir -p "$D/$(dirname "$f")"
    cp "$M/$f" "$D/$f"
  done
done
cp "$M/modules.builtin" "$M/modules.order" "$D/"
[ ! -f "$M/modules.builtin.modinfo" ] || cp "$M/modules.builtin.modinfo" "$D/"
depmod -b "$R" "$kver"
rm -rf "$K"

# 4. Runtime files, then trimming: what neither IPA nor its tools need at run time.
install -m 0755 "$SRC/init" "$R/init"
mkdir -p "$R/etc/ipa-ramdisk"
install -m 0755 "$SRC/udhcpc.script" "$R/etc/ipa-ramdisk/udhcpc.script"
cp "$SRC/modules-load" "$R/etc/ipa-ramdisk/modules-load"
echo "$IPA_VERSION" >"$R/etc/ipa-ramdisk/version"
echo ipa-ramdisk >"$R/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$R/etc/hosts"
: >"$R/etc/resolv.conf"
: >"$R/etc/fstab"
ln -sfn ../proc/self/mounts "$R/etc/mtab"
rm -f "$R/etc/machine-id" "$R/var/lib/dbus/machine-id" "$R/usr/sbin/policy-rc.d" "$R/etc/dpkg/dpkg.cfg.d/ipa-ramdisk"
unmount_root
du -sm "$R" | awk '{print "ipa-ramdisk: root before trimming: " $1 " MiB"}' >&2
rm -rf "$R"/usr/share/{man,info,locale,lintian,bash-completion,bug,menu,python-wheels,zsh,fish}
find "$R/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
find "$R/usr/share/doc" -depth -type d -empty -delete 2>/dev/null || true
rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/* "$R"/var/cache/debconf/*-old "$R"/var/cache/ldconfig/* \
  "$R"/var/log/* "$R"/root/.cache "$R"/tmp/* "$R"/var/tmp/*
# Package management (apt, perl for debconf: nothing installs packages at run time; dpkg -l
# still works), qemu-utils' tools other than qemu-img, udev's hwdb sources (hwdb.bin stays),
# iconv modules but the Unicode ones.
rm -rf "$R"/usr/bin/apt* "$R"/usr/lib/apt "$R"/usr/lib/x86_64-linux-gnu/libapt-* "$R"/etc/apt \
  "$R"/var/lib/apt "$R"/var/cache/apt "$R"/usr/bin/perl* "$R"/usr/lib/x86_64-linux-gnu/perl-base \
  "$R"/usr/share/perl5 "$R"/usr/bin/qemu-nbd "$R"/usr/bin/qemu-io "$R"/usr/bin/qemu-storage-daemon \
  "$R"/usr/lib/udev/hwdb.d "$R"/var/lib/dpkg/*-old
[ ! -d "$R/usr/lib/x86_64-linux-gnu/gconv" ] ||
  find "$R/usr/lib/x86_64-linux-gnu/gconv" -name '*.so' ! -name 'UTF-*' ! -name 'UNICODE.so' -delete
# Python: the agent's and its dependencies' tests, what only installs or builds packages.
py="$R/usr/lib/python$PYVER"
rm -rf "$py"/{ensurepip,lib2to3,pydoc_data,idlelib,turtledemo,test} "$py"/config-*
sp=$(echo "$R"/opt/ipa/lib/python*/site-packages)
rm -rf "$sp/ironic_python_agent/tests" "$sp"/*/tests "$sp"/*/testsuite "$sp"/pip "$sp"/pip-*
find "$R/opt/ipa" "$py" -name '*.pyi' -delete
# Bytecode up front: the VMs emulate their CPUs, where compiling at every import is slow.
chroot "$R" /usr/bin/python3 -m compileall -q -j 2 /opt/ipa/lib /usr/lib/python3/dist-packages "/usr/lib/python$PYVER" \
  >/dev/null 2>&1 || true
du -sm "$R" | awk '{print "ipa-ramdisk: root after trimming: " $1 " MiB"}' >&2

# 5. initrd.img (newc cpio, zstd) and the ISO.
say "initrd.img (zstd -$ZSTD_LEVEL)"
(cd "$R" && find . -xdev | LC_ALL=C sort | cpio -o -H newc --quiet) >"$B/initrd.cpio"
raw=$(stat -c %s "$B/initrd.cpio")
nice -n 10 zstd -q -T0 "-$ZSTD_LEVEL" --rm "$B/initrd.cpio" -o "$B/initrd.img"
say "ipa.iso"
I="$B/iso"
mkdir -p "$I/boot/grub"
cp "$B/vmlinuz" "$I/boot/vmlinuz"
cp "$B/initrd.img" "$I/boot/initrd.img"
cat >"$I/boot/grub/grub.cfg" <<CFG
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=3
menuentry "ironic-python-agent $IPA_VERSION" {
  linux /boot/vmlinuz $CMDLINE
  initrd /boot/initrd.img
}
CFG
grub-mkrescue -o "$B/ipa.iso" --install-modules="$GRUB_MODULES" --fonts= --locales= --themes= \
  --compress=xz "$I" -- -volid IPARAMDISK >"$B/mkrescue.log" 2>&1 || { cat "$B/mkrescue.log" >&2; exit 1; }

# esp.img: an EFI system partition image with GRUB, which Ironic embeds in the ISOs it builds
# for UEFI machines (the node's driver_info `bootloader`, serve's --deploy-bootloader-url).
# Ironic writes its boot menu to EFI/BOOT/grub.cfg on the ISO (its grub_config_path); this
# GRUB finds that file on whatever device holds it and loads it.
say "esp.img"
cat >"$B/esp-early.cfg" <<'CFG'
search --no-floppy --file --set=root /EFI/BOOT/grub.cfg
set prefix=($root)/EFI/BOOT
configfile ($root)/EFI/BOOT/grub.cfg
CFG
grub-mkimage -O x86_64-efi -o "$B/BOOTX64.EFI" -c "$B/esp-early.cfg" -p /EFI/BOOT \
  normal linux search search_fs_file part_gpt part_msdos fat iso9660 echo serial terminal test \
  configfile boot efi_gop all_video
truncate -s 4M "$B/esp.img"
mformat -i "$B/esp.img" -v ESP ::
mmd -i "$B/esp.img" ::/EFI ::/EFI/BOOT
mcopy -i "$B/esp.img" "$B/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI

mv "$B/ipa.iso" "$B/vmlinuz" "$B/initrd.img" "$B/esp.img" "$OUT/"
rm -rf "$B"
echo "$key" >"$OUT/stamp"
say "built: IPA $IPA_VERSION, $kpkg, initrd $(du -m "$OUT/initrd.img" | cut -f1) MiB ($((raw / 1048576)) MiB uncompressed), ISO $(du -m "$OUT/ipa.iso" | cut -f1) MiB"
print
