"""Is the HiCache pass sensitive? SGLang 0.5.23's hicache tree with ONE method patched back to the
shape of a known bug, run under the tier machine (issue 31).

The tier machine passes ``hicache_{python,rust}`` (``findings/sglang_trees.md``, HiCache section).
That pass is only worth something if the same run fails SGLang with a known HiCache bug put back,
and fails it by the oracle that names the bug. Each pre-fix here replaces one method at runtime,
for the run only, with a few lines of our own that behave as the code did before the fix:

``chain-gap`` (sglang #22062, oracle 18)
    ``UnifiedRadixCache._execute_and_commit_kv_backup`` runs a write-through backup chain
    (ancestors first) and stops at the first backup that fails. Pre-fix: each node of the chain is
    backed up on its own, and a failed one does not stop the nodes below it, which leaves a gap in
    the backup chain (a parent on device only, its child on host). Both tree cores (the method is
    the Python wrapper's).
``host-orphan`` (sglang #27631 / #27562, oracle 16)
    ``UnifiedTreeCore._is_host_leaf`` (Python tree core) lets host eviction take a host-only node
    only when it has no children. Pre-fix: any unlocked host-only node qualifies, so host eviction
    detaches internal nodes and orphans their subtree. The Rust core is compiled: not patched.
    SGLang's own tree check (``_remove_leaf_from_parent``: ``assert v == node``) stops that
    ``evict_host`` before its host frees are drained, so oracle 16 sees them only with Python's
    assertions off (``python -O``, which the suite does not need: it raises, it does not assert).

    .audit-venv/bin/python -m radixcheck.reports.sglang_hicache_prefix --pre-fix chain-gap --streams 3
    .audit-venv/bin/python -O -m radixcheck.reports.sglang_hicache_prefix --pre-fix host-orphan --streams 3
    .audit-venv/bin/python -m radixcheck.reports.sglang_hicache_prefix --pre-fix none --streams 3   # unpatched

Runs ``--streams`` derandomized streams of the tier machine (``mutation`` profile, named
``stream{k}_{factory}_{policy}`` as ``sglang_hicache_probes --streams`` names them, so ``none``
replays its streams) per factory and policy the pre-fix applies to, two at a time, and prints
per row how many streams failed and by which oracle. Exit 0 when every patched stream failed by
the expected oracle (``none``: when every stream passed), 1 otherwise.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any


def _chain_gap() -> None:
    from sglang.srt.mem_cache.unified_cache.cache_action import BackupKV
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

    fixed = UnifiedRadixCache._execute_and_commit_kv_backup

    def each_node_alone(self: Any, action: Any, write_back: bool = False) -> int:
        written = 0
        for node_id in action.node_ids:  # a failed parent no longer stops its children
            written = fixed(self, BackupKV(node_ids=[node_id]), write_back) or written
        return written

    UnifiedRadixCache._execute_and_commit_kv_backup = each_node_alone


def _host_orphan() -> None:
    from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeCore

    def any_unlocked_host_node(self: Any, node: Any) -> bool:  # children no longer looked at
        return (node is not self.root_node and node.evicted and node.backuped
                and all(cd.host_lock_ref == 0 and cd.lock_ref == 0 for cd in node.component_data))

    UnifiedTreeCore._is_host_leaf = any_unlocked_host_node


@dataclass(frozen=True)
class PreFix:
    source: str
    oracle: str  # the violation class that must catch it
    factories: tuple[str, ...]
    policies: tuple[str, ...]
    patch: Any


PRE_FIXES = {
    "chain-gap": PreFix("sglang#22062", "BackupChainViolation", ("hicache_python", "hicache_rust"),
                        ("write_through", "write_through_selective"), _chain_gap),
    "host-orphan": PreFix("sglang#27631/#27562", "HostOrphanViolation", ("hicache_python",),
                          ("write_through", "write_back"), _host_orphan),
}


def stream(job: tuple[str, str, str, int]) -> str | None:
    """Stream ``k`` of the tier machine on ``factory`` under ``policy`` with ``pre_fix`` applied
    (``none``: unpatched): ``ExceptionType: message`` of its failure, or None."""
    from radixcheck import profiles
    from radixcheck.properties.adapters import sglang_hicache
    from radixcheck.properties.findings.verdict import run_machine
    from radixcheck.properties.tiers.machine import tier_machine_for

    pre_fix, factory, policy, k = job
    sglang_hicache._load()
    if pre_fix != "none":
        PRE_FIXES[pre_fix].patch()  # a fresh worker process per pool: the patch dies with it
    try:
        run_machine(tier_machine_for(sglang_hicache.FACTORIES[factory], 1, policy, f"stream{k}_{factory}_{policy}"),
                    profiles.SETTINGS["mutation"])
    except Exception as exc:  # noqa: BLE001 - any failure is reported, with its type
        where = ""
        if type(exc) is AssertionError:  # SGLang's own check, or the adapter's: say whose
            last = traceback.extract_tb(exc.__traceback__)[-1]
            where = f" at {os.path.basename(last.filename)}:{last.lineno} ({last.line})"
        return f"{type(exc).__name__}{where}: {' '.join(str(exc).split())[:240]}"
    return None


def main(argv: list[str] | None = None) -> int:
    from radixcheck.argtypes import ArgumentParser, non_negative_int

    parser = ArgumentParser(prog="python -m radixcheck.reports.sglang_hicache_prefix", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pre-fix", required=True, choices=[*PRE_FIXES, "none"], help="the bug to put back (none: unpatched)")
    parser.add_argument("--streams", type=non_negative_int, default=3, help="streams per factory and policy")
    parser.add_argument("--policy", action="append", help="only this write policy (repeatable)")
    args = parser.parse_args(argv)
    from radixcheck.properties.adapters import sglang_hicache

    fix = PRE_FIXES.get(args.pre_fix)
    factories = fix.factories if fix else tuple(sglang_hicache.FACTORIES)
    policies = tuple(args.policy or (fix.policies if fix else sglang_hicache.POLICIES))
    rows = [(f, p) for f in factories for p in policies]
    jobs = [(args.pre_fix, f, p, k) for f, p in rows for k in range(args.streams)]
    start = time.perf_counter()
    with ProcessPoolExecutor(2, max_tasks_per_child=1) as pool:  # one patched SGLang per process
        results = list(pool.map(stream, jobs))
    ok = True
    for f, p in rows:
        got = [r for (_, jf, jp, _), r in zip(jobs, results, strict=True) if (jf, jp) == (f, p)]
        kinds = Counter(r.split(": ")[0] for r in got if r)
        right = kinds[fix.oracle] if fix else got.count(None)
        print(f"{args.pre_fix} {f} {p}: {sum(map(bool, got))}/{len(got)} failed {dict(kinds)}"
              + (f"; first: {next(r for r in got if r)}" if any(got) else ""))
        ok &= right == len(got)
    print(f"{args.pre_fix}: {time.perf_counter() - start:.0f} s wall, {len(jobs)} streams")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
