"""Oracle 4h, the host tier's eviction order, can fail for the right reason, and correct caches pass it:

* a cache whose ``evict_host`` frees its most recently used host-only leaf first fails;
* under a declared LFU, a cache that host-evicts by recency alone fails, and the LFU reference passes;
* a cache that frees several host leaves (a leaf, then its parent) in one ``free`` call passes:
  the oracle replays the call's picks in the order the rule allows.

The stories are a few calls each (the fast tier); the kill rates over the tier machine are the
catalogue's (``python -m radixcheck.reports.tier_catalogue``) and the ``deep`` test below.
"""

from __future__ import annotations

from typing import Any

import pytest

from radixcheck import profiles
from radixcheck.oracles.violations import HostEvictionOrderViolation
from radixcheck.properties.cache.policies import fifo
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.mutants import LfuHostByRecency, MruHostFirst, TieredLfu, machines_for_mutant
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache


def _on_host(factory: Any, prompts: list[list[int]], policy: str = "write_through") -> TierWorld:
    """Each prompt served in turn, then everything evicted through to host only."""
    world = TierWorld(factory, 1, policy)
    for tokens in prompts:
        world.serve(tokens)
        world.finish()
    for _ in range(4):
        world.complete_all()
        world.evict(10**6)
    world.complete_all()
    assert world.cache.device_size() == 0 and world.cache.host_size() > 0
    return world


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_most_recent_host_leaf_first_fails(policy: str) -> None:
    world = _on_host(MruHostFirst, [[1], [2]], policy)
    with pytest.raises(HostEvictionOrderViolation, match=r"evict_host\(1\) freed Page\(\[2\].*host-only leaf Page\(\[1\]"):
        world.evict_host(1)
    reference = _on_host(TieredRadixCache, [[1], [2]], policy)
    reference.evict_host(1)
    reference.check()
    assert reference.cache.match_prefix([2]).host_length == 1  # [1] went, the newer [2] stayed


def test_host_eviction_by_recency_under_lfu_fails() -> None:
    """[1] hit three times (and the older), [2] once: LFU takes [2] from host; recency takes [1]."""
    prompts = [[1], [1, 4], [1, 5], [2]]
    world = _on_host(LfuHostByRecency, prompts)
    world.evict_host(2)  # the two tails [1, 4], [1, 5] go first under either order (one hit, the oldest)
    with pytest.raises(HostEvictionOrderViolation, match=r"freed Page\(\[1\].*3 hits.*host-only leaf Page\(\[2\].*1 hits"):
        world.evict_host(1)
    correct = _on_host(TieredLfu, prompts)
    correct.evict_host(3)
    correct.check()
    assert correct.cache.match_prefix([1]).host_length == 1


class BatchedHostFrees(TieredRadixCache):
    """Correct: ``evict_host`` picks as the reference does, and frees every host copy it took in one call."""

    def evict_host(self, num_tokens: int) -> int:
        pool, freed = self.host_pool, []
        self.host_pool = type("Collect", (), {"free": lambda _, ids: freed.extend(int(i) for i in ids)})()
        try:
            count = super().evict_host(num_tokens)
        finally:
            self.host_pool = pool
        if freed:
            pool.free(freed)
        return count


@pytest.mark.parametrize("factory", [BatchedHostFrees, BatchedHostFrees.with_policy(fifo())], ids=["lru", "fifo"])
@pytest.mark.parametrize("amount", [1, 2])
def test_a_leaf_and_its_parent_freed_in_one_call_pass(factory: Any, amount: int) -> None:
    """[1] cached first, [1, 2] next, [3] last (the newest, by use and by creation): [1, 2] goes
    first, then its parent [1], which under FIFO is older than [3] but was no candidate when
    [1, 2] went (a judge of the whole call at its end would wrongly name it)."""
    world = _on_host(factory, [[1], [1, 2], [3]])
    world.evict_host(amount)
    world.check()
    assert world.cache.match_prefix([3]).host_length == 1
    assert world.cache.match_prefix([1, 2]).host_length == (1 if amount == 1 else 0)


@pytest.mark.deep
@pytest.mark.parametrize("mutant", [MruHostFirst, LfuHostByRecency], ids=lambda m: m.__name__)
def test_host_order_mutants_are_caught_by_oracle_4h(mutant: type) -> None:
    """Each caught by the tier machine at the gate's budget, by oracle 4h (the right reason)."""
    for stream in range(3):
        caught = None
        for machine in machines_for_mutant(mutant, f"host_order_{stream}_{mutant.__name__}"):
            try:
                run_machine(machine, profiles.SETTINGS["mutation"])
            except Exception as exc:  # noqa: BLE001 - the type says whether it is the right reason
                caught = exc
                break
        assert isinstance(caught, HostEvictionOrderViolation), f"stream {stream}: {type(caught).__name__}: {caught}"
