# Issue 15: the parallel inflate on the GPU host's CPUs. Runs ab-gz.sh for B (default
# "old new"), then the inflate alone on the 1 GB .gz, median of 3: the ingest crate's ignored
# `inflate_rate` test, its test binary carried as .gpuc/gzbnow.xz (built by
# `cargo test --release -p llmprof-ingest --no-run`), with T=0 (flate2 alone) and the parallel
# reader's T workers.
set -u
B=${B:-"old new"} bash gpu-jobs/ab-gz.sh
xz -dc .gpuc/gzbnow.xz > /tmp/gzb && chmod +x /tmp/gzb
for T in 0 8 16; do for i in 1 2 3; do echo "T=$T: $(GZ=/dev/shm/k1g.json.gz T=$T /tmp/gzb inflate_rate --ignored --nocapture 2>&1 | grep bytes)"; done; done
