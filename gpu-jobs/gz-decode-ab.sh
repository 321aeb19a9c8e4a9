# Issue 15: two builds of the inflate's decode on the GPU host's cores: `decode_rate` (gzip -1 and
# level 9 of the 180 MB trace) from the ingest crate's test binaries .gpuc/ingest-<a>.xz and
# .gpuc/ingest-<b>.xz (`cargo test --release -p llmprof-ingest --no-run`), alternating, R rounds
# (default 5), alone and as 16 copies at once (the median copy).
set -u
A=${A:-test}; B=${B:-wip}; ROUNDS=${R:-5}
R=$PWD; cd /dev/shm
for x in $A $B; do xz -dc $R/.gpuc/ingest-$x.xz > /tmp/t-$x && chmod +x /tmp/t-$x; done
gunzip -c $R/tests/fixtures/h200-qwen2-0.5b/kineto_trace.json.gz > k180.json
gzip -1 -c k180.json > k180-1.json.gz; gzip -9 -c k180.json > k180-9.json.gz
one() { GZ=/dev/shm/$2 /tmp/t-$1 decode_rate --ignored --nocapture 2>&1 | grep -o "decode [0-9.]*" | cut -d' ' -f2; }
many() { P=""; for i in $(seq 16); do one $1 $2 > /tmp/m.$i & P="$P $!"; done; wait $P; sort -n /tmp/m.* | sed -n 8p; rm -f /tmp/m.*; }
for r in $(seq $ROUNDS); do for f in k180-1.json.gz k180-9.json.gz; do for x in $A $B; do
  echo "$x $f alone $(one $x $f) x16 $(many $x $f)"
done; done; done | tee /tmp/dab.txt
python3 - <<'P'
import collections, statistics
d = collections.defaultdict(list)
for l in open('/tmp/dab.txt'):
    x, f, _, a, _, m = l.split(); d[(f, x)].append((float(a), float(m)))
for (f, x), v in sorted(d.items()):
    print(f"{f:16} {x:6} decode alone {statistics.median(a for a, _ in v):.3f} s, 16 at once (median copy) {statistics.median(m for _, m in v):.3f} s")
P
