# Issue 15: the .gz path at three trace sizes on the GPU host's CPUs, for the binaries
# .gpuc/llmprof-<b>.xz of B (default "base new"): the 989 MB trace (ab-gz.sh: median of 5 and
# the rate ratio), then the fixture ×12 (1.98 GB) and ×30 (4.97 GB) with big-kineto.sh (3 runs
# each, alternating, one anonymous peak each).
set -u
B=${B:-"base new"}
echo "== 1 GB"; B="$B" bash gpu-jobs/ab-gz.sh 2>&1 | grep -v "^-rw"
rm -f /dev/shm/k1g*
echo "== 2 GB"; N=12 B="$B" bash gpu-jobs/big-kineto.sh 2>&1 | grep -v "^r/\|^next\|Model"
echo "== 5 GB"; N=30 B="$B" bash gpu-jobs/big-kineto.sh 2>&1 | grep -v "^r/\|^next\|Model"
