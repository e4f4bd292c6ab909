#!/bin/bash
# each repro: as written (expect 1 on the bug), then its factory import swapped to the correct make (expect 0)
for f in "$@"; do
  .venv/bin/python "$f" > /tmp/aftertrial/last_bug.txt 2>&1; a=$?
  sed -E 's/^( *)from (mybugs|twobugs) import [a-z_]+ as make$/\1from mycache_adapter import make/' "$f" > /tmp/aftertrial/fixed_repro.py
  .venv/bin/python /tmp/aftertrial/fixed_repro.py > /tmp/aftertrial/last_fixed.txt 2>&1; b=$?
  echo "$f bug=$a fixed=$b lines=$(wc -l < "$f") bytes=$(wc -c < "$f")"
done
