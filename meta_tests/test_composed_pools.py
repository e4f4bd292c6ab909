"""A second pool composed with the other parts (issue 39 item 3): with ``lifecycle="requests"``, a
state pool with either lifecycle, bigram keys with a window or a state pool. Each combination is
driven by one machine over one model (the second pool a layer: ``SecondPoolLayer``), and on each a
broken cache fails for the right reason while the composed references pass. (The catalogued composed
mutants' kill rates, and the correct composed caches' false alarms, are in BUG_CATALOGUE.md.)"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.violations import EvictionAmountViolation, SecondSlotViolation, SecondValueViolation, WindowMatchViolation
from radixcheck.properties.cache.composed_mutants import (
    COMPOSED_VARIANTS,
    BigramWindowAlignsRawTokens,
    FinishFreesTakenState,
    RequestKeepsTakenWindow,
)
from radixcheck.properties.cache.contract import Capabilities, SlidingWindow, StatePool
from radixcheck.properties.cache.hybrid import StateMachine, WindowLifecycleMachine, WindowMachine
from radixcheck.properties.cache.hybrid_lifecycle import StateLifecycleMachine, WindowRequestsMachine
from radixcheck.properties.cache.layers import UNSAID, SecondPoolLayer, Tags, keywords_for, layers_for
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import machine_for_mutant
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference.bigram import bigrams
from radixcheck.reference.bigram_hybrid import BigramStateCache, BigramWindowCache
from radixcheck.reference.hybrid_cache import NONE
from radixcheck.reference.hybrid_requests import StateTreeCache, WindowRequestsCache
from radixcheck.reference.validation import as_tokens, as_values

FIND = profiles.SETTINGS["mutation"]  # the gate's search, no shrinking: these tests need the verdict, not the program


def test_the_second_pool_is_a_layer() -> None:
    """An insert's window slots or state travel as ``Tags.second`` and reach the call as the declared keyword."""
    window = np.arange(4, dtype=np.int64)
    layers = layers_for(namespaces=False, policy=None, second="window")
    assert layers == (SecondPoolLayer("window"),)
    assert keywords_for(layers, "insert", Tags(UNSAID, 0, window))["window"] is window
    assert keywords_for(layers, "match_prefix", Tags(UNSAID, 0, window)) == {}  # only an insert brings it
    assert keywords_for(layers_for(True, None, "state"), "insert", Tags("a", 0, 7)) == {"namespace": "a", "state": 7}
    with pytest.raises(ValueError, match="declares no second pool"):
        keywords_for(layers_for(namespaces=False), "insert", Tags(UNSAID, 0, 7))


@pytest.mark.parametrize(("capabilities", "machine"), [
    (Capabilities(second_pool=SlidingWindow(8)), WindowMachine),
    (Capabilities(second_pool=SlidingWindow(8), lifecycle="tree"), WindowLifecycleMachine),
    (Capabilities(second_pool=SlidingWindow(8), lifecycle="requests"), WindowRequestsMachine),
    (Capabilities(second_pool=StatePool()), StateMachine),
    (Capabilities(second_pool=StatePool(), lifecycle="tree"), StateLifecycleMachine),
    (Capabilities(second_pool=StatePool(), lifecycle="requests"), StateLifecycleMachine),
    (Capabilities(second_pool=SlidingWindow(8), key_mode="bigram", lifecycle="tree"), WindowLifecycleMachine),
    (Capabilities(second_pool=StatePool(), key_mode="bigram"), StateMachine),
], ids=["window", "window-tree", "window-requests", "state", "state-tree", "state-requests", "bigram-window-tree", "bigram-state"])
def test_every_second_pool_combination_is_driven(capabilities: Capabilities, machine: type) -> None:
    assert issubclass(machine_for(WindowRequestsCache, capabilities, 4, "meta_combination"), machine)


def test_bigram_keys_with_the_requests_lifecycle_are_refused_in_one_line() -> None:
    """The one combination left refused: the suite's Request holds one slot per key, a bigram request one more."""
    with pytest.raises(ValueError, match="one slot per key") as refused:
        Capabilities(key_mode="bigram", lifecycle="requests")
    assert "\n" not in str(refused.value)


def _caught(mutant: type) -> BaseException:
    with pytest.raises(Exception) as caught:
        run_machine(machine_for_mutant(mutant, f"meta_composed_{mutant.__name__}"), FIND)
    return caught.value


def test_a_request_that_keeps_a_window_slot_the_tree_took_fails() -> None:
    """Window + lifecycle="requests": the request must stop naming what the tree took (it would free it again)."""
    caught = _caught(RequestKeepsTakenWindow)
    assert isinstance(caught, SecondSlotViolation) and "Request.window" in str(caught), caught


def test_a_finish_that_frees_a_state_the_tree_took_fails() -> None:
    """State + lifecycle="requests": a finish's state is freed only if the insert did not take it."""
    caught = _caught(FinishFreesTakenState)
    assert isinstance(caught, SecondSlotViolation) and "cache_finished_req" in str(caught), caught


