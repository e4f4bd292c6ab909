"""The second pool (a sliding window): the oracles judge what the contract says, by examples
small enough to check by eye, and each fails a broken cache for the right reason. (The catalogued
hybrid mutants, and the correct hybrid caches passing, are in test_mutants.py.)"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.second_pool import StateModel, WindowModel, check_second_count, check_second_frees
from radixcheck.oracles.violations import (
    EvictionAmountViolation,
    PinViolation,
    SecondSlotViolation,
    SecondValueViolation,
    WindowMatchViolation,
)
from radixcheck.properties.cache.contract import (
    Capabilities,
    Request,
    SecondPoolAllocator,
    SlidingWindow,
    StatePool,
    required_methods,
    second_pool_keywords,
)
from radixcheck.properties.cache.hybrid import StateMachine, WindowMachine
from radixcheck.properties.cache.hybrid_mutants import RefillingWindow
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference.hybrid_cache import NONE, WINDOW, WindowRadixCache
from radixcheck.reference.state_cache import StateRadixCache
from radixcheck.reference.validation import as_count

SEARCH = settings(profiles.SETTINGS["mutation"], max_examples=40)


def test_the_match_length_rule_by_hand() -> None:
    """W = 2, page 1. Tokens are named by their KV slots 10, 11, ...; ``x`` marks a tombstone."""
    model = WindowModel(window=2, page_size=1)
    model.cache([10, 11, 12, 13, 14], [50, -1, 52, 53, -1])  # 10 11x 12 13 14x
    assert model.resumable([10]) == 1  # shorter than the window: every token must be live
    assert model.resumable([10, 11]) == 1  # 11 is dead
    assert model.resumable([10, 11, 12]) == 1  # the last 2 (11, 12) are not all live
    assert model.resumable([10, 11, 12, 13]) == 4  # 12, 13 live: the tombstone at 11 hides nothing
    assert model.resumable([10, 11, 12, 13, 14]) == 4
    paged = WindowModel(window=2, page_size=2)
    paged.cache([10, 11, 12, 13], [50, 51, 52, 53])
    assert paged.resumable([10, 11, 12]) == 2  # page-aligned
    assert paged.span([10, 11, 12, 13]) == [12, 13]  # a lock pins the page holding the last 2 tokens


def test_pins_and_frees_by_hand() -> None:
    model = WindowModel(window=1, page_size=1)
    model.cache([10, 11], [50, 51])
    model.pin([11])
    assert model.unpinned == 1
    with pytest.raises(PinViolation, match="lock"):
        model.tombstone([51], "evict_window(1)")
    with pytest.raises(SecondSlotViolation, match="did not hold live"):
        model.tombstone([99], "evict_window(1)")
    model.tombstone([50], "evict_window(1)")
    assert model.windows([10, 11]) == [-1, 51] and model.unpinned == 0
    model.unpin([11])
    assert model.drop_with_kv([10, 11]) == {51} and model.held() == 0
    with pytest.raises(SecondSlotViolation, match="twice"):
        check_second_frees([5, 5], {5}, "evict(1)")
    with pytest.raises(SecondSlotViolation, match="not to be freed"):
        check_second_frees([5, 6], {5}, "evict(1)")
    with pytest.raises(SecondSlotViolation, match="refused"):
        check_second_count({1}, 1, (), ["free() of ids not in use"])


def test_the_second_pool_is_declared_and_validated() -> None:
    assert "evict_window" in required_methods(Capabilities(second_pool=SlidingWindow(4)))
    assert "evict_states" in required_methods(Capabilities(second_pool=StatePool()))
    assert "evict_window" not in required_methods(Capabilities())
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="window must be a positive int"):
            SlidingWindow(bad)
    with pytest.raises(ValueError, match="second_pool must be None"):
        Capabilities(second_pool="swa")
    assert second_pool_keywords(Capabilities()) == {}
    assert isinstance(second_pool_keywords(Capabilities(second_pool=SlidingWindow(4)))["second_allocator"], SecondPoolAllocator)
    assert issubclass(machine_for(WindowRadixCache, WindowRadixCache.capabilities, 1, "w"), WindowMachine)
    assert not issubclass(machine_for(WindowRadixCache, Capabilities(), 1, "plain"), WindowMachine)
    assert issubclass(machine_for(StateRadixCache, StateRadixCache.capabilities, 1, "s"), StateMachine)
    # composed with the lifecycle and bigram keys: driven (meta_tests/test_composed_pools.py), no longer refused
    Capabilities(second_pool=SlidingWindow(4), lifecycle="requests")
    Capabilities(second_pool=StatePool(), lifecycle="tree")


def test_a_double_free_in_the_second_pool_is_its_own_violation() -> None:
    pool = SecondPoolAllocator(16)
    slots = pool.alloc(2)
    pool.free(slots)
    with pytest.raises(SecondSlotViolation):
        pool.free(slots[:1])


def test_a_request_keeps_a_window_slot_per_token() -> None:
    request = Request([1, 2, 3, 4])
    request.filled = 1  # a matched token, whose window is the tree's
    request.slots = np.array([7], dtype=np.int64)
    request.compute([8, 9], window=[20, 21])
    assert request.window.tolist() == [-1, 20, 21] and request.slots.tolist() == [7, 8, 9]
    with pytest.raises(ValueError, match="2 window slots for 1 slots"):
        request.compute([10], window=[22, 23])


def test_the_reference_refuses_a_bad_window_and_changes_nothing() -> None:
    kv, window = SecondPoolAllocator(64), SecondPoolAllocator(64)
    cache = WindowRadixCache(kv, 1, second_allocator=window)
    for bad in (np.array([1.5, 2.0]), np.array([1]), np.array([-2, 3]), [1, 2]):
        with pytest.raises((TypeError, ValueError)):
            cache.insert([1, 2], kv.alloc(2), window=bad)
    assert cache.total_size() == 0 and not window.freed_log


class IgnoresWindow(WindowRadixCache):
    """Matches the longest cached prefix, whatever its window: a request would resume without the
    window KV it needs."""

    def resumable_length(self, live: np.ndarray) -> int:
        return len(live) // self.page_size * self.page_size


class WindowEvictionStopsShort(WindowRadixCache):
    """evict_window frees at most one window slot a call."""

    def evict_window(self, num_tokens: int) -> int:
        return super().evict_window(min(1, as_count(num_tokens, "num_tokens", minimum=0)))


@pytest.mark.sampled  # a catalogue that grows with each contract (conftest.FAST_SAMPLE)
@pytest.mark.parametrize(("broken", "violation"), [(IgnoresWindow, WindowMatchViolation),
                                                   (WindowEvictionStopsShort, EvictionAmountViolation)],
                         ids=lambda x: getattr(x, "__name__", ""))
def test_a_broken_hybrid_cache_fails_for_the_right_reason(broken, violation) -> None:
    with pytest.raises(violation):
        run_machine(machine_for(broken, WindowRadixCache.capabilities, 4, f"meta_{broken.__name__}"), SEARCH)


def test_the_state_rule_by_hand() -> None:
    """A state pool: states after KV slots 11 and 13 (prefixes of 2 and 4 tokens)."""
    model = StateModel(page_size=1)
    model.cache([11, 13], [70, 71])
    assert model.resumable([10, 11, 12, 13, 14]) == 4
    assert model.resumable([10, 11, 12]) == 2
    assert model.resumable([10]) == 0
    assert model.span([10, 11]) == [11]  # a lock pins the state it ends at


class IgnoresStates(StateRadixCache):
    """Matches the longest cached prefix, whether a state ends it or not."""

    def _deepest_state(self, key, namespace):  # noqa: ANN001, ANN202 - the reference's own signature
        node, pos = self._root_for(namespace), 0
        while pos < len(key):
            child = self._child(node, key[pos : pos + self.page_size])
            if child is None:
                break
            shared = self._shared_length(child.key, key[pos : pos + len(child.key)])
            node, pos = child, pos + shared
            if shared < len(child.key):
                break
        return pos


def test_a_cache_that_ignores_its_states_fails_the_match_rule() -> None:
    with pytest.raises(WindowMatchViolation, match="ends at a live state"):
        run_machine(machine_for(IgnoresStates, StateRadixCache.capabilities, 1, "meta_IgnoresStates"), SEARCH)


@pytest.mark.deep  # a production-scale world
def test_the_window_reference_passes_the_production_world() -> None:
    """The production-scale test gives a second-pool target the hybrid world (a crowd of 1,025+
    locks under window and memory pressure, 11,000+ requests with slid windows and served turns,
    window pressure around the 500-leaf eviction), and the window reference passes one, at page 1,
    where the 3,000-deep history runs too. The state pool's world (no deep history) is the gate's
    only through its scale-only mutant (test_mutants.py); both references, and the trusting ones,
    pass 50 worlds each in BUG_CATALOGUE.md's false-alarm table (the gate cannot afford every world)."""
    from radixcheck.properties.cache.hybrid_scale import StateScaleMachine, WindowScaleMachine
    from radixcheck.properties.cache.scale_machine import scale_machine_for

    assert issubclass(scale_machine_for(StateRadixCache, StateRadixCache.capabilities, 4, "meta_state"), StateScaleMachine)
    machine = scale_machine_for(WindowRadixCache, WindowRadixCache.capabilities, 1, "meta_window")
    assert issubclass(machine, WindowScaleMachine)
    run_machine(machine, profiles.SETTINGS["mutation"])


