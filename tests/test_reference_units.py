"""Contract rules of the references, checked by hand on examples small enough to read: the tiered
cache, the two second-pool caches, the tenant trees and the request lifecycle. Each is a few milliseconds; together they
are the references' own unit tests (and what kills most of their mutants, reports/MUTATION.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from radixcheck.properties.cache.contract import Request, SecondPoolAllocator, SlotAllocator, second_pool_keywords
from radixcheck.properties.cache.policies import Policy, filo, lfu, priority, slru
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.bigram import BigramRadixCache
from radixcheck.reference.bigram_hybrid import BigramStateCache, BigramWindowCache
from radixcheck.reference.hybrid_cache import WindowRadixCache
from radixcheck.reference.radix_cache import RadixCache
from radixcheck.reference.state_cache import StateRadixCache
from radixcheck.reference.tenant_tree import TenantTree, TokenTenantTree
from radixcheck.reference.tiered_cache import TieredRadixCache
from radixcheck.reference.tiered_state_cache import TieredStateCache
from radixcheck.reference.tiered_window_cache import TieredWindowCache

# ---- the tiered cache ------------------------------------------------------------------------------


def _world(write_policy: str = "write_through", page_size: int = 1, factory: type = TieredRadixCache) -> TierWorld:
    return TierWorld(factory, page_size, write_policy)


def test_tier_an_unknown_write_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="write_policy must be one of"):
        _world("write_sometimes")


def test_tier_construction_defaults_and_a_bad_page_size() -> None:
    world = _world()
    cache = TieredRadixCache(world.device, world.host, world.controller)
    assert cache.page_size == 1 and cache.write_policy == "write_through"
    with pytest.raises(ValueError, match=r"^page_size must be >= 1, got 0$"):
        TieredRadixCache(world.device, world.host, world.controller, 0)


def test_tier_with_policy_declares_the_policy_it_evicts_by() -> None:
    policy = lfu()
    cls = TieredRadixCache.with_policy(policy)
    assert issubclass(cls, TieredRadixCache) and cls.policy is policy
    assert cls.__name__ == "TieredRadixCache_lfu" and cls.__module__ == TieredRadixCache.__module__
    caps = cls.tier_capabilities
    assert caps.eviction_policy is policy and caps.namespaces and caps.page_sizes == (1, 2)
    assert TieredRadixCache.with_policy(policy, "MyTier").__name__ == "MyTier"
    assert TieredRadixCache.policy is None and TieredRadixCache.tier_capabilities.eviction_policy is None


class _MyTier(TieredRadixCache):
    """A user's subclass: its policy variants live in its module (a repro file imports them from there)."""


def test_tier_a_policy_variant_of_a_subclass_is_its_module_s() -> None:
    assert _MyTier.with_policy(lfu()).__module__ == __name__


def test_tier_a_written_back_leaf_leaves_the_device_when_its_write_completes() -> None:
    """Under write_back an evicted leaf is written first; its device slots go at the write's completion."""
    world = _world("write_back")
    world.serve([1])
    world.finish()
    assert world.cache.device_size() == 1 and world.cache.host_size() == 0 and not world.pending()
    assert world.evict(1) == 0  # the write-back started: nothing freed yet
    assert world.cache.device_size() == 1 and len(world.pending()) == 1
    world.complete_all()
    assert world.cache.device_size() == 0 and world.cache.host_size() == 1
    world.check()
    match = world.cache.match_prefix([1])
    assert match.device_values.size == 0 and match.host_length == 1

def test_tier_a_page_without_a_host_copy_leaves_the_cache_when_evicted() -> None:
    """Its backup failed: evicted, it is dropped, and a handle to it is stale."""
    world = _world()
    world.fail_next([True, True])  # the write-through backup (and its retry after a host eviction)
    world.serve([4])
    world.finish()
    handle = world.cache.match_prefix([4]).device_handle
    assert world.evict(1) == 1 and world.cache.device_size() == 0 and world.cache.host_size() == 0
    world.check()
    with pytest.raises(ValueError, match="stale handle"):
        world.cache.inc_lock_ref(handle)


def test_tier_host_eviction_frees_host_only_pages() -> None:
    world = _world()
    world.serve([1, 2])
    world.finish()
    world.complete_all()
    assert world.evict(2) == 2 and world.cache.host_size() == 2  # on host only now
    leaf = world.cache.match_prefix([1, 2]).host_handle
    assert world.evict_host(1) == 1 and world.cache.host_size() == 1  # the leaf [2] first
    assert repr(leaf) == "TierNode([2], nowhere, removed)"
    assert world.cache.match_prefix([1, 2]).host_length == 1
    assert world.evict_host(5) == 1 and world.cache.host_size() == 0
    world.check()
    with pytest.raises(ValueError, match=r"^num_tokens must be >= 0, got -1$"):
        world.cache.evict_host(-1)
    with pytest.raises(TypeError, match=r"^num_tokens must be an integer, got float 1.5$"):
        world.cache.evict(1.5)

