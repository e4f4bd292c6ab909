#!/bin/sh
# the trial's measured runs, after the quiet-box: nice 5, default workers (-n auto on 2 cores)
cd /work/trial-W
mkdir -p runs/fixed
for s in "" 1 2; do
  tag=${s:-default}
  uptime > runs/fixed/$tag.load
  /usr/bin/time -f "%e s wall %U user" nice -n 5 .venv/bin/radixcheck audit mycache:make ${s:+--seed $s} \
     --repro runs/fixed/repro-$tag/ --report runs/fixed/$tag.md > runs/fixed/$tag.out 2>&1
  echo "fixed $tag rc=$? $(tail -1 runs/fixed/$tag.out) load=$(cut -d' ' -f1 /proc/loadavg)" >> runs/fixed/summary.txt
done
./runbugs.sh ci 2 5
./runbugs.sh s1 2 5 1
./runbugs.sh s2 2 5 2
mkdir -p runs/variants
for v in StrictRevive HostGainsWindow LeafFirstWriteBack; do
  for s in "" 1 2; do
    tag=${s:-default}
    /usr/bin/time -f "%e s wall" nice -n 5 .venv/bin/radixcheck audit myvariants:make_$v ${s:+--seed $s} \
       --repro runs/variants/repro-$v-$tag/ > runs/variants/$v-$tag.out 2>&1
    echo "$v $tag rc=$? $(tail -1 runs/variants/$v-$tag.out) load=$(cut -d' ' -f1 /proc/loadavg)" >> runs/variants/summary.txt
  done
done
echo done > runs/batch.done
