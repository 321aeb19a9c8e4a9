# Issue 15: the parallel reader's inflate alone on the GPU host's CPUs, for the ingest crate's
# test binaries .gpuc/gzb-<b>.xz of B (default "base new"; built by `cargo test --release -p
# llmprof-ingest --lib --no-run`, stripped): the ignored test `gunzip::tests::inflate_rate`
# with T=8 workers on /dev/shm/k1g.json.gz (gzip -1) and k1g9.json.gz (zlib level 9), as
# gz-level.sh leaves them; alternating, 3 runs each, wall and user time.
set -u
B=${B:-"base new"}
for b in $B; do xz -dc .gpuc/gzb-$b.xz > /tmp/gzb-$b && chmod +x /tmp/gzb-$b; done
for F in k1g.json.gz k1g9.json.gz; do for i in 1 2 3; do for b in $B; do
  echo "$F $b $(GZ=/dev/shm/$F T=8 /usr/bin/time -f '%U user' /tmp/gzb-$b inflate_rate --ignored --nocapture 2>&1 | grep -E 'bytes|user' | tr '\n' ' ')"
done; done; done
