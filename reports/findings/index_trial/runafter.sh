#!/bin/sh
# ./runafter.sh STREAM TARGET...: audits with the fixed suite (the worktree's venv), logs in after/
s=$1; shift
for t in "$@"; do
  seed=""; [ "$s" != d ] && seed="--seed $s"
  d=after/$s/$(echo $t | tr ':' '_'); mkdir -p $d
  start=$(date +%s.%N)
  nice -n 5 /work/wt-trial-index/.venv/bin/radixcheck audit $t $seed --report $d/card.md --repro $d/repro > $d/log.txt 2>&1
  rc=$?
  echo "$s $t exit=$rc wall=$(echo "$(date +%s.%N) - $start" | bc) load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a after/summary.txt
done
