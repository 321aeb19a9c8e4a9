# Issue 15: where a `.gz` ingest's time goes on the GPU host's CPUs, for .gpuc/llmprof-<b>.xz
# (B, default "new") and the ingest crate's test binary .gpuc/gzb-<b>.xz: the CPU (threads per
# core), the 989 MB trace plain, as gzip -1 and as zlib level 9 (gz-level.sh's files), each
# ingest's wall, user and system time and context switches, then each thread kind's CPU and
# run-queue seconds (threadstat.py; the first run of each with the cores each kind kept busy
# every 25 ms), and the inflate alone (flate2; the parallel reader, 8 and 16 workers).
set -u
B=${B:-new}
. gpu-jobs/ab-setup.sh
lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|Model name|L2|L3)"
which perf || echo "no perf"
python3 $R/gpu-jobs/gzip_par.py k1g.json k1g9.json.gz 9 32
ls -la k1g9.json.gz
for b in $B; do
  [ -f $R/.gpuc/gzb-$b.xz ] && xz -dc $R/.gpuc/gzb-$b.xz > /tmp/gzb-$b && chmod +x /tmp/gzb-$b
  for i in 1 2 3; do for F in k1g.json k1g.json.gz k1g9.json.gz; do
    rm -rf r; /usr/bin/time -f "$b $F wall %e user %U sys %S invol-cs %c vol-cs %w" /tmp/l-$b ingest --kineto $F --out r 2>&1 | tail -1
  done; done
  for F in k1g.json k1g.json.gz k1g9.json.gz; do for t in 1 0; do
    rm -rf r; echo "$b $F threads:"
    STEP=0.025 TIMELINE=$t python3 $R/gpu-jobs/threadstat.py /tmp/l-$b ingest --kineto $F --out r
  done; done
  if [ -x /tmp/gzb-$b ]; then for F in k1g.json.gz k1g9.json.gz; do for T in 0 8 16; do
    echo "$b $F inflate T=$T $(GZ=/dev/shm/$F T=$T /usr/bin/time -f '%U user' /tmp/gzb-$b inflate_rate --ignored --nocapture 2>&1 | grep -E 'bytes|user' | tr '\n' ' ')"
  done; done; fi
done
