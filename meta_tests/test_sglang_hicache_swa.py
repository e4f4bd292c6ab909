"""HiCache over SGLang's FULL+SWA tree: a load-back that fails leaves the request where its window
is live on device, and a host copy may gain its window later (``deep``, and skipped without
SGLang: ``python -m radixcheck.reports.audit_env``).

The matrix's ``hicache_swa_python`` row failed 20w ("token 2 ... reports -1 (tombstoned), but its
window value ... is live there (revived from its host copy by the load-back ...)"). The load-back
had failed (its allocation did); SGLang moved nothing, neither KV nor SWA, and
``UnifiedRadixCache.init_load_back`` keeps the device match's node (``req.last_node``), whose
window is live. The adapter answered with the FULL-only device path instead, a prefix whose window
nothing restored, and the tier model took that as a load-back of that path and revived its window.
Now the adapter answers SGLang's node (``SGLangHiCacheSWA._device_ancestor``) and the tier model
accepts, from a load-back that moved nothing, the device pages up to where the window is live
(``TierModel._failed_load_resumes``), without reviving anything.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from radixcheck.oracles.tier_model import TierModel
from radixcheck.oracles.tier_windows import TierWindows
from radixcheck.oracles.violations import (
    TierResidencyViolation,
    TierWindowViolation,
    TombstoneViolation,
    WindowMatchViolation,
)
from radixcheck.properties.adapters import sglang_hicache, sglang_hicache_hybrid
from radixcheck.properties.tiers.world import TierWorld

pytestmark = [pytest.mark.deep, pytest.mark.skipif(importlib.util.find_spec("sglang") is None,
                                                   reason="needs SGLang (python -m radixcheck.reports.audit_env)")]


def _failed_load_back() -> TierWorld:
    """The row's program, reduced (``properties/tiers/repro.reduced``): ``[0, 0, 0, 1]`` is on device
    with its window tombstoned, ``[0, 0, 0, 1, 0, 0, 0, 0]``'s extension on host only; the last
    request's load-back of it fails (``fail_next([True, ...])``), then its forward reads the prefix."""
    w = TierWorld(sglang_hicache_hybrid.hicache_swa_python, page_size=1, write_policy="write_through")
    w.serve([0, 0, 0, 1, 2, 1], load=True)
    w.finish(-1)
    w.complete(2)
    w.evict(1000000)
    w.serve([0, 0, 0, 1, 2, 1], load=True)
    w.finish(-1)
    w.serve([0, 0, 0, 1, 0, 0, 0, 0], load=True)
    w.finish(-1)
    w.serve([0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1], load=True)
    w.finish(-1)
    w.complete(5)
    w.evict(1000000)
    w.serve([0, 0, 0, 1, 1, 2, 2, 0, 0, 0, 0, 1], load=True)
    w.finish(-1)
    w.fail_next([True, False])
    w.serve([0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 1, 2, 2, 0, 1, 2], load=True)
    w.finish(-1)
    w.check()
    return w


def test_a_failed_load_back_resumes_where_the_window_is_live() -> None:
    _failed_load_back()


