# Issue 15: a kernel-dense trace (CUDA graphs: each decode step one graph launch of hundreds of
# kernels, few CPU ops) of about 1 GB, made from the committed H100 CUDA-graphs trace repeated
# 1,250 times (rep_kineto.py), through two llmprof binaries (.gpuc/llmprof-<b>.xz for each b in
# $B, default "old new"): wall time alternating, median of 5; anonymous peaks, 3 each; outputs
# compared.
set -u
R=$PWD; B=${B:-"old new"}
for b in $B; do [ -x /tmp/l-$b ] || { xz -dc .gpuc/llmprof-$b.xz > /tmp/l-$b && chmod +x /tmp/l-$b; }; done
cd /dev/shm
gunzip -c $R/tests/fixtures/h100-cuda-graphs/kineto_trace.json.gz > cg.json
python3 $R/gpu-jobs/rep_kineto.py cg.json cg1g.json 1250 >/dev/null 2>&1
ls -la cg1g.json
for i in 1 2 3 4 5; do for b in $B; do rm -rf r; /usr/bin/time -f "cg1g $b %e %U" /tmp/l-$b ingest --kineto cg1g.json --out r 2>&1 | tail -1; done; done > /tmp/abd.txt
python3 - <<'P'
import collections,statistics
d=collections.defaultdict(list)
for l in open('/tmp/abd.txt'):
    f,b,e,u=l.split(); d[b].append(float(e))
for b,v in d.items(): print('cg1g', b, 'median wall', statistics.median(v), 'all', v)
P
for i in 1 2 3; do for b in $B; do rm -rf r; echo "$b cg1g $(bash $R/gpu-jobs/anonpeak.sh /tmp/l-$b ingest --kineto cg1g.json --out r)"; done; done
set -- $B
rm -rf r r2; /tmp/l-$1 ingest --kineto cg1g.json --out r >/dev/null 2>&1; /tmp/l-$2 ingest --kineto cg1g.json --out r2 >/dev/null 2>&1
for f in timeline.json launch_calls.json; do cmp r/*/$f r2/*/$f && echo "cg1g $f: equal"; done
python3 -c "
import json,glob
a=json.load(open(glob.glob('r/*/bundle.json')[0])); b=json.load(open(glob.glob('r2/*/bundle.json')[0]))
diff=[k for k in a if k not in ('run_id','created_at','ingested_at') and a.get(k)!=b.get(k)]
print('cg1g bundle: equal' if not diff else 'cg1g bundle DIFF: '+','.join(diff))"
rm -f cg1g.json
