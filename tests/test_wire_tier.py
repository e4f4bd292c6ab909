"""A host tier over the wire (WIRE.md, "A host tier"; properties/adapters/wire_tier.py).

A server that declares ``tier_capabilities`` is a tier target: the same tier world drives it as
drives the tiered reference in process, and sees the same calls (its log, the controller's lines
included, is the in-process one). A server without a host tier is a cache target and is sent no tier
op. Bad tier input over the wire is refused by name, and a refusal of the suite's pool in a call the
server made is raised from the request, as in process."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import pytest

from radixcheck.oracles.violations import EvictionOrderViolation, HostSlotViolation
from radixcheck.properties.adapters.wire import WireProtocolError, WireRefused, reference_command, wire_factory
from radixcheck.properties.adapters.wire_tier import WireTierCache
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.target import load_target
from radixcheck.properties.tiers.contract import Transfer
from radixcheck.properties.tiers.mutants import TieredPriority
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache

TIERED = "radixcheck.reference.tiered_cache:TieredRadixCache"


def tier_server(*extra: str) -> Any:
    return wire_factory([*reference_command(), "--cache", TIERED, *extra])


def _traffic(world: TierWorld) -> tuple[int, int]:
    world.serve([1, 2, 3, 4, 5, 6])
    world.finish()
    world.complete_all()
    world.serve([1, 2, 3, 4, 7, 8], namespace="b")
    world.finish()
    world.evict(6)
    world.complete_all()
    world.serve([1, 2, 3, 4, 5, 6, 9, 9])  # its host part is loaded back
    world.complete_all()
    world.finish()
    world.evict_host(4)
    world.quarantine([1, 2])
    world.complete_all()
    world.check()
    sizes = world.cache.device_size(), world.cache.host_size()
    world.reset()
    world.check()
    return sizes


@pytest.fixture(scope="module")
def served() -> Any:
    factory = tier_server()
    yield factory
    factory.close()


@pytest.mark.parametrize("write_policy", ["write_through", "write_back"])
def test_a_tiered_cache_over_the_wire_is_driven_as_in_process(served: Any, write_policy: str) -> None:
    assert served.tier_capabilities == TieredRadixCache.tier_capabilities
    assert not hasattr(served, "capabilities")  # so radixcheck loads it as a tier target
    wire, local = TierWorld(served, 2, write_policy), TierWorld(TieredRadixCache, 2, write_policy)
    assert isinstance(wire.cache, WireTierCache)
    assert _traffic(wire) == _traffic(local)
    assert wire.log == local.log  # every call and every controller line, in the same order
    assert any("controller.load" in line for line in wire.log) and any("controller.write" in line for line in wire.log)


def test_bad_tier_input_over_the_wire_is_refused_by_name(served: Any) -> None:
    with pytest.raises(WireRefused, match="write_policy must be one of"):
        TierWorld(served, 1, "write_sideways")
    world = TierWorld(served, 1, "write_through")
    with pytest.raises(WireRefused, match="unknown or already completed transfer"):
        world.cache.transfer_done(Transfer("write", np.array([1]), np.array([2]), 99))
    with pytest.raises(WireRefused, match="num_tokens"):
        world.cache.evict_host(1.5)
    assert world.cache.device_size() == 0 and world.cache.host_size() == 0  # nothing changed


# A server that answers init with the JSON object in its argument (merged into its reply) and any
# other op with 1: what the client makes of a declaration, without a cache behind it.
DECLARES = r"""
import json, sys
declared = json.loads(sys.argv[1])
for line in sys.stdin:
    req = json.loads(line)
    ok = {"protocol": 1, "server": "declares", **declared} if req["op"] == "init" else 1
    print(json.dumps({"id": req["id"], "ok": ok}), flush=True)
"""


def declares(**declared: Any) -> Any:
    return wire_factory([sys.executable, "-c", DECLARES, json.dumps(declared)])


def test_a_server_without_a_host_tier_is_a_cache_target_and_one_with_a_tier_target(monkeypatch) -> None:
    from radixcheck.properties.adapters import wire

    monkeypatch.setattr(wire, "server", declares(tier_capabilities={"page_sizes": [1]}))
    try:
        assert load_target("radixcheck.properties.adapters.wire:server").kind == "tier"
    finally:
        wire.server.close()
    plain = declares(capabilities={})
    try:
        assert not hasattr(plain, "tier_capabilities")  # so never sent a tier op
        assert type(plain(SlotAllocator(8), 1)).__name__ == "WireCache"
    finally:
        plain.close()


@pytest.mark.parametrize("declared, named", [
    ({"second_pool": {"window": 4}}, "second_pool"),  # no kind
    ({"second_pool": {"kind": "window", "window": 0}}, "SlidingWindow.window must be a positive int"),
    ({"second_pool": {"kind": "state", "slots": 4}}, "second_pool .*slots"),
    ({"colour": "blue"}, "colour"),
    ({"eviction_policy": "quota"}, "eviction_policy 'quota'"),
    ({"write_policies": ["write_around"]}, "write_policies"),
])
def test_a_host_tier_the_wire_cannot_carry_stops_at_init(declared: dict[str, Any], named: str) -> None:
    factory = declares(tier_capabilities=declared)
    with pytest.raises(WireProtocolError, match=named):
        factory.tier_capabilities  # noqa: B018 - reading it starts the server
    factory.close()


def test_a_second_pool_without_a_host_tier_stops_at_init() -> None:
    """The plain protocol carries no second pool's allocator (WIRE.md): refused by name, never sent."""
    factory = declares(capabilities={"second_pool": {"kind": "state"}})
    with pytest.raises(WireProtocolError, match="second_pool must be None"):
        factory.capabilities  # noqa: B018
    factory.close()