def test_tier_quarantine_cuts_at_the_page_and_removes_both_tiers() -> None:
    world = _world(page_size=2)
    for prompt in ([1, 2, 3, 4], [1, 2, 5, 6], [7, 8]):
        world.serve(prompt)
        world.finish()
    world.complete_all()
    world.evict(2)  # [7, 8], the least recently used leaf, goes to host
    cache = world.cache
    for prefix in ([9, 9, 9], [1, 2, 9], [1, 2, 3], [7, 8, 1], [7]):  # each return value checked against the model
        world.quarantine(prefix)
    assert cache.match_prefix([1, 2, 3, 4]).device_values.size == 2  # the cut was at the page [1, 2]: [3, 4] went
    assert cache.match_prefix([1, 2, 5, 6]).device_values.size == 4
    assert cache.match_prefix([7, 8]).host_length == 0  # on host only: removed from host
    assert cache.device_size() == 4 and cache.host_size() == 4
    world.check()
    with pytest.raises(ValueError) as raised:
        cache.evict_prefix([])
    assert str(raised.value) == "evict_prefix needs a non-empty token sequence"


def test_tier_quarantine_stays_in_its_namespace() -> None:
    world = _world()
    world.serve([1, 2], namespace="a")
    world.finish()
    world.serve([1, 2])
    world.finish()
    world.complete_all()
    world.quarantine([1], namespace="a")
    assert world.cache.match_prefix([1, 2], namespace="a").device_values.size == 0
    assert world.cache.match_prefix([1, 2]).device_values.size == 2
    world.check()

@pytest.mark.parametrize("hits_on_match", [True, False])
def test_tier_lfu_counts_a_match_as_a_hit_only_when_its_policy_says_so(hits_on_match: bool) -> None:
    world = _world(factory=TieredRadixCache.with_policy(lfu(hits_on_match=hits_on_match)))
    world.serve([1])
    world.finish()
    world.match([1])  # a second hit on [1] only if matches count
    world.serve([2])
    world.finish()  # [2]: one hit, and the most recently used
    world.complete_all()
    world.evict(1)  # the order is judged by the model as it goes
    went, stayed = ([2], [1]) if hits_on_match else ([1], [2])
    assert world.cache.match_prefix(went).device_values.size == 0
    assert world.cache.match_prefix(stayed).device_values.size == 1
    world.check()


def test_tier_an_unknown_completion_names_the_transfer() -> None:
    world = _world()
    world.serve([1])
    world.finish()
    transfer = world.controller.pending[0]
    world.complete_all()
    with pytest.raises(ValueError) as raised:
        world.cache.transfer_done(transfer)
    assert str(raised.value) == f"unknown or already completed transfer {transfer!r}"

def test_tier_a_load_back_that_fits_evicts_nothing_and_moves_the_path_in_one_transfer() -> None:
    world = _world()
    world.serve([1, 2])
    world.finish()
    world.complete_all()
    world.evict(2)  # [1, 2] on host only
    world.serve([3])
    world.finish()
    world.complete_all()
    request = world.serve([1, 2])  # loaded back: the device pool has room for it
    assert len(request.values) == 2 and len(world.pending()) == 1  # one load for the whole path
    assert world.cache.match_prefix([3]).device_values.size == 1  # nothing was evicted for it
    world.finish()
    world.check()

def test_tier_a_load_back_whose_one_transfer_fails_loads_page_by_page() -> None:
    world = _world()
    world.serve([1, 2])
    world.finish()
    world.complete_all()
    world.evict(2)  # [1, 2] on host only
    world.fail_next([True])  # the load of the whole path fails; each page's own load then succeeds
    request = world.serve([1, 2])
    assert len(request.values) == 2 and len(world.pending()) == 2
    world.finish()
    world.check()

