#!/bin/bash
# Issue 15: a ~1 GB Nsight Systems export (a long decode, millions of kernels) and how fast
# llmprof ingests it against `nsys stats` computing cuda_gpu_kern_sum and nvtx_gpu_proj_sum.
set -u
R=$PWD
START=$(date +%s)
el() { echo "[$(( $(date +%s) - START )) s]"; }
xz -dc .gpuc/llmprof.xz > /tmp/llmprof && chmod +x /tmp/llmprof
mkdir -p /tmp/nsyslibs && tar -C /tmp -xJf .gpuc/nsyslibs.tar.xz
export LD_LIBRARY_PATH=/tmp/nsyslibs:${LD_LIBRARY_PATH:-}
NSYS=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
[ -x $NSYS ] || NSYS=$(command -v nsys)
export PYTHONPATH=$R/python WORKLOAD_LAYERS=24 WORKLOAD_PROMPT=128 WORKLOAD_STEPS=${STEPS:-3000} WORKLOAD_ITERATIONS=1
cd /dev/shm
el; $NSYS profile -t cuda,nvtx -o /dev/shm/long -f true --export sqlite python3 $R/examples/python-workload/workload.py > profile.log 2>&1
echo "profile rc=$?"; tail -4 profile.log; el
ls -la /dev/shm/long.*
python3 -c "
import sqlite3; c=sqlite3.connect('/dev/shm/long.sqlite')
print('kernels', c.execute('select count(*) from CUPTI_ACTIVITY_KIND_KERNEL').fetchone(), 'runtime', c.execute('select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME').fetchone(), 'nvtx', c.execute('select count(*) from NVTX_EVENTS').fetchone())"
el
/usr/bin/time -f "nsys stats: %e s wall %M KB peak" $NSYS stats --report cuda_gpu_kern_sum,nvtx_gpu_proj_sum --format csv --output /dev/shm/st /dev/shm/long.sqlite > stats.log 2>&1; tail -3 stats.log; el
for i in 1 2 3; do rm -rf r; /usr/bin/time -f "llmprof ingest: %e s wall %M KB peak %U user %S sys" /tmp/llmprof ingest --nsys /dev/shm/long.sqlite --out r 2>&1 | tail -1; done
rm -rf r; echo "anon: $(bash $R/gpu-jobs/anonpeak.sh /tmp/llmprof ingest --nsys /dev/shm/long.sqlite --out r)"
el
mkdir -p $OUT/nsys1g; cp /dev/shm/st_* $OUT/nsys1g/ 2>/dev/null; cp r/*/bundle.json $OUT/nsys1g/ 2>/dev/null; cp profile.log stats.log $OUT/nsys1g/
ls -la $OUT/nsys1g
