"""The tier reset (``TierCapabilities(supports_reset=True)``; the production world's flush,
:mod:`radixcheck.properties.cache.flush`): after it neither tier holds a slot and both sizes are 0,
and the world goes on with an empty model. A reset that keeps the host tier's pages fails on the
host tier (oracle 3h) naming what it left; the tiered references (the request methods and a
window: the most each reset frees) pass, and serve again after it."""

from __future__ import annotations

from typing import Any

import pytest

from radixcheck.oracles.violations import HostSlotViolation, SlotViolation
from radixcheck.properties.target import TargetError, check_target, load_target
from radixcheck.properties.tiers.requests import world_class_for
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tier_requests import RequestWindowTiers
from radixcheck.reference.tiered_cache import TieredRadixCache
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
