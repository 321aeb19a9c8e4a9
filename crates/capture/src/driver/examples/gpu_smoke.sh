#!/usr/bin/env bash
# Run the driver's four passes on the Qwen2.5-0.5B-shaped example plans on a GPU host and check
# the outputs (examples/check_outputs.py). The nsys pass runs under Nsight Systems.
#   gpu_smoke.sh DRIVER_DIR WORK_DIR RESULT_DIR [NSYS_LIB_DIR]
# DRIVER_DIR holds driver.py and examples/; WORK_DIR receives all outputs; RESULT_DIR receives
# the small ones (metadata, timings, flops, the gzipped kineto trace, the nsys report, the log).
set -u
drv=$1 work=$2 res=$3 lib=${4:-}
nsys=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
mkdir -p "$work" "$res"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
python3 -c 'import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__, torch.cuda.is_available())'
plan() {  # plan PASS -> WORK/plan_PASS.json with out_dir = WORK/run
  python3 - "$drv/examples/plan_$1.json" "$work/run" > "$work/plan_$1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["out_dir"] = sys.argv[2]; print(json.dumps(d, indent=1))
PY
}
rc_all=0
for p in baseline kineto; do
  plan $p; s=$(date +%s.%N)
  python3 "$drv/driver.py" "$work/plan_$p.json"; rc=$?
  echo "== $p: rc=$rc, $(python3 -c "print(round($(date +%s.%N)-$s,1))") s"; [ $rc = 0 ] || rc_all=1
done
plan nsys; s=$(date +%s.%N)
LD_LIBRARY_PATH=$lib "$nsys" profile -t cuda,nvtx --sample=none --cpuctxsw=none -o "$work/p" -f true \
  python3 "$drv/driver.py" "$work/plan_nsys.json"; rc=$?
echo "== nsys: rc=$rc, $(python3 -c "print(round($(date +%s.%N)-$s,1))") s"; [ $rc = 0 ] || rc_all=1
LD_LIBRARY_PATH=$lib "$nsys" export --type sqlite -o "$work/p.sqlite" -f true "$work/p.nsys-rep" >/dev/null || rc_all=1
plan flops; s=$(date +%s.%N)
python3 "$drv/driver.py" "$work/plan_flops.json"; rc=$?
echo "== flops: rc=$rc, $(python3 -c "print(round($(date +%s.%N)-$s,1))") s"; [ $rc = 0 ] || rc_all=1
echo "== bad plan / exit codes"
echo '{"pass":"nsys"}' > "$work/bad.json"; python3 "$drv/driver.py" "$work/bad.json"; echo "rc=$?"
PLAN_FOR_ANALYTIC="$work/plan_flops.json" python3 "$drv/examples/check_outputs.py" "$work/run" "$work/p.sqlite" || rc_all=1
ls -la "$work" "$work/run"
for f in metadata.json baseline.json kineto_timing.json nsys_timing.json flops.json; do cp "$work/run/$f" "$res/"; done
gzip -c "$work/run/kineto_trace.json" > "$res/kineto_trace.json.gz"
cp "$work/p.nsys-rep" "$res/" 2>/dev/null
echo "== smoke rc=$rc_all"
exit $rc_all
