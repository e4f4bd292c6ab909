"""Running requests over the wire, through the state machines (deep: each runs a machine through a server).

A cache that runs requests itself, served by the Python wire server declaring ``lifecycle: "requests"``
(WIRE.md, "Running requests"), passes the same machine as in process, silently: the plain reference and
the tiered one. A planted mutant of the request methods served the same way is found by the oracle that
finds it in process, and a tier one's repro file (run as a user would, with ``RADIXCHECK_WIRE_CMD``) exits
1 on the bug's server and 0 on the fixed one. The same plain mutant declared ``"tree"`` (the Python
server's default) passes: its request methods are then never called, which is why the protocol carries them."""

from __future__ import annotations

from pathlib import Path

import pytest

from meta_tests.wire_serving import SPEC, repro_exit_codes, serving
from radixcheck import profiles
from radixcheck.oracles.violations import SlotViolation
from radixcheck.properties.adapters import wire
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.repro import tier_repro

pytestmark = pytest.mark.deep

REQUESTS = {"lifecycle": "requests"}


def test_the_reference_running_requests_over_the_wire_passes_the_machine_silently(monkeypatch) -> None:
    serving(monkeypatch, "radixcheck.reference:RadixCache", REQUESTS)
    try:
        caps = wire.server.capabilities
        assert caps.lifecycle == "requests" and caps.namespaces
        run_machine(machine_for(wire.server, caps, 4, "WireRequests_p4"), profiles.SETTINGS["ci"])
    finally:
        wire.server.close()


def test_the_tiered_reference_running_requests_over_the_wire_passes_the_tier_machine_silently(monkeypatch) -> None:
    serving(monkeypatch, "radixcheck.reference.tier_requests:RequestTiers", REQUESTS)
    try:
        assert wire.server.tier_capabilities.lifecycle == "requests"
        machine = tier_machine_for(wire.server, 2, "write_back", name="WireRequestTiers_write_back_p2")
        run_machine(machine, profiles.SETTINGS["ci"])
    finally:
        wire.server.close()


@pytest.mark.parametrize("declared, caught", [(REQUESTS, True), (None, False)], ids=["requests", "tree"])
def test_a_request_mutant_over_the_wire_is_found_only_when_its_methods_are_driven(monkeypatch, declared, caught) -> None:
    monkeypatch.setenv(SHRINK_ENV, "0")
    serving(monkeypatch, "radixcheck.properties.cache.mutants:RetractFreesPublished", declared)
    try:
        machine = machine_for(wire.server, wire.server.capabilities, 1, "WireRetractFreesPublished")
        if caught:
            with pytest.raises(SlotViolation):
                run_machine(machine, profiles.SETTINGS["mutation"])
        else:
            run_machine(machine, profiles.SETTINGS["mutation"])
    finally:
        wire.server.close()


def test_a_tier_request_mutant_over_the_wire_is_found_by_its_oracle_and_its_repro_exits_1_then_0(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SHRINK_ENV, "0")
    bug = serving(monkeypatch, "radixcheck.properties.tiers.request_mutants:PublishReadsFreedDuplicates", REQUESTS)
    try:
        machine = tier_machine_for(wire.server, 1, "write_through", name="WirePublishReadsFreedDuplicates")
        with pytest.raises(SlotViolation) as caught:
            run_machine(machine, profiles.SETTINGS["mutation"])
        world = caught.value.radixcheck_machine.world
        repro = tier_repro(world, caught.value, SPEC, wire.server)
        assert repro.exit_code == 1, repro.why_not
        assert "cache_unfinished_req" in repro.text
    finally:
        wire.server.close()
    # the fixed cache, declaring what the mutant declares (no namespaces, no reset)
    fixed = serving(monkeypatch, "radixcheck.reference.tier_requests:RequestTiers",
                     {**REQUESTS, "namespaces": False, "supports_reset": False})
    assert repro_exit_codes(repro.text, tmp_path, bug, fixed) == [1, 0]
