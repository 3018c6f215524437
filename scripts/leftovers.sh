#!/usr/bin/env bash
# leftovers.sh NAME=VALUE: lists (and then kills) every process whose environment holds
# NAME=VALUE, other than this script and its parent; exits 1 if there were any. test.sh marks
# every process the tests start this way, so anything found outlived its test.
#
# Virtual machines are checked too (scripts/vmlab.sh): their QEMU processes are started by
# libvirtd, not by the tests, and never carry the mark, so vmlab.sh records the run's
# FERROMETAL_TEST_RUN value in each domain's metadata. Domains named fmlab-* recorded for this
# run (and their QEMU processes) are leftovers: reported, destroyed and undefined with their
# volumes. fmlab-* domains of other runs or of no run, and QEMU processes of fmlab-* guests that
# libvirt no longer knows, are only listed.
set -uo pipefail
mark=${1:?usage: leftovers.sh NAME=VALUE}
URI=qemu:///system
META_NS=urn:ferrometal:vmlab

# run_domains: the fmlab-* domains whose metadata records this run (when the mark is the run's).
run_domains() {
  [ "${mark%%=*}" = FERROMETAL_TEST_RUN ] || return 0
  command -v virsh >/dev/null && pgrep -x libvirtd >/dev/null || return 0
  local d run
  for d in $(virsh -q -c "$URI" list --all --name 2>/dev/null | grep '^fmlab-'); do
    run=$(virsh -q -c "$URI" metadata "$d" "$META_NS" 2>/dev/null | sed -n "s/.* run=[\"']\([^\"']*\)[\"'].*/\1/p")
    [ -n "$run" ] && [ "$run" = "${mark#*=}" ] && echo "$d"
  done
}

# qemu_guests: "PID NAME" for every QEMU process of an fmlab-* guest.
qemu_guests() {
  local pid name
  for pid in $(pgrep -f '^[^ ]*qemu-system' 2>/dev/null); do
    name=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 's/^guest=\(fmlab-[^,]*\).*/\1/p')
    [ -n "$name" ] && echo "$pid $name"
  done
}

found=()
domains=""
# Processes still shutting down get a moment (a test's Drop may have just signalled them, or
# vmlab's owner-watch may be taking a lab down).
for _ in $(seq 20); do
  found=()
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}; pid=${pid%/environ}
    [ "$pid" = "$$" ] || [ "$pid" = "$PPID" ] && continue
    if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qxF "$mark"; then
      found+=("$pid")
    fi
  done
  domains=$(run_domains)
  [ ${#found[@]} -eq 0 ] && [ -z "$domains" ] && break
  sleep 0.5
done

status=0
if [ ${#found[@]} -gt 0 ]; then
  echo "processes started by the tests are still running:" >&2
  for pid in "${found[@]}"; do
    echo "  $pid (parent $(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ')): $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" >&2
  done
  kill -9 "${found[@]}" 2>/dev/null
  status=1
fi

if [ -n "$domains" ]; then
  echo "virtual machines started by the tests are still defined (scripts/vmlab.sh):" >&2
  guests=$(qemu_guests)
  for d in $domains; do
    state=$(virsh -q -c "$URI" domstate "$d" 2>/dev/null)
    pid=$(awk -v d="$d" '$2 == d {print $1}' <<<"$guests")
    echo "  $d ($state${pid:+, qemu pid $pid}; state dir $(virsh -q -c "$URI" metadata "$d" "$META_NS" 2>/dev/null | sed -n "s/.* state=[\"']\([^\"']*\)[\"'].*/\1/p"))" >&2
    uuid=$(virsh -q -c "$URI" domuuid "$d" 2>/dev/null)
    virsh -q -c "$URI" destroy "$d" >/dev/null 2>&1
    virsh -q -c "$URI" undefine --nvram "$d" >/dev/null 2>&1 || virsh -q -c "$URI" undefine "$d" >/dev/null 2>&1
    for vol in $(virsh -q -c "$URI" vol-list default 2>/dev/null | awk '{print $1}'); do
      case "$vol" in
        "$d"-disk*|*"-$uuid.img") virsh -q -c "$URI" vol-delete --pool default "$vol" >/dev/null 2>&1 ;;
      esac
    done
  done
  status=1
fi

# Whatever else carries the lab's prefix: only listed (another run's, a lab made by hand, or a
# QEMU process whose domain libvirt lost).
if command -v virsh >/dev/null && pgrep -x libvirtd >/dev/null; then
  others=$(virsh -q -c "$URI" list --all --name 2>/dev/null | grep '^fmlab-')
  [ -z "$others" ] || echo "note: fmlab-* domains of other runs or labs (left alone): $(echo $others)" >&2
  known=" $(echo $others) "
else
  known=" "
fi
while read -r pid name; do
  [ -n "$pid" ] || continue
  case "$known" in *" $name "*) continue ;; esac
  echo "note: QEMU process $pid runs $name, which libvirt does not know (left alone)" >&2
done <<<"$(qemu_guests)"
exit "$status"
