# Sourced by the A/B jobs (ab-kineto.sh, ab-gz.sh): unpacks .gpuc/llmprof-<b>.xz for each b in
# $B to /tmp/l-<b>, and makes the traces in /dev/shm: the 180 MB H200 trace (k180.json and its
# committed .gz) and a 989 MB trace made from it (k1g.json, rep_kineto.py; or BIG, a trace given,
# copied there instead) with its gzip -1.
# Leaves the shell in /dev/shm, with R the repository.
set -u
R=$PWD; B=${B:-"old new"}
for b in $B; do xz -dc .gpuc/llmprof-$b.xz > /tmp/l-$b && chmod +x /tmp/l-$b; done
echo "cores $(nproc)"; lscpu | grep -m1 "Model name"
cd /dev/shm
gunzip -c $R/tests/fixtures/h200-qwen2-0.5b/kineto_trace.json.gz > k180.json
cp $R/tests/fixtures/h200-qwen2-0.5b/kineto_trace.json.gz k180.json.gz
if [ -n "${BIG:-}" ]; then cp "$BIG" k1g.json; else python3 $R/gpu-jobs/rep_kineto.py k180.json k1g.json 6 >/dev/null 2>&1; fi
gzip -1 -c k1g.json > k1g.json.gz
ls -la k180.json k180.json.gz k1g.json k1g.json.gz
