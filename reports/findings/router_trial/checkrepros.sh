#!/bin/bash
# for each repro file: exit code on the bug, and on the fixed code (the import pointed at myrouter)
. /work/trial-R/.venv/bin/activate
cd /work/trial-R
for f in "$@"; do
  nice -n ${NICE:-15} python $f > /tmp/rc_out 2>&1; bug=$?
  fixed=/tmp/fixed_$(basename $f)
  sed -E -e 's/from mybugs import I[0-9]+ as make/from myrouter import make_index as make/' \
         -e "s/load_target\('mybugs:[A-Z][0-9]*'\)/load_target('myrouter:make_tree')/" $f > $fixed
  nice -n ${NICE:-15} python $fixed > /tmp/rc_fixed 2>&1; ok=$?
  echo "$(basename $(dirname $(dirname $f))) bug_exit=$bug fixed_exit=$ok lines=$(wc -l < $f) $(basename $f | cut -c1-70)"
  [ $bug != 1 ] && sed 's/^/    bug: /' /tmp/rc_out | tail -3
  [ $ok != 0 ] && sed 's/^/    fixed: /' /tmp/rc_fixed | tail -3
  rm -f $fixed
done
