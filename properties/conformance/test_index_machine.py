"""The conformance tests of KV-event indexes (a router's view of the workers' caches): the index
machine (several workers' engines publishing vLLM's events) and the long churn, run against an
index target (``radixcheck audit mymodule:make_index``; the target's ``capabilities`` is an
``IndexCapabilities``). Findings waived by ``--radix-waive`` are recorded and looked past."""

from __future__ import annotations

import pytest

from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.index.machine import index_machine_for

pytestmark = pytest.mark.radix_index


def test_index_state_machine(target, radix_waivers, radix_repro: bool) -> None:
    run_machine(index_machine_for(target.factory, target.capabilities, target.name), waived=radix_waivers or None,
                transcript=radix_repro)


def test_index_under_churn(target, radix_waivers, radix_repro: bool) -> None:
    """Thousands of distinct prompts stored and evicted: memory bounded throughout, nothing left."""
    run_machine(index_machine_for(target.factory, target.capabilities, target.name, churn=True), waived=radix_waivers or None,
                transcript=radix_repro)
