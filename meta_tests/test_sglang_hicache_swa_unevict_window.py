"""HiCache over SGLang's FULL+SWA tree: the host eviction order (oracle 4h) the waived ``hicache_swa_rust``
audit stopped at is SGLang's #3; the tier model missed the node boundary an un-evicting insert makes
(``deep``, and skipped without SGLang: ``python -m radixcheck.reports.audit_env``).

An insert that covers a host-only node un-evicts it (``UnifiedTreeCore._insert_walk_step`` ->
``_unevict_node_on_insert``) and SWA rebuilds the request's window from its slice
(``SWAComponent.recover_after_unevict`` -> ``_populate_range`` -> ``_clip_to_window``): when the window starts
inside the node, ``_split_node`` splits it there, as it splits a new leaf (``commit_insert_component_data``,
the same ``_clip_to_window``). A later use that diverges above the window splits the upper half only (#3
stamps it, not the window node). The tier model ended a node at the window start for new leaves only, so the
#3 deviation stamped the whole chain down to the leaf and could not explain SGLang freeing that (older) leaf
first. The audit's 454-operation program (page size 1, write_through; ``evict_host(24)`` freed
``Page([0, 0, 0, 0])`` over ``Page([1, 2, 2, 2, 2])``) fails the same way on both cores; its mechanism, in 14
operations, is below, on both tiers and both cores.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from meta_tests.sglang_fix_3 import fix_3_for_this_test
from radixcheck.oracles.deviation import SuffixRefreshedOnMidEdgeUse
from radixcheck.oracles.tier_model import TierModel
from radixcheck.oracles.violations import HostEvictionOrderViolation, LRUOrderViolation
from radixcheck.properties.adapters import sglang_hicache_hybrid
from radixcheck.properties.tiers.world import TierWorld

pytestmark = [pytest.mark.deep, pytest.mark.skipif(importlib.util.find_spec("sglang") is None,
                                                   reason="needs SGLang (python -m radixcheck.reports.audit_env)")]

CORES = [sglang_hicache_hybrid.hicache_swa_python, sglang_hicache_hybrid.hicache_swa_rust]
KNOWN_3 = frozenset({SuffixRefreshedOnMidEdgeUse.name})
FREED = r"freed Page\(\[5, 0, 1.*while the .*Page\(\[7, 1, 2\]"  # the window node over the older [7, 1, 2]


def _unevicted_window_then_split_above_it(factory: Any, known_3: bool) -> TierWorld:
    """Up to the ``evict`` that judges the order (page size 1, write_through, window 4)."""
    w = TierWorld(factory, page_size=1, write_policy="write_through")
    if known_3:  # as a ``known: suffix-refreshed-on-mid-edge-use`` waiver sets it (TierMachine)
        w.model.deviations = [SuffixRefreshedOnMidEdgeUse()]
    w.serve([5, 0, 1, 2, 3, 4, 6, 7, 8, 9])  # SGLang's nodes: [5, 0, 1, 2, 3, 4] | [6, 7, 8, 9] (the window)
    w.finish()
    w.complete_all()
    w.evict(10**6)
    w.evict_host(4)  # the window node goes: [5, 0, 1, 2, 3, 4] is a host-only leaf
    for tokens, load in (([7, 1, 2], True),
                         ([5, 0, 1, 2, 3, 4], False),  # un-evicted whole; its window starts at token 2: [5, 0] | [1, 2, 3, 4]
                         ([7, 1, 9], True)):  # splits [7, 1, 2]: #3 stamps its suffix [2]
        w.serve(tokens, load=load)
        w.finish()
        w.complete_all()
    w.match([5, 3])  # splits [5, 0] only: #3 stamps [0], not the window node [1, 2, 3, 4]
    return w


def _to_host_then_evict_host(w: TierWorld) -> None:
    """Everything to host (the device pick said once, as a waived run says it), then one host eviction."""
    with pytest.raises(LRUOrderViolation, match=FREED):
        w.evict(10**6)
    w.complete_all()
    w.evict(10**6)
    w.evict_host(1)


@pytest.mark.parametrize("factory", CORES, ids=["python", "rust"])
def test_the_unevicted_window_node_is_explained_by_3_on_device(factory: Any) -> None:
    w = _unevicted_window_then_split_above_it(factory, known_3=True)
    with pytest.raises(LRUOrderViolation, match=FREED) as raised:
        w.evict(10**6)
    assert raised.value.explained_by == KNOWN_3  # waived by the known: line


@pytest.mark.parametrize("factory", CORES, ids=["python", "rust"])
def test_the_unevicted_window_node_is_explained_by_3_on_host(factory: Any) -> None:
    w = _unevicted_window_then_split_above_it(factory, known_3=True)
    with pytest.raises(HostEvictionOrderViolation, match=FREED) as raised:
        _to_host_then_evict_host(w)
    assert raised.value.explained_by == KNOWN_3


def test_without_the_deviation_it_is_a_finding() -> None:
    w = _unevicted_window_then_split_above_it(sglang_hicache_hybrid.hicache_swa_rust, known_3=False)
    with pytest.raises(LRUOrderViolation, match=FREED) as raised:
        w.evict(10**6)
    assert not raised.value.explained_by


@pytest.mark.parametrize("tier", ["device", "host"])
def test_a_model_ending_new_leaves_only_misses_the_boundary(monkeypatch: pytest.MonkeyPatch, tier: str) -> None:
    """The tier model's rule before: a node ends at the window start of an insert's new pages only
    (``TierModel._cap_new_leaf``), not inside a node the insert un-evicts."""
    def new_leaves_only(self: TierModel, path: list[Any], on_device: int) -> None:
        new = sum(page.created == self.clock for page in path)
        start = len(path) - self.windows.window
        if start > len(path) - new:
            path[start - 1].ends_node = True

    monkeypatch.setattr(TierModel, "_window_start_ends_node", new_leaves_only)
    w = _unevicted_window_then_split_above_it(sglang_hicache_hybrid.hicache_swa_rust, known_3=True)
    if tier == "device":
        with pytest.raises(LRUOrderViolation, match=FREED) as raised:
            w.evict(10**6)
    else:
        with pytest.raises(HostEvictionOrderViolation, match=FREED) as raised:
            _to_host_then_evict_host(w)
    assert not raised.value.explained_by


def test_sglang_with_the_split_stamps_undone_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RADIXCHECK_SGLANG_FIX=3`` for this test only (Python core: the compiled one cannot be patched)."""
    fix_3_for_this_test(monkeypatch)
    w = _unevicted_window_then_split_above_it(sglang_hicache_hybrid.hicache_swa_python, known_3=False)
    w.evict(10**6)
    w.complete_all()
    w.evict(10**6)
    w.evict_host(1)
    w.check()
