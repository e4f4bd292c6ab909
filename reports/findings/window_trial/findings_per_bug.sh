#!/bin/bash
# usage: findings_per_bug.sh LABEL VENV BUG... (SEEDS="d 1 2" by default); window trial audits (ci and seeds), summary in /tmp/onefinding-runs/LABEL
label=$1; venv=$2; shift 2; out=/tmp/onefinding-runs/$label; mkdir -p $out
count() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); f=d['findings']; print(len(f), '|', ' || '.join(x['oracle']+': '+x['reason'][:150] for x in f))" $1; }
cd "$(dirname "$0")"  # the trial's cache and bugs; --json/--repro go under /tmp/onefinding-runs
for b in "$@"; do for s in ${SEEDS:-d 1 2}; do
  seedarg=""; [ "$s" != d ] && seedarg="--seed $s"
  d=$out/W-$b-s$s; rm -rf $d; mkdir -p $d
  start=$(date +%s.%N)
  nice -n 5 $venv/bin/radixcheck audit mybugs:make_$b -n 2 $seedarg --json $d/audit.json --repro $d/repro --report $d/card.md > $d/out.txt 2>&1; rc=$?
  end=$(date +%s.%N)
  printf "W %s seed=%s rc=%s wall=%.1f load=%s files=%s findings=%s\n" $b $s $rc $(echo "$end - $start" | bc) "$(cut -d' ' -f1 /proc/loadavg)" "$(ls $d/repro 2>/dev/null | wc -l)" "$(count $d/audit.json)" >> $out/summary.txt
done; done
echo done >> $out/summary.txt
