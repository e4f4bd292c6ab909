#!/bin/bash
# usage: findings_per_bug.sh LABEL VENV   (LABEL: base | branch): T1-T5, default stream and --seed 1; results in /tmp/onefinding-runs/LABEL
label=$1; venv=$2; out=/tmp/onefinding-runs/$label; mkdir -p $out
count() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); f=d['findings']; print(len(f), '|', ' || '.join(x['oracle']+': '+x['reason'][:150] for x in f))" $1; }
cd "$(dirname "$0")"  # the trial's router and bugs; --json/--repro go under /tmp/onefinding-runs
for b in T1 T2 T3 T4 T5; do for s in d 1; do
  seedarg=""; [ "$s" != d ] && seedarg="--seed $s"
  d=$out/R-$b-s$s; rm -rf $d; mkdir -p $d
  start=$(date +%s.%N)
  nice -n 5 $venv/bin/radixcheck audit mybugs:$b $seedarg --json $d/audit.json --repro $d/repro > $d/out.txt 2>&1; rc=$?
  end=$(date +%s.%N)
  printf "R %s seed=%s rc=%s wall=%.1f load=%s files=%s findings=%s\n" $b $s $rc $(echo "$end - $start" | bc) "$(cut -d' ' -f1 /proc/loadavg)" "$(ls $d/repro 2>/dev/null | wc -l)" "$(count $d/audit.json)" >> $out/summary.txt
done; done
echo done >> $out/summary.txt