def test_tier_a_load_back_with_nothing_on_host_returns_the_device_prefix() -> None:
    """Its host handle is the device handle (``host_length == 0``): nothing moves."""
    world = _world()
    cache = world.cache
    empty = cache.match_prefix([5])
    assert empty.host_length == 0 and empty.host_handle is empty.device_handle
    values, handle = cache.load_back(empty.host_handle)
    assert values.size == 0 and handle is empty.device_handle
    world.serve([5])
    world.finish()
    match = cache.match_prefix([5])
    values, handle = cache.load_back(match.host_handle)
    assert values.tolist() == match.device_values.tolist() and handle is match.device_handle
    assert not [t for t in world.controller.pending if t.kind == "load"]

def test_tier_host_eviction_takes_a_parent_its_leaf_exposed_in_the_same_call() -> None:
    world = _world()
    world.serve([1, 2, 3])
    world.finish()
    world.complete_all()
    assert world.evict(3) == 3 and world.cache.host_size() == 3
    assert world.evict_host(3) == 3 and world.cache.host_size() == 0  # [3], then [2], then [1]
    world.check()

@pytest.mark.parametrize("factory", [TieredRadixCache, TieredStateCache, TieredWindowCache], ids=lambda f: f.__name__)
def test_tier_a_match_of_nothing_cached_gives_int64_slot_ids(factory: type) -> None:
    world = _world(factory=factory)
    world.serve([1, 2])
    world.finish()
    for tokens in ([9], [], [1, 2]):
        assert world.cache.match_prefix(tokens).device_values.dtype == np.int64


@pytest.mark.parametrize("factory", [TieredRadixCache, TieredStateCache, TieredWindowCache], ids=lambda f: f.__name__)
@pytest.mark.parametrize("call", ["match_prefix", "insert", "evict_prefix"])
def test_tier_bad_tokens_and_namespaces_are_named(call: str, factory: type) -> None:
    world = _world(factory=factory)
    cache = world.cache
    args = {"insert": lambda tokens: (tokens, np.arange(len(tokens)))}.get(call, lambda tokens: (tokens,))
    with pytest.raises(TypeError, match=r"^tokens must hold integer token ids, got str 'x'$"):
        getattr(cache, call)(*args([1, "x"]))
    with pytest.raises(TypeError, match=r"^namespace must be hashable \(a str, an int, None or a tuple of those\), got list"):
        getattr(cache, call)(*args([1, 2]), namespace=[1])
    assert cache.device_size() == 0 and list(cache.roots) == [None]

def _evicted_first(world: TierWorld, prompts: list[list[int]]) -> list[int]:
    """Evict one page (its order judged by the model) and say which prompt lost its device page."""
    world.complete_all()
    world.evict(1)
    world.check()
    gone = [p for p in prompts if world.cache.match_prefix(p).device_values.size == 0]
    assert len(gone) == 1, gone
    return gone[0]


def test_tier_lfu_breaks_a_tie_of_hits_by_least_recent_use() -> None:
    world = _world(factory=TieredRadixCache.with_policy(lfu()))
    for prompt in ([1], [2]):
        world.serve(prompt)
        world.finish()
    world.match([1])  # not a hit (an insert is), but a use: [2] is now the least recently used
    assert world.evict(0) == 0
    assert _evicted_first(world, [[1], [2]]) == [2]


def test_tier_a_custom_policy_reads_the_leaf_s_depth() -> None:
    shallowest_first = Policy(key=lambda s: s.depth, name="shallowest-first")
    world = _world(factory=TieredRadixCache.with_policy(shallowest_first))
    for prompt in ([2, 3], [1]):  # [1], depth 1, is the most recently used
        world.serve(prompt)
        world.finish()
    assert _evicted_first(world, [[1], [2, 3]]) == [1]

def test_tier_lfu_counts_each_insert_that_covers_a_page() -> None:
    world = _world(factory=TieredRadixCache.with_policy(lfu()))
    world.serve([1])
    world.finish()
    world.complete_all()
    world.evict(1)  # [1] on host only
    world.serve([1], load=False)
    world.finish()  # cached again from the device: a second insert, a second hit
    world.serve([2])
    world.finish()  # one hit, and the most recently used
    assert _evicted_first(world, [[1], [2]]) == [2]

def test_tier_slru_protects_a_page_two_inserts_covered() -> None:
    world = _world(factory=TieredRadixCache.with_policy(slru(threshold=2)))
    world.serve([1])
    world.finish()
    world.complete_all()
    world.evict(1)
    world.serve([1], load=False)
    world.finish()  # [1]: two hits, protected
    world.serve([2])
    world.finish()  # [2]: one hit (probation), though the most recently used
    assert _evicted_first(world, [[1], [2]]) == [2]

