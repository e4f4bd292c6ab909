"""Running requests over the wire (WIRE.md, "Running requests").

A server that declares ``lifecycle: "requests"`` is sent the cache's own request methods, each with
the suite's request whole, and what its cache left in the request comes back into the suite's: the
same worlds see the same calls and the same results as in process (a tier world's log over the wire is
the in-process one). A server that does not declare it is never sent a request op. Bad input is
refused by name and leaves the request and the cache as they were."""

from __future__ import annotations

from typing import Any

import pytest

from radixcheck.properties.adapters.wire import WireProtocolError, WireRefused, reference_command, wire_factory
from radixcheck.properties.cache.contract import Request, SlotAllocator
from radixcheck.properties.tiers.requests import RequestsTierWorld
from radixcheck.reference import RadixCache
from radixcheck.reference.tier_requests import RequestTiers

REQUESTS = ["--capabilities", '{"lifecycle": "requests"}']


def served(cache: str, *extra: str) -> Any:
    return wire_factory([*reference_command(), "--cache", cache, *extra])


@pytest.fixture(scope="module")
def tiers() -> Any:
    factory = served("radixcheck.reference.tier_requests:RequestTiers", *REQUESTS)
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def plain() -> Any:
    factory = served("radixcheck.reference:RadixCache", *REQUESTS)
    yield factory
    factory.close()


def _tier_traffic(world: RequestsTierWorld) -> tuple[int, int]:
    world.serve([1, 2, 3, 4, 5, 6])
    world.finish()
    world.complete_all()
    world.evict(6)
    world.complete_all()
    world.admit([1, 2, 3, 4, 5, 6, 7, 8])  # its host part is loaded back by lock_req
    world.compute(0, 2)
    world.publish(0)
    world.admit([1, 2, 3, 4, 9], namespace="b")
    world.compute(1, 1)
    world.end(1, "abort")
    world.admit([1, 2, 3, 4, 5, 6], load=False)
    world.end(1, "retract")
    world.complete_all()
    world.compute(0, 2)
    world.end(0, "finish")
    world.complete_all()
    world.check()
    return world.cache.device_size(), world.cache.host_size()


@pytest.mark.parametrize("write_policy", ["write_through", "write_back"])
def test_a_tier_cache_running_requests_over_the_wire_is_driven_as_in_process(tiers: Any, write_policy: str) -> None:
    assert tiers.tier_capabilities.lifecycle == "requests"
    wire, local = RequestsTierWorld(tiers, 2, write_policy), RequestsTierWorld(RequestTiers, 2, write_policy)
    assert _tier_traffic(wire) == _tier_traffic(local)
    assert wire.log == local.log  # every call, every controller line, in the same order
    assert any("w.admit" in line for line in wire.log) and any("controller.load" in line for line in wire.log)


def _plain_steps(cache: Any, allocator: SlotAllocator) -> list[Any]:
    """A prompt cached; a request admitted on it computes, publishes, and finishes; a second is aborted."""
    seen: list[Any] = []
    cache.insert([1, 2, 3, 4, 5, 6, 7, 8], allocator.alloc(8))
    req = Request([1, 2, 3, 4, 5, 6, 9, 9, 9], priority=0)
    cache.match_req(req)
    cache.lock_req(req)
    seen.append((req.slots.tolist(), req.filled, req.protected, cache.protected_size()))
    req.compute(allocator.alloc(3))
    cache.cache_unfinished_req(req)
    seen.append((req.slots.tolist(), req.filled, req.protected, cache.protected_size(), cache.total_size()))
    other = Request([1, 2, 3, 4, 7])
    cache.match_req(other)
    cache.lock_req(other)
    other.compute(allocator.alloc(1))
    cache.cache_finished_req(other, False)
    req.compute(allocator.alloc(2), [5, 5])
    cache.cache_finished_req(req, True)
    seen.append((other.handle, req.handle, cache.protected_size(), cache.evictable_size(), cache.total_size(),
                 sorted(allocator.in_use)))
    return seen


def test_a_cache_running_requests_over_the_wire_answers_as_in_process(plain: Any) -> None:
    assert plain.capabilities.lifecycle == "requests"
    wire_pool, local_pool = SlotAllocator(64, seed=3), SlotAllocator(64, seed=3)
    assert _plain_steps(plain(wire_pool, 4), wire_pool) == _plain_steps(RadixCache(local_pool, 4), local_pool)


def test_bad_request_input_over_the_wire_is_refused_by_name_and_changes_nothing(plain: Any) -> None:
    pool = SlotAllocator(32)
    cache = plain(pool, 1)
    cache.insert([1, 2, 3], pool.alloc(3))
    req = Request([1, 2, 3, 4])
    cache.match_req(req)
    before = (req.slots.tolist(), req.filled, req.protected, req.handle)
    req.handle = object()  # no handle this server issued: sent as null, which a cache checking locks refuses
    with pytest.raises(WireRefused, match="handle"):
        cache.lock_req(req)
    req.handle = before[3]
    assert (req.slots.tolist(), req.filled, req.protected, req.handle) == before and cache.protected_size() == 0
    with pytest.raises(WireRefused, match="insert must be a bool"):
        cache.cache_finished_req(req, "yes")
    with pytest.raises(WireProtocolError, match="a request must be an object of"):
        cache.connection.call("lock_req", {"cache": cache.cache_id, "request": {"id": 1, "tokens": [1.5]}}, pool)
    assert cache.total_size() == 3 and cache.protected_size() == 0 and len(pool.in_use) == 3
