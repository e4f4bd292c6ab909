#!/bin/bash
# usage: run_one.sh MODULE:FACTORY SEED   (SEED "default" = the profile's own stream)
t=$1; seed=$2; tag=${t#*:}-$seed
d=runs/$tag; mkdir runs/$tag.claimed 2>/dev/null || exit 0  # another lane has it
rm -rf $d; mkdir -p $d
args=(); [ "$seed" != default ] && args=(--seed $seed)
s=$(date +%s.%N)
nice -n 5 .venv/bin/radixcheck audit $t "${args[@]}" -n 0 --json $d/audit.json --report $d/audit.md --repro $d/repros > $d/out.txt 2>&1
rc=$?
e=$(date +%s.%N)
first=$(grep -m1 -oE "^\[ *[0-9.]+ s\] FAIL" $d/out.txt | grep -oE "[0-9.]+")
echo "$tag rc=$rc wall=$(printf %.1f $(echo "$e - $s" | bc)) first_fail=${first:--} load=$(cut -d' ' -f1 /proc/loadavg) findings=$(ls $d/repros 2>/dev/null | wc -l)" >> runs/summary.txt