def test_an_unknown_tier_field_is_named_with_the_fields_a_host_tier_has() -> None:
    """A typo (``page_size``) is named with the page's fields, not as Python's "unexpected keyword
    argument" (a new user's Node.js server, session 62)."""
    factory = declares(tier_capabilities={"page_size": [1]})
    with pytest.raises(WireProtocolError, match=r"unknown field\(s\) 'page_size' \(a host tier's fields: write_policies, "
                       r"page_sizes,.*\bnamespaces\b"):
        factory.tier_capabilities  # noqa: B018
    factory.close()


def test_an_unknown_cache_field_is_named_with_the_fields() -> None:
    factory = declares(capabilities={"page_size": [1]})
    with pytest.raises(WireProtocolError, match=r"unknown field\(s\) 'page_size' \(the fields: eviction_policy,"):
        factory.capabilities  # noqa: B018
    factory.close()


def test_lru_by_name_is_a_host_tiers_default_order() -> None:
    """``"lru"`` declares a plain cache's default order; a host tier takes it as its own (null), as a
    server author writing one ``init`` for both would expect, where ``"quota"`` stays refused."""
    factory = declares(tier_capabilities={"eviction_policy": "lru"})
    try:
        assert factory.tier_capabilities.eviction_policy is None
    finally:
        factory.close()


def test_an_init_declaring_both_kinds_of_capabilities_stops() -> None:
    factory = declares(capabilities={}, tier_capabilities={})
    with pytest.raises(WireProtocolError, match="not both"):
        factory.tier_capabilities  # noqa: B018
    factory.close()


# A tiered cache that frees a host slot twice when it flushes (served from this script): the suite's
# host pool refuses the second free in the server's call, and the request raises it, as in process.
DOUBLE_FREE = r"""
import sys
from radixcheck.reference import wire_server
from radixcheck.reference.tiered_cache import TieredRadixCache

class FreesHostTwice(TieredRadixCache):
    def evict_host(self, num_tokens):
        for node in list(self._nodes()):
            if node.host is not None:
                self.host_pool.free(node.host)
                self.host_pool.free(node.host)
        return 0

wire_server.serve(FreesHostTwice, sys.stdin.buffer, sys.stdout.buffer)
"""


def test_a_pool_refusal_in_a_servers_call_is_raised_from_its_request() -> None:
    factory = wire_factory([sys.executable, "-c", DOUBLE_FREE])
    try:
        world = TierWorld(factory, 1, "write_through")
        world.serve([1, 2])
        world.finish()
        world.complete_all()
        with pytest.raises(HostSlotViolation, match="double free"):
            world.cache.evict_host(2)
        assert world.cache.host_size() == 2  # the server goes on answering
    finally:
        factory.close()


# ---- a non-LRU policy over a wire tier: SGLang's priority policy, its requests' priorities on the wire ----

def _revived_at_a_higher_priority(factory: Any, write_policy: str) -> TierWorld:
    """[1, 2] cached at priority 0 goes to host only; a request of priority 2 recomputes it (no load-back:
    the insert revives its pages); [3] is cached at priority 1; then one page is evicted."""
    world = TierWorld(factory, 1, write_policy)
    world.serve([1, 2])
    world.finish()
    world.complete_all()
    for _ in range(3):
        world.evict(100)
        world.complete_all()
    for priority, tokens in ((2, [1, 2]), (1, [3])):
        world.next_priority(priority)
        world.serve(tokens, load=False)
        world.finish()
    world.complete_all()
    world.evict(1)  # under priority, [3] (priority 1) goes first
    world.complete_all()
    world.check()
    return world


