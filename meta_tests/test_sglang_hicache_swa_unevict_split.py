"""HiCache over SGLang's FULL+SWA tree: the device LRU order (oracle 4) the ``hicache_swa_python`` audit
stopped at under write_back with ``RADIXCHECK_SGLANG_FIX=3`` was the suite's fix of #3, not SGLang
(``deep``, and skipped without SGLang: ``python -m radixcheck.reports.audit_env``).

An insert that covers a host-only node whole un-evicts it (``UnifiedTreeCore._insert_walk_step`` ->
``_unevict_node_on_insert``), and SWA rebuilds the window from the request's slice
(``SWAComponent.recover_after_unevict`` -> ``_populate_range`` -> ``_clip_to_window``): when the request's
window starts inside the node, ``_split_node`` splits it there. Both halves were used by the insert.
The old ``_fix_split_refresh`` took any split inside an insert's walk step for a divergence (the lower
half an unused suffix) and gave the lower half back its stamp from before the insert, so SGLang-with-the-fix
evicted that window node before an older leaf. Stock SGLang stamps both halves (a correct pick here), and
so does the fix now (it restores only where the insert diverges inside the node). The story is the
mechanism of the audit's 428-operation repro in 9 operations.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from meta_tests.sglang_fix_3 import fix_3_for_this_test
from radixcheck.oracles.violations import LRUOrderViolation
from radixcheck.properties.adapters import sglang_hicache, sglang_hicache_hybrid
from radixcheck.properties.tiers.world import TierWorld

pytestmark = [pytest.mark.deep, pytest.mark.skipif(importlib.util.find_spec("sglang") is None,
                                                   reason="needs SGLang (python -m radixcheck.reports.audit_env)")]


def _unevict_across_the_window() -> TierWorld:
    """Page size 1, write_back, window 4: up to the ``evict`` that judges the order."""
    w = TierWorld(sglang_hicache_hybrid.hicache_swa_python, page_size=1, write_policy="write_back")
    w.serve([5, 0, 1, 2, 3, 4, 6, 7, 8, 9])  # SGLang's nodes: [5, 0, 1, 2, 3, 4] | [6, 7, 8, 9] (the window)
    w.finish()
    for _ in range(3):  # everything to host
        w.evict(10**6)
        w.complete_all()
    w.evict_host(4)  # the window node goes: [5, 0, 1, 2, 3, 4] is a host-only leaf
    w.serve([7, 7])
    w.finish()
    w.serve([5, 0, 1, 2, 3, 4], load=False)  # its insert un-evicts the node whole; its window starts at token 2
    w.finish()
    return w


def _evict_everything(w: TierWorld) -> None:
    w.evict(10**6)  # [7, 7] (the older leaf) first
    w.check()


def test_stock_sglang_passes() -> None:
    _evict_everything(_unevict_across_the_window())


def test_sglang_with_fix_3_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    fix_3_for_this_test(monkeypatch)
    _evict_everything(_unevict_across_the_window())


def test_the_old_fix_3_fails_the_lru_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: the walk step's patch before this change (any split restores the lower half's stamp)."""
    sglang_hicache._load()
    from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeCore

    walk = UnifiedTreeCore._insert_walk_step
    fix_3_for_this_test(monkeypatch)

    def old_insert_walk_step(self: Any, state: Any) -> None:
        key = state.key
        node = state.node.children.get(key.child_key(self.page_size) if len(key) else None)
        before = (node.parent, node.last_access_time) if node is not None else None
        walk(self, state)
        if before is not None and node.parent is not before[0]:
            node.last_access_time = before[1]

    monkeypatch.setattr(UnifiedTreeCore, "_insert_walk_step", old_insert_walk_step)
    w = _unevict_across_the_window()
    with pytest.raises(LRUOrderViolation, match=r"freed Page\(\[5, 0, 1\].*while the unlocked device leaf Page\(\[7, 7\]"):
        _evict_everything(w)
