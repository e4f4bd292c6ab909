"""The tier oracles can fail: every catalogued tier mutant dies within the gate's budget, by the
oracle its bug class predicts; a broken cache fails conservation (per tier) and the in-flight
rule for the right reason; a repro file re-creates the smallest interleaving and exits 1."""

from __future__ import annotations

import re

import numpy as np
import pytest

from radixcheck import profiles
from radixcheck.oracles.violations import HostSlotViolation, SlotViolation, TransferInFlightViolation
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.properties.tiers.mutants import TIER_MUTANTS, NestedHostEvictionFreesLoading, machines_for_mutant
from radixcheck.properties.tiers.repro import tier_repro
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode


def _first_failure(mutant: type) -> BaseException | None:
    """The first failure in the mutant's streams: its own, then (a rare bug, ``streams_to_catch``)
    the catalogue's next ones, each derandomized under its name, so the test stays deterministic."""
    names = [None] + [f"stream{k}_{mutant.__name__}" for k in range(getattr(mutant, "streams_to_catch", 1) - 1)]
    machines = [machine for name in names for machine in machines_for_mutant(mutant, name)]
    for machine in machines:
        try:
            run_machine(machine, profiles.SETTINGS["mutation"])
        except Exception as exc:  # noqa: BLE001 - the type is what the test checks
            return exc
    return None


@pytest.mark.sampled  # a catalogue that grows with each contract (conftest.FAST_SAMPLE)
@pytest.mark.parametrize("mutant", TIER_MUTANTS, ids=lambda m: m.__name__)
def test_tier_mutant_is_caught_by_its_oracle(mutant: type) -> None:
    failure = _first_failure(mutant)
    assert failure is not None, f"{mutant.__name__} survived the gate's budget"
    assert isinstance(failure, mutant.caught_by), f"{mutant.__name__} caught by the wrong oracle: {failure!r}"


class QuarantineFreesPendingWrite(TieredRadixCache):
    """Frees a quarantined page's host slots while its write is pending."""

    def _release_removed(self, node: TierNode) -> None:
        if node.writing is not None:
            self.host_pool.free(node.writing.host_slots)
            node.writing = None
        super()._release_removed(node)


class QuarantineLeaksHost(TieredRadixCache):
    """Forgets the host copies of what it quarantines."""

    def _release_removed(self, node: TierNode) -> None:
        node.host = None
        super()._release_removed(node)


class DropLeaksDevice(TieredRadixCache):
    """Unlinks a page it drops without freeing its device slots."""

    def _drop(self, node: TierNode) -> int:
        self._unlink(node)  # out of the tree (and so of its kept sizes), its device slots never freed
        return 0


def _backed_up(factory: type, policy: str = "write_through") -> TierWorld:
    world = TierWorld(factory, 1, policy)
    world.serve([1, 2, 0])
    world.finish()
    return world


def test_a_host_slot_freed_under_a_pending_write_is_caught() -> None:
    world = _backed_up(QuarantineFreesPendingWrite)
    assert world.pending()
    with pytest.raises(TransferInFlightViolation, match="pending"):
        world.quarantine([1])


def test_a_host_leak_fails_host_conservation() -> None:
    world = _backed_up(QuarantineLeaksHost)
    world.complete_all()
    world.quarantine([1])
    with pytest.raises(HostSlotViolation, match="leaked"):
        world.check()


def test_a_device_leak_fails_device_conservation() -> None:
    world = TierWorld(DropLeaksDevice, 1, "write_through")
    world.fail_next([True, True])  # the backup (and its retry) fail: the page is device-only
    world.serve([1])
    world.finish()
    with pytest.raises(SlotViolation, match="leaked"):  # named by the eviction's amount check, before its echo
        world.evict(1)
        world.check()


def test_the_correct_cache_passes_the_same_stories() -> None:
    world = _backed_up(TieredRadixCache)
    world.quarantine([1])
    world.complete_all()
    world.fail_next([True, True])
    world.serve([2])
    world.finish()
    world.evict(10)
    world.check()
    assert world.cache.device_size() == 0 and np.array_equal(world.cache.match_prefix([1]).device_values, [])


@pytest.mark.deep  # runs a repro file
def test_repro_file_replays_the_shrunk_interleaving_and_exits_1(monkeypatch) -> None:
    monkeypatch.setenv(SHRINK_ENV, "3")
    mutant = NestedHostEvictionFreesLoading
    with pytest.raises(TransferInFlightViolation) as caught:
        run_machine(machines_for_mutant(mutant)[0], profiles.SETTINGS["audit"])
    machine = caught.value.radixcheck_machine
    repro = tier_repro(machine.world, caught.value, f"{mutant.__module__}:{mutant.__name__}", type(machine).factory)
    assert repro.exit_code == 1, repro.why_not
    assert repro.calls <= sum(not line.startswith("#") for line in machine.world.log)  # reduced (or as small already)
    assert "w.complete(" in repro.text and re.search(r"#   controller: .*load", repro.text), repro.text
    assert "BUG (radixcheck oracle 14 transfers in flight)" in repro.output
