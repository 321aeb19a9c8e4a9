# Issue 15: how much slower a core decodes and parses when every core is busy. The inflate's
# two halves (`decode_rate`, gzip -1 of the 180 MB trace) and the event parse
# (`event_parse_rate`, the 180 MB trace), each alone, then as 8 and 16 copies at once, then 8
# decode copies beside a plain ingest of the 989 MB trace in a loop (its 16 parse workers);
# the test binary as .gpuc/ingest-test.xz (`cargo test --release -p llmprof-ingest --no-run`), the
# ingest's release build as .gpuc/llmprof-base.xz.
set -u
B=base . gpu-jobs/ab-setup.sh >/dev/null
xz -dc $R/.gpuc/ingest-test.xz > /tmp/t && chmod +x /tmp/t
gzip -1 -c k180.json > k180-1.json.gz
lscpu | grep -E "Model name|L2|L3|MHz" | head -5
dec() { GZ=/dev/shm/k180-1.json.gz /tmp/t decode_rate --ignored --nocapture 2>&1 | grep bytes: | sed 's/^[0-9]* bytes: //'; }
par() { TRACE=/dev/shm/k180.json /tmp/t event_parse_rate --ignored --nocapture 2>&1 | grep "^fast path" | cut -d, -f1; }
copies() { f=$1; n=$2; P=""; rm -f /tmp/o.*; for i in $(seq $n); do $f > /tmp/o.$i & P="$P $!"; done; wait $P
  # Each number in the copies' lines (decode and rebuild seconds; the fast path's seconds):
  # fastest, median and slowest copy.
  cat /tmp/o.* | python3 -c '
import re, statistics, sys
rows = [[float(x) for x in re.findall(r"(?<![(\w])(\d+\.\d+)", l)] for l in sys.stdin if l.strip()]
for k in range(min(map(len, rows))):
    v = sorted(r[k] for r in rows)
    print(f"'$f' x'$n' #{k + 1}: {v[0]:.3f} / {statistics.median(v):.3f} / {v[-1]:.3f} s (fastest / median / slowest)")'
  rm -f /tmp/o.*; }
for n in 1 8 16; do copies dec $n; copies par $n; done
( while :; do rm -rf r; /tmp/l-base ingest --kineto k1g.json --out r >/dev/null 2>&1; done ) & L=$!
sleep 1; copies dec 8; kill $L; wait 2>/dev/null
