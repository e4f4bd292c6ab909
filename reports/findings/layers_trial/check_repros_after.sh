#!/bin/bash
# the repro files of the runs on the fixed suite (runs_after/), run with that venv
for f in runs_after/*/repros/*.py; do
  /tmp/trial58/venv-after/bin/python "$f" > /dev/null 2>&1; a=$?
  sed -E 's/^    from mybugs import [a-z_]+ as make$/    from mycache_adapter import make/' "$f" > /tmp/trial58/fixed_repro2.py
  /tmp/trial58/venv-after/bin/python /tmp/trial58/fixed_repro2.py > /dev/null 2>&1; b=$?
  echo "$f bug=$a fixed=$b lines=$(wc -l < "$f") bytes=$(wc -c < "$f")"
done