def test_a_bigram_window_aligned_to_raw_tokens_fails() -> None:
    """Bigram keys + a window: key i keeps raw token i's window slot, not raw token i + 1's."""
    caught = _caught(BigramWindowAlignsRawTokens)
    assert isinstance(caught, (SecondValueViolation, SecondSlotViolation)), caught


class StateOnlyOnNewLeaves(StateTreeCache):
    """State + lifecycle="tree": takes a state only with new KV, so a request whose chunk is all
    duplicates (two requests racing on one prompt) or that re-publishes leaves the prefix without
    the state it brought; the match then stops short of it."""

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0, state: Any = NONE) -> int:
        key = as_tokens(tokens, "tokens")
        cached = len(self.match_prefix_plain(key, namespace))
        return super().insert(tokens, values, namespace, priority, state if cached < len(key) else NONE)

    def match_prefix_plain(self, key: tuple[int, ...], namespace: Hashable) -> list[int]:
        node, pos = self._root_for(namespace), 0
        while pos < len(key):
            child = self._child(node, key[pos : pos + self.page_size])
            if child is None or self._shared_length(child.key, key[pos : pos + len(child.key)]) < len(child.key):
                break
            node, pos = child, pos + len(child.key)
        return list(range(pos))


def test_a_state_cache_that_drops_a_duplicate_chunks_state_fails_with_the_tree_lifecycle() -> None:
    """The state the contract says it takes is not there: the match stops short of it (23), the state
    is held by nobody (3s), or a state eviction stops while the model still counts it live (4)."""
    with pytest.raises(Exception) as caught:
        run_machine(machine_for(StateOnlyOnNewLeaves, StateOnlyOnNewLeaves.capabilities, 4, "meta_state_new_leaves"), FIND)
    assert isinstance(caught.value, (WindowMatchViolation, SecondSlotViolation, EvictionAmountViolation)), caught.value


class BigramStateAlignsRawTokens(BigramStateCache):
    """Bigram keys + a state pool: brings the state only when the raw tokens fill whole pages (one
    more than the keys), so the caller, told its state was taken, leaks it, or the match stops short."""

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0, state: Any = NONE) -> int:
        raw = as_tokens(tokens, "tokens")
        vals = as_values(values, len(raw))
        keys = bigrams(raw)
        taken = state if len(raw) % self.page_size == 0 else NONE
        return super(BigramStateCache, self).insert(keys, vals[: len(keys)], namespace, priority, state=taken)


def test_a_bigram_state_aligned_to_raw_tokens_fails() -> None:
    with pytest.raises(Exception) as caught:
        run_machine(machine_for(BigramStateAlignsRawTokens, BigramStateAlignsRawTokens.capabilities, 4, "meta_bigram_state"), FIND)
    assert isinstance(caught.value, (WindowMatchViolation, SecondSlotViolation)), caught.value


@pytest.mark.deep  # seven machines run to a verdict
@pytest.mark.parametrize("variant", COMPOSED_VARIANTS, ids=lambda v: v.__name__)
def test_the_correct_composed_caches_pass_at_every_page_size(variant: type) -> None:
    """The composed references and the trusting ones pass every declared page size (the catalogue runs
    each at its test page size over 50 streams, in the ordinary machine and the production world)."""
    for page_size in variant.capabilities.page_sizes:
        run_machine(machine_for(variant, variant.capabilities, page_size, f"meta_composed_{variant.__name__}_{page_size}"),
                    settings(FIND, max_examples=20))


def test_bigram_window_reference_keeps_raw_token_i_s_window_for_key_i() -> None:
    """By hand: 5 raw tokens are 4 keys; key i keeps raw token i's window slot, the last one is the caller's."""
    from radixcheck.properties.cache.contract import SecondPoolAllocator, SlotAllocator

    kv, second = SlotAllocator(64), SecondPoolAllocator(64)
    cache = BigramWindowCache(kv, 1, second_allocator=second)
    values, window = kv.alloc(5), second.alloc(5)
    assert cache.insert([9, 1, 2, 3, 4], values, window=window) == 0
    got_values, _handle, got_window = cache.match_prefix([9, 1, 2, 3, 4])
    assert got_values.tolist() == values[:4].tolist() and got_window.tolist() == window[:4].tolist()


@pytest.mark.deep  # a production world of ~10^4 calls
def test_the_bigram_window_reference_passes_the_production_world_at_page_1() -> None:
    """The long history (3,000 keys deep, told at page 1 only) is matched as raw tokens, ``BIGRAM_START`` first."""
    from radixcheck.properties.cache.scale_machine import scale_machine_for

    run_machine(scale_machine_for(BigramWindowCache, BigramWindowCache.capabilities, 1, "meta_bigram_window_scale"), FIND)
