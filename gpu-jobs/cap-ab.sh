#!/bin/bash
# Session 44: glibc's heap cap (`M_ARENA_MAX` = 8, crates/cli/alloc.rs) on the work session 43
# did not measure it on: 64 ranks ingested at once, an Nsight Systems export, and a site build
# of 1,000 runs. C lists configurations as gz-ab.sh does (label:binary:settings, the binary
# $B/llmprof-<binary>.xz), alternating; by default .gpuc/llmprof-fin.xz (the cap) and
# .gpuc/llmprof-nocap.xz (the same code with the `mallopt(M_ARENA_MAX)` call left out).
# Whole-process wall, user time and peak RSS (`/usr/bin/time`), and the anonymous peak
# (`anonpeak.sh`) once each. PARTS picks from "ranks nsys site".
# Run from the repo root on the GPU host; N rounds (default 3), NSYS_COPIES copies of the
# H200 export (default 100).
set -u
R=$PWD
N=${N:-3}; RANKS=${RANKS:-64}; RUNS=${RUNS:-1000}
B=${B:-.gpuc}; C=${C:-"fin:fin: nocap:nocap:"}; PARTS=${PARTS:-"ranks nsys site"}
for b in $(for c in $C; do echo $c | cut -d: -f2; done | sort -u); do xz -dc $B/llmprof-$b.xz > /tmp/$b && chmod +x /tmp/$b; done
nproc; lscpu | grep "Model name"; free -g | head -2
W=/dev/shm/cap; rm -rf $W; mkdir -p $W
t() { /usr/bin/time -f "$1: %e s wall %U user %M KB peak" "${@:2}" >/dev/null 2>>$W/time.log; tail -1 $W/time.log; }
# each PART LABEL CMD...: every configuration N times, alternating, then its anonymous peak;
# the words OUTDIR in CMD stand for the configuration's own output directory.
each() {
  local part=$1; shift
  for i in $(seq $N); do for c in $C; do IFS=: read l b e <<< "$c"; rm -rf $W/o-$l
    t "$part $l" env $(echo $e | tr ',' ' ') /tmp/$b "${@/OUTDIR/$W/o-$l}"; done; done
  for c in $C; do IFS=: read l b e <<< "$c"; rm -rf $W/o-$l
    echo "$part $l anon: $(env $(echo $e | tr ',' ' ') bash $R/gpu-jobs/anonpeak.sh /tmp/$b "${@/OUTDIR/$W/o-$l}")"; done
}
on() { [[ " $PARTS " == *" $1 "* ]]; }

if on ranks; then
echo "== $RANKS ranks (the H200 kineto fixture relabelled, as ranks64.sh)"
RANKS=$RANKS python3 - <<'PY'
import gzip, os
raw = gzip.open("tests/fixtures/h200-qwen2-0.5b/kineto_trace.json.gz").read()
i = raw.index(b"{") + 1
os.makedirs("/dev/shm/cap/traces")
for r in range(int(os.environ["RANKS"])):
    head = b'\n  "distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d},' % (r, int(os.environ["RANKS"]))
    open("/dev/shm/cap/traces/rank-%02d.json" % r, "wb").write(raw[:i] + head + raw[i:])
PY
du -sh $W/traces
each ranks ingest --kineto $W/traces --out OUTDIR
rm -rf $W/traces
fi

if on nsys; then
echo "== nsys export: the H200 fixture's $((${NSYS_COPIES:-100})) copies (rep_nsys.py)"
zcat tests/fixtures/h200-qwen2-0.5b/nsys_export.sqlite.gz > $W/one.sqlite
python3 gpu-jobs/rep_nsys.py $W/one.sqlite $W/big.sqlite ${NSYS_COPIES:-100}; ls -la $W/big.sqlite
each nsys ingest --nsys $W/big.sqlite --out OUTDIR
rm -rf $W/*.sqlite
fi

if on site; then
echo "== site build, 1,000 runs (copies of the H200 trace's run)"
/tmp/$(echo ${C%% *} | cut -d: -f2) ingest --kineto tests/fixtures/h200-qwen2-0.5b/kineto_trace.json.gz --out $W/one >/dev/null 2>&1
run=$(ls -d $W/one/*/ | head -1); ls -la $run
for i in $(seq -w 0 $((RUNS - 1))); do mkdir -p $W/runs/r$i; sed "s/\"run_id\": \"[^\"]*\"/\"run_id\": \"r$i\"/" $run/bundle.json > $W/runs/r$i/bundle.json; cp $run/timeline.json $W/runs/r$i/ 2>/dev/null || cp $run/timeline.json.gz $W/runs/r$i/; done
du -sh $W/runs
each site site build --runs $W/runs --out OUTDIR
fi
python3 - $W/time.log <<'PY'
import collections, re, statistics, sys
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r"(\w+) (\S+): ([\d.]+) s wall ([\d.]+) user (\d+) KB peak", l)
    if m: d[m.group(1), m.group(2)].append((float(m.group(3)), float(m.group(4)), int(m.group(5)) / 1024))
for (part, c), x in d.items():
    med = [statistics.median(v[k] for v in x) for k in range(3)]
    print(f"{part:6} {c:8} medians of {len(x)}: {med[0]:.2f} s wall, {med[1]:.2f} user-s, {med[2]:.0f} MiB peak RSS  walls {[v[0] for v in x]}")
PY
[ -n "${KEEP:-}" ] || rm -rf $W
