#!/bin/bash
# for each repro of a bug run: exit code on the bug, on the fixed cache (same file, factory swapped), lines, bytes
for f in runs/*/repros/*.py; do
  b=$(basename $(dirname $(dirname $f))); b=${b%-*}
  [ "$b" = make ] && continue
  .venv/bin/python $f > /dev/null 2>&1; on_bug=$?
  sed "s/from mycache_adapter import $b as make/from mycache_adapter import make/" $f > /tmp/fixed_repro.py
  grep -q "^    from mycache_adapter import make$" /tmp/fixed_repro.py || echo "  (could not swap factory in $f)"
  (cd /work/trial-E && .venv/bin/python /tmp/fixed_repro.py > /dev/null 2>&1); on_fixed=$?
  echo "$f bug=$on_bug fixed=$on_fixed lines=$(wc -l < $f) bytes=$(wc -c < $f)"
done
