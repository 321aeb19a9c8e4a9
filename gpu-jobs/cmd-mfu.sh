#!/bin/bash
# Issue 16 proof on the GPU host: MFU for a --cmd workload, and the Chrome export of a fresh run.
#
# Runs from the repo root with the release binary at .gpu/llmprof. The workload is the
# plain-PyTorch script examples/python-workload/workload.py (Qwen2.5-0.5B's shape, random
# weights, NVTX + stages.jsonl through the repo's python/llmprof package on PYTHONPATH), 32
# decode steps, 3 measured iterations. The job
#   1. `llmprof capture --cmd ... --stages prefill,decode --mode standard --model-config
#      examples/python-workload/config.json --prompt-tokens 512 --decode-steps 32 --batch-size 1`
#      (baseline, kineto and nsys passes, no ncu: about 2 minutes on an H100);
#   2. `llmprof show RUN` -> $OUT/show.txt: the Efficiency table must show prefill and decode
#      MFU/MBU (not n/a), each below 100%;
#   3. `llmprof export RUN --format chrome -o $OUT/trace/rank-0.json` (then gzipped), timed ->
#      $OUT/export.txt; check.txt: the trace's kernel calls and ns per name against the bundle,
#      its annotations, NVML counters, launch calls and flows (a fresh run keeps its launch
#      calls in launch_calls.json), PASS or FAIL on the last line (python3 stdlib only);
#   4. tests/manual/stage2_profile/check_run.py on the run -> $OUT/check_run.txt (pass/fail);
#   5. runs.tgz: the run without its big raw traces.
# Under 5 minutes of wall time.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
export LD_LIBRARY_PATH=$R/.gpu/nsyslibs:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$R/python${PYTHONPATH:+:$PYTHONPATH}
export WORKLOAD_STEPS=32 WORKLOAD_ITERATIONS=3
BIN=$R/.gpu/llmprof
RUNS=/tmp/runs-cmd-mfu
rm -rf "$RUNS"
timeout -s INT 300 "$BIN" capture --cmd "python3 examples/python-workload/workload.py" \
  --stages prefill,decode --mode standard \
  --model-config examples/python-workload/config.json \
  --prompt-tokens 512 --decode-steps 32 --batch-size 1 --out "$RUNS" > "$OUT/capture.log" 2>&1
echo "capture rc=$?"; tail -n 4 "$OUT/capture.log"
run=$(ls -d "$RUNS"/2* 2>/dev/null | tail -n 1)
[ -n "$run" ] || exit 1
"$BIN" show "$run" > "$OUT/show.txt" 2>&1
grep -n "MFU\|MBU\|prefill\|decode" "$OUT/show.txt" | head -n 30
mkdir -p "$OUT/trace"
/usr/bin/time -f "%e s %M KB" "$BIN" export "$run" --format chrome -o "$OUT/trace/rank-0.json" > "$OUT/export.txt" 2>&1
cat "$OUT/export.txt"
python3 - "$run/bundle.json" "$OUT/trace/rank-0.json" > "$OUT/check.txt" 2>&1 <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
t = json.load(open(sys.argv[2]))
ev = t["traceEvents"]
tot = {}
for e in ev:
    if e.get("cat") == "kernel":
        c = tot.setdefault(e["name"], [0, 0])
        c[0] += 1
        c[1] += round(e["dur"] * 1000)
bad = [k["name"] for k in b["kernels"] if k["kind"] == "kernel" and tot.get(k["name"]) != [k["calls"], k["total_ns"]]]
print("kernel names:", len(tot), "mismatched:", len(bad), bad[:3])
for cat in ("user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset"):
    print(cat, sum(1 for e in ev if e.get("cat") == cat))
print("counters", sum(1 for e in ev if e.get("ph") == "C"))
calls = sum(1 for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver"))
flows = sum(1 for e in ev if e.get("ph") == "f")
print("launch calls", calls, "flows", flows)
print("PASS" if not bad and tot and calls > 0 and flows == calls else "FAIL")
PY
cat "$OUT/check.txt"
gzip -f "$OUT/trace/rank-0.json"
python3 tests/manual/stage2_profile/check_run.py "$run" > "$OUT/check_run.txt" 2>&1
echo "check_run rc=$?"; tail -n 5 "$OUT/check_run.txt"
cd "$RUNS" && tar czf "$OUT/runs.tgz" --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.qdstrm' --exclude='kineto_trace.json*' . ; ls -la "$OUT"
