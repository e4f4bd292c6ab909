#!/bin/sh
# ./checkrepros.sh FILE...: each repro as written (the bug: expect 1), then pointed at my shipped index (expect 0)
for f in "$@"; do
  b=$(sed -n 's/^    from mybugs import \(B[0-9]*\) as make$/\1/p' "$f")
  fixed=make; [ "$b" = B1 ] && fixed=make_dedup
  .venv/bin/python "$f" > /dev/null 2>&1; bug=$?
  sed "s/^    from mybugs import $b as make\$/    from myrouter_adapter import $fixed as make/" "$f" > /tmp/trial-index/fixed_repro.py
  .venv/bin/python /tmp/trial-index/fixed_repro.py > /dev/null 2>&1; ok=$?
  echo "$f bug=$b lines=$(wc -l < "$f") bytes=$(wc -c < "$f") bug_exit=$bug fixed_exit=$ok"
done
