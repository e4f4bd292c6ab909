"""Oracles 4t and 4h, the amount: ``evict(n)`` and ``evict_host(n)`` on a tier free what was asked.

* each catalogued amount mutant fails its small story for the right reason (it went on, or it
  stopped while a candidate stayed), and the reference passes the same story;
* no false alarm where the cache may not reach ``n``: the leaves left are locked by a request or
  have a transfer in flight; a write-back started counts toward ``n`` though the call returns 0;
* page granularity and steps: a page of 2 tokens that reaches ``n = 1`` or ``n = 3`` is needed, and
  a cache that frees several leaves in one ``free`` call (a node of several pages) is one step;
* a cache that trusts its callers passes.

The kill rates over the tier machine are the catalogue's (``python -m radixcheck.reports.tier_catalogue``).
"""

from __future__ import annotations

from typing import Any

import pytest

from radixcheck.oracles.tier_amount import TierAmount
from radixcheck.oracles.tier_model import Page, _leaving_together
from radixcheck.oracles.violations import EvictionAmountViolation, HostEvictionAmountViolation
from radixcheck.properties.tiers.mutants import (
    TierEvictHostOvershoots,
    TierEvictHostStopsShort,
    TierEvictOvershoots,
    TierEvictStopsShort,
    TrustingTenantTiers,
)
from radixcheck.properties.tiers.repro import tier_repro
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache

POLICIES = ["write_through", "write_back"]


def _cached(factory: Any, prompts: list[list[int]], policy: str, page_size: int = 1) -> TierWorld:
    """Each prompt served and finished in turn, every backup completed (nothing in flight)."""
    world = TierWorld(factory, page_size, policy)
    for tokens in prompts:
        world.serve(tokens)
        world.finish()
    world.complete_all()
    return world


def _on_host(factory: Any, prompts: list[list[int]], policy: str) -> TierWorld:
    """As :func:`_cached`, then everything evicted through to host only."""
    world = _cached(factory, prompts, policy)
    for _ in range(4):
        world.evict(10**6)
        world.complete_all()
    assert world.cache.device_size() == 0 and world.cache.host_size() > 0
    return world


THREE = [[1], [2], [3]]  # three one-page leaves, [1] the least recently used


@pytest.mark.parametrize("policy", POLICIES)
def test_device_eviction_that_takes_one_leaf_more_fails(policy: str) -> None:
    world = _cached(TierEvictOvershoots, THREE, policy)
    how = "freed" if policy == "write_through" else "started the write-back of"
    with pytest.raises(EvictionAmountViolation, match=rf"evict\(2\) kept going: .*counted 2 tokens, then it {how} Page\(\[3\]"):
        world.evict(2)
    reference = _cached(TieredRadixCache, THREE, policy)
    assert reference.evict(2) == (2 if policy == "write_through" else 0)  # write-backs count toward n, not the result
    reference.complete_all()
    reference.check()
    assert len(reference.cache.match_prefix([3]).device_values) == 1  # the newest stayed on device


@pytest.mark.parametrize("policy", POLICIES)
def test_device_eviction_that_stops_after_one_leaf_fails(policy: str) -> None:
    world = _cached(TierEvictStopsShort, THREE, policy)
    short = r"evict\(3\) (freed 1 tokens|.*started the write-back of 1), fewer than 3, .*unlocked device leaf Page\(\[2\]"
    with pytest.raises(EvictionAmountViolation, match=short):
        world.evict(3)
    reference = _cached(TieredRadixCache, THREE, policy)
    reference.evict(3)
    reference.complete_all()
    assert reference.cache.device_size() == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_host_eviction_that_frees_one_leaf_more_fails(policy: str) -> None:
    world = _on_host(TierEvictHostOvershoots, THREE, policy)
    with pytest.raises(HostEvictionAmountViolation, match=r"evict_host\(1\) kept going: .*then it freed Page\(\[2\]"):
        world.evict_host(1)
    reference = _on_host(TieredRadixCache, THREE, policy)
    assert reference.evict_host(1) == 1
    assert reference.cache.host_size() == 2


@pytest.mark.parametrize("policy", POLICIES)
def test_host_eviction_that_stops_after_one_leaf_fails(policy: str) -> None:
    """A chain: [1, 2]'s host-only leaf goes first, then its parent [1] is a candidate."""
    world = _on_host(TierEvictHostStopsShort, [[1, 2]], policy)
    with pytest.raises(HostEvictionAmountViolation, match=r"evict_host\(2\) freed 1 tokens, .*host-only leaf Page\(\[1\], host\)"):
        world.evict_host(2)
    reference = _on_host(TieredRadixCache, [[1, 2]], policy)
    assert reference.evict_host(2) == 2 and reference.cache.host_size() == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_locked_and_busy_leaves_are_no_candidates(policy: str) -> None:
    """[1] is held by a running request and [2]'s backup (write-through) is in flight: evict(5)
    takes [3] alone (write-through: [3]'s backup completed), and nothing it left was a candidate."""
    world = TierWorld(TieredRadixCache, 1, policy)
    world.serve([3])
    world.finish()
    world.complete_all()
    world.serve([1])
    world.finish()
    world.complete_all()
    world.serve([1])  # held: locked
    world.serve([2])
    world.finish()  # [2] cached, its write-through backup pending
    world.evict(5)
    world.complete_all()
    world.check()
    assert len(world.cache.match_prefix([1]).device_values) == 1


