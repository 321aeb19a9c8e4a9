# Issue 15: the .gz path of llmprof binaries (.gpuc/llmprof-<b>.xz for each b in $B, default
# "old new") on the GPU host's CPUs: the 180 MB H200 trace and the 1 GB trace made from it,
# gzip -1, and the 1 GB plain trace for the rate ratio; alternating, median of 5; then
# anonymous peaks (gpu-jobs/anonpeak.sh), 3 samples each.
. gpu-jobs/ab-setup.sh
for F in k180.json.gz k1g.json.gz k1g.json; do for i in 1 2 3 4 5; do for b in $B; do rm -rf r; /usr/bin/time -f "$F $b %e %U" /tmp/l-$b ingest --kineto $F --out r 2>&1 | tail -1; done; done; done > /tmp/abgz.txt
python3 - <<'P'
import collections,statistics
d=collections.defaultdict(list)
for l in open('/tmp/abgz.txt'):
    f,b,e,u=l.split(); d[(f,b)].append((float(e),float(u)))
med={k:statistics.median(x[0] for x in v) for k,v in d.items()}
for k,v in sorted(d.items()):
    print(k, 'median', med[k], 'user', statistics.median(x[1] for x in v), 'all', [x[0] for x in v])
for (f,b),m in sorted(med.items()):
    if f=='k1g.json.gz' and ('k1g.json',b) in med: print(b, '1 GB .gz rate / plain rate', round(med[('k1g.json',b)]/m, 2))
P
for F in k180.json.gz k1g.json.gz; do for i in 1 2 3; do for b in $B; do rm -rf r; echo "$b $F $(bash $R/gpu-jobs/anonpeak.sh /tmp/l-$b ingest --kineto $F --out r)"; done; done; done
