#!/usr/bin/env bash
# Installs the Debian packages the tests need: OpenIPMI's ipmi_sim, ipmitool, htpasswd
# (bcrypt entries for sushy-tools' auth file), kubectl, wrk for the emulator benchmark, a C++
# compiler (libFuzzer, and the C of aws-lc-rs and mimalloc, all built at compile time), and for
# the deploy agent's media and its tests xorriso (boot ISOs, config drives), cpio and sgdisk;
# for Ironic's ISOs genisoimage and isolinux; the web console's browser tests headless
# Chromium and its WebDriver; libvirt's client library (the libvirt HostClass provider loads it).
set -euo pipefail
need=()
command -v ipmi_sim >/dev/null || need+=(openipmi)
command -v ipmitool >/dev/null || need+=(ipmitool)
command -v htpasswd >/dev/null || need+=(apache2-utils)
command -v kubectl >/dev/null || need+=(kubernetes-client)
command -v wrk >/dev/null || need+=(wrk)
command -v xorriso >/dev/null || need+=(xorriso)
command -v cpio >/dev/null || need+=(cpio)
command -v sgdisk >/dev/null || need+=(gdisk)
# What Ironic runs to build the virtual-media ISOs that boot its agent ramdisk: mkisofs, and
# isolinux for BIOS machines.
command -v mkisofs >/dev/null || need+=(genisoimage)
[ -f /usr/lib/ISOLINUX/isolinux.bin ] || need+=(isolinux)
[ -f /usr/lib/syslinux/modules/bios/ldlinux.c32 ] || need+=(syslinux-common)
# The web console's tests drive a real browser.
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
# Certificates of the tests' HTTPS image server.
command -v openssl >/dev/null || need+=(openssl)
# libFuzzer (fuzz/, through libfuzzer-sys) is C++ and aws-lc-rs and mimalloc are C, built at
# compile time; g++ brings gcc.
command -v c++ >/dev/null || need+=(g++)
# The libvirt host-class provider loads libvirt's client library at run time (its tests use
# libvirt's in-process test driver); building needs nothing of libvirt.
ldconfig -p | grep -q 'libvirt\.so\.0 ' || need+=(libvirt0)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
