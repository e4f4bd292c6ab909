"""Oracle 6: DFS (cache-aware) order is optimal under a budget >= the longest request.

Theorem 3.1 of arXiv 2312.07104. The tokens computed can never be fewer than the batch's
distinct non-empty prefixes; in lexicographic order (≡ DFS pre-order) with enough budget the
target cache must meet that bound exactly, and for small batches no order does better.

The serving protocol keeps the running request's path locked while it evicts back to budget, so
the bound holds for any policy that never evicts a locked node: a cache fails these properties by
losing, mis-matching or mis-locking what the previous request left, not by its eviction order.
"""

from __future__ import annotations

import itertools

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


def misses_the_bound(target, batch: list[tuple[int, ...]], budget: int, order_fn=cache_aware_order) -> bool:
    """True when serving ``batch`` in ``order_fn``'s order computes more than the bound."""
    return _computed(target, [batch[i] for i in order_fn(batch)], budget) != distinct_prefixes(batch)


@given(batch=batches(), slack=st.integers(0, 6))
def test_dfs_order_meets_the_bound(target, batch, slack) -> None:
    assert not misses_the_bound(target, batch, max(map(len, batch)) + slack)


@settings(max_examples=max(15, settings.default.max_examples // 6))  # brute force: scale with the profile, gently
@given(batch=batches(max_requests=5), slack=st.integers(0, 3))
def test_no_order_beats_dfs(target, batch, slack) -> None:
    budget = max(map(len, batch)) + slack
    dfs = _computed(target, [batch[i] for i in cache_aware_order(batch)], budget)
    best = min(_computed(target, list(order), budget) for order in itertools.permutations(batch))
    assert dfs == best == distinct_prefixes(batch)


@given(batch=batches(), budget=st.integers(1, 12))
def test_bound_holds_under_any_budget(target, batch, budget) -> None:
    """Below the theorem's budget nothing is guaranteed except the lower bound itself."""
    assert _computed(target, batch, budget) >= distinct_prefixes(batch)
    assert _computed(target, batch, None) == distinct_prefixes(batch)


def test_cache_aware_order_is_dfs_preorder() -> None:
    batch = [(1, 2, 3), (0,), (1, 2), (1, 0), (0, 5)]
    assert [batch[i] for i in cache_aware_order(batch)] == [(0,), (0, 5), (1, 0), (1, 2), (1, 2, 3)]