# ---- refills_tombstones: the option is judged both ways, and a broken refill fails ----------------


def _refilling(refills: bool) -> Capabilities:
    return dataclasses.replace(RefillingWindow.capabilities, second_pool=SlidingWindow(WINDOW, refills_tombstones=refills))


class RefillsLiveValues(RefillingWindow):
    """Takes every live window value the caller brings for the cached prefix, not only where its
    own is tombstoned: its own live value is dropped unfreed (a leak) and it keeps the caller's,
    which the caller frees as a duplicate (a freed slot cached as live)."""

    @staticmethod
    def _refilled(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
        return theirs != NONE  # the bug: where its own is live too


@pytest.mark.parametrize(("cache", "refills", "violation", "reason"), [
    # declared without the option, a refilling cache keeps window slots its callers free as duplicates
    (RefillingWindow, False, SecondValueViolation, "a freed window value cached as live"),
    # declared with it, a cache that never refills answers none where it took its callers' value, or (the model counting
    # the refilled values live) its evict_window stops while the model holds live values it never took
    (WindowRadixCache, True, (SecondValueViolation, EvictionAmountViolation),
     "returned no window value|stopped while \\d+ live window values no lock pins were left"),
    (RefillsLiveValues, True, SecondValueViolation, "a freed window value cached as live"),
], ids=["refiller-declared-without", "non-refiller-declared-with", "refills-live-values"])
def test_refills_tombstones_is_judged(cache: type, refills: bool, violation: Any, reason: str) -> None:
    with pytest.raises(violation, match=reason):
        run_machine(machine_for(cache, _refilling(refills), 4, f"meta_refill_{cache.__name__}_{refills}"), SEARCH)


def test_a_request_inserts_only_its_own_window_slots() -> None:
    """The refilling cache's page-4 disagreement, by hand. A request admitted on a cached prompt
    reads the tree's window values; window pressure then tombstones those its lock does not pin
    (the first two pages). Its finish must send ``-1`` there: those slots were the tree's and are
    free now. The machine once sent the request's whole row, so a refilling cache took the freed
    ids back (as the contract says it takes any live-looking ``w[i]`` over a tombstone) and the
    model counted them held: 3s, "8 second-pool slots in use; the cache holds 16 live"."""
    machine = machine_for(RefillingWindow, RefillingWindow.capabilities, 4, "meta_own_window")()
    prompt = tuple(range(1, 17))  # four pages, cached with a live window
    machine._insert_request(prompt)
    record = machine._admit_request((*prompt, 99, 98, 97, 96), False, True)  # its lock pins the last W = 8 tokens
    machine._evict_window(16)  # tombstones the first 8
    machine._compute(record, 4, 0)
    sent = machine._second_keywords(record)["window"]
    assert (sent[:16] == NONE).all() and (sent[16:] != NONE).all(), sent  # only its own: none of the tree's, live or freed
    machine._end(record, "finish")
    machine.second_pool_conserved()
    cached = machine.model.values_of(machine.model.longest_cached(prompt))
    assert machine.windows.windows(cached)[:8] == [NONE] * 8  # nothing of its own to refill them with
