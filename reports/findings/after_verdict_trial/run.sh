#!/bin/bash
# usage: run.sh TAG FACTORY [extra args...]
tag=$1; t=$2; shift 2
d=runs/$tag; rm -rf $d; mkdir -p $d
s=$(date +%s.%N); l0=$(cut -d' ' -f1 /proc/loadavg)
nice -n 15 .venv/bin/radixcheck audit $t --page-sizes 1 -n 0 --json $d/audit.json --report $d/audit.md --repro $d/repros "$@" > $d/out.txt 2>&1
rc=$?; e=$(date +%s.%N)
first=$(grep -m1 -oE "^\[ *[0-9.]+ s\] FAIL" $d/out.txt | grep -oE "[0-9.]+")
echo "$tag rc=$rc wall=$(printf %.1f $(echo "$e - $s" | bc)) first_fail=${first:--} load=$l0-$(cut -d' ' -f1 /proc/loadavg) findings=$(ls $d/repros 2>/dev/null | wc -l)" >> runs/summary.txt
