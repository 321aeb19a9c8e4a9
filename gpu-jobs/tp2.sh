#!/bin/bash
# Issue 14: `llmprof capture --nproc N` on a machine with N GPUs (nvidia-h200-x2 or
# nvidia-h100-x2), and the same targets on one GPU for comparison. Each argument is one capture,
# NAME:CONFIG:NPROC[:KEEP][:ARGS] (NPROC 0 = one process without the launcher; KEEP=all keeps
# the raw traces, for fixtures; ARGS are extra capture arguments, comma-separated), e.g.
#   bash gpu-jobs/tp2.sh dense2:qwen2.5-0.5b:2 moe2:qwen3-moe-small:2 dense1:qwen2.5-0.5b:0
# Every capture runs in $MODE (default standard), 3 measured iterations, 16 new tokens, each
# pass at most $TIMEOUT s (default 200). Runs from the repo root with the binary at .gpuc/llmprof.xz and elfutils'
# libdw/libelf at .gpuc/nsyslibs.tar.xz (carried). For each capture $OUT/NAME.tgz holds
# capture.log (stderr, with the wall time), show.txt and the run directory (without the big raw
# traces unless KEEP=all); env.txt says what the machine has.
set -u
export PYTHONUNBUFFERED=1
MODE=${MODE:-standard}
TIMEOUT=${TIMEOUT:-200}
R=$PWD
mkdir -p /tmp/gpuc
[ -x /tmp/gpuc/llmprof ] || { xz -dc "$R/.gpuc/llmprof.xz" > /tmp/gpuc/llmprof && chmod +x /tmp/gpuc/llmprof; }
[ -d /tmp/gpuc/nsyslibs ] || tar -xJf "$R/.gpuc/nsyslibs.tar.xz" -C /tmp/gpuc
export LD_LIBRARY_PATH=/tmp/gpuc/nsyslibs:${LD_LIBRARY_PATH:-}
{
  python3 -c 'import sys, torch, transformers; print(sys.executable, torch.__version__, transformers.__version__, torch.cuda.device_count(), torch.cuda.nccl.version())'
  nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv,noheader
  nvidia-smi topo -m 2>&1 | head -4
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)'
} > "$OUT/env.txt" 2>&1
for job in "$@"; do
  IFS=: read -r name config nproc keep args <<< "$job"
  d=/tmp/jobs/$name; runs=/tmp/runs-$name; rm -rf "$d" "$runs"; mkdir -p "$d"
  ranks=(); [ "$nproc" -gt 0 ] && ranks=(--nproc "$nproc")
  extra=(); [ -n "${args:-}" ] && IFS=, read -r -a extra <<< "$args"
  start=$(date +%s.%N)
  /tmp/gpuc/llmprof capture --target "configs/$config.toml" "${ranks[@]}" --mode "$MODE" \
    --repeats 3 --timeout "$TIMEOUT" --set inputs.max_new_tokens=16 "${extra[@]}" --out "$runs" \
    > "$d/capture.out" 2> "$d/capture.log"
  rc=$?
  end=$(date +%s.%N)
  echo "$name: capture rc=$rc wall=$(awk "BEGIN{print $end - $start}") s" | tee -a "$d/capture.log"
  grep -E "^(warning|energy|error|llmprof: error|captured)" "$d/capture.log" | cut -c1-220
  run=$(tail -1 "$d/capture.out")
  [ -d "$run" ] || run=$(ls -d "$runs"/.capture-* 2>/dev/null | head -1)
  [ -n "$run" ] && /tmp/gpuc/llmprof show "$run" > "$d/show.txt" 2>&1
  grep -A6 "^Ranks" "$d/show.txt" | head -8
  excl=(--exclude=tp-checkpoint --exclude='*.nsys-rep')
  [ "${keep:-}" = all ] || excl+=(--exclude=profile.sqlite --exclude='kineto_trace.json*')
  [ -n "$run" ] && cp -r "$run" "$d/"
  tar -C /tmp/jobs -czf "$OUT/$name.tgz" "${excl[@]}" "$name"
  ls -la "$OUT/$name.tgz"
done
