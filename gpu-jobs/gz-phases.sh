# Issue 15: where a `.gz` ingest's extra time goes, phase by phase, over many rounds. The 989 MB
# trace plain, as gzip -1 and as zlib's level 9 (gzip_par.py), each read N times (default 11),
# alternating, by .gpuc/llmprof-<B>.xz (default new) with LLMPROF_SPANS; then gz-phases.py's
# medians per phase and per thread. Each reading is also timed untraced, to show what tracing costs.
set -u
N=${N:-11}; B=${B:-new}
. gpu-jobs/ab-setup.sh >/dev/null
python3 $R/gpu-jobs/gzip_par.py k1g.json k1g9.json.gz 9 32 >/dev/null
rm -rf /tmp/gzp; mkdir -p /tmp/gzp
for i in $(seq $N); do for F in k1g.json k1g.json.gz k1g9.json.gz; do
  rm -rf r; /usr/bin/time -f "$F traced %e" env LLMPROF_SPANS=/tmp/gzp/$F.$i /tmp/l-$B ingest --kineto $F --out r 2>&1 | tail -1
  rm -rf r; /usr/bin/time -f "$F untraced %e" /tmp/l-$B ingest --kineto $F --out r 2>&1 | tail -1
done; done > /tmp/gzp.txt
python3 - <<'P'
import collections, statistics
d = collections.defaultdict(list)
for l in open('/tmp/gzp.txt'):
    f, how, e = l.split(); d[(f, how)].append(float(e))
for k, v in sorted(d.items()):
    print(f"{k[0]:14} {k[1]:8} median {statistics.median(v):.3f} s  {v}")
P
python3 $R/gpu-jobs/gz-phases.py /tmp/gzp