def test_the_full_only_path_after_a_failed_load_fails_21(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter's old answer (the plain HiCache adapter's: the FULL KV's device path). It failed
    20w at the forward's ``windows()``; since the tier world judges a failed load's end
    (``TierModel.check_failed_load_end``, oracle 21) it fails there, one step earlier."""
    monkeypatch.setattr(sglang_hicache_hybrid.SGLangHiCacheSWA, "_device_ancestor",
                        sglang_hicache.SGLangHiCache._device_ancestor)
    with pytest.raises(TombstoneViolation, match=r"its load moved nothing, and it returned the whole device path \(4 tokens\)"):
        _failed_load_back()


def test_the_model_needs_the_failed_load_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without it, the right answer (short of the FULL KV on device) is a residency violation."""
    monkeypatch.setattr(TierModel, "_failed_load_resumes", lambda *args: False)
    with pytest.raises(TierResidencyViolation, match=r"returned slots \[\], the path's device pages hold"):
        _failed_load_back()


def _window_backed_up_later(factory: Any) -> TierWorld:
    """The rows' oracle-23 program, reduced: ``[0]``'s host copy is written with its window
    tombstoned (out of the window at ``[0, 0, 0, 0, 0]``'s end); ``[0]`` alone is served and inserted
    with its window live, and SGLang backs that window up into the existing host copy, alone
    (``UnifiedTreeCore._should_backup_after_insert`` -> ``SWAComponent._collect_unbacked_swa_nodes_in_window``);
    after an ``evict``, ``match([0])``'s host part is 1."""
    w = TierWorld(factory, page_size=1, write_policy="write_through")
    w.serve([0, 0, 0, 0, 0], load=True)
    w.finish(-1)
    w.serve([3, 0], load=True)
    w.finish(-1)
    w.complete(3)
    w.evict(1000000)
    w.serve([0], load=True)
    w.finish(-1)
    w.evict(1)
    w.serve([0], load=True)
    w.finish(-1)
    w.check()
    return w


CORES = [sglang_hicache_hybrid.hicache_swa_python, sglang_hicache_hybrid.hicache_swa_rust]


@pytest.mark.parametrize("factory", CORES, ids=["python", "rust"])
def test_a_window_backed_up_later_is_counted_on_host(factory: Any) -> None:
    _window_backed_up_later(factory)


@pytest.mark.parametrize("factory", CORES, ids=["python", "rust"])
def test_without_the_later_backup_maybe_the_host_match_fails_23(factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TierWindows, "_may_back_up", lambda self, page: None)
    with pytest.raises(WindowMatchViolation, match=r"match\(\[0\]\): its host part ends after 1 tokens"):
        _window_backed_up_later(factory)


def _device_page_behind_a_host_window(factory: Any) -> TierWorld:
    """The rows' 20w program after the rule ``failed_load_at_a_dead_window``, reduced to 13
    operations: ``[0]*8``'s nodes ``[0]*4`` (no window) and ``[0]*4`` (window on host only) have
    their FULL KV on device and host; ``[1]`` after them is on device only (its write failed), its
    window live. SGLang's ``host_hit_length`` counts only the FULL host copies (8), while its
    ``best_match_node`` is ``[1]`` (9), and a load-back returns 9 tokens."""
    w = TierWorld(factory, page_size=1, write_policy="write_through")
    w.serve([0] * 8, load=True)
    w.finish(-1)
    w.serve([0] * 12, load=True)
    w.finish(-1)
    w.complete(3)
    w.fail_next([True, True])
    w.serve([0] * 8, load=True)
    w.finish(-1)
    w.evict(1)
    w.evict(1)
    w.serve([0] * 8 + [1, 1, 1, 1], load=True)  # its load fails, then its write
    w.finish(-1)
    w.serve([0] * 8 + [1, 0, 1, 0], load=True)
    w.check()
    return w


@pytest.mark.parametrize("factory", CORES, ids=["python", "rust"])
def test_a_device_page_behind_a_host_window_is_in_the_host_part(factory: Any) -> None:
    _device_page_behind_a_host_window(factory)


@pytest.mark.parametrize("factory", CORES, ids=["python", "rust"])
def test_host_hit_length_as_the_host_part_fails_20w(factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter's old answer (SGLang's ``host_hit_length`` as the host part): the matrix's 20w."""
    monkeypatch.setattr(sglang_hicache_hybrid.SGLangHiCacheSWA, "_match_prefix", sglang_hicache.SGLangHiCache._match_prefix)
    expected = r"its host part stops after 8 tokens, short of 9: the window of the 1 token\(s\) from token 8 is live"
    with pytest.raises(TierWindowViolation, match=expected):
        _device_page_behind_a_host_window(factory)