def test_tier_filo_evicts_the_last_cached_first() -> None:
    world = _world(factory=TieredRadixCache.with_policy(filo()))
    for prompt in ([1], [2]):
        world.serve(prompt)
        world.finish()
    world.match([2])
    assert _evicted_first(world, [[1], [2]]) == [2]


@pytest.mark.parametrize("factory", [TieredRadixCache, TieredStateCache], ids=lambda f: f.__name__)
def test_tier_priority_evicts_the_lower_priority_first(factory: type) -> None:
    """The state cache passes the insert's priority on to the tiered cache's tree."""
    world = _world(factory=factory.with_policy(priority()))
    world.next_priority(5)
    world.serve([1])
    world.finish()
    world.next_priority(0)
    world.serve([2])
    world.finish()  # the more recently used, but of lower priority
    assert _evicted_first(world, [[1], [2]]) == [2]

def test_tier_a_failed_backup_is_retried_after_host_eviction() -> None:
    world = _world()
    world.fail_next([True])  # the first write fails; the retry (after evict_host) succeeds
    world.serve([5])
    world.finish()
    assert [t.kind for t in world.controller.pending] == ["write"]
    world.complete_all()
    assert world.cache.host_size() == 1
    world.check()


def test_tier_a_page_locked_while_its_write_back_is_in_flight_stays_on_device() -> None:
    world = _world("write_back")
    world.serve([1])
    world.finish()
    assert world.evict(1) == 0  # its write-back starts
    world.serve([1])  # a request locks it before the write completes
    world.complete_all()
    assert world.cache.device_size() == 1 and world.cache.host_size() == 1
    world.finish()  # reads its own KV (checked), then unlocks
    world.check()

def test_tier_write_back_starts_count_toward_num_tokens() -> None:
    """The tier contract's rule (SGLang 0.5.23's: a started write-back frees its page): evict(1)
    writes back the least recently used leaf alone (its ancestor first, top-down), not every one."""
    world = _world("write_back")
    for tokens in ([1, 1], [2, 2], [3, 3]):
        world.serve(tokens)
        world.finish()
    assert world.evict(1) == 0  # nothing freed during the call: its write-back is pending
    assert [len(t.device_slots) for t in world.controller.pending] == [1, 1]  # [1] then [1, 1]
    world.complete_all()
    assert world.cache.device_size() == 5 and world.cache.host_size() == 2
    world.check()


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


def test_tier_a_node_says_where_its_page_lives() -> None:
    """What a refused handle's message shows: the page, its tiers and whether it is still cached."""
    world = _world()
    world.serve([1, 2])
    world.finish()
    cache = world.cache
    node = cache.match_prefix([1]).device_handle
    assert repr(node) == "TierNode([1], device, linked)"  # its write is still pending
    world.complete_all()
    assert repr(node) == "TierNode([1], device+host, linked)"
    world.evict(2)
    assert repr(node) == "TierNode([1], host, linked)"
    world.quarantine([1])
    assert repr(node) == "TierNode([1], nowhere, removed)"
    with pytest.raises(ValueError, match=r"^stale handle TierNode\(\[1\], nowhere, removed\): its node was removed$"):
        cache.inc_lock_ref(node)
    assert repr(cache) == "TieredRadixCache(write_through, page_size=1)"


@pytest.mark.parametrize(("state", "error", "message"), [
    (True, TypeError, "state must be an int slot id (or -1 for none), got bool True"),
    (1.5, TypeError, "state must be an int slot id (or -1 for none), got float 1.5"),
    (-2, ValueError, "state must be a slot id >= 0 or -1, got -2"),
], ids=["bool", "float", "below -1"])
def test_state_a_bad_state_is_refused_and_changes_nothing(state: object, error: type[Exception], message: str) -> None:
    cache, kv, _ = _state_cache()
    with pytest.raises(error) as raised:
        cache.insert([1, 2], kv.alloc(2), state=state)
    assert str(raised.value) == message
    assert cache.match_prefix([1, 2])[0].size == 0


def test_state_construction_defaults_and_refusals() -> None:
    assert StateRadixCache(SlotAllocator(8), second_allocator=SecondPoolAllocator(8)).page_size == 1
    with pytest.raises(TypeError) as raised:
        StateRadixCache(SlotAllocator(8))
    assert str(raised.value) == "StateRadixCache needs second_allocator= (the state pool)"
    cache, kv, _ = _state_cache()
    with pytest.raises(TypeError, match=r"^tokens must hold integer token ids, got float 1.5$"):
        cache.insert([1, 1.5], kv.alloc(2))
    with pytest.raises(ValueError, match=r"^tokens holds negative token id -3$"):
        cache.match_prefix([1, -3])


