# Issue 15: anonymous peaks of configurations, K times each on each file, alternating (one
# sampled peak is noisy: the 2 ms sampling can miss a short top). C as in gz-ab.sh
# (label:binary:settings); run after gz-ab.sh, whose traces it reuses in /dev/shm.
set -u
C=${C:-"base:base: new:new:"}; K=${K:-3}; R=$PWD
cd /dev/shm
for i in $(seq $K); do for F in k1g.json k1g.json.gz k1g9.json.gz; do for c in $C; do
  IFS=: read l b e <<< "$c"
  rm -rf r; echo "$l $F $(env $(echo $e | tr ',' ' ') bash $R/gpu-jobs/anonpeak.sh /tmp/l-$b ingest --kineto $F --out r)"
done; done; done | tee /tmp/peaks.txt
python3 - <<'P'
import collections,statistics,re
d=collections.defaultdict(list)
for l in open('/tmp/peaks.txt'):
    c,f=l.split()[:2]; d[(c,f)].append(int(re.search(r'peak anon (\d+)',l).group(1)))
for (c,f),x in sorted(d.items()):
    print(f"{c:10} {f:14} anon MiB median {statistics.median(x)} max {max(x)} {x}")
P
