#!/bin/sh
# check_repros.sh: each repro file must exit 1 on its bug and 0 on the fix (the same file, the correct cache)
for f in runs/*/*/repros/*.py; do
  bug=$(echo $f | cut -d/ -f2)
  nice -n 15 .venv/bin/python $f > /dev/null 2>&1; onbug=$?
  sed "s/from bugs import $bug as make/from bugs import HybridHiCache as make/" $f > /tmp/fixed_repro.py
  nice -n 15 .venv/bin/python /tmp/fixed_repro.py > /tmp/fixed_repro.out 2>&1; onfix=$?
  echo "$f lines=$(wc -l < $f) bug=$onbug fix=$onfix"
done
