#!/bin/sh
# controls (each bug without the part it needs) and the waiver checks, default stream
nicev=$1
for bug in HostStatesByTokensOneTenant AbortLeaksLoadLockNoAborts LoadDoneNoRequeueNoAborts LoadBackResetsHitsUnderLru; do
  out=controls/$bug; mkdir -p $out
  s=$(date +%s.%N); nice -n $nicev .venv/bin/radixcheck audit bugs:$bug -n 0 --json $out/audit.json > $out/log 2>&1; rc=$?
  echo "$bug rc=$rc wall=$(echo "$(date +%s.%N) - $s" | bc) load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a controls/summary.txt
done
for w in state both; do for bug in DemoteDropsState TwoBugs; do
  out=waivers/$bug-$w; mkdir -p $out
  s=$(date +%s.%N); nice -n $nicev .venv/bin/radixcheck audit bugs:$bug -n 0 --waive waive-$w.txt --json $out/audit.json --repro $out/repros > $out/log 2>&1; rc=$?
  echo "$bug waive-$w rc=$rc wall=$(echo "$(date +%s.%N) - $s" | bc) $(tail -1 $out/log | cut -c1-200)" | tee -a waivers/summary.txt
done; done
out=waivers/TwoBugs-none; mkdir -p $out
nice -n $nicev .venv/bin/radixcheck audit bugs:TwoBugs -n 0 --json $out/audit.json > $out/log 2>&1; echo "TwoBugs no-waiver rc=$? $(tail -1 $out/log | cut -c1-200)" | tee -a waivers/summary.txt
