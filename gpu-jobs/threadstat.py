#!/usr/bin/env python3
"""Runs a command and samples its threads' scheduler statistics (/proc/PID/task/TID/schedstat:
time on a CPU, time waiting on a run queue, time slices) every 2 ms; prints, per thread name,
the threads' count and their summed CPU and run-queue seconds, then the wall time; with
TIMELINE=1 also the cores each thread kind kept busy in every STEP seconds (default 0.05).
Usage: threadstat.py cmd args..."""
import os, subprocess, sys, time, collections

start = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
last = {}
samples = []  # (time, {name: summed run ns of the threads alive})
while p.poll() is None:
    try:
        tids = os.listdir(f"/proc/{p.pid}/task")
    except OSError:
        break
    for t in tids:
        try:
            with open(f"/proc/{p.pid}/task/{t}/schedstat") as f:
                run, wait, slices = map(int, f.read().split())
            if t not in last:
                with open(f"/proc/{p.pid}/task/{t}/comm") as f:
                    name = f.read().strip()
            else:
                name = last[t][0]
            last[t] = (name, run, wait, slices)
        except OSError:
            pass
    now = collections.Counter()
    for name, run, _, _ in last.values():
        now[name] += run
    samples.append((time.monotonic() - start, now))
    time.sleep(0.002)
wall = time.monotonic() - start
by = collections.defaultdict(lambda: [0, 0, 0, 0])
for name, run, wait, slices in last.values():
    b = by[name]; b[0] += 1; b[1] += run; b[2] += wait; b[3] += slices
for name, (n, run, wait, slices) in sorted(by.items()):
    print(f"  {name:16} x{n:<3} cpu {run/1e9:6.3f} s  runqueue {wait/1e9:6.3f} s  slices {slices}")
print(f"  wall {wall:.3f} s (the last 2 ms of a thread's life are not sampled)")
if os.environ.get("TIMELINE") == "1":
    names = sorted(by)
    print("  ms    " + " ".join(f"{n[:12]:>12}" for n in names))
    step, t0, prev = float(os.environ.get("STEP", "0.05")), 0.0, collections.Counter()
    for t, run in samples:
        if t >= t0 + step or (t, run) == samples[-1]:
            busy = [(run[n] - prev[n]) / 1e9 / (t - t0) for n in names]
            print(f"  {t0*1000:5.0f} " + " ".join(f"{b:12.1f}" for b in busy))
            t0, prev = t, run
