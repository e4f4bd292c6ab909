"""The conformance test of tiered caches (a host tier: ``radixcheck.properties.tiers.contract``),
run against a tier target (``radixcheck audit mymodule:make``; the factory's ``tier_capabilities``
is a ``TierCapabilities``): the tier machine, whose scheduler delivers the controller's
completions in any order, at each page size, in each write policy the target declares."""

from __future__ import annotations

import pytest

from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.machine import tier_machine_for

pytestmark = pytest.mark.radix_tier


def test_tier_state_machine(target, page_size, radix_waivers) -> None:
    """Every write policy in turn; the first failure is the test's (its note names the policy)."""
    for policy in target.capabilities.write_policies:
        machine = tier_machine_for(target.factory, page_size, policy, name=f"{target.name}_{policy}_p{page_size}")
        try:
            run_machine(machine, waived=radix_waivers or None)
        except Exception as exc:
            exc.add_note(f"radixcheck: write policy {policy}, page size {page_size}")
            raise
