"""Composed tier mutants whose bug needs two declared parts to show (issue 39) fail for the right
reason, and are correct with either part alone:

* a retract after a publish that cancels its chunk's pending backups by freeing their host slots
  (``RetractFreesWritingHost``: lifecycle + host tier) fails oracle 14 (a host slot freed under a
  pending write); a finish, or a cache without the lifecycle, never shows it;
* a write-back completion applied to another tenant's copy of the same tokens
  (``WriteBackAckWrongTenant``: namespaces + write-back) fails oracle 14 (that node's device pages
  freed while its own write still reads them); with one tenant it is correct;
* a load-back that forgets the hit count LFU keys on (``LoadBackForgetsHits``: a Policy + host
  tier) fails oracle 4 (eviction order);
* an insert that revives a host-only page keeping its old priority (``RevivedPageKeepsOldPriority``:
  priority + host tier) fails oracle 4 (a low-priority prompt recomputed at a high priority goes
  before a leaf of a priority between the two; the tier machine's ``priority_through_host``).

The stories are a few calls each (fast); the full runs are ``deep``; the kill rates are the tier
catalogue's (``python -m radixcheck.reports.tier_catalogue --only RetractFreesWritingHost --only
WriteBackAckWrongTenant --streams 200``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from radixcheck import profiles
from radixcheck.oracles.violations import EvictionOrderViolation, TransferInFlightViolation
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.lifecycle import LifecycleTierWorld
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import (
    LoadBackForgetsHits,
    RetractFreesWritingHost,
    RevivedPageKeepsOldPriority,
    TieredPriority,
    WriteBackAckWrongTenant,
    machines_for_mutant,
)
from radixcheck.properties.tiers.world import TierWorld


def _published(outcome: str) -> LifecycleTierWorld:
    """A request computes [1, 2] and publishes it (write-through: both backups pending), then ends."""
    world = LifecycleTierWorld(RetractFreesWritingHost, 1, "write_through")
    world.admit([1, 2])
    world.compute(0, 2)
    world.publish(0)
    assert world.pending()
    world.end(0, outcome)
    return world


@pytest.mark.parametrize("outcome", ["retract", "abort"])
def test_a_retract_freeing_the_host_of_a_page_being_written_fails_transfers_in_flight(outcome: str) -> None:
    with pytest.raises(TransferInFlightViolation, match="host slots .* freed while a write to them is pending"):
        _published(outcome)


def test_a_finish_after_a_publish_is_correct_on_the_same_mutant() -> None:
    world = _published("finish")
    world.complete_all()
    world.evict(10)
    world.check()


def _both_tenants_written_back(factory: Any, second: Any) -> TierWorld:
    """Tenants "a" and ``second`` cache [1, 2]; both copies are evicted (their write-backs pending);
    the latest request is ``second``'s; then the write-backs land."""
    world = TierWorld(factory, 1, "write_back")
    for namespace in ("a", second):
        world.serve([1, 2], namespace=namespace)
        world.finish()
    world.evict(100)
    assert len(world.pending()) == (2 if second == "a" else 4)  # [1] and [2] of each tree
    world.match([1, 2], namespace=second)
    world.complete_all()
    return world


def test_a_write_back_completion_on_another_tenants_node_fails_transfers_in_flight() -> None:
    with pytest.raises(TransferInFlightViolation, match="device slots .* freed while a transfer still reads"):
        _both_tenants_written_back(WriteBackAckWrongTenant, "b")


def test_the_same_story_with_one_tenant_is_correct() -> None:
    world = _both_tenants_written_back(WriteBackAckWrongTenant, "a")  # "a" twice: one tree, one copy
    world.evict(100)
    world.check()


def _revived_at_a_higher_priority(factory: Any, policy: str) -> TierWorld:
    """[1, 2] cached at priority 0 goes to host only; a request of priority 2 recomputes it (no
    load-back: the insert revives its pages); [3] is cached at priority 1."""
    world = TierWorld(factory, 1, policy)
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
    return world


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_a_revived_page_that_keeps_its_old_priority_fails_the_policy_order(policy: str) -> None:
    world = _revived_at_a_higher_priority(RevivedPageKeepsOldPriority, policy)
    with pytest.raises(EvictionOrderViolation, match=r"evict\(1\) freed Page\(\[1, 2\].*priority 2.*under priority it goes first"):
        world.evict(1)


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_a_correct_priority_tier_raises_a_revived_pages_priority(policy: str) -> None:
    world = _revived_at_a_higher_priority(TieredPriority, policy)
    world.evict(1)  # [3] (priority 1) goes
    world.complete_all()
    world.check()
    assert world.cache.match_prefix([1, 2]).device_values.tolist() != []


# ---- the tier machine (deep: each is a full run at the gate's budget) -----------------------------

REASONS = {
    RetractFreesWritingHost: "host slots .* freed while a write to them is pending",
    WriteBackAckWrongTenant: "device slots .* freed while a transfer still reads",
    # the forgotten hits misorder whichever tier evicts next: the device's order or the host's
    LoadBackForgetsHits: r"hits, priority .* stayed: (under .* it goes first|the host tier evicts by lfu's key first)",
    RevivedPageKeepsOldPriority: r"hits, priority .* stayed: under priority it goes first",
}


@pytest.mark.deep
@pytest.mark.parametrize("mutant", list(REASONS), ids=lambda m: m.__name__)
def test_composed_mutants_die_by_their_oracle_for_the_right_reason(mutant: Any) -> None:
    for machine in machines_for_mutant(mutant):
        with pytest.raises(mutant.caught_by, match=REASONS[mutant]):
            run_machine(machine, profiles.SETTINGS["mutation"])


def _without(mutant: Any, **part: Any) -> Any:
    """``mutant`` declaring one part fewer (``lifecycle="off"``, ``namespaces=False``, ...)."""
    return type(f"{mutant.__name__}Alone", (mutant,), {"tier_capabilities": replace(mutant.tier_capabilities, **part)})


@pytest.mark.deep
@pytest.mark.parametrize(("mutant", "part"), [(RetractFreesWritingHost, {"lifecycle": "off"}),
                                              (WriteBackAckWrongTenant, {"namespaces": False})],
                         ids=["RetractFreesWritingHost-no-lifecycle", "WriteBackAckWrongTenant-one-tenant"])
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_composed_mutants_are_correct_with_one_part_alone(mutant: Any, part: dict[str, Any], policy: str) -> None:
    alone = _without(mutant, **part)
    run_machine(tier_machine_for(alone, 1, policy, name=f"alone_{mutant.__name__}_{policy}"), profiles.SETTINGS["mutation"])
