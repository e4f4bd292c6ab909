"""Contract rules of the references, checked by hand on examples small enough to read: the tiered
cache, the two second-pool caches and the tenant trees. Each is a few milliseconds; together they
are the references' own unit tests (and what kills most of their mutants, reports/MUTATION.md)."""

from __future__ import annotations

import dataclasses

import pytest

from radixcheck.properties.cache.contract import SecondPoolAllocator, SlotAllocator, second_pool_keywords
from radixcheck.properties.cache.policies import lfu
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.bigram import BigramRadixCache
from radixcheck.reference.hybrid_cache import WindowRadixCache
from radixcheck.reference.radix_cache import RadixCache
from radixcheck.reference.state_cache import StateRadixCache
from radixcheck.reference.tiered_cache import TieredRadixCache

# ---- the tiered cache ------------------------------------------------------------------------------


def _world(write_policy: str = "write_through", page_size: int = 1, factory: type = TieredRadixCache) -> TierWorld:
    return TierWorld(factory, page_size, write_policy)


def test_tier_an_unknown_write_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="write_policy must be one of"):
        _world("write_sometimes")


def test_tier_with_policy_declares_the_policy_it_evicts_by() -> None:
    policy = lfu()
    cls = TieredRadixCache.with_policy(policy)
    assert issubclass(cls, TieredRadixCache) and cls.policy is policy
    assert cls.__name__ == "TieredRadixCache_lfu" and cls.__module__ == TieredRadixCache.__module__
    caps = cls.tier_capabilities
    assert caps.eviction_policy is policy and caps.namespaces and caps.page_sizes == (1, 2)
    assert TieredRadixCache.with_policy(policy, "MyTier").__name__ == "MyTier"
    assert TieredRadixCache.policy is None and TieredRadixCache.tier_capabilities.eviction_policy is None


def test_tier_foreign_stale_and_unmatched_handles_are_refused() -> None:
    world = _world()
    request = world.serve([1, 2])
    world.finish()
    handle = world.cache.match_prefix([1, 2]).device_handle
    with pytest.raises(ValueError, match="unknown handle"):
        _world().cache.inc_lock_ref(handle)
    with pytest.raises(ValueError, match="unknown handle"):
        world.cache.inc_lock_ref("not a node")
    with pytest.raises(ValueError, match="unmatched unlock"):
        world.cache.dec_lock_ref(handle)
    world.complete_all()
    world.quarantine([1])
    with pytest.raises(ValueError, match="stale handle"):
        world.cache.inc_lock_ref(handle)
    assert request.handle is not None


# ---- the state pool ----------------------------------------------------------------------------


def _state_cache(page_size: int = 1) -> tuple[StateRadixCache, SlotAllocator, SecondPoolAllocator]:
    kv, states = SlotAllocator(64), SecondPoolAllocator(16, seed=1)
    return StateRadixCache(kv, page_size, second_allocator=states), kv, states


def _cache_with_state(cache: StateRadixCache, kv: SlotAllocator, states: SecondPoolAllocator, tokens: list[int],
                      namespace: object = None) -> int:
    slot = int(states.alloc(1)[0])
    cache.insert(tokens, kv.alloc(len(tokens)), namespace=namespace, state=slot)
    return slot


def test_state_a_lock_pins_the_state_until_its_last_unlock() -> None:
    cache, kv, states = _state_cache()
    slot = _cache_with_state(cache, kv, states, [1, 2, 3])
    _, handle, state = cache.match_prefix([1, 2, 3])
    assert state == slot
    cache.inc_lock_ref(handle)
    cache.inc_lock_ref(handle)
    assert cache.evict_states(1) == 0  # pinned twice
    cache.dec_lock_ref(handle)
    assert cache.evict_states(1) == 0  # still pinned once
    cache.dec_lock_ref(handle)
    assert cache.evict_states(1) == 1 and slot not in states.in_use
    assert cache.match_prefix([1, 2, 3])[2] == -1  # the KV stays, no state ends it: nothing to resume from


def test_state_the_root_handle_locks_and_unlocks() -> None:
    cache, kv, states = _state_cache()
    _, root, state = cache.match_prefix([7, 8])
    assert state == -1
    cache.inc_lock_ref(root)
    cache.dec_lock_ref(root)
    slot = _cache_with_state(cache, kv, states, [7, 8])
    assert cache.evict_states(1) == 1 and slot not in states.in_use  # the root's lock pinned nothing


def test_state_namespaces_keep_their_own_states() -> None:
    cache, kv, states = _state_cache()
    slot = _cache_with_state(cache, kv, states, [1, 2], namespace="a")
    assert cache.match_prefix([1, 2], namespace="a")[2] == slot
    values, _, state = cache.match_prefix([1, 2])
    assert state == -1 and len(values) == 0


def test_state_eviction_frees_the_amount_asked_least_recently_used_first() -> None:
    cache, kv, states = _state_cache()
    older = _cache_with_state(cache, kv, states, [1, 2])
    newer = _cache_with_state(cache, kv, states, [5, 6])
    cache.match_prefix([1, 2])  # now [5, 6] is the least recently used
    assert cache.evict_states(1) == 1
    assert newer not in states.in_use and older in states.in_use
    assert cache.evict_states(0) == 0 and older in states.in_use
    assert cache.evict_states(5) == 1 and not states.in_use


@pytest.mark.parametrize(("amount", "error"), [(-1, ValueError), (1.5, TypeError)])
def test_state_a_bad_amount_names_num_states(amount: object, error: type[Exception]) -> None:
    cache, kv, states = _state_cache()
    _cache_with_state(cache, kv, states, [1, 2])
    with pytest.raises(error, match=r"^num_states "):
        cache.evict_states(amount)
    assert len(states.in_use) == 1


# ---- with_policy keeps what the class declares ---------------------------------------------------


@pytest.mark.parametrize("cls", [RadixCache, BigramRadixCache, WindowRadixCache, StateRadixCache],
                         ids=lambda c: c.__name__)
def test_with_policy_keeps_every_other_part_the_class_declares(cls: type) -> None:
    """A policy variant is the class evicting by another key: its key mode, second pool, lifecycle
    and namespaces are the class's (a window cache under LFU still has its window, and builds)."""
    policy = lfu()
    variant = cls.with_policy(policy)
    assert variant.capabilities == dataclasses.replace(cls.capabilities, eviction_policy=policy)
    assert variant.__name__ == f"{cls.__name__}_lfu" and variant.policy is policy
    keywords = second_pool_keywords(variant.capabilities)
    cache = variant(SlotAllocator(16), 1, **keywords)
    assert cache.match_prefix([1, 2])[0].size == 0
