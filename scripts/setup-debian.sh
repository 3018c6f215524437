#!/usr/bin/env bash
# Installs the Debian packages the tests need: OpenIPMI's ipmi_sim, ipmitool, htpasswd
# (bcrypt entries for sushy-tools' auth file), kubectl, wrk for the emulator benchmark, a C++
# compiler (libFuzzer, and the C of aws-lc-rs and mimalloc, all built at compile time), and for
# the deploy agent's media and its tests xorriso (boot ISOs, config drives), cpio and sgdisk.
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
# Certificates of the tests' HTTPS image server.
command -v openssl >/dev/null || need+=(openssl)
# libFuzzer (fuzz/, through libfuzzer-sys) is C++ and aws-lc-rs and mimalloc are C, built at
# compile time; g++ brings gcc.
command -v c++ >/dev/null || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
