"""The reference tiered cache passes the tier machine in every write policy and page size (a small
budget here; the false-alarm streams in TIER_CATALOGUE.md are the evidence), and the tier
contract's own pieces refuse what they must."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.violations import HostSlotViolation
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.contract import HostPool, TierCapabilities
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache
from radixcheck.reference.tiered_state_cache import TieredStateCache
from radixcheck.reference.tiered_window_cache import TieredWindowCache

GATE = settings(profiles.SETTINGS["mutation"], max_examples=20, stateful_step_count=30)


@pytest.mark.parametrize("page_size", TieredRadixCache.tier_capabilities.page_sizes)
@pytest.mark.parametrize("policy", TieredRadixCache.tier_capabilities.write_policies)
def test_reference_passes_every_interleaving_tried(policy: str, page_size: int) -> None:
    run_machine(tier_machine_for(TieredRadixCache, page_size, policy), GATE)


@pytest.mark.deep  # the false-alarm streams of TIER_CATALOGUE.md are the evidence; this is mutation testing's selection
@pytest.mark.parametrize("page_size", (1, 2))
@pytest.mark.parametrize("policy", ("write_through", "write_back"))
@pytest.mark.parametrize("reference", (TieredStateCache, TieredWindowCache), ids=lambda cls: cls.__name__)
def test_composed_references_pass_every_interleaving_tried(reference: type, policy: str, page_size: int) -> None:
    """The references with a second pool on the tiers (namespaces, the tree lifecycle, a state or a
    window per node) pass the same machine, every layer driven at once."""
    run_machine(tier_machine_for(reference, page_size, policy), GATE)


def test_host_pool_refuses_a_double_free_and_remembers_it() -> None:
    pool = HostPool(4)
    ids = pool.alloc(2)
    pool.free(ids)
    with pytest.raises(HostSlotViolation, match="double free"):
        pool.free(ids)
    assert pool.violations and pool.available() == 4
    assert pool.alloc(5) is None


def test_capabilities_refuse_an_unknown_policy() -> None:
    with pytest.raises(ValueError, match="write_policies"):
        TierCapabilities(write_policies=("write_sometimes",))


@pytest.mark.parametrize("reference", (TieredRadixCache, TieredStateCache, TieredWindowCache), ids=lambda cls: cls.__name__)
def test_an_unknown_completion_is_refused(reference: type) -> None:
    world = TierWorld(reference, 1, "write_through")
    world.serve([1, 2])
    world.finish()
    transfer = world.controller.pending[0]
    world.complete(transfer.number)
    with pytest.raises(ValueError, match="already completed"):
        world.cache.transfer_done(transfer)


def test_completions_in_reverse_order_keep_every_page_where_it_belongs() -> None:
    """Write-through backs a prompt up page by page; the suite acks the writes last-first, then
    pushes the prompt to host and loads it back: the request reads its own KV."""
    world = TierWorld(TieredRadixCache, 1, "write_through")
    world.serve([1, 2, 0, 1])
    world.finish()
    for number in reversed(world.pending()):
        world.complete(number)
    world.evict(100)
    request = world.serve([1, 2, 0, 1, 2])
    assert len(request.values) == 4 and world.pending()  # loaded back, loads still pending
    world.finish()
    world.check()
    assert np.array_equal(world.cache.match_prefix([1, 2, 0, 1, 2]).device_values[:4], request.values)
