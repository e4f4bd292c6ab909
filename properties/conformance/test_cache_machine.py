"""The conformance state machine, run against the target at each page size it declares (up to 64)."""

from __future__ import annotations

from radixcheck.properties.cache_machine import machine_for
from radixcheck.properties.verdict import run_machine


def test_cache_state_machine(target, page_size: int) -> None:
    run_machine(machine_for(target.factory, target.capabilities, page_size, target.name))
