#!/bin/bash
# Issue 14: a rank that hangs. Runs `llmprof capture --nproc 2` (light mode, the dense target)
# with a 30 s collective timeout, and stops rank 1 (SIGSTOP) once its baseline driver has run
# for $STOP_AFTER s (default 30): rank 0 then waits in a collective rank 1 never joins. What
# the capture does with that — how long it takes, what the pass's note says, what the run keeps
# — lands in $OUT/hang.tgz (capture.log, show.txt, the run, watcher.log). Needs what tp2.sh
# needs (.gpuc/llmprof.xz, .gpuc/nsyslibs.tar.xz) on a machine with two GPUs.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
STOP_AFTER=${STOP_AFTER:-30}
mkdir -p /tmp/gpuc
[ -x /tmp/gpuc/llmprof ] || { xz -dc "$R/.gpuc/llmprof.xz" > /tmp/gpuc/llmprof && chmod +x /tmp/gpuc/llmprof; }
[ -d /tmp/gpuc/nsyslibs ] || tar -xJf "$R/.gpuc/nsyslibs.tar.xz" -C /tmp/gpuc
export LD_LIBRARY_PATH=/tmp/gpuc/nsyslibs:${LD_LIBRARY_PATH:-}
d=/tmp/jobs/hang; runs=/tmp/runs-hang; rm -rf "$d" "$runs"; mkdir -p "$d"
# The pid of rank 1's driver in the baseline pass, once it exists.
rank1() {
  for p in /proc/[0-9]*; do
    tr '\0' '\n' < "$p/cmdline" 2>/dev/null | grep -q 'baseline/plan.json' || continue
    tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qx 'RANK=1' && { basename "$p"; return; }
  done
}
watch() {
  local pid=""
  for _ in $(seq 600); do pid=$(rank1); [ -n "$pid" ] && break; sleep 0.5; done
  [ -n "$pid" ] || { echo "no rank 1 driver seen"; return; }
  echo "$(date +%s.%N) rank 1 driver pid $pid; stopping it in $STOP_AFTER s"
  sleep "$STOP_AFTER"
  kill -STOP "$pid" && echo "$(date +%s.%N) SIGSTOP sent to $pid"
  sleep 150
  kill -CONT "$pid" 2>/dev/null && echo "$(date +%s.%N) SIGCONT sent to $pid (still alive)"
}
start=$(date +%s.%N)
/tmp/gpuc/llmprof capture --target configs/qwen2.5-0.5b.toml --nproc 2 --mode light \
  --repeats 3 --timeout 200 --set inputs.max_new_tokens=16 --set run.collective_timeout_s=30 \
  --out "$runs" > "$d/capture.out" 2> "$d/capture.log" &
cap=$!
watch > "$d/watcher.log" 2>&1 &
wpid=$!
wait $cap; rc=$?
end=$(date +%s.%N)
kill $wpid 2>/dev/null
echo "hang: capture rc=$rc wall=$(awk "BEGIN{print $end - $start}") s" | tee -a "$d/capture.log"
cat "$d/watcher.log"
grep -E "^(warning|error|llmprof: error|captured)|missing|rank" "$d/capture.log" | cut -c1-400 | tail -20
run=$(tail -1 "$d/capture.out")
[ -d "$run" ] || run=$(ls -d "$runs"/* 2>/dev/null | head -1)
[ -n "$run" ] && /tmp/gpuc/llmprof show "$run" > "$d/show.txt" 2>&1
[ -n "$run" ] && cp -r "$run" "$d/"
tar -C /tmp/jobs -czf "$OUT/hang.tgz" --exclude=tp-checkpoint --exclude='*.nsys-rep' \
  --exclude='kineto_trace.json*' hang
ls -la "$OUT/hang.tgz"
