"""Issue 15: rep_kineto.py's copies in the input's own text layout. rep_kineto.py writes each
event on one line in Python's json layout; the PyTorch profiler writes each over several
indented lines, with a fifth fewer events to the byte (PERFORMANCE.md, session 44). Here each
copy is the input's traceEvents text as it stands, with every "ts" shifted by a whole number
of microseconds (exactly, its digits after the point kept) and the ids rep_kineto.py shifts, shifted
the same way. Streams the output.

usage: python3 rep_kineto_layout.py IN.json OUT.json N
"""
import re
import sys
from decimal import Decimal

src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(src, encoding="utf-8").read()
start = re.search(r'"traceEvents"\s*:\s*\[', text).end()
end = text.rindex("]", start, text.rindex("}"))
head, events, tail = text[:start], text[start:end].rstrip(), text[end:]
body = events.lstrip()
lead = events[: len(events) - len(body)]

TS = re.compile(r'"ts": (-?\d+(?:\.\d+)?)')
ID_KEYS = ("correlation", "External id", "Ev Idx", "Python id", "Python parent id", "id")
IDS = re.compile(r'"(%s)": (\d+)' % "|".join(re.escape(k) for k in ID_KEYS))

ts = [float(m.group(1)) for m in TS.finditer(body)]
span = int((max(ts) - min(ts)) * 1.01) + 1001
step = max((int(m.group(2)) for m in IDS.finditer(body)), default=-1) + 1


def copy_text(k):
    """Copy k of the events: times `k * span` µs later, ids `k * step` higher."""
    if k == 0:
        return body

    def shift_ts(m):
        # Exact, with as many digits after the point as the input had.
        return '"ts": %s' % (Decimal(m.group(1)) + k * span)

    def shift_id(m):
        return '"%s": %d' % (m.group(1), int(m.group(2)) + k * step)

    return IDS.sub(shift_id, TS.sub(shift_ts, body))


with open(dst, "w", encoding="utf-8") as out:
    out.write(head + lead)
    for k in range(n):
        out.write(("" if k == 0 else ",\n  ") + copy_text(k))
    out.write("\n  " + tail)
