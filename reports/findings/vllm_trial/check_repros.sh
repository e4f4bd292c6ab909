#!/bin/bash
# Each repro file must exit 1 on its bug and 0 on the fix (the same file, the correct cache in its place).
cd "$(dirname "$0")"
for f in repros/*/*.py; do
  bug=$(basename "$(dirname "$f")" | sed 's/-.*//')
  nice -n 5 .venv/bin/python "$f" > /dev/null 2>&1; onbug=$?
  sed "s/from bugs import $bug as make/from vllm_like import VllmLikeCache as make/" "$f" > /tmp/s55-trial-vllm/fixed_repro.py
  PYTHONPATH=. nice -n 5 .venv/bin/python /tmp/s55-trial-vllm/fixed_repro.py > /dev/null 2>&1; onfix=$?
  echo "$f lines=$(wc -l < "$f") bug=$onbug fix=$onfix"
done
