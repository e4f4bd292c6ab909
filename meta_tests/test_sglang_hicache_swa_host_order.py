"""HiCache over SGLang's FULL+SWA tree: the host eviction order (oracle 4h) the matrix's
``hicache_swa_*`` rows stopped at is SGLang's #3, met where a match's walk goes past its answer
(``deep``, and skipped without SGLang: ``python -m radixcheck.reports.audit_env``).

SGLang's match walks every node whose full KV is cached on a tier (``UnifiedTreeCore._match_prefix_helper``)
and splits the last one where the tokens diverge; the answer ends earlier, at the deepest node whose SWA
window is live (``best_match_node``). ``_split_node`` stamps the lower half (the unused suffix: #3) and
the new upper half (a new node's ``last_access_time`` is its creation); the match restamps only
``best_match_node`` and its ancestors. The program below (the ``hicache_swa_python`` row's, reduced by
``radixcheck audit --repro`` to 39 operations) ends in ``evict_host(17)`` freeing a leaf used later than
the one the split refreshed. The #3 known deviation explains it once the tier model ends the cache's node
where the walk ends (``TierModel._walked``), not where the answer does; with both stamps of the split
undone (``RADIXCHECK_SGLANG_FIX=3``) the program passes.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from meta_tests.sglang_fix_3 import fix_3_for_this_test
from radixcheck.oracles.deviation import SuffixRefreshedOnMidEdgeUse
from radixcheck.oracles.tier_model import TierModel
from radixcheck.oracles.violations import HostEvictionOrderViolation
from radixcheck.properties.adapters import sglang_hicache_hybrid
from radixcheck.properties.tiers.world import TierWorld

pytestmark = [pytest.mark.deep, pytest.mark.skipif(importlib.util.find_spec("sglang") is None,
                                                   reason="needs SGLang (python -m radixcheck.reports.audit_env)")]


def _split_past_the_answer(known_3: bool) -> TierWorld:
    """The 39 operations up to the failing ``evict_host(17)`` (page size 1, write_through)."""
    w = TierWorld(sglang_hicache_hybrid.hicache_swa_python, page_size=1, write_policy="write_through")
    if known_3:  # as a ``known: suffix-refreshed-on-mid-edge-use`` waiver sets it (TierMachine)
        w.model.deviations = [SuffixRefreshedOnMidEdgeUse()]
    w.serve([0, 0, 0, 0, 0, 0, 0], load=True)
    w.finish(-1)
    w.complete(2)
    w.evict(15)
    w.serve([0, 0, 0], load=True)
    w.finish(-1)
    w.evict(1000000)
    w.evict_host(4)
    w.fail_next([True, True])
    w.serve([0, 0, 0], load=True)
    w.serve([0, 0, 0, 1, 1, 0, 1, 1, 0], load=True)
    w.finish(-1)
    w.complete(4)
    w.evict(1000000)
    w.serve([0, 0, 0, 1], load=True)
    w.serve([0, 0, 0, 0, 0, 0, 0], load=True)
    w.finish(-1)
    w.complete(6)
    w.evict(1000000)
    w.serve([0, 0, 0, 0, 0, 0, 0], load=True)
    w.finish(-1)
    w.evict(4)
    w.serve([0, 0, 0, 0], load=True)
    w.finish(-1)
    w.finish(-1)
    w.serve([0, 0, 0, 2, 0, 2, 2, 0, 2], load=True)
    w.finish(-1)
    w.complete(10)
    w.evict(1000000)
    w.serve([0, 0, 0, 2, 0, 2, 2, 0, 2], load=True)
    w.finish(-1)
    w.evict(6)
    w.evict(1000000)
    w.serve([0, 0, 0], load=False)
    w.finish(-1)
    w.serve([0, 0, 0, 1, 0, 1, 1], load=False)
    w.evict_host(7)
    w.serve([0, 0, 0, 2, 0, 2, 1, 1, 0, 0], load=False)
    return w


def test_the_split_past_the_answer_is_explained_by_3() -> None:
    w = _split_past_the_answer(known_3=True)
    with pytest.raises(HostEvictionOrderViolation) as raised:
        w.evict_host(17)
    assert raised.value.explained_by == {SuffixRefreshedOnMidEdgeUse.name}  # waived by the known: line


def test_without_the_deviation_it_is_a_finding() -> None:
    with pytest.raises(HostEvictionOrderViolation, match=r"freed Page\(\[0, 0, 0, 1\], host\)") as raised:
        _split_past_the_answer(known_3=False).evict_host(17)
    assert not raised.value.explained_by


def test_a_node_ended_at_the_answer_misses_the_split(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tier model's rule before: the cache's node ends where the answer does."""
    def at_the_answer(self: TierModel, tokens: Any, namespace: Any = None) -> list:
        device, host, _ = self.expected_match(tokens, namespace, windowed=True)
        return [pg for pg in self.pages_of(tokens, namespace) if not pg.gone][: (len(device) + host) // self.page_size]

    monkeypatch.setattr(TierModel, "_walked", at_the_answer)
    w = _split_past_the_answer(known_3=True)
    with pytest.raises(HostEvictionOrderViolation) as raised:
        w.evict_host(17)
    assert not raised.value.explained_by


def test_sglang_with_the_split_stamps_undone_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RADIXCHECK_SGLANG_FIX=3`` for this test only (both halves keep the node's last use)."""
    fix_3_for_this_test(monkeypatch)
    w = _split_past_the_answer(known_3=False)
    w.evict_host(17)
    w.check()
