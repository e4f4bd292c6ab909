"""Oracle 6: DFS (cache-aware) order is optimal under a budget >= the longest request.

Theorem 3.1 of arXiv 2312.07104. The tokens computed can never be fewer than the batch's
distinct non-empty prefixes; in lexicographic order (≡ DFS pre-order) with enough budget the
target cache must meet that bound exactly, and for small batches no order does better.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.dfs_bound import distinct_prefixes
from properties.contract import SlotAllocator
from properties.serving import serve_all
from reference import cache_aware_order


@st.composite
def batches(draw, max_requests: int = 8) -> list[tuple[int, ...]]:
    """Requests that share prefixes: each one extends a cut of an earlier one."""
    first = tuple(draw(st.lists(st.integers(0, 2), min_size=1, max_size=8)))
    batch = [first]
    for _ in range(draw(st.integers(0, max_requests - 1))):
        base = draw(st.sampled_from(batch))
        cut = draw(st.integers(0, len(base)))
        tail = tuple(draw(st.lists(st.integers(0, 2), min_size=1, max_size=5)))
        batch.append(base[:cut] + tail)
    return draw(st.permutations(batch))


def _computed(target, order: list[tuple[int, ...]], budget: int | None) -> int:
    allocator = SlotAllocator(1 << 16)
    return serve_all(target.factory(allocator, 1), allocator, order, budget)


def _needs_lru(target) -> None:
    if target.capabilities.eviction_policy != "lru":
        pytest.skip(f"{target.spec} evicts by {target.capabilities.eviction_policy!r}; the theorem is about LRU")


@given(batch=batches(), slack=st.integers(0, 6))
def test_dfs_order_meets_the_bound(target, batch, slack) -> None:
    _needs_lru(target)
    budget = max(map(len, batch)) + slack
    order = [batch[i] for i in cache_aware_order(batch)]
    assert _computed(target, order, budget) == distinct_prefixes(batch)


@settings(max_examples=15)
@given(batch=batches(max_requests=5), slack=st.integers(0, 3))
def test_no_order_beats_dfs(target, batch, slack) -> None:
    _needs_lru(target)
    budget = max(map(len, batch)) + slack
    dfs = _computed(target, [batch[i] for i in cache_aware_order(batch)], budget)
    best = min(_computed(target, list(order), budget) for order in itertools.permutations(batch))
    assert dfs == best == distinct_prefixes(batch)


@given(batch=batches(), budget=st.integers(1, 12))
def test_bound_holds_under_any_budget(target, batch, budget) -> None:
    """Below the theorem's budget nothing is guaranteed except the lower bound itself."""
    _needs_lru(target)
    assert _computed(target, batch, budget) >= distinct_prefixes(batch)
    assert _computed(target, batch, None) == distinct_prefixes(batch)


def test_cache_aware_order_is_dfs_preorder() -> None:
    batch = [(1, 2, 3), (0,), (1, 2), (1, 0), (0, 5)]
    assert [batch[i] for i in cache_aware_order(batch)] == [(0,), (0, 5), (1, 0), (1, 2), (1, 2, 3)]
