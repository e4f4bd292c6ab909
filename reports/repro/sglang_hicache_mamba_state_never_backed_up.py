"""radixcheck finding (13 tier residency and KV): match([0, 0]) counted 0 tokens on host, but 1 are

Target radixcheck.properties.adapters.sglang_hicache_hybrid:hicache_mamba_python, write_through, page size 1: 6
operations of a serving engine on a
TierWorld (radixcheck's pools, controller and tier model; its oracles check each event as it happens), each
completion delivered where `w.complete(n)` says; the controller's calls are the comments under each.
Reduced from 10 operations to 6 (16 replays, 0.61 s).

SGLang finding M1 (reports/findings/sglang_trees.md): HiCache over a FULL+MAMBA tree. The write-through
of `[0, 0]` fails (host full); the adapter then caches the prefix `[0]` with a state of its own, which
splits the node, and that insert's write-through of the new node `[0]` starts before the state is
attached. `UnifiedTreeCore._should_backup_after_insert` asks no backup of the state while the node's
write is in flight (`write_through_pending_id is None` is required), and nothing asks later. On device
eviction the state is dropped with no host copy, so the node's host KV can never be matched again.
`.audit-venv/bin/python reports/repro/sglang_hicache_mamba_state_never_backed_up.py` exits 1 on sglang
0.5.23 (the Rust core's audit finds the same); with `RADIXCHECK_SGLANG_FIX=M1` (the adapter backs the
state up when the write's ack is consumed, Python core) it exits 0. Written by `radixcheck audit
radixcheck.properties.adapters.sglang_hicache_hybrid:hicache_mamba_python -n 0 --repro DIR` before the
factory declared its state pool. In session 61 that audit stopped first at oracle 20
(`sglang_hicache_mamba_state_reads_none.py`): the adapter's false alarm, fixed; with it fixed the audit
stops first at M1 again, on this very program (shrunk to the same 6 operations, its last a `match` in
place of a `serve`). Checked again in session 61: this file exits 1 on 0.5.23 and 0 with
`RADIXCHECK_SGLANG_FIX=M1`.

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
    from radixcheck.properties.adapters.sglang_hicache_hybrid import hicache_mamba_python as make
except Exception as exc:  # noqa: BLE001 - not run, so neither 1 (the bug) nor 0 (fixed)
    print('radixcheck repro: cannot import the factory '
          f'radixcheck.properties.adapters.sglang_hicache_hybrid:hicache_mamba_python: {type(exc).__name__}: {exc} (run this file '
          'from where you ran radixcheck audit)', file=sys.stderr)
    sys.exit(2)


def bug(finding, got):
    """The check failed: say what radixcheck found, and what the cache did this time."""
    print('BUG (radixcheck oracle 13 tier residency and KV): ' + finding)
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
    w = TierWorld(make, page_size=1, write_policy='write_through')
    w.fail_next([True])
    w.serve([0, 0], load=True)
    w.finish(-1)
    #   controller.write([2, 29]) -> None (allocation failed)
    #   controller.write([2]) -> write #1 to host [0]
    w.complete(1)
    w.evict(1000000)

    # the operation that fails, and radixcheck's checks of it
    try:
        w.serve([0, 0], load=True)
        w.check()  # conservation on both tiers, and the sizes
    except ContractViolation as exc:
        if exc.oracle != '13 tier residency and KV':  # another oracle's: not this finding
            raise
        bug('match([0, 0]) counted 0 tokens on host, but 1 are', got=str(exc))
except Exception as exc:  # noqa: BLE001 - not the finding's check: the file cannot say
    cannot_run(exc)
print('no bug: every operation passed its oracles')
