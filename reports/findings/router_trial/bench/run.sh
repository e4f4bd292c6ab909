#!/bin/sh
# The bench on the references, the trial's router and its two scale bugs (I6, T6), and the slow variants:
# one log each here (load before and after, wall and CPU time). RADIXCHECK: the radixcheck command to use.
out=$(cd "$(dirname "$0")" && pwd)
cd "$out/.." || exit 2
B=${RADIXCHECK:-radixcheck}
for t in radixcheck.reference.kv_index:KvIndex radixcheck.reference.tenant_tree:TenantTree myrouter:make_index mybugs:I6 \
         myrouter:make_tree mybugs:T6 radixcheck.properties.index.slow_variants:LookupScansEveryBlock \
         radixcheck.properties.tenant_tree.slow_variants:EvictScansTenantNodes myrouter:make_trusting_index; do
  n=$(echo "$t" | tr ':.' '__')
  echo "== $t load: $(uptime)" > "$out/$n.log"
  ( /usr/bin/time -f "wall %e s, user %U s, sys %S s" env PYTHONPATH=. nice -n 5 "$B" bench "$t" ) >> "$out/$n.log" 2>&1
  echo "exit $? load after: $(uptime)" >> "$out/$n.log"
done
