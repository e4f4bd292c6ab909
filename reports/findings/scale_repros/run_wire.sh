#!/bin/bash
# the wire deep-reset finding, production world only, with its repro
cd "$(dirname "$0")"
V=${V:-.venv/bin}
OUT=${1:-repros}
export RADIXCHECK_WIRE_CMD="python3 $PWD/../wire_trial/router_server.py --bug dies-on-deep-reset"
uptime > $OUT.time
/usr/bin/time -v -o $OUT.tv nice -n 5 $V/python -m pytest --pyargs radixcheck.properties.conformance -p no:cacheprovider -o addopts= -q -n 1 \
  -k test_cache_at_production_scale --radix-target radixcheck.properties.adapters.wire:server --radix-page-sizes 1 --radix-repro $OUT > $OUT.log 2>&1
uptime >> $OUT.time
