# Issue 15: two ~1 GB traces whose records are not mostly CPU ops, through two llmprof binaries
# (.gpuc/llmprof-<b>.xz for each b in $B, default "old new"): wall time alternating, median of
# 5; anonymous peaks, 3 each; outputs compared.
# - cg1g: kernel-dense (CUDA graphs: each decode step one graph launch of hundreds of kernels,
#   few CPU ops), the committed H100 CUDA-graphs trace repeated 1,250 times (rep_kineto.py);
# - nccl1g: a rank of a 2-GPU NCCL run (HTA's MIT-licensed test trace: collectives, so the
#   bundle's communication windows are computed too), repeated 100 times.
set -u
R=$PWD; B=${B:-"old new"}
for b in $B; do [ -x /tmp/l-$b ] || { xz -dc .gpuc/llmprof-$b.xz > /tmp/l-$b && chmod +x /tmp/l-$b; }; done
cd /dev/shm
one() {
  name=$1 src=$2 n=$3
  gunzip -c $R/tests/fixtures/$src > $name-1.json
  python3 $R/gpu-jobs/rep_kineto.py $name-1.json $name.json $n >/dev/null 2>&1
  ls -la $name.json
  for i in 1 2 3 4 5; do for b in $B; do rm -rf r; /usr/bin/time -f "$name $b %e %U" /tmp/l-$b ingest --kineto $name.json --out r 2>&1 | tail -1; done; done > /tmp/abd.txt
  python3 - <<'P'
import collections,statistics
d=collections.defaultdict(list)
for l in open('/tmp/abd.txt'):
    f,b,e,u=l.split(); d[(f,b)].append(float(e))
for (f,b),v in d.items(): print(f, b, 'median wall', statistics.median(v), 'all', v)
P
  for i in 1 2 3; do for b in $B; do rm -rf r; echo "$b $name $(bash $R/gpu-jobs/anonpeak.sh /tmp/l-$b ingest --kineto $name.json --out r)"; done; done
  set -- $B
  rm -rf r r2; /tmp/l-$1 ingest --kineto $name.json --out r >/dev/null 2>&1; /tmp/l-$2 ingest --kineto $name.json --out r2 >/dev/null 2>&1
  for f in timeline.json launch_calls.json; do cmp r/*/$f r2/*/$f && echo "$name $f: equal"; done
  NAME=$name python3 -c "
import json,glob,os
a=json.load(open(glob.glob('r/*/bundle.json')[0])); b=json.load(open(glob.glob('r2/*/bundle.json')[0]))
diff=[k for k in a if k not in ('run_id','created_at','ingested_at') and a.get(k)!=b.get(k)]
print(os.environ['NAME'], 'bundle: equal' if not diff else 'bundle DIFF: '+','.join(diff))"
  rm -f $name.json $name-1.json
}
one cg1g h100-cuda-graphs/kineto_trace.json.gz 1250
one nccl1g hta-multirank/nccl_rank0_of_2.json.gz 100