def test_state_insert_keeps_the_priority_it_is_given() -> None:
    """Under the priority policy the lower priority goes first, then the least recently used; an
    insert without a priority has priority 0."""
    kv, states = SlotAllocator(64), SecondPoolAllocator(16, seed=1)
    cache = StateRadixCache.with_policy(priority())(kv, 1, second_allocator=states)
    slot = iter(states.alloc(3).tolist())
    cache.insert([1, 2], kv.alloc(2), priority=5, state=next(slot))
    cache.insert([3, 4], kv.alloc(2), state=next(slot))  # priority 0 (the default), the older of the two 0s
    cache.insert([5, 6], kv.alloc(2), priority=0, state=next(slot))
    assert cache.evict(2) == 2
    assert [cache.match_prefix(t)[0].size for t in ([3, 4], [5, 6], [1, 2])] == [0, 2, 2]
    assert cache.evict(2) == 2
    assert [cache.match_prefix(t)[0].size for t in ([5, 6], [1, 2])] == [0, 2]


# ---- the request lifecycle (requests.py) ---------------------------------------------------------


def test_requests_a_finish_caches_the_whole_pages_computed_after_the_last_publish() -> None:
    """SGLang's cache_finished_req: the decoded pages never published are inserted at the finish
    (insert=True is the default), the unaligned tail's slot is freed, the lock released."""
    kv = SlotAllocator(64)
    cache = RadixCache(kv, 2)
    req = Request([1, 2, 3, 4, 5])
    cache.match_req(req)
    cache.lock_req(req)
    req.compute(kv.alloc(2))
    cache.cache_unfinished_req(req)  # publishes [1, 2]
    req.compute(kv.alloc(3))  # [3, 4] a whole page, 5 the tail
    cache.cache_finished_req(req)
    assert cache.match_prefix([1, 2, 3, 4, 5])[0].tolist() == req.slots[:4].tolist()
    assert set(kv.in_use) == set(req.slots[:4].tolist())  # the tail's slot was freed
    assert cache.evict(4) == 4  # nothing is still locked


def test_requests_follow_their_namespace() -> None:
    kv = SlotAllocator(64)
    cache = RadixCache(kv)
    cache.insert([1, 2, 3], kv.alloc(3))  # the default namespace's
    req = Request([1, 2, 3, 4], namespace="a")
    cache.match_req(req)
    assert req.filled == 0  # nothing is cached under "a"
    cache.lock_req(req)
    req.compute(kv.alloc(4))
    cache.cache_unfinished_req(req)
    assert req.protected == 4 and cache.match_prefix([1, 2, 3, 4], namespace="a")[0].tolist() == req.slots[:4].tolist()
    req.compute(kv.alloc(1), more_tokens=[9])
    cache.cache_finished_req(req)
    assert cache.match_prefix([1, 2, 3, 4, 9], namespace="a")[0].tolist() == req.slots[:5].tolist()
    assert cache.match_prefix([1, 2, 3, 4, 9])[0].size == 3  # the default namespace is as it was
    assert len(kv.in_use) == 8


# ---- the tenant trees ------------------------------------------------------------------------------


def test_tenant_tree_one_node_per_segment_split_where_keys_branch() -> None:
    """A radix tree: a key is one node until another branches off it (node_count includes the root)."""
    tree = TenantTree()
    tree.add_tenants(["a", "b"], 0.0)
    tree.insert("abc", "a", 1.0)
    assert tree.node_count() == 2
    tree.insert("abd", "b", 2.0)
    assert tree.node_count() == 4  # root, "ab", "c", "d"
    assert tree.sizes() == {"a": 3, "b": 3}
    assert tree.match("abd", {"a", "b"}) == (3, frozenset({"b"}))
    assert tree.match("abx", {"a", "b"}) == (2, frozenset({"a", "b"}))
    tree.remove_tenants(["a"])
    assert tree.node_count() == 3  # "c" went with its only holder; "ab" is b's
    tree.evict("b", 1)
    assert tree.node_count() == 2 and tree.sizes() == {"b": 2}  # b's leaf "d" went; "ab" stays until asked
    tree.evict("b", 5)
    assert tree.node_count() == 1 and tree.match("abd", {"b"}) == (0, frozenset())


