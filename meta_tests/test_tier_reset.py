"""The tier reset (``TierCapabilities(supports_reset=True)``; the production world's flush,
:mod:`radixcheck.properties.cache.flush`): after it neither tier holds a slot and both sizes are 0,
and the world goes on with an empty model. A reset that keeps the host tier's pages fails on the
host tier (oracle 3h) naming what it left; the tiered references (the request methods and a
window: the most each reset frees) pass, and serve again after it.

The small tier worlds flush too (the tier machine's rare ``reset`` rule, when declared): a reset
whose own frees are right but that leaves a stale index behind (``ResetKeepsHostIndex``) passes the
production world's one final flush and is caught by the traffic that follows a mid-world one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from radixcheck import profiles
from radixcheck.oracles.violations import ContractViolation, HostSlotViolation, SlotViolation
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import TargetError, check_target, load_target
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.machine import DRAINS, RESET_EVERY, _may_reset, tier_machine_for
from radixcheck.properties.tiers.requests import world_class_for
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tier_requests import RequestWindowTiers
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode
from radixcheck.reference.tiered_state_cache import TieredStateCache


class KeepsHostPages(TieredRadixCache):
    """``reset`` flushes the device tier only: each node's host copy is forgotten, not freed."""

    def reset(self) -> None:
        for node in list(self._nodes()):
            node.host = None
        super().reset()


class KeepsDevicePages(TieredRadixCache):
    """``reset`` forgets the device leaves' slots instead of freeing them."""

    def reset(self) -> None:
        for node in list(self._nodes()):
            if node.device is not None and not node.children:
                node._device = None
        super().reset()


def _flushed(factory: Any, policy: str) -> TierWorld:
    """Pages on both tiers (one written back, under write-back), every transfer landed, then a reset."""
    world = world_class_for(factory.tier_capabilities)(factory, 2, policy)
    for tokens in ([1, 2, 3, 4], [1, 2, 5, 6], [7, 8]):
        world.serve(tokens)
        world.finish()
    world.evict(2)
    world.complete_all()
    assert world.cache.host_size() > 0  # something to flush on host
    world.reset()
    return world


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("factory", [TieredRadixCache, TieredStateCache, RequestWindowTiers], ids=lambda f: f.__name__)
def test_a_reference_reset_empties_both_tiers_and_the_world_goes_on(factory: Any, policy: str) -> None:
    world = _flushed(factory, policy)
    assert world.cache.device_size() == world.cache.host_size() == 0 and not world.host.in_use
    world.serve([1, 2, 3, 4])  # a miss: the model starts over too
    assert world.running[-1].values == []
    world.finish()
    world.complete_all()
    world.evict(100)
    world.complete_all()
    world.check()


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_a_reset_that_keeps_host_pages_fails_on_the_host_tier(policy: str) -> None:
    with pytest.raises(HostSlotViolation, match=r"^host slots leaked: reset\(\) left \d+ host slots allocated .*a flush "
                                                r"frees both tiers"):
        _flushed(KeepsHostPages, policy)


def test_a_reset_that_keeps_device_pages_fails_on_the_device_tier() -> None:
    with pytest.raises(SlotViolation, match=r"^device slots leaked: reset\(\) left \d+ device slots allocated"):
        _flushed(KeepsDevicePages, "write_through")


def test_reset_is_sent_only_when_declared_and_nothing_runs() -> None:
    """Undeclared, a tier target needs no ``reset`` (never sent); declared, it must have one."""
    assert TieredRadixCache.tier_capabilities.supports_reset
    world = TierWorld(TieredRadixCache, 1, "write_through")
    world.serve([1])
    with pytest.raises(ValueError, match="no request running"):  # its transfers would land first
        world.reset()
    check_target(load_target("radixcheck.reference.tiered_cache:TieredRadixCache"))
    with pytest.raises(TargetError, match="lacks reset"):
        check_target(load_target(f"{__name__}:DeclaresResetWithout"))


class DeclaresResetWithout(TieredRadixCache):
    reset = None  # type: ignore[assignment]


class ResetKeepsHostIndex(TieredRadixCache):
    """A backup skips pages whose tokens already have a host copy, found in an index of the host
    copies (tokens -> the node and its host slots), kept as the copies land and leave. ``reset``
    frees both tiers right, and rebuilds the tree, but keeps the index: the next backup of the same
    tokens after it takes the freed host slots of a copy the flush dropped, writing nothing. With no
    traffic after the reset (the production world's one final flush) it is correct."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), supports_reset=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._host_index: dict[tuple[int, ...], tuple[TierNode, np.ndarray]] = {}

    def _tokens(self, node: TierNode) -> tuple[int, ...]:
        return tuple(t for n in self._path(node) for t in n.key)

    def _prune(self) -> None:
        """The index keeps only the copies still on host."""
        self._host_index = {k: (n, s) for k, (n, s) in self._host_index.items() if n.linked and n.host is not None}

    def _write(self, node: TierNode) -> bool:
        known = self._host_index.get(self._tokens(node))
        if known is not None:  # "already on host": take its slots, write nothing
            node.host = known[1]
            return True
        return super()._write(node)

    def transfer_done(self, transfer: Any) -> None:
        nodes = list(self._pending.get(transfer.number, ()))
        super().transfer_done(transfer)
        for node in nodes if transfer.kind == "write" else ():
            if node.linked and node.host is not None:
                self._host_index[self._tokens(node)] = (node, node.host)
        self._prune()

    def evict_host(self, num_tokens: int) -> int:
        freed = super().evict_host(num_tokens)
        self._prune()
        return freed

    def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
        removed = super().evict_prefix(tokens, namespace)
        self._prune()
        return removed

    def reset(self) -> None:
        index = self._host_index
        super().reset()
        self._host_index = index  # BUG: the flush forgets to clear it


class NeverReset(TieredRadixCache):
    """Declares no reset; one sent would fail loudly."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), supports_reset=False)

    def reset(self) -> None:
        raise AssertionError("reset() was sent to a tier target that declares supports_reset=False")


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_a_reset_that_keeps_a_stale_host_index_passes_the_final_flush_and_fails_the_traffic_after(policy: str) -> None:
    world = _flushed(ResetKeepsHostIndex, policy)  # the production world's flush: right
    world.check()
    with pytest.raises(ContractViolation):  # the same prompt again: its backup takes the stale host slots
        world.serve([1, 2, 3, 4])
        world.finish()
        world.complete_all()
        world.evict(100)
        world.complete_all()
        world.check()


