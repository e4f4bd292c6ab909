"""The conformance state machines, run against the target at each page size it declares (up to 64):
the ordinary one (many small worlds) and the production-scale one (a few worlds of 10^4 nodes; with
both pools for a target that declares a second one).
Findings waived by ``--radix-waive`` are recorded and looked past (``radix_waivers``). The plugin
dispatches the ordinary machine first and the scale one last (``radixcheck.pytest_plugin.DISPATCH_ORDER``);
``radixcheck audit --no-production`` leaves the scale one out."""

from __future__ import annotations

import pytest

from radixcheck.profiles import current
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.scale_machine import runs_world_at, scale_machine_for
from radixcheck.properties.findings.verdict import run_machine


def test_cache_at_production_scale(target, page_size: int, radix_waivers, radix_repro: bool) -> None:
    """A target with a second pool gets the hybrid world (``radixcheck.properties.cache.hybrid_scale``)."""
    if not runs_world_at(page_size, target.capabilities.page_sizes_tested(), current()):
        pytest.skip("the profile buys one production world, built at the smallest page size (radixcheck.profiles)")
    run_machine(scale_machine_for(target.factory, target.capabilities, page_size, target.name), waived=radix_waivers or None,
                transcript=radix_repro)


def test_cache_state_machine(target, page_size: int, radix_waivers, radix_repro: bool) -> None:
    run_machine(machine_for(target.factory, target.capabilities, page_size, target.name), waived=radix_waivers or None,
                transcript=radix_repro)
