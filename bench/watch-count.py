#!/usr/bin/env python3
"""Count the object changes a bench run makes, per kind, from watches on its serve.

Usage (two shells, or the first in the background):
    python3 bench/watch-count.py record SECONDS OUT    # start just before the bench
    cargo run --release -p ferrometal-bench -- scale --hosts 300 --via-claims ...
    python3 bench/watch-count.py count OUT HOSTS       # the HostClaim phase, per host

`record` waits for the next bench scratch directory's kubeconfig, then runs one
`kubectl get KIND -A --watch-only --output-watch-events` per kind for SECONDS and writes a line
per change: time, kind, event type, namespace, name, resourceVersion. `count` prints the changes
per kind and type in the window from the first HostClaim added to the last change of one.
The bench's own "store writes" is the growth of the resourceVersion, which Events take too.
"""

import collections
import glob
import os
import subprocess
import sys
import threading
import time

KINDS = [
    "baremetalhosts.metal3.io", "hostclaims.metal3.io", "hardwaredata.metal3.io", "secrets",
    "hostfirmwaresettings.metal3.io", "hostfirmwarecomponents.metal3.io",
    "firmwareschemas.metal3.io", "preprovisioningimages.metal3.io", "configmaps",
    "hostdeploypolicies.metal3.io", "leases.coordination.k8s.io", "events",
]
PATTERN = "/tmp/ferrometal-bench-scale-*"


def record(seconds, out_path):
    before = set(glob.glob(PATTERN))
    kubeconfig = None
    while kubeconfig is None:
        for d in set(glob.glob(PATTERN)) - before:
            if os.path.exists(d + "/data/kubeconfig"):
                kubeconfig = d + "/data/kubeconfig"
        time.sleep(0.05)
    time.sleep(0.3)
    out = open(out_path, "w")
    lock = threading.Lock()
    template = ("jsonpath={.type} {.object.metadata.namespace} {.object.metadata.name} "
                "{.object.metadata.resourceVersion}{\"\\n\"}")

    watchers = []

    def watch(p, kind):
        for line in p.stdout:
            with lock:
                out.write(f"{time.time():.3f} {kind} {line}")
                out.flush()

    for kind in KINDS:
        p = subprocess.Popen(
            ["kubectl", "--kubeconfig", kubeconfig, "get", kind, "-A", "--watch-only",
             "--output-watch-events", "-o", template],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        watchers.append(p)
        threading.Thread(target=watch, args=(p, kind), daemon=True).start()
    try:
        time.sleep(seconds)
    finally:
        # No watch outlives the recording.
        for p in watchers:
            p.terminate()
        for p in watchers:
            p.wait()


def count(path, hosts):
    events = [l.split() for l in open(path)]
    events = [e for e in events if len(e) >= 4]
    claims = [float(e[0]) for e in events if e[1].startswith("hostclaims")]
    start = min(float(e[0]) for e in events
                if e[1].startswith("hostclaims") and e[2] == "ADDED")
    end = max(claims)
    print(f"window {end - start:.2f} s")
    c = collections.Counter(
        (e[1].split(".")[0], e[2]) for e in events if start - 0.05 <= float(e[0]) <= end + 0.5)
    for (kind, kind_of_change), n in c.most_common():
        print(f"{n:7d} {n / hosts:6.2f}  {kind} {kind_of_change}")
    total = sum(c.values())
    print(f"{total:7d} {total / hosts:6.2f}  all")


if __name__ == "__main__":
    if sys.argv[1:2] == ["record"]:
        record(float(sys.argv[2]), sys.argv[3])
    elif sys.argv[1:2] == ["count"]:
        count(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
