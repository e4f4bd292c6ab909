#!/bin/sh
# ./runbugs.sh STREAM BUG...   STREAM: d (the default stream) or a seed number
s=$1; shift
for b in "$@"; do
  d=runs/$s/$b; mkdir -p $d
  seed=""; [ "$s" != d ] && seed="--seed $s"
  start=$(date +%s.%N)
  nice -n 5 .venv/bin/radixcheck audit mybugs:$b $seed --report $d/card.md --json $d/result.json --repro $d/repro > $d/log.txt 2>&1
  rc=$?
  end=$(date +%s.%N)
  echo "$s $b exit=$rc wall=$(echo "$end - $start" | bc) load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a runs/summary.txt
done
