#!/bin/bash
# One seeded run of the two Hypothesis machines (state machine, production scale) at page size 1
# against router_server.py --bug BUG, through radixcheck's pytest plugin (the audit's own tests;
# the DFS tests and the fixed construction tests left out to save time on a loaded machine).
# usage: run_seed.sh BUG SEED ; prints one summary line.
bug=$1; seed=$2; cd /work/trial-U
[ -e "runs/$bug.seed$seed.log" ] && exit 0  # another lane ran it
export RADIXCHECK_WIRE_CMD="python3 /work/trial-U/router_server.py${bug:+ --bug $bug}"
start=$(date +%s.%N)
nice -n 5 .venv/bin/python -m pytest -p no:cacheprovider -p no:randomly -o addopts= --assert=plain -q -rf \
  --pyargs radixcheck.properties.conformance --radix-target radixcheck.properties.adapters.wire:server \
  --radix-seed "$seed" --radix-page-sizes 1 --hypothesis-profile=ci -k "state_machine or production_scale" \
  > "runs/$bug.seed$seed.log" 2>&1
rc=$?
wall=$(python3 -c "import time;print(round(time.time()-$start,1))")
fails=$(grep '^FAILED' "runs/$bug.seed$seed.log" | sed -E 's/^FAILED [^:]*::(test_[a-z_]*)\[page_size=1\] - ([A-Za-z]*).*/\1:\2/' | tr '\n' ' ')
echo "${bug:-correct} seed=$seed rc=$rc fails=[${fails}] wall=${wall}s load=$(cut -d' ' -f1 /proc/loadavg)"
