#!/bin/bash
# Session 44: a real gigabyte PyTorch-profiler trace, in the profiler's own layout, against the
# 989 MB trace rep_kineto.py makes from the 180 MB fixture (one event per line, Python's json
# layout), on one instance. The real one is the fixture's own workload
# (tests/fixtures/h200-qwen2-0.5b/kineto_workload.py: a Qwen2-0.5B-shaped model, random
# weights, a 512-token prefill and STEPS decode steps, default 360). Then gz-ab.sh on each
# (plain, gzip -1, level 9; medians of N), real, synthetic, real again, with .gpuc/llmprof-$BIN.xz.
# ROUNDS picks the order (default "real syn real"); STATS=0 skips counting the real trace's events.
# Run from the repo root on the GPU host; the traces are left in /dev/shm.
set -u
R=$PWD; STEPS=${STEPS:-360}; N=${N:-7}; BIN=${BIN:-fin}; ROUNDS=${ROUNDS:-"real syn real"}
START=$(date +%s); el() { echo "[$(( $(date +%s) - START )) s] $*"; }
el "profiling $STEPS decode steps"
python3 tests/fixtures/h200-qwen2-0.5b/kineto_workload.py /dev/shm/real.json $STEPS 2>&1 | grep -v Warning | tail -3
el "trace written"; ls -la /dev/shm/real.json
[ "${STATS:-1}" = 0 ] || python3 - <<'PY'
import collections, json
doc = json.load(open("/dev/shm/real.json"))
ev = doc["traceEvents"]
print("events", len(ev), collections.Counter(e.get("cat") for e in ev).most_common(8))
PY
for r in $ROUNDS; do
  cd $R; el $r
  if [ $r = real ]; then BIG=/dev/shm/real.json C="real:$BIN:" N=$N Z=9 bash gpu-jobs/gz-ab.sh 2>&1 | grep -E "median|peak|k1g.*gz$"
  else C="syn:$BIN:" N=$N Z=9 bash gpu-jobs/gz-ab.sh 2>&1 | grep -E "median|peak|k1g.*gz$"; fi
done
el done
