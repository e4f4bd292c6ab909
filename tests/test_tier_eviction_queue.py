"""The tiered reference's device eviction takes its leaves from a queue of the tips kept by eviction key
(an evict(1) costs a few queue steps, not a heap built over every candidate): the same leaves, in the same
order, as the heap over every candidate it replaced (``tier_full_heap.py``), on the three references,
both write policies, with keys that fall as well as rise (most recently used first)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from radixcheck.oracles.violations import LRUOrderViolation
from radixcheck.properties.tiers.mutants import TieredLfu
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache
from radixcheck.reference.tiered_state_cache import TieredStateCache
from radixcheck.reference.tiered_window_cache import TieredWindowCache

from .tier_churn import churn
from .tier_full_heap import full_heap_evict, traced


class MostRecentFirst(TieredRadixCache):
    """A key that falls as a node is used: the queue must re-file a node whose key went down (the world's
    order oracle stops it at the first eviction it judges)."""

    def _eviction_key(self, node: Any) -> tuple[int, int]:
        return -node.last_access, node.serial


def _trace(factory: type, policy: str, page_size: int) -> list[Any]:
    trace: list[Any] = []
    world = TierWorld(traced(factory, trace), page_size, policy, device_slots=120, host_slots=240, seed=5)
    try:
        churn(world, random.Random(5), steps=60, quarantine_rate=0.1, reset_at=30)
        world.complete_all()
        world.check()
    except LRUOrderViolation as caught:  # MostRecentFirst: the world's order oracle stops it, at the same call both ways
        trace.append(("caught", str(caught)))
    return trace


@pytest.mark.parametrize("cache", [TieredRadixCache, TieredStateCache, TieredWindowCache, MostRecentFirst,
                                   TieredLfu], ids=lambda c: c.__name__)
@pytest.mark.parametrize(("policy", "page_size"), [("write_through", 1), ("write_back", 2)])
def test_the_queue_takes_the_leaves_the_full_heap_took(cache: type, policy: str, page_size: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    kept = _trace(cache, policy, page_size)
    monkeypatch.setattr(TieredRadixCache, "evict", full_heap_evict)
    full = _trace(cache, policy, page_size)
    assert sum(1 for e in full if e[0] in ("free", "write_back")) > (0 if cache is MostRecentFirst else 20), full
    assert kept == full


def test_an_evict_of_one_token_does_not_key_every_candidate() -> None:
    keyed: list[Any] = []

    class Counted(TieredRadixCache):
        def _eviction_key(self, node: Any) -> tuple[int, int]:
            keyed.append(node)
            return super()._eviction_key(node)

    world = TierWorld(Counted, 1, "write_through", device_slots=4000, host_slots=8000, seed=1)
    for i in range(400):  # 400 device leaves under one shared page
        world.serve([7, 1000 + i], load=False)
        world.finish(0)
    world.complete_all()
    keyed.clear()
    assert world.evict(1) == 1
    assert len(keyed) < 20, f"evict(1) computed {len(keyed)} eviction keys over 400 candidates"
