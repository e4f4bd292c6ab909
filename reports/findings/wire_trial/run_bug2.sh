#!/bin/bash
# run_bug.sh's default run, with radixcheck from branch trial-wire (.venv2: its fixes installed).
bug=$1; cd /work/trial-U
export RADIXCHECK_WIRE_CMD="python3 /work/trial-U/router_server.py --bug $bug"
start=$(date +%s.%N)
nice -n 5 .venv2/bin/radixcheck audit radixcheck.properties.adapters.wire:server --page-sizes 1 -n 1 \
  --json "runs2/$bug.json" --report "runs2/$bug.md" --repro "runs2/$bug.repros" > "runs2/$bug.log" 2>&1
rc=$?
wall=$(python3 -c "import time;print(round(time.time()-$start,1))")
first=$(grep -m1 -o '^\[ *[0-9.]* s\] FAIL' "runs2/$bug.log" | grep -o '[0-9.]*')
nf=$(python3 -c "import json;d=json.load(open('runs2/$bug.json'));print(len(d.get('findings',[])))" 2>/dev/null)
echo "$bug (branch) rc=$rc findings=$nf first_fail=${first:-none}s wall=${wall}s load=$(cut -d' ' -f1 /proc/loadavg)"
