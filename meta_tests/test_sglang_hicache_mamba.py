"""HiCache over SGLang's FULL+MAMBA tree: the adapter drains the state-only copies SGLang makes (a
node's Mamba state backed up alone), so the tier machine's verdicts are SGLang's and not the adapter's
(``deep``, and skipped without SGLang: ``python -m radixcheck.reports.audit_env``).

The ``M1`` fix (``sglang_hicache.apply_fixes``) backs a node's state up when its KV write's ack is
consumed, inside the poll (``check_hicache_events``) that ``transfer_done`` makes. That copy moves no
suite slot, so the suite never completes it, and SGLang keeps the node locked (an in-flight write)
until the next poll. The adapter polled next only after the suite's next call, so an ``evict`` in
between found the node locked and took a younger leaf: a false "4 LRU order" finding, the one
``findings/sglang_trees.md`` left "not analysed" (``hicache_mamba_python`` with
``RADIXCHECK_SGLANG_FIX=M1``). The adapter now polls again after each completion.

Unpatched, such a copy can also wait behind a suite write still in flight (SGLang acts on its write
acks in order): its node stays locked while the tier model sees no transfer on it, a false "4
eviction amount" (the matrix's Mamba rows). The adapter acts on a done state-only copy's ack ahead of
the suite writes not yet done (``_Polling._own_copies_first``).
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from meta_tests.test_tier_target_state import _loaded_back
from radixcheck.oracles.violations import EvictionAmountViolation, SecondValueViolation, TierResidencyViolation
from radixcheck.properties.adapters import sglang_hicache, sglang_hicache_hybrid
from radixcheck.properties.tiers.world import TierWorld

pytestmark = [pytest.mark.deep, pytest.mark.skipif(importlib.util.find_spec("sglang") is None,
                                                   reason="needs SGLang (python -m radixcheck.reports.audit_env)")]


@pytest.fixture
def m1_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter's M1 fix for this test only (the patched method restored afterwards)."""
    sglang_hicache._load()
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

    monkeypatch.setattr(UnifiedRadixCache, "_finish_write_through_ack", UnifiedRadixCache._finish_write_through_ack)
    monkeypatch.setattr(sglang_hicache, "_applied", set())
    assert sglang_hicache.apply_fixes("M1") == ["M1"]


def _m1_backup_then_evict() -> TierWorld:
    """The audit's shrunk program: ``[3]``'s state (the adapter's prefix state, attached while
    ``[3, 0]``'s write was in flight: M1) is backed up by the fix when ``complete(2)`` acks that write;
    ``[0, 0]``, re-inserted after its load-back failed, is younger than ``[3]``. ``evict(13)``."""
    w = TierWorld(sglang_hicache_hybrid.hicache_mamba_python, page_size=1, write_policy="write_through")
    w.serve([0, 0], load=True)
    w.finish(-1)
    w.complete(1)
    w.evict(1000000)
    w.serve([3, 0], load=True)
    w.finish(-1)
    w.fail_next([True, True])
    w.serve([0, 0], load=True)  # its load-back fails: recomputed and inserted again
    w.finish(-1)
    w.complete(2)
    w.evict(13)
    w.check()
    return w


def test_m1_fixed_evicts_in_lru_order(m1_fixed: None) -> None:
    _m1_backup_then_evict()