def test_a_priority_tier_over_the_wire_is_driven_as_in_process() -> None:
    factory = wire_factory([*reference_command(), "--cache", "radixcheck.properties.tiers.mutants:TieredPriority"])
    try:
        assert factory.tier_capabilities == TieredPriority.tier_capabilities  # {"named": "priority"} on the wire
        wire, local = (_revived_at_a_higher_priority(f, "write_back") for f in (factory, TieredPriority))
        assert wire.log == local.log and any("w.next_priority(2)" in line for line in wire.log)
        assert wire.cache.match_prefix([1, 2]).device_values.tolist() != []  # the revived page kept its priority 2
    finally:
        factory.close()


@pytest.mark.deep  # a server of its own (~1 s); meta_tests/test_wire_policy_audit.py runs it through the machine
def test_a_revived_page_keeping_its_old_priority_over_the_wire_fails_the_policy_order() -> None:
    factory = wire_factory([*reference_command(), "--cache", "radixcheck.properties.tiers.mutants:RevivedPageKeepsOldPriority"])
    try:
        with pytest.raises(EvictionOrderViolation, match=r"evict\(1\) freed Page\(\[1, 2\].*under priority it goes first"):
            _revived_at_a_higher_priority(factory, "write_through")
    finally:
        factory.close()


# ---- a second pool on a host tier: a state or window value per page, the suite's (WIRE.md) ----------

@pytest.mark.parametrize("cache, requests", [("tiered_state_cache:TieredStateCache", False),
                                             ("tier_requests:RequestWindowTiers", True)], ids=["state", "window-requests"])
def test_a_host_tiers_second_pool_over_the_wire_is_driven_as_in_process(cache: str, requests: bool) -> None:
    from radixcheck.properties.tiers.requests import RequestsTierWorld
    from radixcheck.reference.wire_server import load_factory

    from .test_wire_requests import _tier_traffic

    local = load_factory(f"radixcheck.reference.{cache}")
    factory = wire_factory([*reference_command(), "--cache", f"radixcheck.reference.{cache}",
                            *(["--capabilities", '{"lifecycle": "requests"}'] if requests else [])])
    sent: list[str] = []
    try:
        assert factory.tier_capabilities == local.tier_capabilities  # the pool declared as {"kind": ...}
        connection, world = factory.connection(), RequestsTierWorld if requests else TierWorld
        call = connection.call
        connection.call = lambda op, args, *a, **k: sent.append(op + "".join(f"+{f}" for f in ("state", "window")
                                                                              if f in args or f in args.get("request", {}))) \
            or call(op, args, *a, **k)
        traffic = _tier_traffic if requests else _traffic
        for write_policy in ("write_through", "write_back"):
            wire, here = world(factory, 2, write_policy), world(local, 2, write_policy)
            assert traffic(wire) == traffic(here)
            assert wire.log == here.log
    finally:
        factory.close()
    second = "window" if requests else "state"
    assert f"{second}s" in sent and f"insert+{second}" in sent  # the values went over the wire, and were read back
    assert not requests or f"cache_unfinished_req+{second}" in sent


def test_a_request_that_calls_the_suite_keeps_the_servers_cpu_time(served: Any) -> None:
    """A tier request answered through prompt calls (an evict's ``free`` per page) keeps the server's
    CPU time from its first call on, so the suite's wall-clock backstop quotes it: each call's line
    cleared it before, and a Node.js server's O(n^2) evict stopped at the backstop read "the wire
    server's CPU time cannot be read here" (a new user's trial, session 62)."""
    w = TierWorld(served, page_size=1, write_policy="write_through")
    w.serve([1, 2, 3, 4])
    w.finish()
    w.complete_all()
    w.cache.evict(4)  # backed up: one free call per page, each answered at once
    spent = served.connection().request_cpu()
    assert spent is not None and spent >= 0.0


def test_the_suites_answers_to_a_servers_calls_count_as_the_servers_request(served: Any, monkeypatch) -> None:  # noqa: ANN001
    """While the suite answers a tier server's call (a ``free``), the guarded request is still marked
    as computed by the server: a backstop firing then judges the server's CPU time and run-queue wait
    too. It judged the suite's own thread alone there, which only waited on the pipe: a starved
    server's evict was "a call that blocks" ("it computed for only 1.0 s", session 62's trial)."""
    from radixcheck.properties import target
    from radixcheck.properties.adapters import wire_tier

    seen: list[Any] = []
    answer = wire_tier.TierCalls.answer

    def spying(self: Any, message: dict[str, Any], op: str) -> Any:
        call = target._current_call
        seen.append(None if call is None else call.elsewhere)
        return answer(self, message, op)

    w = TierWorld(served, page_size=1, write_policy="write_through")
    w.serve([1, 2, 3, 4])
    w.finish()
    w.complete_all()
    monkeypatch.setattr(wire_tier.TierCalls, "answer", spying)
    target.guarded("evict", w.cache.evict, 4)  # backed up: a free call per page
    assert seen and all(e is not None and e[0] == "the wire server" and e[2] is not None for e in seen), seen
