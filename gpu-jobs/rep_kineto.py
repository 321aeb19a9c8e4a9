"""Issue 15: a large PyTorch-profiler trace made from a real one, repeated N times with shifted
times and ids (so every copy attributes as the original does). Streams the output.

usage: python3 rep_kineto.py IN.json OUT.json N [JOBS]

With JOBS > 1 the copies are written by that many processes into parts that are then joined:
the output is the same, byte for byte.
"""
import json
import os
import shutil
import sys
from multiprocessing import Pool

src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
jobs = int(sys.argv[4]) if len(sys.argv) > 4 else 1
doc = json.load(open(src))
events = doc.pop("traceEvents")
ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
span = (max(ts) - min(ts)) * 1.01 + 1000.0
ID_KEYS = ("correlation", "External id", "Ev Idx", "Python id", "Python parent id")
ids = [a[k] for e in events for a in [e.get("args") or {}] for k in ID_KEYS if isinstance(a.get(k), int)]
ids += [e["id"] for e in events if isinstance(e.get("id"), int)]
step = max(ids) + 1 if ids else 0


def copy_text(k):
    """Copy k of the events, each line but the first preceded by `,\n`."""
    lines = []
    for e in events:
        e2 = dict(e)
        if isinstance(e2.get("ts"), (int, float)) and k:
            e2["ts"] = round(e2["ts"] + k * span, 3)
        if isinstance(e2.get("id"), int):
            e2["id"] += k * step
        a = e2.get("args")
        if isinstance(a, dict):
            a = dict(a)
            for key in ID_KEYS:
                if isinstance(a.get(key), int) and a[key] >= 0:
                    a[key] += k * step
            e2["args"] = a
        lines.append(json.dumps(e2))
    return ("" if k == 0 else ",\n") + ",\n".join(lines)


def write_part(k):
    path = f"{dst}.part{k}"
    with open(path, "w") as out:
        out.write(copy_text(k))
    return path


with open(dst, "w") as out:
    head = json.dumps(doc)[:-1]
    out.write(head + (', ' if doc else '') + '"traceEvents": [\n')
    if jobs > 1:
        with Pool(jobs) as pool:
            for path in pool.imap(write_part, range(n)):
                with open(path) as part:
                    shutil.copyfileobj(part, out, 1 << 24)
                os.remove(path)
    else:
        for k in range(n):
            out.write(copy_text(k))
    out.write("\n]}\n")