def test_an_undrained_state_copy_looks_like_an_lru_bug(m1_fixed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the second poll the fix's copy is still in flight at the next ``evict``: a false
    finding made by the adapter, not by SGLang. The matrix showed it as "4 LRU order" at
    ``evict(13)``; the tier amount oracle (added since) sees it first, at ``evict(1000000)``, which
    stops short at ``[0]``, the node that copy keeps locked."""
    monkeypatch.setattr(sglang_hicache_hybrid._Polling, "transfer_done", sglang_hicache.SGLangHiCache.transfer_done)
    with pytest.raises(EvictionAmountViolation, match=r"evict\(1000000\) freed 1 tokens.*unlocked device leaf Page\(\[0\]"):
        _m1_backup_then_evict()


def _state_copy_behind_a_write_then_evict(factory: object) -> TierWorld:
    """The matrix's shrunk program (``4 eviction amount`` on both cores, unpatched SGLang): ``[0, 0]``
    goes to host; ``[3, 0]`` is served (its write #2 in flight); ``[0, 0]``'s load-back fails and it is
    inserted again, and the adapter's prefix insert of ``[0]`` gives that host-backed node a new state,
    which SGLang backs up alone (a state-only copy, its ack queued behind write #2). ``evict(16)``."""
    w = TierWorld(factory, page_size=1, write_policy="write_through")
    w.serve([0, 0], load=True)
    w.finish(-1)
    for _ in range(4):
        w.evict(1000000)
        w.complete_all()
    w.match([0, 0])
    w.evict_host(max(0, w.cache.host_size() - 2))
    w.serve([3, 0], load=True)
    w.finish(-1)
    w.fail_next([True, True])
    w.serve([0, 0], load=True)
    w.finish(-1)
    w.evict(16)
    w.check()
    return w


@pytest.mark.parametrize("factory", [sglang_hicache_hybrid.hicache_mamba_python, sglang_hicache_hybrid.hicache_mamba_rust],
                         ids=["python", "rust"])
def test_a_done_state_copy_does_not_wait_behind_a_suite_write(factory: object) -> None:
    _state_copy_behind_a_write_then_evict(factory)


def test_a_state_copy_held_behind_a_suite_write_looks_like_an_amount_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``_own_copies_first`` SGLang keeps ``[0]`` locked (its state copy's ack waits for write
    #2, which only the suite completes), and the tier model, seeing no transfer on ``[0]``, calls the
    short ``evict`` a bug: the finding the matrix showed, made by the adapter, not by SGLang."""
    monkeypatch.setattr(sglang_hicache_hybrid._Polling, "_own_copies_first", lambda self: None)
    with pytest.raises(EvictionAmountViolation, match=r"evict\(16\) freed 1 tokens.*unlocked device leaf Page\(\[0\]"):
        _state_copy_behind_a_write_then_evict(sglang_hicache_hybrid.hicache_mamba_python)


def test_the_state_pool_holds_a_state_per_cached_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cached token boundary is a request end with a Mamba state of its own (the adapter's
    ``_inserted``), so a world caches up to one state per device slot. The private state pool had a
    fixed size (4,096), and the tier production world (~37,000 device slots) ran it out: "slot pool
    exhausted" reported as the target's crash. Here the least size is 16 and the world caches 32
    token boundaries in 128 device slots: it must not run out."""
    monkeypatch.setattr(sglang_hicache_hybrid, "_STATES", 16)
    w = TierWorld(sglang_hicache_hybrid.hicache_mamba_python, page_size=1, write_policy="write_through",
                  device_slots=128, host_slots=256)
    for request in range(4):
        w.serve([100 * (request + 1) + t for t in range(8)])
        w.finish(-1)
        w.check()
    assert int(w.cache.device_size()) == 32  # every token cached, each with its state


def _state_back_on_device_after_host_only() -> TierWorld:
    """The audit's shrunk program (``reports/repro/sglang_hicache_mamba_state_reads_none.py``): ``[0]``
    (state 1) and ``[0, 0]`` go to host; ``[0, 0]`` is served without its load-back, so its insert puts
    both nodes' KV back on device, and the adapter's prefix insert of ``[0]`` gives ``[0]`` a fresh
    device state (SGLang attaches it: ``[0]``'s state was on host only). The next forward reads the
    states of ``[0, 0]``: ``[0]`` must still hold 1."""
    w = TierWorld(sglang_hicache_hybrid.hicache_mamba_python, page_size=1, write_policy="write_through")
    w.serve([0], load=False)
    w.finish(0)
    w.serve([0, 0], load=True)
    w.finish(-1)
    w.complete(2)
    w.evict(1000000)
    w.serve([0, 0], load=False)
    w.finish(-1)
    w.serve([0, 0], load=True)
    w.finish(-1)
    w.check()
    return w


def test_a_prefix_state_restored_on_device_keeps_its_host_value() -> None:
    _state_back_on_device_after_host_only()


def test_a_prefix_state_written_as_none_looks_like_a_lost_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``_host_only_states`` the adapter wrote that fresh state as *none*: ``states`` read -1 at
    ``[0]``, the oracle-20 finding the audit stopped at in session 61, made by the adapter (SGLang
    attached the new device state, as it should: the state after the same tokens), not by SGLang."""
    monkeypatch.setattr(sglang_hicache_hybrid.SGLangHiCacheMamba, "_host_only_states", lambda self, node: {})
    with pytest.raises(SecondValueViolation, match=r"Page\(\[0\], device\+host\) reports state -1, but it has the state 1"):
        _state_back_on_device_after_host_only()


@pytest.mark.parametrize("factory", [sglang_hicache_hybrid.hicache_mamba_python, sglang_hicache_hybrid.hicache_mamba_rust],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_a_load_back_restores_only_its_targets_state(factory: object, policy: str) -> None:
    """Session 61's next ``FIX=M1`` finding (oracle 13, ``match([0]*7) returned device slots [] (0), but the
    pages on device hold [...] (7)``) is SGLang's design, now declared (``state_load_back="target"``): a
    load-back of ``[0]*8`` restores ``[0]*8``'s state alone, so ``[0]*7`` resumes from host. Conforms."""
    world = _loaded_back(factory, policy)
    world.check()


def test_without_the_declaration_sglangs_load_back_looks_like_a_residency_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same story judged as if a load-back restored the whole path's states: session 61's message."""
    factory = sglang_hicache_hybrid.hicache_mamba_python
    monkeypatch.setattr(factory, "tier_capabilities", dataclasses.replace(factory.tier_capabilities, state_load_back="path"))
    with pytest.raises(TierResidencyViolation, match=r"match\(\[0, 0, 0, 0, 0, 0, 0\]\) returned device slots \[\] \(0\), but"):
        _loaded_back(factory, "write_through")


def _named_after_its_host_copy(factory: object) -> TierWorld:
    """Session 62's ``FIX=M1`` audit, shrunk (9 operations to 7): ``[0]*6`` cached and backed up (the adapter's
    state at ``[0]*4`` unnamed, copied to host), everything evicted, ``[0]*4`` re-inserted naming a state
    there (SGLang attaches it on device and keeps the node's host copy), evicted again: ``[0]*4``'s state
    is then its host copy's, which must read as the state the suite named."""
    w = TierWorld(factory, page_size=1, write_policy="write_through")
    w.serve([0] * 6, load=True)
    w.finish(-1)
    w.complete(1)
    w.evict(1000000)
    w.serve([0] * 4, load=False)
    w.finish(-1)
    w.evict(1000000)
    w.serve([0] * 9 + [2, 2, 1, 1, 1, 2, 1], load=True)
    w.finish(-1)
    w.check()
    return w


def test_a_state_named_after_its_host_copy_reads_back_from_host(m1_fixed: None) -> None:
    """The Python core only: the M1 fix is (the Rust core fails the program's match on M1 first)."""
    _named_after_its_host_copy(sglang_hicache_hybrid.hicache_mamba_python)


def test_an_unnamed_host_copy_looks_like_a_lost_state(m1_fixed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the adapter's naming of the host copy taken out: the audit's false oracle-20 finding."""
    monkeypatch.setattr(sglang_hicache_hybrid.SGLangHiCacheMamba, "_name_host_copy", lambda self, node, length: None)
    with pytest.raises(SecondValueViolation, match=r"Page\(\[0, 0, 0, 0\], device\+host\) reports state -1, but it has the state"):
        _named_after_its_host_copy(sglang_hicache_hybrid.hicache_mamba_python)