def test_tenant_tree_removing_an_absent_tenant_changes_nothing() -> None:
    tree = TokenTenantTree()
    tree.add_tenants(["a"], 0.0)
    tree.insert((1, 2), "a", 1.0)
    tree.remove_tenants(["never-added"])
    tree.remove_tenants(["a"])
    tree.remove_tenants(["a"])  # twice: a router may repeat a worker's removal
    assert tree.node_count() == 1 and tree.sizes().get("a", 0) == 0  # a size-0 tenant may be left out
    tree.add_tenants(["a"], 2.0)  # the name comes back, holding nothing
    assert tree.sizes() == {"a": 0} and tree.match((1, 2), {"a"}) == (0, frozenset())


# ---- the bigram reference ------------------------------------------------------------------------


def test_bigram_bad_input_messages_name_the_argument_first() -> None:
    kv = SlotAllocator(64)
    cache = BigramRadixCache(kv)
    with pytest.raises(TypeError, match=r"^tokens must hold integer token ids, got float 1.5$"):
        cache.match_prefix([1, 1.5])
    with pytest.raises(TypeError, match=r"^tokens must hold integer token ids, got float 2.5$"):
        cache.insert([1, 2.5], kv.alloc(2))
    with pytest.raises(ValueError) as raised:
        cache.evict_prefix([1])
    assert str(raised.value) == "evict_prefix needs at least two raw tokens (one bigram key)"


@pytest.mark.parametrize("cls", [BigramWindowCache, BigramStateCache], ids=lambda c: c.__name__)
def test_bigram_with_a_second_pool_names_bad_input_as_the_plain_bigram_cache_does(cls: type) -> None:
    kv = SlotAllocator(64)
    cache = cls(kv, 1, **second_pool_keywords(cls.capabilities))
    with pytest.raises(TypeError, match=r"^tokens must hold integer token ids, got float 1.5$"):
        cache.match_prefix([1, 1.5])
    with pytest.raises(TypeError, match=r"^tokens must hold integer token ids, got float 2.5$"):
        cache.insert([1, 2.5], kv.alloc(2))
    with pytest.raises(ValueError, match=r"^tokens holds negative token id -1$"):
        cache.evict_prefix([1, -1])
    with pytest.raises(ValueError) as raised:
        cache.evict_prefix([1])
    assert str(raised.value) == "evict_prefix needs at least two raw tokens (one bigram key)"


@pytest.mark.parametrize("method", ["match_req", "lock_req", "cache_unfinished_req", "cache_finished_req"])
def test_bigram_a_request_method_is_refused_loudly(method: str) -> None:
    """A bigram cache declares lifecycle='tree': the suite never sends it a request step, and one
    sent anyway fails at once, saying so, rather than running the token-keyed lifecycle."""
    cache = BigramRadixCache(SlotAllocator(8))
    assert BigramRadixCache.capabilities.lifecycle == "tree"
    with pytest.raises(AssertionError) as raised:
        getattr(cache, method)(Request([1, 2]))
    assert str(raised.value) == "a request method was sent to a bigram cache (it declares lifecycle='tree')"


# ---- the sliding window (hybrid_cache.py; W = 8) ---------------------------------------------------


def _window_cache(page_size: int = 1) -> tuple[WindowRadixCache, SlotAllocator, SecondPoolAllocator]:
    kv, windows = SlotAllocator(64), SecondPoolAllocator(64, seed=1)
    return WindowRadixCache(kv, page_size, second_allocator=windows), kv, windows


def _cache_with_window(cache: WindowRadixCache, kv: SlotAllocator, windows: SecondPoolAllocator, tokens: list[int],
                       namespace: object = None) -> np.ndarray:
    window = windows.alloc(len(tokens))
    cache.insert(tokens, kv.alloc(len(tokens)), namespace=namespace, window=window)
    return window


@pytest.mark.parametrize(("window", "error", "message"), [
    ([5, 6], TypeError, "window must be a 1-D integer ndarray or None, got list"),
    (np.array([5, 6, 7]), ValueError, "window must have shape (2,) to match tokens, got (3,)"),
    (np.array([[5, 6]]), ValueError, "window must have shape (2,) to match tokens, got (1, 2)"),
    (np.array([5.0, 6.0]), TypeError, "window must be integer slot ids, got dtype float64"),
    (np.array([5, -2]), ValueError, "window holds slot id -2 (only ids >= 0, or -1 for none)"),
], ids=["list", "length", "2-D", "float", "below -1"])
def test_window_a_bad_window_is_refused_and_changes_nothing(window: object, error: type[Exception], message: str) -> None:
    cache, kv, _ = _window_cache()
    with pytest.raises(error) as raised:
        cache.insert([1, 2], kv.alloc(2), window=window)
    assert str(raised.value) == message
    assert cache.match_prefix([1, 2])[0].size == 0


