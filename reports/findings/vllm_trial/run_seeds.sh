#!/bin/bash
# Seeds 1..3 of each planted bug through the pytest plugin (the same streams as `audit --seed N`, profile ci),
# page size 2, stopping at the first failure; the scale bugs run the production-scale test instead.
cd "$(dirname "$0")"
bugs=${*:-$(.venv/bin/python -c "import bugs; print(' '.join(c.__name__ for c in bugs.BUGS))")}
mkdir -p runs
for bug in $bugs; do
  case $bug in SizesScanEveryBlock|TouchWalksQueue) test=test_cache_at_production_scale;; *) test=test_cache_state_machine;; esac
  for seed in 1 2 3; do
    start=$(date +%s.%N)
    CI=true nice -n 5 .venv/bin/pytest -p no:cacheprovider --pyargs radixcheck.properties.conformance -q -x \
      --radix-target "bugs:$bug" --radix-page-sizes 2 --radix-seed "$seed" -k "$test" > "runs/$bug-seed$seed.pytest" 2>&1
    rc=$?
    echo "$bug seed$seed rc=$rc wall=$(echo "$(date +%s.%N) - $start" | bc) load=$(cut -d' ' -f1 /proc/loadavg) oracle=$(grep -m1 -oE 'E +[A-Za-z]+Violation|E +[A-Za-z]*(Error|Timeout)[A-Za-z]*' runs/$bug-seed$seed.pytest | tr -s ' ')" | tee -a runs/seeds.txt
  done
done
