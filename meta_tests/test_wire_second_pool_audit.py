"""A host tier's second pool over the wire, through the tier machine (deep: each runs a machine through a server).

The tiered state cache served by the Python wire server (``"second_pool": {"kind": "state"}``, WIRE.md,
"A second pool on a host tier") passes the same tier machine as in process, silently, its states read
back with ``states``; a planted composed bug (a load's completion restores the parent's state) served
the same way is found by the second pool's oracle (20), and its repro file exits 1 on the bug's server
and 0 on the fixed one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from radixcheck import profiles
from radixcheck.oracles.violations import SecondValueViolation
from radixcheck.properties.adapters import wire
from radixcheck.properties.adapters.wire import CMD_ENV, reference_command
from radixcheck.properties.cache.contract import StatePool
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.repro import tier_repro

pytestmark = pytest.mark.deep

SPEC = "radixcheck.properties.adapters.wire:server"
FIXED = "radixcheck.reference.tiered_state_cache:TieredStateCache"
BUG = "radixcheck.properties.tiers.state_mutants:LoadBackRestoresParentState"


def _serving(monkeypatch: pytest.MonkeyPatch, cache: str, *extra: str) -> str:
    command = " ".join([*reference_command(), "--cache", cache, *extra])
    monkeypatch.setenv(CMD_ENV, command)
    wire.server.close()  # the next factory call starts this command's server
    return command


def test_a_state_tier_over_the_wire_passes_the_tier_machine_silently(monkeypatch) -> None:
    _serving(monkeypatch, FIXED)
    try:
        assert wire.server.tier_capabilities.second_pool == StatePool()
        run_machine(tier_machine_for(wire.server, 2, "write_back", name="WireTieredState_write_back_p2"), profiles.SETTINGS["ci"])
    finally:
        wire.server.close()


def test_a_state_mutant_over_the_wire_is_found_by_oracle_20_and_its_repro_exits_1_then_0(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SHRINK_ENV, "0")
    bug = _serving(monkeypatch, BUG)
    try:
        machine = tier_machine_for(wire.server, 1, "write_through", name="WireLoadBackRestoresParentState")
        with pytest.raises(SecondValueViolation) as caught:
            run_machine(machine, profiles.SETTINGS["mutation"])
        repro = tier_repro(caught.value.radixcheck_machine.world, caught.value, SPEC, wire.server)
        assert repro.exit_code == 1, repro.why_not
    finally:
        wire.server.close()
    path = tmp_path / "repro.py"
    path.write_text(repro.text, encoding="utf-8")
    fixed = _serving(monkeypatch, FIXED, "--capabilities", "'{\"namespaces\": false, \"supports_reset\": false}'")  # as the mutant
    codes = [subprocess.run([sys.executable, str(path)], env={**os.environ, CMD_ENV: command}, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300).returncode for command in (bug, fixed)]
    assert codes == [1, 0]
