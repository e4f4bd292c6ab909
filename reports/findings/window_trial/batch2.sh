#!/bin/sh
# after batch.sh: StrictRevive again (fixed), then every repro file checked
cd /work/trial-W
while [ ! -f runs/batch.done ]; do sleep 5; done
for s in "" 1 2; do
  tag=${s:-default}
  rm -rf runs/variants/repro-StrictRevive-$tag
  /usr/bin/time -f "%e s wall" nice -n 5 .venv/bin/radixcheck audit myvariants:make_StrictRevive ${s:+--seed $s} \
     --repro runs/variants/repro-StrictRevive-$tag/ > runs/variants/StrictRevive2-$tag.out 2>&1
  echo "StrictRevive(fixed) $tag rc=$? $(tail -1 runs/variants/StrictRevive2-$tag.out) load=$(cut -d' ' -f1 /proc/loadavg)" >> runs/variants/summary.txt
done
./check_repros.sh runs > runs/repros.txt 2>&1
echo done > runs/batch2.done