def test_window_construction_needs_the_window_pool() -> None:
    assert WindowRadixCache(SlotAllocator(8), second_allocator=SecondPoolAllocator(8)).page_size == 1
    with pytest.raises(TypeError) as raised:
        WindowRadixCache(SlotAllocator(8))
    assert str(raised.value) == "WindowRadixCache needs second_allocator= (the window pool)"


def test_window_an_empty_insert_and_no_window_are_accepted() -> None:
    cache, kv, windows = _window_cache()
    assert cache.insert([], kv.alloc(0), window=np.zeros(0, dtype=np.int64)) == 0
    cache.insert([1, 2], kv.alloc(2))  # no window: nothing to resume from
    assert cache.match_prefix([1, 2])[0].size == 0 and not windows.in_use


def test_window_a_lock_pins_the_last_w_tokens_until_unlocked() -> None:
    cache, kv, windows = _window_cache()
    window = _cache_with_window(cache, kv, windows, list(range(1, 11)))  # 10 tokens
    values, handle, got = cache.match_prefix(list(range(1, 11)))
    assert values.size == 10 and got.tolist() == window.tolist()
    cache.inc_lock_ref(handle)
    assert cache.evict_window(10) == 2  # only the first two are not among the last 8
    assert cache.match_prefix(list(range(1, 11)))[2].tolist() == [-1, -1, *window[2:].tolist()]
    assert cache.match_prefix([1, 2])[0].size == 0  # shorter than W, its tokens must all be live
    cache.dec_lock_ref(handle)
    assert cache.evict_window(3) == 8 and not windows.in_use  # one node: all of its unpinned values at once
    assert cache.match_prefix(list(range(1, 11)))[0].size == 0 and cache.evict(10) == 10


def test_window_eviction_goes_least_recently_used_node_first_and_stops_at_the_amount() -> None:
    cache, kv, windows = _window_cache()
    older = _cache_with_window(cache, kv, windows, [1, 2])
    newer = _cache_with_window(cache, kv, windows, [5, 6])
    cache.match_prefix([1, 2])  # [5, 6] is now the least recently used
    assert cache.evict_window(0) == 0 and len(windows.in_use) == 4
    assert cache.evict_window(1) == 2  # a node's values go together
    assert set(windows.in_use) == set(older.tolist()) and not set(newer.tolist()) & set(windows.in_use)
    with pytest.raises(ValueError, match=r"^num_tokens must be >= 0, got -1$"):
        cache.evict_window(-1)


def test_window_a_split_keeps_each_half_s_window_and_pins() -> None:
    cache, kv, windows = _window_cache()
    window = _cache_with_window(cache, kv, windows, list(range(1, 11)))
    _, handle, _ = cache.match_prefix(list(range(1, 11)))
    cache.inc_lock_ref(handle)
    mine = windows.alloc(4)
    assert cache.insert([1, 2, 3, 99], kv.alloc(4), window=mine) == 3  # splits after [1, 2, 3]
    windows.free(mine[:3])  # the caller's own copies of the cached prefix: the tree kept its own
    assert cache.match_prefix(list(range(1, 11)))[2].tolist() == window.tolist()
    assert cache.evict_window(64) == 3  # [1, 2] of the upper half and the new leaf's 99 (pinned: the last 8)
    cache.dec_lock_ref(handle)
    assert cache.evict_window(64) == 8 and not windows.in_use  # [3] of the upper half, and the lower half


def test_window_namespaces_keep_their_own_windows() -> None:
    cache, kv, windows = _window_cache()
    window = _cache_with_window(cache, kv, windows, [1, 2], namespace="a")
    assert cache.match_prefix([1, 2], namespace="a")[2].tolist() == window.tolist()
    assert cache.match_prefix([1, 2])[0].size == 0


def test_window_a_one_token_prefix_with_a_live_window_is_resumed() -> None:
    cache, kv, windows = _window_cache()
    window = _cache_with_window(cache, kv, windows, [1])
    values, _, got = cache.match_prefix([1, 2, 3])
    assert values.size == 1 and got.tolist() == window.tolist()


def test_window_eviction_passes_over_a_quarantined_node_still_locked() -> None:
    """A node quarantined under a lock stays (detached) until its unlock; window eviction skips it
    and goes on to the next node."""
    cache, kv, windows = _window_cache()
    doomed = _cache_with_window(cache, kv, windows, [1, 2])
    _, handle, _ = cache.match_prefix([1, 2])
    cache.inc_lock_ref(handle)
    assert cache.evict_prefix([1]) == 2  # detached: its lock still holds it
    live = _cache_with_window(cache, kv, windows, [5, 6])
    assert cache.evict_window(2) == 2 and not set(live.tolist()) & set(windows.in_use)
    assert set(windows.in_use) == set(doomed.tolist())  # pinned by the lock until the unlock frees it
    cache.dec_lock_ref(handle)
    assert not windows.in_use