def test_a_lifecycle_world_refuses_a_reset_while_a_request_runs() -> None:
    world = world_class_for(TieredRadixCache.tier_capabilities)(TieredRadixCache, 1, "write_through")
    world.admit([1, 2])
    with pytest.raises(ValueError, match="no request running"):
        world.reset()


@pytest.mark.parametrize("drain", DRAINS)
@pytest.mark.parametrize("factory", [TieredRadixCache, RequestWindowTiers, ResetKeepsHostIndex], ids=lambda f: f.__name__)
def test_the_reset_rule_drains_the_running_requests_as_a_scheduler_does_then_flushes(factory: Any, drain: str) -> None:
    """A request still running does not hold the rule back (it did: held ``serve`` requests kept it out of
    most examples); the rule drains them first, as the flush's caller does (SGLang flushes only when
    idle, after the requests finish or are aborted; vLLM preempts them), and resets with nothing running."""
    machine = tier_machine_for(factory, 2, "write_through", name=f"Drain_{factory.__name__}_{drain}")()
    world = machine.world
    for tokens in ([1, 2, 3, 4], [1, 2, 5, 6]):
        world.serve(tokens)
        world.finish()
    world.serve([1, 2, 3, 4, 7, 8])  # held: still running at the flush
    if hasattr(world, "lives"):  # a lifecycle world: a request admitted, one chunk computed and published
        world.admit([1, 2, 5, 6, 0, 0])
        world.compute(0, 2)
        world.publish(0)
    machine.reset_at = world.operations - RESET_EVERY
    assert _may_reset(machine)
    machine.reset(drain)
    assert not world.running and not getattr(world, "lives", ())
    assert world.cache.device_size() == world.cache.host_size() == 0 and not world.host.in_use
    world.check()
    world.serve([1, 2, 3, 4])  # the traffic goes on against an empty model
    assert world.running[-1].values == []
    world.finish()


def test_the_reset_rule_waits_for_its_gap_and_is_never_drawn_undeclared() -> None:
    machine = tier_machine_for(NeverReset, 1, "write_through", name="NeverResetGap")()
    machine.world.operations = RESET_EVERY
    assert not _may_reset(machine)
    machine = tier_machine_for(TieredRadixCache, 1, "write_through", name="ResetGap")()
    machine.world.operations = RESET_EVERY - 1
    assert not _may_reset(machine)
    machine.world.operations = RESET_EVERY
    assert _may_reset(machine)


@pytest.mark.deep
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_the_small_tier_worlds_flush_mid_world_and_catch_a_stale_index(policy: str) -> None:
    """The tier machine's ``reset`` rule (declared: drawn now and then, traffic after it) catches the
    stale index; its reset alone, at the production world's end, does not."""
    machine = tier_machine_for(ResetKeepsHostIndex, 1, policy, name=f"ResetKeepsHostIndex_{policy}")
    with pytest.raises(ContractViolation):
        run_machine(machine, profiles.SETTINGS["mutation"])


@pytest.mark.deep
def test_the_small_tier_worlds_never_reset_a_target_that_does_not_offer_it() -> None:
    run_machine(tier_machine_for(NeverReset, 1, "write_through", name="NeverReset"), profiles.SETTINGS["mutation"])


def _resets_per_example(factory: Any, page_size: int, policy: str) -> list[int]:
    """How many times the machine's ``reset`` rule fired in each example of one derandomized run."""
    counts: list[int] = []
    base = tier_machine_for(factory, page_size, policy, name=f"ResetShare_{factory.__name__}_{policy}_p{page_size}")

    class Counting(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            counts.append(0)

        @precondition(_may_reset)
        @rule(drain=st.sampled_from(DRAINS))
        def reset(self, drain: str) -> None:
            super().reset(drain)
            counts[-1] += 1

    run_machine(Counting, profiles.SETTINGS["mutation"])
    return counts


@pytest.mark.deep
@pytest.mark.parametrize("factory", [TieredRadixCache, RequestWindowTiers], ids=lambda f: f.__name__)
def test_the_reset_rule_fires_in_a_fair_share_of_examples(factory: Any) -> None:
    """The rule is rare by design (``RESET_EVERY`` operations apart) but not dead: session 60 measured
    it in 26-42 % of the examples of a declaring correct variant at page size 2, write-through (23 %
    overall while a running request blocked it; the running requests are drained first now), about
    half of those that reach the gap: Hypothesis's swarm testing disables it in the rest. A
    precondition that starved it would silently stop the small worlds from flushing."""
    counts = _resets_per_example(factory, 2, "write_through")
    fired = sum(1 for c in counts if c)
    assert fired >= len(counts) // 20, f"reset fired in {fired} of {len(counts)} examples"
