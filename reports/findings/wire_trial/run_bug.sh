#!/bin/bash
# One audit of router_server.py with one planted bug.
# usage: run_bug.sh BUG SEED   (SEED "default" = the profile's own stream, with --repro)
# Writes runs/BUG.SEED.{log,json,md}; prints one summary line.
bug=$1; seed=$2; cd /work/trial-U
export RADIXCHECK_WIRE_CMD="python3 /work/trial-U/router_server.py --bug $bug"
extra=(); [ "$seed" = default ] && extra=(--repro "runs/$bug.repros") || extra=(--seed "$seed")
start=$(date +%s.%N)
nice -n 5 .venv/bin/radixcheck audit radixcheck.properties.adapters.wire:server --page-sizes 1 -n 1 \
  --json "runs/$bug.$seed.json" --report "runs/$bug.$seed.md" "${extra[@]}" > "runs/$bug.$seed.log" 2>&1
rc=$?
wall=$(python3 -c "import time;print(round(time.time()-$start,1))")
first=$(grep -m1 -o '^\[ *[0-9.]* s\] FAIL' "runs/$bug.$seed.log" | grep -o '[0-9.]*')
nf=$(python3 -c "import json;d=json.load(open('runs/$bug.$seed.json'));print(len(d.get('findings',[])))" 2>/dev/null)
echo "$bug seed=$seed rc=$rc findings=$nf first_fail=${first:-none}s wall=${wall}s load=$(cut -d' ' -f1 /proc/loadavg)"
