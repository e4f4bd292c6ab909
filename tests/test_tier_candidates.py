"""The reference tiered cache keeps its eviction candidates as the tree changes (no walk of the
tree per eviction): at every eviction, on both tiers, the nodes its rule admits from the
candidates are exactly those it admits from the whole tree, so the order and the tie-breaks are
the walk's. Driven through the tier world (both write policies, both page sizes, the composed
references too), whose oracles judge the run as well."""

from __future__ import annotations

import random
from typing import Any

import pytest

from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode
from radixcheck.reference.tiered_state_cache import TieredStateCache
from radixcheck.reference.tiered_window_cache import TieredWindowCache

from .tier_churn import churn

ADMITTED: list[tuple[str, int]] = []  # (tier, how many nodes its rule admitted) per eviction


def _admitted(cache: Any, nodes: Any, rule: Any) -> list[TierNode]:
    return sorted((n for n in nodes if rule(n)), key=lambda n: n.serial)


def _checked(base: type) -> type:
    class Checked(base):  # type: ignore[misc, valid-type]
        def evict(self, num_tokens: int) -> int:
            walked = _admitted(self, self._nodes(), self._device_leaf)
            assert _admitted(self, self._device_candidates(), self._device_leaf) == walked
            ADMITTED.append(("device", len(walked)))
            return super().evict(num_tokens)

        def evict_host(self, num_tokens: int) -> int:
            walked = _admitted(self, self._nodes(), self._host_evictable)
            assert _admitted(self, self._host_candidates(), self._host_evictable) == walked
            ADMITTED.append(("host", len(walked)))
            return super().evict_host(num_tokens)

    Checked.__name__ = f"Checked{base.__name__}"
    return Checked


CheckedTieredRadixCache = _checked(TieredRadixCache)
CheckedTieredStateCache = _checked(TieredStateCache)
CheckedTieredWindowCache = _checked(TieredWindowCache)


def _drive(factory: type, policy: str, page_size: int, seed: int) -> None:
    """Requests over shared prefixes, transfers completed in random order, both tiers evicted,
    now and then a quarantine: enough churn that many leaves are evictable at once."""
    world = TierWorld(factory, page_size, policy, device_slots=192, host_slots=384, seed=seed)
    churn(world, random.Random(seed), steps=60, quarantine_rate=0.05)
    while world.running:
        world.finish(0)
    world.complete_all()
    world.evict(10_000)
    world.evict_host(10_000)
    world.check()


@pytest.mark.parametrize("cache", [CheckedTieredRadixCache, CheckedTieredStateCache, CheckedTieredWindowCache],
                         ids=lambda c: c.__name__)
@pytest.mark.parametrize(("policy", "page_size"), [("write_through", 1), ("write_back", 2)])
def test_the_candidates_admit_what_a_walk_of_the_tree_admits(cache: type, policy: str, page_size: int) -> None:
    ADMITTED.clear()
    _drive(cache, policy, page_size, seed=7)
    assert sum(n for tier, n in ADMITTED if tier == "device") > 50, ADMITTED  # many device leaves were candidates
    assert sum(n for tier, n in ADMITTED if tier == "host") > 20, ADMITTED
