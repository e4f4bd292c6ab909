"""The model served through the reference radix cache: every request's logits, computed on top of
the cache's matched slot ids, must equal a from-scratch prefill bit for bit.

This is the seed's central soundness claim (reuse through a split edge is bit-identical to
recompute), checked with the reference cache's own values as the KV slots, including a state
machine that serves a random stream of related requests under an eviction budget (evicted slots
are recycled, so stale K/V in a reused slot would show up as a logits mismatch).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from threadpoolctl import threadpool_limits

from radixcheck.model import KVPool, Model, load_default
from radixcheck.model.checks import assert_bit_identical, full_prefill
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.reference import RadixCache

MODEL = load_default()
VOCAB = MODEL.config.vocab_size


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread_by_default():
    with threadpool_limits(limits=1):
        yield


class ModelServer:
    """Serve requests through a radix cache whose values are KV slot ids of one ``KVPool``.

    The protocol is a serving engine's: match, lock the match, prefill the rest into fresh slots
    (at least the last token is always computed, so it has logits), insert, free duplicates,
    evict to the budget with the new path locked, unlock.
    """

    def __init__(self, model: Model, pool_size: int, budget: int | None = None, dtype: str = "float32") -> None:
        self.model = model
        self.pool = KVPool(model.config, pool_size, dtype=dtype)
        self.allocator = SlotAllocator(pool_size)
        self.cache = RadixCache(self.allocator, page_size=1)
        self.budget = budget

    def serve(self, tokens: list[int]) -> tuple[np.ndarray, int]:
        """Returns (logits of the computed suffix, number of tokens reused from the cache)."""
        values, handle = self.cache.match_prefix(tokens)
        cached = min(len(values), len(tokens) - 1)
        self.cache.inc_lock_ref(handle)
        new = self.allocator.alloc(len(tokens) - cached)
        slots = np.concatenate([np.asarray(values[:cached], dtype=np.int64), new])
        logits = self.model.prefill(self.pool, tokens, slots, cached)
        prefix_len = self.cache.insert(tokens, slots)
        if prefix_len > cached:  # the cache already held these tokens: our copies are duplicates
            self.allocator.free(slots[cached:prefix_len])
        _, leaf = self.cache.match_prefix(tokens)
        self.cache.inc_lock_ref(leaf)
        self.cache.dec_lock_ref(handle)
        if self.budget is not None and self.cache.total_size() > self.budget:
            self.cache.evict(self.cache.total_size() - self.budget)
        self.cache.dec_lock_ref(leaf)
        return logits, cached


def check_served(server: ModelServer, tokens: list[int]) -> int:
    logits, cached = server.serve(tokens)
    want, _ = full_prefill(server.model, tokens, server.pool.dtype_name)
    assert_bit_identical(logits, want[cached:], f"request of {len(tokens)} tokens served with {cached} reused")
    return cached


tokens_st = st.lists(st.integers(0, VOCAB - 1), min_size=2, max_size=40)


@settings(deadline=None, max_examples=max(10, settings.default.max_examples // 2))  # 6 prefills per example
@given(first=tokens_st, data=st.data())
def test_second_request_diverging_inside_a_cached_edge_is_bit_identical(first: list[int], data: st.DataObject) -> None:
    cut = data.draw(st.integers(1, len(first) - 1), label="cut")
    tail = data.draw(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=20), label="tail")
    if tail[0] == first[cut]:
        tail[0] = (tail[0] + 1) % VOCAB  # diverge exactly at the cut: the cached edge is split there
    second = first[:cut] + tail
    server = ModelServer(MODEL, pool_size=128)
    assert check_served(server, first) == 0
    assert check_served(server, second) == cut
    # and the first request again, now served across the split node
    assert check_served(server, first) == len(first) - 1


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
@settings(deadline=None, max_examples=10)
@given(first=tokens_st, data=st.data())
def test_split_reuse_with_low_precision_kv_storage(dtype: str, first: list[int], data: st.DataObject) -> None:
    cut = data.draw(st.integers(1, len(first) - 1), label="cut")
    second = first[:cut] + data.draw(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=10), label="tail")
    server = ModelServer(MODEL, pool_size=128, dtype=dtype)
    check_served(server, first)
    check_served(server, second)


class ServingMachine(RuleBasedStateMachine):
    """A random stream of related requests (extensions and branches of earlier ones) served through
    the reference radix cache + the exact model with an eviction budget."""

    MODEL = MODEL
    MAX_LEN = 32
    BUDGET = 48

    def __init__(self) -> None:
        super().__init__()
        self.server = ModelServer(self.MODEL, pool_size=self.BUDGET + self.MAX_LEN + 1, budget=self.BUDGET)
        self.history: list[list[int]] = []
        self.reused = 0

    def _serve(self, tokens: list[int]) -> None:
        note(f"serve {tokens}")
        self.reused += check_served(self.server, tokens)
        self.history.append(tokens)

    @rule(tokens=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=MAX_LEN))
    def fresh_request(self, tokens: list[int]) -> None:
        self._serve(tokens)

    @rule(data=st.data())
    def related_request(self, data: st.DataObject) -> None:
        if not self.history:
            return
        base = data.draw(st.sampled_from(self.history), label="base")
        cut = data.draw(st.integers(0, len(base)), label="cut")
        extra = data.draw(st.lists(st.integers(0, VOCAB - 1), max_size=self.MAX_LEN - cut), label="extra")
        tokens = base[:cut] + extra
        if tokens:
            self._serve(tokens)

    @invariant()
    def within_budget_and_no_leaks(self) -> None:
        assert self.server.cache.total_size() <= self.BUDGET
        assert not self.server.allocator.violations
        # every slot in use is either in the tree or nowhere: the tree holds exactly the in-use slots
        assert len(self.server.allocator.in_use) == self.server.cache.total_size()


TestServingMachine = ServingMachine.TestCase
TestServingMachine.settings = settings(deadline=None, max_examples=15, stateful_step_count=12)
