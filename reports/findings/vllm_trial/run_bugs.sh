#!/bin/bash
# Each planted bug, audited at page size 2 (the window W=4 spans two pages) under the default stream and seeds 1..3.
# Usage: ./run_bugs.sh [Bug ...]   Output: runs/<Bug>-<seed>.{out,err,json} and repros/<Bug>-<seed>/
cd "$(dirname "$0")"
bugs=${*:-$(.venv/bin/python -c "import bugs; print(' '.join(c.__name__ for c in bugs.BUGS))")}
mkdir -p runs
for bug in $bugs; do
  for seed in ${SEEDS:-default}; do
    args=(); [ "$seed" != default ] && args=(--seed "$seed")
    start=$(date +%s.%N)
    nice -n 5 .venv/bin/radixcheck audit "bugs:$bug" --page-sizes 2 -n 1 "${args[@]}" \
      --json "runs/$bug-$seed.json" --repro "repros/$bug-$seed" > "runs/$bug-$seed.out" 2> "runs/$bug-$seed.err"
    rc=$?
    echo "$bug $seed rc=$rc wall=$(echo "$(date +%s.%N) - $start" | bc) load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a runs/summary.txt
  done
done
