"""The reference tiered cache keeps its sizes as nodes move (``device_size``/``host_size`` are O(1):
a scheduler reads them every step, and the production-scale worlds hold thousands of nodes). The
kept counts must equal a walk of the tree after every call, on every path a node takes (a backup
completing, a load-back, both evictions, a write-back, a quarantine with transfers in flight, a
reset), in the composed references too; and a size call must not walk the tree."""

from __future__ import annotations

import random
from typing import Any

import pytest

from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache
from radixcheck.reference.tiered_state_cache import TieredStateCache
from radixcheck.reference.tiered_window_cache import TieredWindowCache

from .tier_churn import churn

CALLS = ("match_prefix", "insert", "load_back", "inc_lock_ref", "dec_lock_ref", "evict", "evict_host", "evict_prefix",
         "transfer_done", "reset")
CHECKED: list[tuple[int, int]] = []  # (device, host) sizes after each call: the drive must reach both tiers


def _recounted(base: type) -> type:
    """``base`` with its kept sizes compared with a walk of its tree after every call."""

    def wrap(name: str) -> Any:
        method = getattr(base, name)

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = method(self, *args, **kwargs)
            kept = (self.device_size(), self.host_size())
            assert kept == self._recounted_sizes(), f"after {name}{args}: kept sizes {kept}, a walk counts {self._recounted_sizes()}"
            CHECKED.append(kept)
            return result
        return call

    return type(f"Recounted{base.__name__}", (base,), {name: wrap(name) for name in CALLS})


def _drive(factory: type, policy: str, page_size: int, seed: int) -> None:
    """Requests over shared prefixes, transfers completed in random order (some after a quarantine
    took their nodes), both tiers evicted, and a reset midway."""
    world = TierWorld(factory, page_size, policy, device_slots=160, host_slots=320, seed=seed)
    churn(world, random.Random(seed), steps=50, quarantine_rate=0.1, reset_at=25)
    world.complete_all()
    world.check()


@pytest.mark.parametrize("cache", [TieredRadixCache, TieredStateCache, TieredWindowCache], ids=lambda c: c.__name__)
@pytest.mark.parametrize(("policy", "page_size"), [("write_through", 1), ("write_back", 2)])
def test_the_kept_sizes_equal_a_walk_of_the_tree_after_every_call(cache: type, policy: str, page_size: int) -> None:
    CHECKED.clear()
    _drive(_recounted(cache), policy, page_size, seed=11)
    assert len(CHECKED) > 200 and any(d for d, _ in CHECKED) and any(h for _, h in CHECKED), len(CHECKED)


def test_a_size_call_does_not_walk_the_tree() -> None:
    world = TierWorld(TieredRadixCache, 1, "write_through", device_slots=64, host_slots=128, seed=0)
    world.serve(list(range(20)))
    world.finish()
    world.complete_all()
    cache = world.cache

    def walked() -> Any:
        raise AssertionError("a size call walked the tree")

    cache._nodes = walked
    assert (cache.device_size(), cache.host_size()) == (20, 20)
