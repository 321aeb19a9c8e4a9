#!/bin/bash
# Issue 16: check the OCR-2 headroom prediction (batch 20, estimated 735.9 decode tok/s from
# Run from the repo root on the GPU host with the stripped release binary xz-compressed at
# .gpuc/llmprof.xz (or gzip at .gpuc/llmprof.gz) and $OUT set by the device runner.
# batch 1's 36.8) by capturing the suggested batch.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
xz -dc $R/.gpuc/llmprof.xz > /tmp/llmprof-bin && chmod +x /tmp/llmprof-bin
BIN=/tmp/llmprof-bin
RUNS=/tmp/runs-ocr
mkdir -p $OUT/ocr
timeout -s INT 500 $BIN capture --target configs/deepseek-ocr2.toml --mode light --set inputs.max_new_tokens=16 --set inputs.batch_size=20 --out $RUNS > $OUT/ocr/capture.log 2>&1
echo "capture rc=$?"; tail -5 $OUT/ocr/capture.log
run=$(ls -d $RUNS/2* | tail -1)
$BIN show $run > $OUT/ocr/show.txt 2>&1
python3 - $run/bundle.json <<'PY'
import json,sys
b=json.load(open(sys.argv[1])); r=b['analysis']['run']
print("measured decode tok/s at batch 20:", r.get('decode_tokens_per_s'), "TPOT", r.get('tpot_ms') if 'tpot_ms' in r else '')
m=b['analysis'].get('memory') or {}
print("headroom at batch 20:", {k:v for k,v in (m.get('headroom') or {}).items() if k!='arithmetic'})
PY
grep -A12 "Headline" $OUT/ocr/show.txt | head -14
cd $RUNS && tar czf $OUT/ocr/runs.tgz --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.qdstrm' --exclude='kineto_trace.json*' . ; ls -la $OUT/ocr
