#!/bin/bash
# each repro file as written (expect 1), then with its factory import swapped to the correct cache (expect 0)
for f in runs/*/repros/*.py; do
  .venv/bin/python "$f" > /dev/null 2>&1; a=$?
  sed -E 's/^    from mybugs import [a-z_]+ as make$/    from mycache_adapter import make/' "$f" > /tmp/trial58/fixed_repro.py
  (cd /tmp/trial58/mycache && .venv/bin/python /tmp/trial58/fixed_repro.py > /dev/null 2>&1); b=$?
  echo "$f bug=$a fixed=$b lines=$(wc -l < "$f") bytes=$(wc -c < "$f")"
done
