"""Issue 15: a large PyTorch-profiler trace made from a real one, repeated N times with shifted
times and ids (so every copy attributes as the original does). Streams the output.

usage: python3 rep_kineto.py IN.json OUT.json N
"""
import json
import sys

src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = json.load(open(src))
events = doc.pop("traceEvents")
ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
span = (max(ts) - min(ts)) * 1.01 + 1000.0
ID_KEYS = ("correlation", "External id", "Ev Idx", "Python id", "Python parent id")
ids = [a[k] for e in events for a in [e.get("args") or {}] for k in ID_KEYS if isinstance(a.get(k), int)]
ids += [e["id"] for e in events if isinstance(e.get("id"), int)]
step = max(ids) + 1 if ids else 0
with open(dst, "w") as out:
    head = json.dumps(doc)[:-1]
    out.write(head + (', ' if doc else '') + '"traceEvents": [\n')
    first = True
    for k in range(n):
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
            out.write(("" if first else ",\n") + json.dumps(e2))
            first = False
    out.write("\n]}\n")
