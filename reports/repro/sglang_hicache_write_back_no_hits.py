"""radixcheck finding (4 eviction order): evict(1000000) freed Page([1], device+host) (last used by the
insert([1]) of operation 6, cached at time 2, 2 hits, priority 0, key (2, 4)) while the unlocked device leaf
Page([0, 0], device) (last used by the insert([0, 0]) of operation 8, cached at time 6, 1 hits, priority 0,
key (1, 6)) stayed: under lfu it goes first

Target radixcheck.properties.adapters.sglang_hicache:hicache_python_lfu_salted, write_back, page size 1: 9
operations of a serving engine on a
TierWorld (radixcheck's pools, controller and tier model; its oracles check each event as it happens), each
completion delivered where `w.complete(n)` says; the controller's calls are the comments under each. Reduced
from 24 operations to 9 (20 replays, 1.44 s).

SGLang finding N3 (reports/findings/sglang_trees.md): under `--hicache-write-policy write_back`,
`UnifiedTreeCore._inc_hit_count_and_check` returns before `hit_count += 1`, so LFU (and SLRU) never
count a hit and evict by recency alone. Written by `RADIXCHECK_SGLANG_FIX=3 radixcheck audit
radixcheck.properties.adapters.sglang_hicache:hicache_python_lfu_salted --page-sizes 1 --repro DIR`.
`.audit-venv/bin/python reports/repro/sglang_hicache_write_back_no_hits.py` exits 1 on sglang 0.5.23;
with the hits counted (`RADIXCHECK_SGLANG_FIX=N3`, the adapter's patch of the two early returns) it exits 0.

Exits 1 while the bug is there (printing radixcheck's finding), 0 once it is fixed, 2 if it cannot run to its
last operation. Needs radixcheck. Writes nothing where it runs. Written by `radixcheck audit --repro`.
"""
import os
import sys
import traceback

try:
    from radixcheck.oracles.violations import ContractViolation
    from radixcheck.properties.tiers.world import TierWorld
except ImportError as exc:  # not run, so neither 1 (the bug) nor 0 (fixed)
    print(f'radixcheck repro: cannot import {exc.name}: {exc} (this file needs numpy and radixcheck)', file=sys.stderr)
    sys.exit(2)
sys.dont_write_bytecode = True  # this file writes nothing where it runs
sys.path.append(os.getcwd())  # your factory's module, from where you run this file (as radixcheck audit does)
try:
    from radixcheck.properties.adapters.sglang_hicache import hicache_python_lfu_salted as make
except Exception as exc:  # noqa: BLE001 - not run, so neither 1 (the bug) nor 0 (fixed)
    print('radixcheck repro: cannot import the factory '
          f'radixcheck.properties.adapters.sglang_hicache:hicache_python_lfu_salted: {type(exc).__name__}: {exc} (run this file '
          'from where you ran radixcheck audit)', file=sys.stderr)
    sys.exit(2)


def bug(finding, got):
    """The check failed: say what radixcheck found, and what the cache did this time."""
    print('BUG (radixcheck oracle 4 eviction order): ' + finding)
    shown = repr(got)
    print('  the cache did:', shown if len(shown) < 2000 else f'{shown[:1500]} … {shown[-200:]} ({len(shown)} characters)')
    sys.exit(1)


def cannot_run(exc):
    """The file did not get to its check (its own code, or a call before the one the finding is about, raised):
    neither 1 (the bug) nor 0 (fixed)."""
    traceback.print_exception(exc)
    print(f'radixcheck repro: did not run to the check: {type(exc).__name__}: {exc}', file=sys.stderr)
    sys.exit(2)


try:
    w = TierWorld(make, page_size=1, write_policy='write_back')
    w.serve([1], load=True)
    w.finish(-1)
    w.evict(1000000)
    #   controller.write([2]) -> write #1 to host [0]
    #   SGLang waited for write #1: completed now
    w.fail_next([True, True])
    w.serve([1], load=True)
    #   controller.load([0]) -> None (allocation failed)
    w.finish(-1)
    w.serve([0, 0], load=True)
    w.finish(-1)

    # the operation that fails, and radixcheck's checks of it
    try:
        w.evict(1000000)
        #   controller.write([29, 16]) -> None (allocation failed)
        w.check()  # conservation on both tiers, and the sizes
    except ContractViolation as exc:
        if exc.oracle != '4 eviction order':  # another oracle's: not this finding
            raise
        bug('evict(1000000) freed Page([1], device+host) (last used by the insert([1]) of operation 6, cached at '
            'time 2, 2 hits, priority 0, key (2, 4)) while the unlocked device leaf Page([0, 0], device) (last '
            'used by the insert([0, 0]) of operation 8, cached at time 6, 1 hits, priority 0, key (1, 6)) stayed:'
            ' under lfu it goes first', got=str(exc))
except Exception as exc:  # noqa: BLE001 - not the finding's check: the file cannot say
    cannot_run(exc)
print('no bug: every operation passed its oracles')
