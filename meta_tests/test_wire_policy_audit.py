"""A non-LRU policy over a wire tier, through the tier machine (deep: each runs the machine through a server).

SGLang's priority policy travels as ``{"named": "priority"}`` (WIRE.md, "Eviction policies") and every
``match_prefix`` and ``insert`` carries the request's ``"priority"``: the correct priority tier served by
the Python wire server passes the tier machine silently, its order judged as in process; a planted
composed bug (an insert reviving a host-only page keeps the page's old priority) served the same way is
found by the order oracle that finds it in process, and its repro file (run as a user would, with
``RADIXCHECK_WIRE_CMD``) exits 1 on the bug's server and 0 on the fixed one."""

from __future__ import annotations

from pathlib import Path

import pytest

from meta_tests.wire_serving import SPEC, repro_exit_codes, serving
from radixcheck import profiles
from radixcheck.oracles.violations import EvictionOrderViolation, HostEvictionOrderViolation
from radixcheck.properties.adapters import wire
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.repro import tier_repro

pytestmark = pytest.mark.deep

FIXED = "radixcheck.properties.tiers.mutants:TieredPriority"
BUG = "radixcheck.properties.tiers.mutants:RevivedPageKeepsOldPriority"


def test_a_priority_tier_over_the_wire_passes_the_tier_machine_silently(monkeypatch) -> None:
    serving(monkeypatch, FIXED)
    try:
        policy = wire.server.tier_capabilities.eviction_policy
        assert policy is not None and policy.name == "priority" and policy.takes_priority
        machine = tier_machine_for(wire.server, 2, "write_back", name="WireTieredPriority_write_back_p2")
        run_machine(machine, profiles.SETTINGS["ci"])
    finally:
        wire.server.close()


def test_a_priority_mutant_over_the_wire_is_found_by_its_order_oracle_and_its_repro_exits_1_then_0(
        monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SHRINK_ENV, "0")
    bug = serving(monkeypatch, BUG)
    try:
        machine = tier_machine_for(wire.server, 1, "write_through", name="WireRevivedPageKeepsOldPriority")
        with pytest.raises((EvictionOrderViolation, HostEvictionOrderViolation)) as caught:
            run_machine(machine, profiles.SETTINGS["mutation"])
        assert "under priority it goes first" in str(caught.value) or "host tier evicts by" in str(caught.value)
        world = caught.value.radixcheck_machine.world
        repro = tier_repro(world, caught.value, SPEC, wire.server)
        assert repro.exit_code == 1, repro.why_not
        assert "next_priority" in repro.text  # the priorities travel in the file too
    finally:
        wire.server.close()
    fixed = serving(monkeypatch, FIXED, {"namespaces": False})  # as the mutant declares
    assert repro_exit_codes(repro.text, tmp_path, bug, fixed) == [1, 0]
