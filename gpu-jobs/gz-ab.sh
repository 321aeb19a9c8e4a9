# Issue 15: configurations of the `.gz` reading on the GPU host's CPUs. C lists them as
# label:binary:settings, the binary .gpuc/llmprof-<binary>.xz, the settings environment
# assignments joined by commas (or none), e.g.
#   C="base:base: spin:new:LLMPROF_SPIN_US=300" bash gpu-jobs/gz-ab.sh
# The 989 MB trace plain, as gzip -1 and at each zlib level in Z (default 9; gzip_par.py, on
# every core): whole ingests,
# alternating, median of N (default 5) with each one's ratio to its own plain median, and the
# median of the ratios paired by round (less moved by the drift of a noisy host), and each median
# over the median of every configuration's plain runs (where they share the plain code); then one
# anonymous peak of each on each file, and whether each configuration's outputs equal the first's.
set -u
C=${C:-"base:base: new:new:"}; N=${N:-5}; Z=${Z:-9}
B=$(for c in $C; do echo $c | cut -d: -f2; done | sort -u | tr '\n' ' ') . gpu-jobs/ab-setup.sh >/dev/null
GZ="k1g.json.gz"
for z in $Z; do python3 $R/gpu-jobs/gzip_par.py k1g.json k1g$z.json.gz $z 32 >/dev/null; GZ="$GZ k1g$z.json.gz"; done
ls -la k1g*.gz
for i in $(seq $N); do for F in k1g.json $GZ; do for c in $C; do
  IFS=: read l b e <<< "$c"
  rm -rf r; /usr/bin/time -f "$F $l %e %U" timeout 15 env $(echo $e | tr ',' ' ') /tmp/l-$b ingest --kineto $F --out r 2>&1 | tail -1
done; done; done | tee /tmp/ab.txt
python3 - <<'P'
import collections,statistics
d=collections.defaultdict(list)
for l in open('/tmp/ab.txt'):
    f,c,e,u=l.split(); d[(c,f)].append((float(e),float(u)))
# Where the configurations share the plain file's code, the plain runs of all of them are one
# sample: `pooled` is each median over theirs, less moved by one configuration's plain spread.
every=statistics.median(y[0] for (c,f),x in d.items() if f=='k1g.json' for y in x)
for (c,f),x in sorted(d.items()):
    m=statistics.median(y[0] for y in x); p=statistics.median(y[0] for y in d[(c,'k1g.json')])
    # Each run over the plain run of the same configuration and round, a minute apart at most.
    paired=statistics.median(a[0]/b[0] for a,b in zip(d[(c,'k1g.json')],x))
    print(f"{c:10} {f:14} median {m:.2f} s user {statistics.median(y[1] for y in x):.2f} ratio {p/m:.3f} paired {paired:.3f} pooled {every/m:.3f} {[y[0] for y in x]}")
P
first=""
for c in $C; do IFS=: read l b e <<< "$c"
  for F in k1g.json $GZ; do rm -rf r; echo "$l $F $(env $(echo $e | tr ',' ' ') bash $R/gpu-jobs/anonpeak.sh /tmp/l-$b ingest --kineto $F --out r)"; done
  rm -rf o-$l; timeout 15 env $(echo $e | tr ',' ' ') /tmp/l-$b ingest --kineto ${GZ##* } --out o-$l >/dev/null 2>&1
  if [ -z "$first" ]; then first=$l; else diff -rq o-$first o-$l >/dev/null && echo "$l: outputs equal $first's" || echo "$l: OUTPUTS DIFFER from $first's"; fi
done
