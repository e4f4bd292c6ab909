"""The tier machinery an engine's adapter leans on (issue 39, SGLang HiCache composed), without the engine:

* ``TierCapabilities.unsent_namespaces``: a namespace kind the engine's requests cannot carry is
  declared, refused by the world before anything is sent, and never drawn by the tier machine's
  tenant rules (the draw stays, the next namespace the target takes is sent); the report card
  names it;
* oracle 4t is judged inside ``evict`` and raised once the cache's ``evict`` has returned: a cache
  that catches its allocator's exceptions cannot swallow it, and the cache is not left half way
  through its call.

Each runs in well under a second; the SGLang side is ``tests/test_sglang_hicache_composed.py`` (``deep``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from radixcheck.oracles.violations import LRUOrderViolation
from radixcheck.properties.cache.tenants import NAMESPACES, PAIRS, kinds_of, pair_kinds
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import MruFirstTier
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache

ENGINE_UNSENT = ("empty", "multimodal", "decimal", "float", "bool")


class StringFieldTiers(TieredRadixCache):
    """A correct tiered cache whose callers' requests carry no empty, multimodal, float or bool
    namespace (an engine's string fields): it records every namespace it is sent."""

    tier_capabilities = TierCapabilities(page_sizes=(1,), namespaces=True, unsent_namespaces=ENGINE_UNSENT)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[Any] = []

    def match_prefix(self, tokens: Any, namespace: Any = None, **kwargs: Any) -> Any:
        self.sent.append(namespace)
        return super().match_prefix(tokens, namespace=namespace, **kwargs)

    def insert(self, tokens: Any, values: Any, namespace: Any = None, **kwargs: Any) -> int:
        self.sent.append(namespace)
        return super().insert(tokens, values, namespace=namespace, **kwargs)


def test_unsent_namespaces_are_validated_and_need_namespaces() -> None:
    with pytest.raises(ValueError, match="needs namespaces=True"):
        TierCapabilities(unsent_namespaces=("float",))
    with pytest.raises(ValueError, match="unsent_namespaces must be a tuple of"):
        TierCapabilities(namespaces=True, unsent_namespaces=("lora",))
    caps = TierCapabilities(namespaces=True, unsent_namespaces=["float"])
    assert caps.unsent_namespaces == ("float",)
    assert TierCapabilities().unsent_namespaces == ()


def test_the_report_card_names_what_is_never_sent() -> None:
    caps = StringFieldTiers.tier_capabilities
    assert "not sent: the empty-string namespace" in caps.tenant_isolation()
    gaps = caps.not_exercised()
    assert sum("unsent_namespaces: never sent" in g for g in gaps) == len(ENGINE_UNSENT)
    assert not any("unsent" in g for g in TierCapabilities(namespaces=True).not_exercised())


@pytest.mark.parametrize("namespace", ["", 2.5, True, ("lora-7", None, (5,))], ids=["empty", "float", "bool", "multimodal"])
def test_the_world_refuses_an_unsent_kind_before_sending_anything(namespace: Any) -> None:
    world = TierWorld(StringFieldTiers, 1, "write_through")
    with pytest.raises(ValueError, match="declares unsent"):
        world.serve([1, 2], namespace=namespace)
    with pytest.raises(ValueError, match="declares unsent"):
        world.match([1, 2], namespace=namespace)
    assert world.cache.sent == [] and world.log == []


def test_the_world_sends_the_kinds_the_target_takes() -> None:
    world = TierWorld(StringFieldTiers, 1, "write_through")
    for namespace in (("X", None), "tenant", 7, None):
        world.serve([1, 2], namespace=namespace)
        world.finish()
    assert world.cache.sent[0] == ("X", None) and 7 in world.cache.sent


def test_the_fixed_lists_hold_namespaces_an_engine_cannot_carry() -> None:
    """Else the filter below would be vacuous."""
    assert any(kinds_of(n) & set(ENGINE_UNSENT) for n in NAMESPACES)
    assert any(pair_kinds(p) & set(ENGINE_UNSENT) for p in PAIRS)


def test_the_tier_machine_never_sends_an_unsent_kind() -> None:
    machine = tier_machine_for(StringFieldTiers, 1, "write_through", "UnsentNeverSent")
    sent: list[Any] = []
    original = machine.teardown

    def teardown(self: Any) -> None:
        sent.extend(self.world.cache.sent)
        original(self)

    machine.teardown = teardown  # type: ignore[method-assign]
    run_machine(machine, settings(max_examples=8, stateful_step_count=10, derandomize=True, database=None, deadline=None))
    assert sent, "the machine sent no namespace at all"
    assert not [n for n in sent if kinds_of(n) & set(ENGINE_UNSENT)]


# ---- oracle 4t: raised after evict returns ------------------------------------------------------


class SwallowingMruTier(MruFirstTier):
    """MRU-first, and its evict catches what its allocator raises (as an engine that logs a failed
    free and goes on would): a 4t raised from inside the free would be lost."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.returned = False
        self.caught: list[BaseException] = []
        allocator = self.allocator
        original = allocator.free

        def free(slots: Any) -> None:
            try:
                original(slots)
            except Exception as exc:  # noqa: BLE001 - the point of this cache
                self.caught.append(exc)

        allocator.free = free

    def evict(self, num_tokens: int) -> int:
        self.returned = False
        freed = super().evict(num_tokens)
        self.returned = True
        return freed


def _two_prompts(factory: Any) -> TierWorld:
    world = TierWorld(factory, 1, "write_through")
    for tokens in ([1], [2]):
        world.serve(tokens)
        world.finish()
    world.complete_all()
    return world


def test_an_order_finding_is_raised_once_evict_returned() -> None:
    world = _two_prompts(SwallowingMruTier)
    with pytest.raises(LRUOrderViolation, match=r"evict\(1\) freed Page\(\[2\]"):
        world.evict(1)
    assert world.cache.returned and world.cache.caught == []  # nothing was raised inside the cache's call
    assert world.model.order_violation is None  # kept for one call only
    world.check()  # and the cache finished its call: both tiers still conserved


def test_a_correct_cache_leaves_no_order_finding_behind() -> None:
    world = _two_prompts(TieredRadixCache)
    assert world.evict(1) == 1
    assert world.model.order_violation is None
    world.complete_all()
    world.check()
    assert np.asarray(world.cache.match_prefix([2]).device_values).size == 1
