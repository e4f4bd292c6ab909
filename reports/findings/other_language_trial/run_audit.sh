#!/bin/bash
# usage: run2.sh LABEL VENV_BIN ENVSPEC
cd /tmp/nu-user
export RADIXCHECK_WIRE_CMD="env $3 node /tmp/nu-cache/server.js"
S=$(date +%s); uptime > audit-$1.log
nice -n 15 $2/radixcheck audit radixcheck.properties.adapters.wire:server -n 2 --report card-$1.md --repro repro-$1 >> audit-$1.log 2>&1
echo "rc=$? wall=$(( $(date +%s)-S )) s" >> audit-$1.log; uptime >> audit-$1.log
