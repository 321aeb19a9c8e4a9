#!/usr/bin/env python3
"""Sums the spans `LLMPROF_SPANS=FILE llmprof ingest ...` wrote (crates/ingest/src/spans.rs).

    python3 gpu-jobs/spans.py FILE [STEP_MS]

Prints the trace's reading time, then seconds per thread name and span kind (`x16`: how many
threads of that name recorded spans). With STEP_MS, also how many threads of each name were in
each kind of span in every STEP_MS milliseconds of the reading: 0.60 for one thread busy 60% of
the step, 7.5 for workers averaging 7.5 at a time. Last, from the `sched` lines, each thread
name's time on a core and time ready but waiting for one (Linux's schedstat), summed.
"""
import collections
import sys


def load(path, comment=lambda line: None):
    """A span file's spans, as (thread, kind, start, end), and per thread name its `sched`
    lines summed: [on a core, run queue, timeslices, threads]. Comment lines go to `comment`."""
    rows = []
    sched = collections.defaultdict(lambda: [0, 0, 0, 0])
    for line in open(path):
        if line.startswith("#"):
            comment(line.strip())
            continue
        thread, kind, a, b, c = line.split()
        if kind == "sched":
            for i, v in enumerate((int(a), int(b), int(c), 1)):
                sched[thread][i] += v
            continue
        rows.append((thread, kind, int(a), int(b)))
    return rows, sched


def main():
    rows, sched = load(sys.argv[1], print)
    if not rows:
        sys.exit(f"{sys.argv[1]}: no spans")
    read = [r for r in rows if r[1] == "read-trace"]
    whole = [r for r in rows if r[1] == "ingest"]
    for name, spans in (("reading the trace", read), ("the whole ingest", whole)):
        for s in spans:
            print(f"{name}: {(s[3] - s[2]) / 1e9:.3f} s, from {s[2] / 1e9:.3f} s")
    threads = collections.defaultdict(set)
    totals = collections.defaultdict(int)
    for thread, kind, start, end in rows:
        totals[(thread, kind)] += end - start
    # Threads of one name are told apart by their spans' overlap only in sum: count them by
    # the most spans of one kind open at once.
    print(f"{'thread':14} {'kind':13} {'seconds':>8}")
    for (thread, kind), ns in sorted(totals.items()):
        n = most_at_once([(s, e) for t, k, s, e in rows if t == thread and k == kind])
        print(f"{thread:14} {kind:13} {ns / 1e9:8.3f}  (x{n})")
    if len(sys.argv) > 2:
        timeline(rows, float(sys.argv[2]) * 1e6, read[0] if read else None)
    if sched:
        print(f"\n{'thread':14} {'on a core':>10} {'run queue':>10} {'slices':>8}")
        for thread, (cpu, wait, slices, n) in sorted(sched.items()):
            print(f"{thread:14} {cpu / 1e9:10.3f} {wait / 1e9:10.3f} {slices:8}  (x{n})")


def most_at_once(spans):
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = open_now = 0
    for _, d in edges:
        open_now += d
        most = max(most, open_now)
    return most


def timeline(rows, step, read):
    end = read[3] if read else max(r[3] for r in rows)
    bins = int(end // step) + 1
    cols = sorted({(t, k) for t, k, _, _ in rows if k not in ("ingest", "read-trace")})
    busy = {c: [0.0] * bins for c in cols}
    for thread, kind, start, stop in rows:
        if (thread, kind) not in busy:
            continue
        for b in range(int(start // step), min(int(stop // step), bins - 1) + 1):
            lo, hi = max(start, b * step), min(stop, (b + 1) * step)
            if hi > lo:
                busy[(thread, kind)][b] += (hi - lo) / step
    print("\nms    " + " ".join(f"{(t[:6] + '.' + k)[:14]:>14}" for t, k in cols))
    for b in range(bins):
        print(f"{b * step / 1e6:5.0f} " + " ".join(f"{busy[c][b]:14.2f}" for c in cols))


if __name__ == "__main__":
    main()
