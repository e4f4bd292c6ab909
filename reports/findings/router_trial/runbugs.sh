#!/bin/bash
# usage: runbugs.sh SEEDTAG BUG... ; SEEDTAG "d" = default stream
. /work/trial-R/.venv/bin/activate
cd /work/trial-R
tag=$1; shift
for b in "$@"; do
  seedarg=""; [ "$tag" != d ] && seedarg="--seed $tag"
  d=runs/$b-s$tag; rm -rf $d; mkdir -p $d
  start=$(date +%s.%N)
  nice -n ${NICE:-15} radixcheck audit mybugs:$b $seedarg --report $d/card.md --json $d/audit.json --repro $d/repro > $d/out.txt 2>&1
  rc=$?
  end=$(date +%s.%N)
  printf "%s seed=%s rc=%s wall=%.1f load=%s | %s\n" $b $tag $rc $(echo "$end - $start" | bc) "$(cut -d' ' -f1 /proc/loadavg)" "$(grep -m1 -E 'FAIL|ERROR' $d/out.txt | cut -c1-200)"
done
