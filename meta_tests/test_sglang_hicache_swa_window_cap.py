"""HiCache over SGLang's FULL+SWA tree: the device LRU order (oracle 4) the ``hicache_swa_python`` row
stopped at, with #3 waived by its behaviour, is SGLang's #3; the tier model missed a node boundary
(``deep``, and skipped without SGLang: ``python -m radixcheck.reports.audit_env``).

SGLang splits a fresh leaf longer than one window one window from its end:
``SWAComponent.commit_insert_component_data`` -> ``_populate_range`` -> ``_clip_to_window``, at the
request's window start (session 57: every new-leaf split of a traced 454-operation program was this one;
the adapter's window is the request's last one, so ``_maybe_split_leaf_for_swa_lock``'s cap, credited
before, finds the fragment one window long already and does not split). A later use that diverges inside the upper half splits
that half only (``UnifiedTreeCore._split_node``: #3 stamps its lower half, not the window node below).
The #3 deviation, which did not know that boundary, stamped the whole chain down to the leaf, so it
could not explain SGLang evicting that (older) leaf first. The story below is the audit's 117-operation
program (``radixcheck audit ...:hicache_swa_python --waive reports/waivers/sglang_hybrid.txt --repro``)
reduced by hand to its mechanism: 13 operations.
"""

from __future__ import annotations

import importlib.util

import pytest

from meta_tests.sglang_fix_3 import fix_3_for_this_test
from radixcheck.oracles.deviation import SuffixRefreshedOnMidEdgeUse
from radixcheck.oracles.tier_model import TierModel
from radixcheck.oracles.violations import LRUOrderViolation
from radixcheck.properties.adapters import sglang_hicache_hybrid
from radixcheck.properties.tiers.world import TierWorld

pytestmark = [pytest.mark.deep, pytest.mark.skipif(importlib.util.find_spec("sglang") is None,
                                                   reason="needs SGLang (python -m radixcheck.reports.audit_env)")]


def _capped_leaf_then_split_above_it(known_3: bool) -> TierWorld:
    """Up to the failing ``evict`` (page size 1, write_through, window 4)."""
    w = TierWorld(sglang_hicache_hybrid.hicache_swa_python, page_size=1, write_policy="write_through")
    if known_3:  # as a ``known: suffix-refreshed-on-mid-edge-use`` waiver sets it (TierMachine)
        w.model.deviations = [SuffixRefreshedOnMidEdgeUse()]
    # [7, 1, 2]: one node. [5, 0, 1, 2, 3, 4]: longer than the window, so SGLang caps it: [5, 0] | [1, 2, 3, 4].
    # [7, 1, 9] splits [7, 1, 2] (#3 stamps its suffix [2]); [5, 3] splits [5, 0] only (#3 stamps [0], not the leaf).
    for tokens in ([7, 1, 2], [5, 0, 1, 2, 3, 4], [7, 1, 9], [5, 3]):
        w.serve(tokens, load=True)
        w.finish(-1)
        w.complete(*w.pending())
    return w


def test_the_capped_leaf_is_explained_by_3() -> None:
    w = _capped_leaf_then_split_above_it(known_3=True)
    with pytest.raises(LRUOrderViolation, match=r"freed Page\(\[5, 0, 1\]") as raised:
        w.evict(1000000)
    assert raised.value.explained_by == {SuffixRefreshedOnMidEdgeUse.name}  # waived by the known: line


def test_without_the_deviation_it_is_a_finding() -> None:
    with pytest.raises(LRUOrderViolation, match=r"while the unlocked device leaf Page\(\[7, 1, 2\]") as raised:
        _capped_leaf_then_split_above_it(known_3=False).evict(1000000)
    assert not raised.value.explained_by


def test_a_model_without_the_cap_misses_the_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tier model's rule before: a leaf ends a node only where a use ended or the trie forked."""
    monkeypatch.setattr(TierModel, "_window_start_ends_node", lambda self, path, on_device: None)
    w = _capped_leaf_then_split_above_it(known_3=True)
    with pytest.raises(LRUOrderViolation) as raised:
        w.evict(1000000)
    assert not raised.value.explained_by


def test_sglang_with_the_split_stamps_undone_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RADIXCHECK_SGLANG_FIX=3`` for this test only (both halves keep the node's last use)."""
    fix_3_for_this_test(monkeypatch)
    w = _capped_leaf_then_split_above_it(known_3=False)
    w.evict(1000000)
    w.check()
