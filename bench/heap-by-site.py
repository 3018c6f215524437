#!/usr/bin/env python3
"""Heap bytes at the peak by call site, from `heaptrack_print --print-peaks 1 -m 0 -n 100000`.

Each backtrace is counted under the first of its frames in this repository's `crates/`, then
grouped by what that code holds (bench/RESULTS.md, "Issue 29, round 12"):

    heaptrack_print -f serve.zst --print-peaks 1 --print-allocators 0 --print-temporary 0 \
        --print-leaks 0 -m 0 -n 100000 > peaks.txt
    python3 bench/heap-by-site.py peaks.txt          # grouped
    python3 bench/heap-by-site.py peaks.txt --files  # by first frame's file
"""

import collections
import pathlib
import re
import sys

UNIT = {"B": 1, "K": 1e3, "M": 1e6, "G": 1e9}
HEAD = re.compile(r"^([0-9.]+)([BKMG]) peak memory consumed over \d+ calls from")


def records(path):
    """(bytes, frames under crates/ from the allocation outwards) per backtrace."""
    cost, frames = None, []
    with open(path, errors="replace") as f:
        for line in f:
            m = HEAD.match(line)
            if m:
                if cost is not None:
                    yield cost, frames
                cost, frames = float(m.group(1)) * UNIT[m.group(2)], []
                continue
            s = line.strip()
            if cost is not None and s.startswith("at crates/"):
                frame = s[3:].replace("crates/", "").replace("/src/", "/")
                if not frames or frames[-1] != frame:
                    frames.append(frame)
    if cost is not None:
        yield cost, frames


def shared_watch_lines():
    """Where in shared_watch.rs the watch loop reads its next event (what it allocates is the
    watched objects, deserialized into the reflector stores) and which lines `changes` spans
    (each controller's map of every object's last trigger). Read from the source, which must
    be the one the profiled binary was built from."""
    source = pathlib.Path(__file__).resolve().parent.parent / "crates/controller/src/shared_watch.rs"
    lines = source.read_text().splitlines()
    loop = next(n for n, l in enumerate(lines, 1) if "events.next().await" in l)
    start = next(n for n, l in enumerate(lines, 1) if l.startswith("fn changes<"))
    end = next(n for n, l in enumerate(lines, 1) if n > start and l == "}")
    return loop, range(start, end + 1)


WATCH_LOOP, CHANGE_FILTER = shared_watch_lines()


def line_of(frame, file):
    """The line number of `frame` if it is in `file`, else None."""
    name, _, line = frame.rpartition(":")
    return int(line) if name == file and line.isdigit() else None


def group(frames):
    watch = [line_of(f, "controller/shared_watch.rs") for f in frames]
    if WATCH_LOOP in watch:
        return "typed caches (watch events into the reflector stores)"
    if any(n in CHANGE_FILTER for n in watch if n is not None):
        return "controllers' change filters"
    first = frames[0] if frames else ""
    if first.startswith("apiserver/store/"):
        return "stored objects (JSON, index, commits, watch history)"
    if first.startswith(("bmc/", "provisioner/", "controller/detached.rs", "controller/bmc_gate.rs")):
        return "BMC calls in flight"
    if first.startswith(("controller/", "api/")):
        return "controllers (reconciles, queues, objects being written)"
    if first.startswith(("apiserver/", "apimachinery/", "crdschema/")):
        return "API server request path"
    return "other"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    by_file = "--files" in sys.argv[2:]
    totals = collections.Counter()
    for cost, frames in records(sys.argv[1]):
        key = (frames[0].rsplit(":", 1)[0] if frames else "(no frame in crates/)") if by_file else group(frames)
        totals[key] += cost
    whole = sum(totals.values()) or 1
    print(f"{whole / 1e6:9.1f} MB  at the peak")
    for key, cost in totals.most_common(40):
        print(f"{cost / 1e6:9.1f} MB  {100 * cost / whole:5.1f}%  {key}")


if __name__ == "__main__":
    main()
