#!/bin/bash
# Issue 13: a real Nsight Systems export holding two processes that ran kernels (two copies of
# the marked example workload on the one GPU under one `nsys profile`).
set -u
R=$PWD
export LD_LIBRARY_PATH=$R/.gpuc/nsyslibs:${LD_LIBRARY_PATH:-}
NSYS=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
[ -x $NSYS ] || NSYS=$(command -v nsys)
export PYTHONPATH=$R/python WORKLOAD_TINY=0 WORKLOAD_LAYERS=2 WORKLOAD_PROMPT=64 WORKLOAD_STEPS=4 WORKLOAD_ITERATIONS=2
mkdir -p $OUT/two
cd /tmp
$NSYS profile -t cuda,nvtx --cuda-graph-trace=node -o /tmp/two -f true sh -c "python3 $R/examples/python-workload/workload.py > /tmp/w1.log 2>&1 & python3 $R/examples/python-workload/workload.py > /tmp/w2.log 2>&1; wait" > $OUT/two/profile.log 2>&1
echo "profile rc=$?"; tail -3 $OUT/two/profile.log; cat /tmp/w1.log /tmp/w2.log | tail -4
$NSYS export --type sqlite -o /tmp/two.sqlite -f true /tmp/two.nsys-rep > $OUT/two/export.log 2>&1; echo "export rc=$?"
ls -la /tmp/two.*
python3 - <<'PY'
import sqlite3
c=sqlite3.connect("/tmp/two.sqlite")
print(c.execute("select globalPid, deviceId, count(*) from CUPTI_ACTIVITY_KIND_KERNEL group by 1,2").fetchall())
print(c.execute("select count(*) from NVTX_EVENTS").fetchall())
PY
$NSYS stats --report nvtx_sum,cuda_gpu_kern_sum --format csv --output /tmp/two_stats /tmp/two.sqlite > $OUT/two/stats.log 2>&1; echo "stats rc=$?"
cp /tmp/two_stats* $OUT/two/ 2>/dev/null
gzip -9 -c /tmp/two.sqlite > $OUT/two/nsys_export.sqlite.gz
ls -la $OUT/two