def test_a_write_back_started_counts_toward_n() -> None:
    """Under write-back evict(1) starts [1]'s write-back (returns 0) and stops; the completion frees it."""
    world = _cached(TieredRadixCache, THREE, "write_back")
    assert world.evict(1) == 0
    world.evict(1)  # [1] has a write in flight: [2] is the next candidate
    world.complete_all()
    world.check()
    assert world.cache.device_size() == 1 and world.cache.host_size() == 2


@pytest.mark.parametrize("wanted, freed", [(1, 2), (2, 2), (3, 4)])
def test_the_page_that_reaches_n_is_needed(wanted: int, freed: int) -> None:
    world = _cached(TieredRadixCache, [[1, 1], [2, 2], [3, 3]], "write_through", page_size=2)
    assert world.evict(wanted) == freed


class BatchedDeviceFrees(TieredRadixCache):
    """Correct: evicts as the reference does, and frees every device slot it took in one call (as a
    cache whose node holds several pages does)."""

    def evict(self, num_tokens: int) -> int:
        allocator, freed = self.allocator, []
        self.allocator = type("Collect", (), {"free": lambda _, ids: freed.extend(int(i) for i in ids)})()
        try:
            count = super().evict(num_tokens)
        finally:
            self.allocator = allocator
        if freed:
            allocator.free(freed)
        return count


def test_leaves_freed_in_one_call_are_one_step() -> None:
    world = _cached(BatchedDeviceFrees, THREE, "write_through")
    assert world.evict(2) == 2
    world.check()


@pytest.mark.parametrize("policy", POLICIES)
def test_a_cache_that_trusts_its_callers_passes(policy: str) -> None:
    world = _on_host(TrustingTenantTiers, [[1, 2], [3]], policy)
    assert world.evict_host(2) == 2
    world.serve([3])
    world.finish()
    world.complete_all()
    world.evict(1)
    world.check()


def test_the_count_itself() -> None:
    amount = TierAmount("device", 3)
    amount.step(2, "freed a")
    amount.step(2, "freed b")  # reached 3 here: needed
    amount.check(left=object())
    amount.step(1, "freed c")
    with pytest.raises(EvictionAmountViolation, match=r"evict\(3\) kept going: its first 2 steps had counted 4"):
        amount.check(left=None)
    short = TierAmount("host", 3)
    short.step(2, "freed a")
    short.check(left=None)  # nothing left to take: not short
    with pytest.raises(HostEvictionAmountViolation, match=r"evict_host\(3\) freed 2 tokens, fewer than 3"):
        short.check(left="Page([1], host)")
    nothing = TierAmount("device", 0)
    nothing.step(1, "freed a")
    with pytest.raises(EvictionAmountViolation, match=r"evict\(0\) kept going"):
        nothing.check(left=None)


@pytest.mark.deep  # runs a repro file
@pytest.mark.parametrize("mutant, violation", [(TierEvictStopsShort, EvictionAmountViolation),
                                               (TierEvictHostOvershoots, HostEvictionAmountViolation)],
                         ids=lambda m: getattr(m, "__name__", ""))
def test_the_findings_pipeline_carries_the_amount(mutant: type, violation: type) -> None:
    """A repro file of an amount finding replays it and exits 1 with the oracle's name."""
    world = _on_host(mutant, THREE, "write_through") if violation is HostEvictionAmountViolation else \
        _cached(mutant, THREE, "write_through")
    with pytest.raises(violation) as caught:
        world.evict_host(1) if violation is HostEvictionAmountViolation else world.evict(3)
    repro = tier_repro(world, caught.value, f"{mutant.__module__}:{mutant.__name__}", mutant)
    assert repro.exit_code == 1, repro.why_not
    assert f"BUG (radixcheck oracle {violation.oracle})" in repro.output


def test_a_node_written_back_whole_counts_all_its_pages() -> None:
    """A write of a chain a -> b -> c whose end c is a device leaf takes all three off the device
    (a node of three pages, as SGLang writes one back); a page with another child on device
    (an ancestor written top-down first) stays, and so does everything above it."""
    root = Page((), None)
    a = Page((1,), root, device=(0,))
    b = Page((2,), a, device=(1,))
    c = Page((3,), b, device=(2,))
    d = Page((4,), a, device=(3,))  # a's other child, on device
    a.children, b.children = {(2,): b, (4,): d}, {(3,): c}
    assert _leaving_together([a, b, c]) == [c, b]
    assert _leaving_together([b, c]) == [c, b]
    assert _leaving_together([a]) == []  # top-down: a written before its leaves
    c.device = None  # c on host only: b is the device leaf now
    assert _leaving_together([b]) == [b]
