#!/bin/sh
# run_scale.sh: radixcheck bench (device tier, beside the reference) and the production-scale tier world,
# on the correct cache and the two scale bugs
for t in hybridcache:make bugs:EvictScansLeaves bugs:RecursiveLocks; do
  n=$(echo $t | tr ':' '_'); u=$(uptime | sed 's/.*average: //'); s=$(date +%s.%N)
  nice -n 5 .venv/bin/radixcheck bench $t --json scale/bench_$n.json --fail-on-flag > scale/bench_$n.log 2>&1; rc=$?
  echo "bench $t rc=$rc wall=$(echo "$(date +%s.%N) - $s" | bc) load_before=$u load_after=$(uptime | sed 's/.*average: //')" | tee -a scale/summary.txt
done
for t in hybridcache:make bugs:EvictScansLeaves bugs:RecursiveLocks; do for p in write_through write_back; do
  n=$(echo $t | tr ':' '_'); u=$(uptime | sed 's/.*average: //'); s=$(date +%s.%N)
  nice -n 5 .venv/bin/python -m radixcheck.reports.tier_scale --target $t --policy $p --seeds 2 > scale/tier_scale_${n}_$p.log 2>&1; rc=$?
  echo "tier_scale $t $p seeds 0-1 rc=$rc wall=$(echo "$(date +%s.%N) - $s" | bc) load_before=$u" | tee -a scale/summary.txt
done; done
