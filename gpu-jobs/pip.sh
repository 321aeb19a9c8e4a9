#!/bin/bash
# Issue 17 proof on the GPU host: `pip install llmprof` without Rust, then a Python workload
# marked with `llmprof.stage` captured with `llmprof capture --cmd`.
#
# Carry: gpu-jobs/dist/ (not committed) holding the wheel `bash .ci/wheel` built
# (target/wheels/llmprof-*-manylinux_2_28_x86_64.whl, copied there). The job
#   1. makes a fresh venv with --system-site-packages (torch and transformers are system-wide
#      here) and pip-installs the wheel from the file (--no-index: no network, no Rust);
#   2. runs, with PATH = that venv + system dirs, `llmprof capture --cmd "python
#      examples/python-workload/workload.py" --stages prefill,decode --mode standard
#      --repeats 3` (3 baseline runs, the kineto pass, the nsys pass);
#   3. writes under $OUT: env.txt (glibc, llmprof --version, where llmprof and the package
#      came from, whether cargo/rustc exist), pip.log, capture.log, show.txt (`llmprof show`:
#      the Capture section's baseline line and energy table are the per-stage figures --cmd
#      lacked), summary.json (capture.baseline, capture.energy, capture.overhead, the stage
#      rows), and runs.tgz (the run without its big raw traces).
# About 3 minutes on an H100.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
export LD_LIBRARY_PATH=$R/.gpu/nsyslibs:${LD_LIBRARY_PATH:-}
V=/tmp/llmprof-wheel-venv
RUNS=/tmp/runs-pip
rm -rf "$V" "$RUNS"
wheel=$(ls "$R"/gpu-jobs/dist/llmprof-*.whl 2>/dev/null | head -n 1)
if [ -z "$wheel" ]; then echo "no wheel in gpu-jobs/dist/: carry it (bash .ci/wheel builds it)"; exit 1; fi
python3 -m venv --system-site-packages "$V"
# The host's python3 may itself be a venv (/opt/torch/.venv): --system-site-packages then
# reaches the base interpreter, not torch. A .pth line makes the host's packages visible.
host_site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
echo "$host_site" > "$("$V/bin/python" -c 'import site; print(site.getsitepackages()[0])')/host-site.pth"
"$V/bin/python" -m pip install --no-index --no-deps "$wheel" > "$OUT/pip.log" 2>&1
echo "pip install rc=$?"
export PATH="$V/bin:/usr/local/bin:/usr/bin:/bin"
{
  echo "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
  echo "glibc: $(ldd --version | head -n 1)"
  echo "llmprof: $(command -v llmprof) -> $(llmprof --version)"
  echo "package: $(python -c 'import llmprof; print(llmprof.__file__)')"
  echo "torch: $(python -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))')"
  echo "cargo: $(command -v cargo || echo none); rustc: $(command -v rustc || echo none)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout -s INT 420 llmprof capture --cmd "python examples/python-workload/workload.py" \
  --stages prefill,decode --mode standard --repeats 3 --out "$RUNS" > "$OUT/capture.log" 2>&1
echo "capture rc=$?"; tail -n 4 "$OUT/capture.log"
run=$(ls -d "$RUNS"/2* 2>/dev/null | tail -n 1)
[ -n "$run" ] || exit 1
llmprof show "$run" > "$OUT/show.txt" 2>&1
python - "$run/bundle.json" > "$OUT/summary.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
c = b.get("capture") or {}
print(json.dumps({
    "baseline": c.get("baseline"),
    "energy": c.get("energy"),
    "energy_note": c.get("energy_note"),
    "overhead": c.get("overhead"),
    "missing": c.get("missing"),
    "stages": [{k: s.get(k) for k in ("name", "instances", "wall_ns", "gpu_proj_ns")} for s in b.get("stages", [])],
}, indent=1))
PY
grep -n "baseline \|energy\|prefill\|decode" "$OUT/show.txt" | head -n 40
cd "$RUNS" && tar czf "$OUT/runs.tgz" --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.qdstrm' --exclude='kineto_trace.json*' . ; ls -la "$OUT"
