#!/bin/sh
# run_bugs.sh NICE BUG... : audit each bug under the default stream and seeds 1..3, keep the logs, repros and JSON
nicev=$1; shift
for bug in "$@"; do
  for seed in default 1 2 3; do
    out=runs/$bug/$seed; mkdir -p $out; rm -rf $out/repros
    extra=""; [ $seed != default ] && extra="--seed $seed"
    start=$(date +%s.%N)
    nice -n $nicev .venv/bin/radixcheck audit bugs:$bug -n 0 $extra --json $out/audit.json --report $out/audit.md --repro $out/repros > $out/log 2>&1
    rc=$?
    end=$(date +%s.%N)
    echo "$bug $seed rc=$rc wall=$(echo "$end - $start" | bc) load=$(cut -d' ' -f1 /proc/loadavg) first=$(grep -m1 'FAIL' $out/log | sed 's/^\[ *\([0-9.]*\) s\].*/\1/')" | tee -a runs/summary.txt
  done
done
