"""The tier machine over the wire (deep: each runs the tier machine through a server process).

The tiered reference served by the Python wire server passes the same tier machine as in process,
silently; a planted tier mutant served the same way is found by the oracle that finds it in process,
and its repro file (run as a user would, with ``RADIXCHECK_WIRE_CMD``) exits 1 on the bug's server
and 0 on the fixed one."""

from __future__ import annotations

from pathlib import Path

import pytest

from meta_tests.wire_serving import SPEC, repro_exit_codes, serving
from radixcheck import profiles
from radixcheck.oracles.violations import HostOrphanViolation
from radixcheck.properties.adapters import wire
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.repro import tier_repro

pytestmark = pytest.mark.deep

FIXED = "radixcheck.reference.tiered_cache:TieredRadixCache"
BUG = "radixcheck.properties.tiers.mutants:HostEvictionOrphansSubtree"


def test_the_tiered_reference_over_the_wire_passes_the_tier_machine_silently(monkeypatch) -> None:
    page_size, write_policy = 2, "write_back"  # write-backs, pages and running requests: one world of the audit's
    serving(monkeypatch, FIXED)
    try:
        assert wire.server.tier_capabilities.lifecycle == "tree"  # running requests on the tiers, tenants too
        machine = tier_machine_for(wire.server, page_size, write_policy, name=f"WireTiered_{write_policy}_p{page_size}")
        run_machine(machine, profiles.SETTINGS["ci"])
    finally:
        wire.server.close()


def test_a_tier_mutant_over_the_wire_is_found_by_its_oracle_and_its_repro_exits_1_then_0(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SHRINK_ENV, "0")
    bug = serving(monkeypatch, BUG)
    try:
        machine = tier_machine_for(wire.server, 1, "write_through", name="WireHostEvictionOrphansSubtree")
        with pytest.raises(HostOrphanViolation) as caught:
            run_machine(machine, profiles.SETTINGS["mutation"])
        world = caught.value.radixcheck_machine.world
        repro = tier_repro(world, caught.value, SPEC, wire.server)
        assert repro.exit_code == 1, repro.why_not
        assert "BUG (radixcheck oracle 16 host eviction orphans nothing)" in repro.output
    finally:
        wire.server.close()
    fixed = serving(monkeypatch, FIXED)
    assert repro_exit_codes(repro.text, tmp_path, bug, fixed) == [1, 0]
