# Issue 15: a PyTorch-profiler trace past Perfetto's 4 GB cap, on the GPU host's CPUs. Makes a
# 5 GB trace from the 180 MB H200 fixture (N=30 copies, rep_kineto.py on 16 processes) and its
# one-member gzip -1 (gzip_par.py; the trailer's size field wraps past 4 GiB), then ingests
# each 3 times with each binary .gpuc/llmprof-<b>.xz of B (default "new"), alternating, and
# samples their anonymous peaks.
set -u
R=$PWD; B=${B:-new}; N=${N:-30}
for b in $B; do xz -dc .gpuc/llmprof-$b.xz > /tmp/l-$b && chmod +x /tmp/l-$b; done
echo "cores $(nproc)"; lscpu | grep -m1 "Model name"
cd /dev/shm
gunzip -c $R/tests/fixtures/h200-qwen2-0.5b/kineto_trace.json.gz > k180.json
/usr/bin/time -f "made the trace in %e s" python3 $R/gpu-jobs/rep_kineto.py k180.json big.json $N 16
/usr/bin/time -f "gzipped it in %e s" python3 $R/gpu-jobs/gzip_par.py big.json big.json.gz 1
ls -la big.json big.json.gz
for i in 1 2 3; do for F in big.json big.json.gz; do for b in $B; do
  rm -rf r; /usr/bin/time -f "$F $b %e s, user %U s, max RSS %M KB" /tmp/l-$b ingest --kineto $F --out r 2>&1 | tail -3 | grep -v '^r/\|^next'
done; done; done
for F in big.json big.json.gz; do for b in $B; do rm -rf r; echo "$F $b $(bash $R/gpu-jobs/anonpeak.sh /tmp/l-$b ingest --kineto $F --out r)"; done; done
/tmp/l-$b ingest --kineto big.json.gz --out r2 2>&1 | tail -2
