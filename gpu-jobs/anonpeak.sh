#!/bin/bash
# usage: anonpeak.sh cmd...  -> prints wall, peak RssAnon, peak RssFile (sampled every 2ms)
start=$(date +%s.%N)
"$@" >/dev/null 2>&1 &
pid=$!
pa=0; pf=0
while kill -0 $pid 2>/dev/null; do
  if [ -r /proc/$pid/status ]; then
    read a f < <(awk '/RssAnon/{a=$2}/RssFile/{f=$2}END{print a+0, f+0}' /proc/$pid/status 2>/dev/null)
    [ "${a:-0}" -gt $pa ] && pa=$a; [ "${f:-0}" -gt $pf ] && pf=$f
  fi
  sleep 0.002
done
end=$(date +%s.%N)
echo "wall $(python3 -c "print(round($end - $start, 2))") s, peak anon $((pa/1024)) MiB, peak file $((pf/1024)) MiB"
