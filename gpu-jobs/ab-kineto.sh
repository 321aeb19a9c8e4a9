# Issue 15: two llmprof binaries (.gpuc/llmprof-old.xz, .gpuc/llmprof-new.xz: stripped, xz) on the
# GPU host's CPUs, alternating, median of 5: the 180 MB H200 trace plain and .gz, a 1 GB trace
# made from it (rep_kineto.py) plain and .gz, the 180 MB on 2 cores; anonymous peaks; outputs
# compared; where the 1 GB run's time goes (phases.py).
. gpu-jobs/ab-setup.sh
run() { tag=$1; shift; for i in 1 2 3 4 5; do for b in $B; do rm -rf r; /usr/bin/time -f "$tag $b %e %M %U" "$@" /tmp/l-$b ingest --kineto $F --out r 2>&1 | tail -1; done; done; }
for F in k180.json k180.json.gz k1g.json k1g.json.gz; do run $F; done > /tmp/ab.txt
for F in k180.json k180.json.gz; do run 2core-$F taskset -c 2,3; done >> /tmp/ab.txt
python3 - <<'P'
import collections,statistics
d=collections.defaultdict(list)
for l in open('/tmp/ab.txt'):
    f,b,e,m,u=l.split(); d[(f,b)].append((float(e),int(m),float(u)))
for k,v in sorted(d.items()):
    print(k, 'median wall', statistics.median(x[0] for x in v), 'all', [x[0] for x in v], 'user', statistics.median(x[2] for x in v), 'peak MB', max(x[1] for x in v)//1024)
P
for F in k180.json k1g.json k1g.json.gz; do for i in 1 2 3; do for b in $B; do rm -rf r; echo "$b $F $(bash $R/gpu-jobs/anonpeak.sh /tmp/l-$b ingest --kineto $F --out r)"; done; done; done
rm -rf r r2; /tmp/l-old ingest --kineto k1g.json --out r >/dev/null 2>&1; /tmp/l-new ingest --kineto k1g.json --out r2 >/dev/null 2>&1
cmp r/*/timeline.json r2/*/timeline.json && echo "1g timelines equal"
python3 -c "
import json,glob
a=json.load(open(glob.glob('r/*/bundle.json')[0])); b=json.load(open(glob.glob('r2/*/bundle.json')[0]))
for k in ('stages','kernels','operators','totals'): print(k, 'equal' if a[k]==b[k] else 'DIFFERENT')"
for b in $B; do for i in 1 2 3; do rm -rf r; echo "$b k1g phases: $(python3 $R/gpu-jobs/phases.py /tmp/l-$b ingest --kineto k1g.json --out r)"; done; done
