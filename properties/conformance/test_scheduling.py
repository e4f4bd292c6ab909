"""Oracle 6: DFS (cache-aware) order is optimal under a budget >= the longest request.

Theorem 3.1 of arXiv 2312.07104. The tokens computed can never be fewer than the batch's
distinct non-empty prefixes; in lexicographic order (≡ DFS pre-order) with enough budget the
target cache must meet that bound exactly, and for small batches no order does better. With
pages the bound counts whole pages (``radixcheck.properties.cache.batches``), so each test runs at the
smallest and the largest page size the target declares.

The serving protocol keeps the running request's path locked while it evicts back to budget, so
the bound holds for any policy that never evicts a locked node: a cache fails these properties by
losing, mis-matching or mis-locking what the previous request left, not by its eviction order.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixcheck.oracles.violations import Check, DFSBoundViolation
from radixcheck.profiles import current
from radixcheck.properties.cache.batches import ServingRun, batches, bound, served_run, tokens_computed
from radixcheck.reference import cache_aware_order

RADIXCHECK = current()  # radixcheck's profile (chosen by the plugin), never the project's loaded one


def _one_pool(target) -> None:  # noqa: ANN001 - the plugin's Target
    """The serving runs drive one pool: a hybrid target (a second pool) is judged by the state machine instead."""
    if target.capabilities.second_pool is not None:
        pytest.skip(f"{target.spec} declares a second pool: the DFS serving runs drive one pool (the state machine judges the hybrid)")


def _violation(message: str, run: ServingRun, holds: str, expected: int) -> DFSBoundViolation:
    """The bound missed by ``run``: its check as a repro file states it (``computed`` tokens)."""
    violation = DFSBoundViolation(message, Check(holds, "computed", {"expected": expected}))
    violation.radixcheck_serving = run
    return violation


@settings(RADIXCHECK)
@given(batch=batches(), slack=st.integers(0, 6))
def test_dfs_order_meets_the_bound(target, extreme_page_size, batch, slack) -> None:
    _one_pool(target)
    order, budget, p = [batch[i] for i in cache_aware_order(batch)], max(map(len, batch)) + slack, extreme_page_size
    if tokens_computed(target, order, budget, p) != bound(batch, p):
        raise _violation(f"cache-aware order computed more than {bound(batch, p)} tokens for {batch}", served_run(order, budget, p),
                         "computed == expected", bound(batch, p))


@settings(RADIXCHECK, max_examples=max(15, RADIXCHECK.max_examples // 6))  # brute force: scale with the profile, gently
@given(batch=batches(max_requests=5), slack=st.integers(0, 3))
def test_no_order_beats_dfs(target, extreme_page_size, batch, slack) -> None:
    _one_pool(target)
    budget, p = max(map(len, batch)) + slack, extreme_page_size
    dfs_order = [batch[i] for i in cache_aware_order(batch)]
    dfs = tokens_computed(target, dfs_order, budget, p)
    best, best_order = min((tokens_computed(target, list(order), budget, p), list(order)) for order in itertools.permutations(batch))
    if not dfs == best == bound(batch, p):
        run, holds = (served_run(dfs_order, budget, p), "computed == expected") if dfs != bound(batch, p) else (
            served_run(best_order, budget, p), "computed >= expected")  # fewer than the bound: a cache that lost count
        raise _violation(f"DFS order computed {dfs}, the best order {best}, the bound is {bound(batch, p)} for {batch}", run,
                         holds, bound(batch, p))


@settings(RADIXCHECK)
@given(batch=batches(), budget=st.integers(1, 12))
def test_bound_holds_under_any_budget(target, extreme_page_size, batch, budget) -> None:
    _one_pool(target)
    """Below the theorem's budget nothing is guaranteed except the lower bound itself."""
    p = extreme_page_size
    if tokens_computed(target, batch, budget, p) < bound(batch, p):
        raise _violation(f"computed fewer tokens than the batch's distinct prefixes: {batch}", served_run(batch, budget, p),
                         "computed >= expected", bound(batch, p))
    if tokens_computed(target, batch, None, p) != bound(batch, p):
        raise _violation(f"with no budget, computed other than the distinct prefixes of {batch}", served_run(batch, None, p),
                         "computed == expected", bound(batch, p))


def test_cache_aware_order_is_dfs_preorder() -> None:
    batch = [(1, 2, 3), (0,), (1, 2), (1, 0), (0, 5)]
    assert [batch[i] for i in cache_aware_order(batch)] == [(0,), (0, 5), (1, 0), (1, 2), (1, 2, 3)]
