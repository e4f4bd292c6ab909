#!/bin/bash
# Each default run's repro files: exit code with the bug's server (want 1) and with the correct one (want 0).
cd /work/trial-U
for dir in runs/*.repros; do
  bug=$(basename "$dir" .repros)
  for f in "$dir"/*.py; do
    [ -e "$f" ] || { echo "$bug: no repro file"; continue; }
    RADIXCHECK_WIRE_CMD="python3 /work/trial-U/router_server.py --bug $bug" timeout 300 nice -n 5 .venv/bin/python "$f" >/dev/null 2>&1; on_bug=$?
    RADIXCHECK_WIRE_CMD="python3 /work/trial-U/router_server.py" timeout 300 nice -n 5 .venv/bin/python "$f" >/dev/null 2>&1; on_fix=$?
    echo "$bug $(basename "$f" | cut -c1-70) bug=$on_bug fix=$on_fix $(wc -l < "$f") lines"
  done
done
