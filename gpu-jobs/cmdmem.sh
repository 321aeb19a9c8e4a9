#!/bin/bash
# Issue 16: a --cmd workload reports its memory on its stages.jsonl lines (llmprof.stage,
# Run from the repo root on the GPU host with the stripped release binary xz-compressed at
# .gpuc/llmprof.xz (or gzip at .gpuc/llmprof.gz) and $OUT set by the device runner.
# llmprof.report_memory); the run's Memory table comes from them, not NVML.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
gunzip -c $R/.gpuc/llmprof.gz > /tmp/llmprof-bin && chmod +x /tmp/llmprof-bin
BIN=/tmp/llmprof-bin
RUNS=/tmp/runs-cmd
mkdir -p $OUT/cmd
export PYTHONPATH=$R/python WORKLOAD_STEPS=32
timeout -s INT 400 $BIN capture --cmd "python3 examples/python-workload/workload.py" --stages prefill,decode \
  --mode light --repeats 2 --model-config examples/python-workload/config.json \
  --prompt-tokens 512 --decode-steps 32 --batch-size 1 --out $RUNS > $OUT/cmd/capture.log 2>&1
echo "capture rc=$?"; tail -4 $OUT/cmd/capture.log
run=$(ls -d $RUNS/2* | tail -1)
$BIN show $run > $OUT/cmd/show.txt 2>&1
grep -B2 -A12 "memory    device" $OUT/cmd/show.txt
grep -B2 -A8 -i "headroom" $OUT/cmd/show.txt | head -40
head -c 600 $run/raw/baseline/stages.jsonl; echo
cd $RUNS && tar czf $OUT/cmd/runs.tgz --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.sqlite.gz' --exclude='kineto_trace.json*' . ; ls -la $OUT/cmd
