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
from hypothesis import settings
from hypothesis import strategies as st

from radixcheck.oracles.violations import Check, DFSBoundViolation
from radixcheck.profiles import current
from radixcheck.properties.cache.batches import ServingRun, batches, bound, served_run, tokens_computed
from radixcheck.properties.findings.verdict import run_property
from radixcheck.reference import cache_aware_order

RADIXCHECK = current()  # radixcheck's profile (chosen by the plugin), never the project's loaded one


def _one_pool(target) -> None:  # noqa: ANN001 - the plugin's Target
    """The serving runs drive one pool: a hybrid target (a second pool) is judged by the state machine instead."""
    if getattr(getattr(target, "capabilities", None), "second_pool", None) is not None:  # (a bare target: one pool)
        pytest.skip(f"{target.spec} declares a second pool: the DFS serving runs drive one pool (the state machine judges the hybrid)")


def _violation(message: str, run: ServingRun, holds: str, expected: int) -> DFSBoundViolation:
    """The bound missed by ``run``: its check as a repro file states it (``computed`` tokens)."""
    violation = DFSBoundViolation(message, Check(holds, "computed", {"expected": expected}))
    violation.radixcheck_serving = run
    return violation


@pytest.fixture(autouse=True)
def _keyed_by_tokens(request: pytest.FixtureRequest) -> None:
    """The serving protocol sends raw sequences of its own: a bigram cache (capabilities.key_mode) is
    judged by the state machines, in keys."""
    if "target" in request.fixturenames:
        target = request.getfixturevalue("target")
        if target.capabilities.key_mode != "tokens":
            pytest.skip(f"{target.spec} keys by {target.capabilities.key_mode} (capabilities.key_mode): the serving "
                        "protocol sends raw sequences of its own; the state machines judge it in keys")


# Each test runs its property through run_property: a broken cache's failure is shrunk within the shrink budget
# (RADIXCHECK_SHRINK_SECONDS), as the state machines' are, not for as long as Hypothesis finds progress.

def test_dfs_order_meets_the_bound(target, extreme_page_size) -> None:
    _one_pool(target)
    p = extreme_page_size

    def dfs_order_meets_the_bound(batch, slack) -> None:  # noqa: ANN001
        order, budget = [batch[i] for i in cache_aware_order(batch)], max(map(len, batch)) + slack
        if tokens_computed(target, order, budget, p) != bound(batch, p):
            raise _violation(f"cache-aware order computed more than {bound(batch, p)} tokens for {batch}", served_run(order, budget, p),
                             "computed == expected", bound(batch, p))

    run_property(dfs_order_meets_the_bound, RADIXCHECK, batch=batches(), slack=st.integers(0, 6))


def test_no_order_beats_dfs(target, extreme_page_size) -> None:
    _one_pool(target)
    p = extreme_page_size

    def no_order_beats_dfs(batch, slack) -> None:  # noqa: ANN001
        budget = max(map(len, batch)) + slack
        dfs_order = [batch[i] for i in cache_aware_order(batch)]
        dfs = tokens_computed(target, dfs_order, budget, p)
        best, best_order = min((tokens_computed(target, list(order), budget, p), list(order)) for order in itertools.permutations(batch))
        if not dfs == best == bound(batch, p):
            run, holds = (served_run(dfs_order, budget, p), "computed == expected") if dfs != bound(batch, p) else (
                served_run(best_order, budget, p), "computed >= expected")  # fewer than the bound: a cache that lost count
            raise _violation(f"DFS order computed {dfs}, the best order {best}, the bound is {bound(batch, p)} for {batch}", run,
                             holds, bound(batch, p))

    brute_force = settings(RADIXCHECK, max_examples=max(15, RADIXCHECK.max_examples // 6))  # scale with the profile, gently
    run_property(no_order_beats_dfs, brute_force, batch=batches(max_requests=5), slack=st.integers(0, 3))


def test_bound_holds_under_any_budget(target, extreme_page_size) -> None:
    """Below the theorem's budget nothing is guaranteed except the lower bound itself."""
    _one_pool(target)
    p = extreme_page_size

    def bound_holds_under_any_budget(batch, budget) -> None:  # noqa: ANN001
        if tokens_computed(target, batch, budget, p) < bound(batch, p):
            raise _violation(f"computed fewer tokens than the batch's distinct prefixes: {batch}", served_run(batch, budget, p),
                             "computed >= expected", bound(batch, p))
        if tokens_computed(target, batch, None, p) != bound(batch, p):
            raise _violation(f"with no budget, computed other than the distinct prefixes of {batch}", served_run(batch, None, p),
                             "computed == expected", bound(batch, p))

    run_property(bound_holds_under_any_budget, RADIXCHECK, batch=batches(), budget=st.integers(1, 12))


def test_cache_aware_order_is_dfs_preorder() -> None:
    batch = [(1, 2, 3), (0,), (1, 2), (1, 0), (0, 5)]
    assert [batch[i] for i in cache_aware_order(batch)] == [(0,), (0, 5), (1, 0), (1, 2), (1, 2, 3)]
