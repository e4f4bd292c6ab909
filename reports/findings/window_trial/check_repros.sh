#!/bin/sh
# every repro file under $1: exit code as written (bug), then with the factory swapped to the fixed cache
for f in $(find "$1" -name 'repro-*.py' | sort); do
  nice -n 5 .venv/bin/python "$f" > /dev/null 2>&1; bug=$?
  sed -E 's/^    from mybugs import make_[A-Za-z]+ as make$/    from mycache import make/' "$f" > /tmp/fixed_repro.py
  grep -q "from mycache import make" /tmp/fixed_repro.py || echo "SWAP FAILED $f"
  (cd /work/trial-W && nice -n 5 .venv/bin/python /tmp/fixed_repro.py > /dev/null 2>&1); fixed=$?
  echo "bug=$bug fixed=$fixed lines=$(wc -l < "$f") bytes=$(wc -c < "$f") $f"
done
