# Issue 15: the .gz path by compressor, on the GPU host's CPUs, for the binaries
# .gpuc/llmprof-<b>.xz of B (default "base new"): the 989 MB trace plain, as `gzip -1`
# (ab-setup.sh), and as zlib level 9 (what PyTorch's export_chrome_trace writes for a .gz path:
# Python's gzip.open at its default level; made here on every core by gzip_par.py, whose 32 MB
# parts end in sync flushes). Alternating, median of 7; then anonymous peaks, 3 samples each.
set -u
B=${B:-"base new"}
. gpu-jobs/ab-setup.sh
/usr/bin/time -f "level 9 made in %e s" python3 $R/gpu-jobs/gzip_par.py k1g.json k1g9.json.gz 9 32
ls -la k1g9.json.gz
for i in 1 2 3 4 5 6 7; do for F in k1g.json k1g.json.gz k1g9.json.gz; do for b in $B; do rm -rf r; /usr/bin/time -f "$F $b %e %U" /tmp/l-$b ingest --kineto $F --out r 2>&1 | tail -1; done; done; done > /tmp/lv.txt
python3 - <<'P'
import collections,statistics
d=collections.defaultdict(list)
for l in open('/tmp/lv.txt'):
    f,b,e,u=l.split(); d[(f,b)].append((float(e),float(u)))
med={k:statistics.median(x[0] for x in v) for k,v in d.items()}
for k,v in sorted(d.items()):
    print(k, 'median', med[k], 'user', statistics.median(x[1] for x in v), 'all', [x[0] for x in v])
for (f,b),m in sorted(med.items()):
    if f.endswith('.gz') and ('k1g.json',b) in med: print(b, f, 'rate / plain rate', round(med[('k1g.json',b)]/m, 3))
P
for F in k1g.json k1g.json.gz k1g9.json.gz; do for i in 1 2 3; do for b in $B; do rm -rf r; echo "$b $F $(bash $R/gpu-jobs/anonpeak.sh /tmp/l-$b ingest --kineto $F --out r)"; done; done; done
set -- $B
for F in k1g.json.gz k1g9.json.gz; do rm -rf o1 o2; /tmp/l-$1 ingest --kineto $F --out o1 >/dev/null 2>&1; /tmp/l-$2 ingest --kineto $F --out o2 >/dev/null 2>&1; diff -rq o1 o2 >/dev/null && echo "$F: outputs of $1 and $2 equal"; done
