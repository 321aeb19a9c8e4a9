# Issue 15: configurations of the `.gz` reading on the GPU host's CPUs. C lists them as
# label:binary:settings, the binary .gpuc/llmprof-<binary>.xz, the settings environment
# assignments joined by commas (or none), e.g.
#   C="base:base: spin:new:LLMPROF_SPIN_US=300" bash gpu-jobs/gz-ab.sh
# The 989 MB trace plain, as gzip -1 and as zlib level 9 (gz-level.sh's files): whole ingests,
# alternating, median of N (default 5) with each one's ratio to its own plain median; then one
# anonymous peak of each on each `.gz`, and whether each configuration's outputs equal the first's.
set -u
C=${C:-"base:base: new:new:"}; N=${N:-5}
B=$(for c in $C; do echo $c | cut -d: -f2; done | sort -u | tr '\n' ' ') . gpu-jobs/ab-setup.sh >/dev/null
python3 $R/gpu-jobs/gzip_par.py k1g.json k1g9.json.gz 9 32 >/dev/null
for i in $(seq $N); do for F in k1g.json k1g.json.gz k1g9.json.gz; do for c in $C; do
  IFS=: read l b e <<< "$c"
  rm -rf r; /usr/bin/time -f "$F $l %e %U" timeout 15 env $(echo $e | tr ',' ' ') /tmp/l-$b ingest --kineto $F --out r 2>&1 | tail -1
done; done; done | tee /tmp/ab.txt
python3 - <<'P'
import collections,statistics
d=collections.defaultdict(list)
for l in open('/tmp/ab.txt'):
    f,c,e,u=l.split(); d[(c,f)].append((float(e),float(u)))
for (c,f),x in sorted(d.items()):
    m=statistics.median(y[0] for y in x); p=statistics.median(y[0] for y in d[(c,'k1g.json')])
    print(f"{c:10} {f:14} median {m:.2f} s user {statistics.median(y[1] for y in x):.2f} ratio {p/m:.3f} {[y[0] for y in x]}")
P
first=""
for c in $C; do IFS=: read l b e <<< "$c"
  for F in k1g.json.gz k1g9.json.gz; do rm -rf r; echo "$l $F $(env $(echo $e | tr ',' ' ') bash $R/gpu-jobs/anonpeak.sh /tmp/l-$b ingest --kineto $F --out r)"; done
  rm -rf o-$l; timeout 15 env $(echo $e | tr ',' ' ') /tmp/l-$b ingest --kineto k1g9.json.gz --out o-$l >/dev/null 2>&1
  if [ -z "$first" ]; then first=$l; else diff -rq o-$first o-$l >/dev/null && echo "$l: outputs equal $first's" || echo "$l: OUTPUTS DIFFER from $first's"; fi
done
