#!/bin/bash
# 64-rank ingest benchmark: the H200 kineto fixture relabelled as ranks 0..63 of one job.
# Run from the repo root on the GPU host with the stripped release binary xz-compressed at
# .gpuc/llmprof.xz (or gzip at .gpuc/llmprof.gz) and $OUT set by the device runner.
set -u
B=/tmp/llmprof-bin; zcat .gpuc/llmprof.gz > $B; chmod +x $B  # results: README "64 ranks, measured"
D=/dev/shm/r64; rm -rf $D; mkdir -p $D/traces
nproc; free -g | head -2; lscpu | grep "Model name"
python3 - <<'PY'
import gzip
raw = gzip.open("tests/fixtures/h200-qwen2-0.5b/kineto_trace.json.gz").read()
i = raw.index(b"{") + 1
for r in range(64):
    head = b'\n  "distributedInfo": {"backend": "nccl", "rank": %d, "world_size": 64},' % r
    open("/dev/shm/r64/traces/rank-%02d.json" % r, "wb").write(raw[:i] + head + raw[i:])
print("trace bytes", len(raw))
PY
ls $D/traces | wc -l; du -sh $D/traces
echo "== single rank x5"
for i in 1 2 3 4 5; do /usr/bin/time -f "single wall %e s maxrss %M KB" $B ingest --kineto $D/traces/rank-00.json --out $D/single >/dev/null 2>>$D/single.log; done
grep single $D/single.log
echo "== 64 ranks x3"
for i in 1 2 3; do /usr/bin/time -f "ranks64 wall %e s maxrss %M KB" $B ingest --kineto $D/traces --out $D/multi 2>$D/multi-$i.log >/dev/null; tail -3 $D/multi-$i.log; done
echo "== 64 ranks, 1 job"
/usr/bin/time -f "ranks64-j1 wall %e s maxrss %M KB" $B ingest --kineto $D/traces --jobs 1 --out $D/multi1 2>$D/multi-j1.log >/dev/null; tail -2 $D/multi-j1.log
R=$(ls -d $D/multi/*/ | head -1); du -sh $R; ls $R/ranks | wc -l
$B show $R | head -30
rm -rf $D
