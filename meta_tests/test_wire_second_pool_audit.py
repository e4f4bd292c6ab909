"""A host tier's second pool over the wire, through the tier machine (deep: each runs a machine through a server).

The tiered state cache served by the Python wire server (``"second_pool": {"kind": "state"}``, WIRE.md,
"A second pool on a host tier") passes the same tier machine as in process, silently, its states read
back with ``states``; a planted composed bug (a load's completion restores the parent's state) served
the same way is found by the second pool's oracle (20), and its repro file exits 1 on the bug's server
and 0 on the fixed one."""

from __future__ import annotations

from pathlib import Path

import pytest

from meta_tests.wire_serving import SPEC, repro_exit_codes, serving
from radixcheck import profiles
from radixcheck.oracles.violations import SecondValueViolation
from radixcheck.properties.adapters import wire
from radixcheck.properties.cache.contract import StatePool
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.repro import tier_repro

pytestmark = pytest.mark.deep

FIXED = "radixcheck.reference.tiered_state_cache:TieredStateCache"
BUG = "radixcheck.properties.tiers.state_mutants:LoadBackRestoresParentState"


def test_a_state_tier_over_the_wire_passes_the_tier_machine_silently(monkeypatch) -> None:
    serving(monkeypatch, FIXED)
    try:
        assert wire.server.tier_capabilities.second_pool == StatePool()
        run_machine(tier_machine_for(wire.server, 2, "write_back", name="WireTieredState_write_back_p2"), profiles.SETTINGS["ci"])
    finally:
        wire.server.close()


def test_a_state_mutant_over_the_wire_is_found_by_oracle_20_and_its_repro_exits_1_then_0(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SHRINK_ENV, "0")
    bug = serving(monkeypatch, BUG)
    try:
        machine = tier_machine_for(wire.server, 1, "write_through", name="WireLoadBackRestoresParentState")
        with pytest.raises(SecondValueViolation) as caught:
            run_machine(machine, profiles.SETTINGS["mutation"])
        repro = tier_repro(caught.value.radixcheck_machine.world, caught.value, SPEC, wire.server)
        assert repro.exit_code == 1, repro.why_not
    finally:
        wire.server.close()
    fixed = serving(monkeypatch, FIXED, {"namespaces": False, "supports_reset": False})  # as the mutant
    assert repro_exit_codes(repro.text, tmp_path, bug, fixed) == [1, 0]