def test_window_insert_keeps_the_priority_it_is_given_and_names_bad_tokens() -> None:
    """Under the priority policy the lower priority goes first, then the least recently used; an
    insert without a priority has priority 0."""
    kv, windows = SlotAllocator(64), SecondPoolAllocator(64, seed=1)
    cache = WindowRadixCache.with_policy(priority())(kv, 1, second_allocator=windows)
    cache.insert([1, 2], kv.alloc(2), priority=5, window=windows.alloc(2))
    cache.insert([3, 4], kv.alloc(2), window=windows.alloc(2))  # priority 0 (the default), the older of the two 0s
    cache.insert([5, 6], kv.alloc(2), priority=0, window=windows.alloc(2))
    assert cache.evict(2) == 2
    assert [cache.match_prefix(t)[0].size for t in ([3, 4], [5, 6], [1, 2])] == [0, 2, 2]
    with pytest.raises(TypeError, match=r"^tokens must hold integer token ids, got float 1.5$"):
        cache.insert([1, 1.5], kv.alloc(2))


def test_window_match_names_bad_tokens() -> None:
    cache, _, _ = _window_cache()
    with pytest.raises(ValueError, match=r"^tokens holds negative token id -4$"):
        cache.match_prefix([1, -4])


def test_window_an_empty_match_returns_integer_window_ids() -> None:
    """Slot ids are integers even when there are none: an engine concatenates them with its own."""
    cache, kv, windows = _window_cache()
    _cache_with_window(cache, kv, windows, [1, 2])
    for tokens in ([9], [], [1, 2]):
        assert cache.match_prefix(tokens)[2].dtype == np.int64


# ---- the tiered caches with a second pool ----------------------------------------------------------


@pytest.mark.parametrize("factory", [TieredStateCache, TieredWindowCache], ids=lambda f: f.__name__)
def test_tier_pool_a_prefix_recomputed_over_its_host_copy_keeps_the_host_copy_s_values(factory: type) -> None:
    """Under a namespace: [1] and [1, 2] cached, both sent to host only, then [1, 2] recomputed
    without a load-back (the insert rebuilds the host-only pages from the caller's KV). Each page's
    state or window values come back from its host copy; the next request's forward reads them
    (oracles 20 and 20w judge them there)."""
    world = _world(factory=factory)
    for tokens in ([1], [1, 2]):
        world.serve(tokens, namespace="n")
        world.finish()
    for _ in range(3):
        world.evict(10**6)
        world.complete_all()
    assert world.cache.device_size() == 0 and world.cache.host_size() == 2
    world.serve([1, 2], load=False, namespace="n")
    world.finish()
    world.complete_all()
    world.serve([1, 2], namespace="n")
    world.finish()
    world.check()


def test_tenant_tree_lru_heap_stays_bounded_by_what_the_tenant_holds() -> None:
    """The eviction heap leaves an entry stale each time a node is used again; it is compacted, so
    a router inserting the same prompts all day keeps a heap as large as its tree, not its history."""
    tree = TenantTree()
    tree.add_tenants(["a", "b"], 0.0)
    for t in range(1, 2001):
        tree.insert("system prompt: " + "xyz"[t % 3], "ab"[t % 2], float(t))
    for tenant in "ab":
        assert len(tree.lru[tenant]) <= 2 * len(tree.nodes_of[tenant]) + 16 + 1
    held = tree.sizes()["a"]
    assert held == len("system prompt: ") + 3 and tree.evict("a", 100) == held and tree.sizes()["a"] == 0
    assert tree.sizes()["b"] == len("system prompt: ") + 3  # b's own prefixes, untouched


def test_tenant_tree_evicts_the_oldest_leaf_deepest_first() -> None:
    tree = TenantTree()
    tree.add_tenants(["a"], 0.0)
    tree.insert("abcd", "a", 1.0)
    tree.insert("abxy", "a", 2.0)  # splits "abcd": "ab" is as new as "xy", "cd" keeps 1.0
    assert tree.evict("a", 1) == 2 and tree.match("abcd", ["a"])[0] == 2  # "cd", the oldest leaf, went
    assert tree.evict("a", 1) == 2 and tree.match("abxy", ["a"])[0] == 2  # then "xy" before its parent "ab"
