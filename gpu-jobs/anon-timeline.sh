# Issue 15: a process's anonymous memory over time, beside its spans.
# usage: anon-timeline.sh OUT_PREFIX cmd...  -> OUT_PREFIX.mem ("ms RssAnon-KB" lines, sampled
# as fast as a shell loop goes, every 5-10 ms), OUT_PREFIX.spans (LLMPROF_SPANS), and the peak.
# e.g. for F in k1g.json k1g9.json.gz; do bash gpu-jobs/anon-timeline.sh /tmp/$F llmprof ingest --kineto $F --out r; done
set -u
out=$1; shift
LLMPROF_SPANS=$out.spans "$@" >/dev/null 2>&1 &
pid=$!; s=$(date +%s%N)
while kill -0 $pid 2>/dev/null; do
  a=$(awk '/RssAnon/{print $2}' /proc/$pid/status 2>/dev/null)
  echo "$(( ($(date +%s%N) - s) / 1000000 )) ${a:-0}"
  sleep 0.002
done > $out.mem
echo "peak (ms KB): $(sort -k2 -n $out.mem | tail -1)"
