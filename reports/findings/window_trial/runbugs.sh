#!/bin/sh
# usage: runbugs.sh TAG NWORKERS NICE [seed]   (from /work/trial-W; one audit per planted bug)
tag=$1; n=$2; nc=$3; seed=$4
mkdir -p runs/$tag
for b in $(.venv/bin/python -c "import mybugs; print(' '.join(c.__name__ for c in mybugs.BUGS))"); do
  s=""; [ -n "$seed" ] && s="--seed $seed"
  start=$(date +%s.%N)
  nice -n "$nc" .venv/bin/radixcheck audit "mybugs:make_$b" -n "$n" $s --repro "runs/$tag/repro-$b/" \
    --json "runs/$tag/$b.json" > "runs/$tag/$b.out" 2>&1
  rc=$?
  end=$(date +%s.%N)
  first=$(grep -m1 -oE '^\[ *[0-9.]+ s\] FAIL' "runs/$tag/$b.out" | grep -oE '[0-9.]+')
  echo "$b rc=$rc first_fail=${first:-none} wall=$(echo "$end - $start" | bc) load=$(cut -d' ' -f1 /proc/loadavg)" >> "runs/$tag/summary.txt"
done
