"""radixcheck finding (20 second-pool value live or tombstoned): states() of Request([0, 0], 2 cached)'s handle:
Page([0], device+host) reports state -1, but it has the state 1 inserted there

Target radixcheck.properties.adapters.sglang_hicache_hybrid:hicache_mamba_python, write_through, page size 1: 10
operations of a serving engine on a TierWorld (radixcheck's pools, controller and oracles, which check each event
as it happens). `w.complete(n)` delivers transfer n; `# controller: write #n [2] -> [1]` says the cache's calls
under an operation (transfer n copies device slots [2] to host slots [1]). Reduced from 20 operations to 10 (36
replays, 1.58 s of CPU).

Where `radixcheck audit radixcheck.properties.adapters.sglang_hicache_hybrid:hicache_mamba_python -n 0
--repro DIR` stopped first in session 61 (main 97f1131, oracle 20, at 246 s, load ~20), written by that command.
**Analysed in session 61: the adapter's false alarm, not SGLang's; fixed in the adapter.** After `evict`
puts `[0]` (state 1) and `[0, 0]` on host, the no-load serve of `[0, 0]` inserts both again; SGLang puts
the request's new state on `[0, 0]`, then the adapter's own prefix insert of `[0]` hands it a fresh state
that the adapter wrote as *none*. `[0]`'s state was on host only, so SGLang attaches that fresh state on
device (`mamba_exist` False), as it should: a real request's state after `[0]` is the host copy's. The
adapter's `states()` reads the device slot first, so it read -1 where the suite inserted 1. Traced on
SGLang's nodes: before the prefix insert `[0]` is `mamba dev None, host-only, value 1`; after it
`mamba dev [4], value -1`. Fix (`properties/adapters/sglang_hicache_hybrid.py`,
`SGLangHiCacheMamba._host_only_states`): such a fresh prefix state carries its node's host value. Kept as
the fix's regression (meta-test `meta_tests/test_sglang_hicache_mamba.py`, deep): this file exits 1 on
sglang 0.5.23 with the adapter before the fix, and 0 with it (with and without `RADIXCHECK_SGLANG_FIX=M1`).

Exits 1 while the bug is there, 0 once it is fixed, 2 if it cannot run to its last operation. Needs radixcheck;
writes nothing where it runs. Written by `radixcheck audit --repro`.
"""
import os
import sys
import traceback

try:
    from radixcheck.oracles.violations import ContractViolation
    from radixcheck.properties.tiers.world import TierWorld
except ImportError as exc:  # not run, so neither 1 (the bug) nor 0 (fixed)
    print(f'radixcheck repro: cannot import {exc.name}: {exc} (this file needs radixcheck)', file=sys.stderr)
    sys.exit(2)
sys.dont_write_bytecode = True  # this file writes nothing where it runs
sys.path.append(os.getcwd())  # your factory's module, from where you run this file (as radixcheck audit does)
try:
    from radixcheck.properties.adapters.sglang_hicache_hybrid import hicache_mamba_python as make
except Exception as exc:  # noqa: BLE001 - not run, so neither 1 (the bug) nor 0 (fixed)
    print('radixcheck repro: cannot import the factory '
          f'radixcheck.properties.adapters.sglang_hicache_hybrid:hicache_mamba_python: {type(exc).__name__}: {exc} (run this file '
          'from where you ran radixcheck audit)', file=sys.stderr)
    sys.exit(2)


def bug(finding, got):  # the check failed: say what radixcheck found, and what the cache did this time
    print('BUG (radixcheck oracle 20 second-pool value live or tombstoned): ' + finding)
    shown = repr(got)
    print('  the cache did:', shown if len(shown) < 2000 else f'{shown[:1500]} … {shown[-200:]} ({len(shown)} characters)')
    sys.exit(1)


def cannot_run(exc):  # a call before the finding's check raised: neither 1 (the bug) nor 0 (fixed)
    traceback.print_exception(exc)
    print(f'radixcheck repro: did not run to the check: {type(exc).__name__}: {exc}', file=sys.stderr)
    sys.exit(2)


try:
    w = TierWorld(make, page_size=1, write_policy='write_through')
    w.serve([0], load=False)
    w.finish(0)
    #   controller: write #1 [2] -> [0]
    w.serve([0, 0], load=True)
    w.finish(-1)
    #   controller: write #2 [29] -> [1]
    w.complete(2)
    #   its stream finished #2 after write #1: completed now
    w.evict(1000000)
    w.serve([0, 0], load=False)
    w.finish(-1)
    w.serve([0, 0], load=True)

    # the operation that fails, and radixcheck's checks of it
    try:
        w.finish(-1)
        w.check()  # conservation on both tiers, and the sizes
    except ContractViolation as exc:
        if exc.oracle != '20 second-pool value live or tombstoned':  # another oracle's: not this finding
            raise
        bug("states() of Request([0, 0], 2 cached)'s handle: Page([0], device+host) reports state -1, "
            "but it has the state 1 inserted there", got=str(exc))
except Exception as exc:  # noqa: BLE001 - not the finding's check: the file cannot say
    cannot_run(exc)
print('no bug: every operation passed its oracles')
