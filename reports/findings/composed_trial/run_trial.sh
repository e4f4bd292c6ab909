#!/bin/bash
# usage: run_trial.sh TARGET PROFILE TAG
t=$1; p=$2; tag=$3
d=runs/$t-$tag; rm -rf $d; mkdir -p $d
s=$(date +%s.%N)
${FRESH:+env HYPOTHESIS_STORAGE_DIRECTORY=$(mktemp -d /tmp/trialE-hyp.XXXX)} nice -n 5 .venv/bin/radixcheck audit mycache_adapter:$t --profile $p --json $d/audit.json --report $d/audit.md --repro $d/repros > $d/out.txt 2>&1
rc=$?
e=$(date +%s.%N)
echo "$t $p $tag rc=$rc wall=$(echo "$e - $s" | bc) load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a runs/summary.txt
grep -E "^\[ *[0-9.]+ s\] FAIL" $d/out.txt | head -3
