# Building boot media from Debian packages: shared by scripts/guest-images.sh (the test guests)
# and scripts/agent-ramdisk.sh (the deploy agent's ramdisk). Source it; do not run it.
# Expects: OUT (the cache directory, debs under OUT/debs), B (the build directory, with Debian's
# busybox unpacked in B/busybox), and `policy` (see `candidates`) before `fetch` is called.

# meta_package FLAVOUR: Debian's package that always depends on the current kernel of FLAVOUR.
meta_package() {
  case "$1" in
    cloud) echo linux-image-cloud-amd64 ;;
    generic) echo linux-image-amd64 ;;
    *) echo "a guest kernel is cloud or generic, not '$1'" >&2; exit 2 ;;
  esac
}
# kernel_package FLAVOUR: linux-image-<abi>-<flavour> behind the meta package.
kernel_package() { apt-cache depends "$(meta_package "$1")" 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}'; }
# candidates PACKAGE…: one `apt-cache policy` call for all (each call costs ~0.4 s); sets `policy`.
candidates() {
  policy=$(apt-cache policy "$@" | awk '/^[^ ]/ {p = $1; sub(/:$/, "", p)} /Candidate:/ {print p, $2}')
}
candidate() { awk -v p="$1" '$1 == p {print $2}' <<<"$policy"; }
# fetch PACKAGE: the path of PACKAGE's .deb at its candidate version, downloaded once.
fetch() {
  local pkg=$1 ver deb
  ver=$(candidate "$pkg")
  [ -n "$ver" ] && [ "$ver" != "(none)" ] || { echo "no candidate for $pkg (apt-get update?)" >&2; return 1; }
  for deb in "$OUT/debs/${pkg}"_*.deb; do
    [ -f "$deb" ] && [ "$(dpkg-deb -f "$deb" Version)" = "$ver" ] && { echo "$deb"; return 0; }
  done
  rm -f "$OUT/debs/${pkg}"_*.deb
  (cd "$OUT/debs" && apt-get download -q "$pkg=$ver" 2>&1 | grep -v -e '^W: Download is performed unsandboxed' -e '^Get:' -e '^Fetched' >&2 || true)
  for deb in "$OUT/debs/${pkg}"_*.deb; do
    [ -f "$deb" ] && { echo "$deb"; return 0; }
  done
  echo "could not download $pkg" >&2
  return 1
}
# initramfs DEB DIR: DIR/vmlinuz and DIR/initrd.img from the kernel package DEB: busybox, SRC's
# init, udhcpc.script and *.awk, the modules listed in SRC/modules and their dependencies, and
# whatever a function `initramfs_extra ROOT`, when defined, adds.
initramfs() {
  local deb=$1 D=$2 kver M R m pat line f
  mkdir -p "$D"
  dpkg-deb -x "$deb" "$D/kernel"
  kver=$(ls "$D/kernel/lib/modules")
  cp "$D/kernel/boot/vmlinuz-$kver" "$D/vmlinuz"
  R="$D/root"
  mkdir -p "$R/bin" "$R/etc" "$R/usr/share/fm" "$R/lib/modules/$kver"
  cp "$B/busybox/bin/busybox" "$R/bin/busybox"
  ln -s busybox "$R/bin/sh"
  install -m 0755 "$SRC/init" "$R/init"
  install -m 0755 "$SRC/udhcpc.script" "$R/etc/udhcpc.script"
  for f in "$SRC"/*.awk; do [ ! -f "$f" ] || cp "$f" "$R/usr/share/fm/"; done
  depmod -b "$D/kernel" "$kver"
  M="$D/kernel/lib/modules/$kver"
  : >"$R/etc/fm-modules"
  for m in $(grep -v -e '^#' -e '^$' "$SRC/modules"); do
    # modules.dep: "kernel/…/NAME.ko: DEP.ko …"; '-' and '_' are the same in module names.
    pat=$(echo "$m" | sed 's/[-_]/[-_]/g')
    line=$(grep -E "(^|/)$pat\.ko(\.[a-z]+)?:" "$M/modules.dep" || true)
    if [ -z "$line" ]; then
      grep -qE "(^|/)$pat\.ko" "$M/modules.builtin" && continue
      echo "$(basename "$0" .sh): module $m is not in $(basename "$deb" | cut -d_ -f1) (skipped)" >&2
      continue
    fi
    echo "$m" >>"$R/etc/fm-modules"
    for f in $(echo "$line" | tr -d ':'); do
      mkdir -p "$R/lib/modules/$kver/$(dirname "$f")"
      cp "$M/$f" "$R/lib/modules/$kver/$f"
    done
  done
  cp "$M/modules.builtin" "$M/modules.order" "$R/lib/modules/$kver/"
  [ ! -f "$M/modules.builtin.modinfo" ] || cp "$M/modules.builtin.modinfo" "$R/lib/modules/$kver/"
  depmod -b "$R" "$kver"
  if declare -F initramfs_extra >/dev/null; then initramfs_extra "$R"; fi
  (cd "$R" && find . | LC_ALL=C sort | "$B/busybox/bin/busybox" cpio -o -H newc 2>/dev/null) | gzip -9n >"$D/initrd.img"
  rm -rf "$D/kernel" "$R"
}
