"""Oracle 6 can fail: a non-DFS order, or a cache that mangles what it matched, misses the bound."""

from __future__ import annotations

import pytest
from hypothesis import Phase, find, settings

from radixcheck.properties.cache.batches import batches, misses_the_bound
from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES
from radixcheck.properties.cache.mutants import SplitOffByOne
from radixcheck.properties.target import Target
from radixcheck.reference import RadixCache

REFERENCE = Target("reference", RadixCache, DEFAULT_CAPABILITIES)
SEARCH = settings(max_examples=500, derandomize=True, database=None, deadline=None)
# For the orders only whether a witness exists matters: no shrinking (it cost 7 s of the gate).
FIND_ONLY = settings(SEARCH, phases=[Phase.generate])


def shortest_first(batch):
    """Not DFS: groups requests by length, splitting prefix families apart."""
    return sorted(range(len(batch)), key=lambda i: (len(batch[i]), batch[i]))


def arrival_order(batch):
    return list(range(len(batch)))


@pytest.mark.parametrize("order_fn", [shortest_first, arrival_order], ids=lambda f: f.__name__)
def test_a_non_dfs_order_misses_the_bound(order_fn) -> None:
    witness = find(batches(), lambda b: misses_the_bound(REFERENCE, b, max(map(len, b)), order_fn=order_fn), settings=FIND_ONLY)
    assert witness  # find() raises NoSuchExample when the oracle cannot tell the orders apart


@pytest.mark.deep  # a scheduling search to its verdict
def test_a_cache_that_splits_wrongly_misses_the_bound() -> None:
    broken = Target("SplitOffByOne", SplitOffByOne, DEFAULT_CAPABILITIES)
    witness = find(batches(), lambda b: misses_the_bound(broken, b, max(map(len, b))), settings=SEARCH)
    assert witness


@pytest.mark.deep  # a failing property, found and shrunk
def test_a_failing_dfs_property_is_shrunk_within_the_budget(monkeypatch) -> None:
    """The DFS serving properties shrink a failure as the state machines do (run_property), for at most
    RADIXCHECK_SHRINK_SECONDS, and report the replayed smallest failure with the budget it had."""
    from radixcheck.properties.conformance.test_scheduling import test_no_order_beats_dfs

    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0.5")
    broken = Target("SplitOffByOne", SplitOffByOne, DEFAULT_CAPABILITIES)
    with pytest.raises(Exception) as caught:  # noqa: B017,PT011 - what it fails by is the catalogue's matter; the budget is this test's
        test_no_order_beats_dfs(broken, 1)
    assert any("(budget 0.5 s of CPU, RADIXCHECK_SHRINK_SECONDS)" in note for note in caught.value.__notes__)
