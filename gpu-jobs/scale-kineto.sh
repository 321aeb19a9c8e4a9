#!/bin/bash
# Issue 15: kineto ingest throughput and memory on the GPU host's CPUs: the 180 MB H200 trace
# (plain and .gz) and a 1 GB trace made from it (rep_kineto.py, 6 copies), median of 5.
set -u
R=$PWD
xz -dc .gpuc/llmprof.xz > /tmp/llmprof && chmod +x /tmp/llmprof
echo "cores $(nproc)"; lscpu | grep -m1 "Model name"
cd /dev/shm
gunzip -c $R/tests/fixtures/h200-qwen2-0.5b/kineto_trace.json.gz > k180.json
cp $R/tests/fixtures/h200-qwen2-0.5b/kineto_trace.json.gz k180.json.gz
t0=$(date +%s.%N); python3 $R/gpu-jobs/rep_kineto.py k180.json k1g.json 6; echo "replicated in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
ls -la k180.json k180.json.gz k1g.json
for f in k180.json k180.json.gz k1g.json; do
  for i in 1 2 3 4 5; do rm -rf r; /usr/bin/time -f "$f %e s wall %M KB peak %U user %S sys" /tmp/llmprof ingest --kineto $f --out r 2>&1 | tail -1; done
done
for f in k180.json k1g.json; do rm -rf r; echo "$f $(bash $R/gpu-jobs/anonpeak.sh /tmp/llmprof ingest --kineto $f --out r)"; done
rm -rf r; /tmp/llmprof ingest --kineto k1g.json --out r > /dev/null 2>&1; python3 -c "
import json,glob; b=json.load(open(glob.glob('r/*/bundle.json')[0])); print('1g totals', b['totals']['kernels'], 'kernels', [(s['name'], s.get('instances')) for s in b['stages']])"
