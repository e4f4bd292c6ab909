#!/bin/bash
# The tenant bugs again on the fixed suite (.venv2): which oracle files them now.
cd "$(dirname "$0")"
for bug in SaltKeyedByStr ExtraKeysConcatenated; do
  for seed in 1 2 3; do
    CI=true nice -n 5 .venv2/bin/pytest -p no:cacheprovider --pyargs radixcheck.properties.conformance -q -x --radix-target "bugs:$bug" \
      --radix-page-sizes 2 --radix-seed $seed -k test_cache_state_machine > runs/$bug-seed$seed.fixed.pytest 2>&1
    echo "$bug seed$seed rc=$? load=$(cut -d' ' -f1 /proc/loadavg) $(grep -m1 -oE '^E +radixcheck\.oracles\.violations\.[A-Za-z]+' runs/$bug-seed$seed.fixed.pytest | sed 's/.*\.//') $(grep -oE 'in [0-9.]+s' runs/$bug-seed$seed.fixed.pytest | tail -1)" | tee -a runs/tenants_fixed.txt
  done
done
