# Issue 15: the kineto (differential) and nsys fuzz targets on the GPU host's cores.
# usage: fuzz-host.sh SECONDS_KINETO SECONDS_NSYS  (binaries: .gpuc/fz-{kineto,nsys}.xz, stripped)
# or TARGETS="gunzip:300" fuzz-host.sh: any targets, each with its seconds. Seeds: the committed
# corpus, and .gpuc/corp-<t>/ where it exists (a corpus carried from this machine), or
# .gpuc/corp-<t>.tar.xz holding a folder <t>/ (thousands of small files carry far smaller so):
#   tar -C /tmp/fz -cf - kineto | xz -T2 -6 > .gpuc/corp-kineto.tar.xz
set -u
R=$PWD; J=$(nproc)
TARGETS=${TARGETS:-"kineto:${1:-180} nsys:${2:-120}"}
for tt in $TARGETS; do
  t=${tt%%:*}; xz -dc .gpuc/fz-$t.xz > /tmp/fz-$t && chmod +x /tmp/fz-$t
  if [ -f .gpuc/corp-$t.tar.xz ] && [ ! -d .gpuc/corp-$t ]; then
    mkdir -p /tmp/corp && tar -C /tmp/corp -xJf .gpuc/corp-$t.tar.xz && mv /tmp/corp/$t .gpuc/corp-$t
  fi
done
run() {
  t=$1; secs=$2; dict=""; [ -f $R/tests/fuzz/$t.dict ] && dict="-dict=$R/tests/fuzz/$t.dict"
  rm -rf /tmp/c-$t /tmp/a-$t; mkdir -p /tmp/c-$t /tmp/a-$t; cd /tmp/a-$t
  extra=""; [ -d $R/.gpuc/corp-$t ] && extra=$R/.gpuc/corp-$t
  /tmp/fz-$t /tmp/c-$t $R/tests/fuzz/corpus/$t $extra $dict -jobs=$J -workers=$J -rss_limit_mb=2048 \
    -timeout=10 -max_len=65536 -max_total_time=$secs -print_final_stats=1 > /tmp/fz-$t.log 2>&1
  execs=$(grep -h "stat::number_of_executed_units" fuzz-*.log | awk '{s+=$2} END{print s+0}')
  cov=$(grep -ho "cov: [0-9]*" fuzz-*.log | awk '{print $2}' | sort -n | tail -1)
  rss=$(grep -ho "rss: [0-9]*Mb" fuzz-*.log | tr -dc '0-9\n' | sort -n | tail -1)
  echo "$t: $J workers, $secs s, executions $execs, max cov $cov, max rss ${rss}Mb, findings: $(ls /tmp/a-$t | grep -c -E '^(crash|timeout|oom|leak)-')"
  ls /tmp/a-$t | grep -E '^(crash|timeout|oom)-' | head -3
  # Findings come back under $OUT (when the runner gives one), with the log that names them.
  if [ -n "${OUT:-}" ] && ls /tmp/a-$t | grep -q -E '^(crash|timeout|oom)-'; then
    mkdir -p $OUT/fuzz-$t; cp /tmp/a-$t/crash-* /tmp/a-$t/timeout-* /tmp/a-$t/oom-* $OUT/fuzz-$t/ 2>/dev/null
    grep -h -B2 -A8 "panicked\|ERROR" /tmp/a-$t/fuzz-*.log | head -60 > $OUT/fuzz-$t/log.txt
  fi
  cd $R
}
for tt in $TARGETS; do run ${tt%%:*} ${tt#*:}; done
