"""A tier target may declare a shorter production conversation (``TierCapabilities(conversation_turns=T)``:
its inserts' own cost, e.g. an adapter that re-inserts every shorter prefix with a state): the world
then builds a path ``T`` pages deep, the report card says what that leaves unmet, and a target that
declares nothing keeps the 1,200 turns."""

from __future__ import annotations

import random
from typing import Any

import pytest

from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.scale import DEEP_TURNS, conversation_turns, production_stories
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache


class ShortConversation(TieredRadixCache):
    """The reference, declaring a conversation of 6 turns."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), conversation_turns=6)


def _deepest(world: TierWorld) -> int:
    """The pages of the deepest cached path of the world's model."""
    def depth(page: Any) -> int:
        return 1 + max((depth(child) for child in page.children.values()), default=0)
    return depth(world.model.root) - 1


@pytest.mark.parametrize("page_size", [1, 2])
def test_a_declared_conversation_is_that_many_pages_deep(page_size: int) -> None:
    world = TierWorld(ShortConversation, page_size, "write_through", device_slots=64 * page_size, host_slots=128 * page_size)
    production_stories(world, random.Random(0), wide=False)
    assert _deepest(world) == 6


def test_the_default_is_the_worlds_and_the_declaration_is_checked_and_named() -> None:
    assert conversation_turns(TieredRadixCache.tier_capabilities) == DEEP_TURNS
    assert conversation_turns(None) == DEEP_TURNS
    assert conversation_turns(ShortConversation.tier_capabilities) == 6
    for bad in (1, True, 2.5, "300"):
        with pytest.raises(ValueError, match="conversation_turns must be None or an int >= 2"):
            TierCapabilities(conversation_turns=bad)  # type: ignore[arg-type]
    gaps = ShortConversation.tier_capabilities.not_exercised()
    assert any("conversation past 6 pages deep" in gap and "1,000 frames" in gap for gap in gaps), gaps
    assert not any("conversation past" in gap for gap in TieredRadixCache.tier_capabilities.not_exercised())
