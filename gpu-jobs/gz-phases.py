#!/usr/bin/env python3
"""Medians, per input, of where whole ingests spent their time, from span files.

    python3 gpu-jobs/gz-phases.py DIR

DIR holds `LLMPROF_SPANS` files named `<input>.<round>` (gz-phases.sh writes them). For each
input: the whole ingest; the calling thread's time before the reading, the reading, and each
span kind it records after the reading; and each thread name's time on a core and in the run
queue (schedstat), summed over its threads. Each row is a median over the rounds, with the
gap to the first input's median, so the rows say where a `.gz` reading's extra time is spent.
"""
import collections
import os
import statistics
import sys

import spans  # gpu-jobs/spans.py, beside this script

AFTER = ("close-input", "gather", "finish", "analyze", "write-run")


def phases(path):
    rows, sched = spans.load(path)
    one = {k: (s, e) for t, k, s, e in rows if k in ("ingest", "read-trace")}
    (i0, i1), (r0, r1) = one["ingest"], one["read-trace"]
    out = {"whole ingest": i1 - i0, "before the reading": r0 - i0, "the reading": r1 - r0,
           "after the reading": i1 - r1}
    for kind in AFTER:
        out[kind] = sum(e - s for t, k, s, e in rows if k == kind and s >= r1)
    for thread, (cpu, wait, _, _) in sched.items():
        out[f"{thread}: on a core"] = cpu
        out[f"{thread}: run queue"] = wait
    return out


def main():
    runs = collections.defaultdict(list)
    for name in sorted(os.listdir(sys.argv[1])):
        runs[name.rsplit(".", 1)[0]].append(phases(os.path.join(sys.argv[1], name)))
    inputs = sorted(runs, key=lambda f: (f.endswith(".gz"), f))
    keys = list(dict.fromkeys(k for f in inputs for r in runs[f] for k in r))
    med = {f: {k: statistics.median(r.get(k, 0) for r in runs[f]) / 1e9 for k in keys}
           for f in inputs}
    print(f"{'seconds (median of ' + str(len(runs[inputs[0]])) + ')':40}"
          + "".join(f"{f:>24}" for f in inputs))
    for k in keys:
        base = med[inputs[0]][k]
        cells = [f"{med[f][k]:9.3f}" + (f" ({med[f][k] - base:+.3f})" if f != inputs[0] else " " * 9)
                 for f in inputs]
        print(f"{k:40}" + "".join(f"{c:>24}" for c in cells))


if __name__ == "__main__":
    main()
