"""The conformance tests of tiered caches (a host tier: ``radixcheck.properties.tiers.contract``),
run against a tier target (``radixcheck audit mymodule:make``; the factory's ``tier_capabilities``
is a ``TierCapabilities``): the tier production world (a wide tree, then a conversation > 1000
pages deep: ``radixcheck.properties.tiers.scale``) at the smallest page size, then the tier
machine, whose scheduler delivers the controller's completions in any order, at each page size,
in each write policy the target declares. The plugin dispatches the production world last
(``radixcheck.pytest_plugin.DISPATCH_ORDER``): it took 38-366 s of a new user's audits, and their
small worlds' findings waited for it; ``radixcheck audit --no-production`` leaves it out."""

from __future__ import annotations

import random

import pytest

from radixcheck.properties.findings.failures import WORLD_CUT_SHORT
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.scale import production_stories, world_for

pytestmark = pytest.mark.radix_tier


def test_tier_at_production_scale(target, page_size, radix_waivers) -> None:
    """The wide tree in every declared write policy, the deep conversation in the first (it costs
    turns**2 * page_size tokens sent: once per target, as the plain cache's deep history), at the
    smallest declared page size; each call under the per-operation limit. A failure a waiver covers
    (``WaiverLog.at_scale``: a ``known:`` line's deviation is kept beside the model, and re-judged)
    ends that world and is recorded as waived, with
    what it left unbuilt; the next policy's world is built all the same, and a conversation the
    waived finding kept from being built is built alone in a fresh world. Each world built ends with
    one flush (a checked ``reset``) if the target declares ``supports_reset``, as the plain production
    world does. Any other failure is the test's."""
    if page_size != min(target.capabilities.page_sizes_tested()):
        pytest.skip("the tier production world is built once, at the smallest page size")
    policies = target.capabilities.write_policies

    def build(policy: str, deep: bool, wide: bool = True) -> str | None:
        """Build one world; ``None`` once built, else the story a waived finding ended."""
        world = world_for(target.factory, page_size, policy)
        world.model.deviations = [make() for make in radix_waivers.deviations()] if radix_waivers else []
        try:
            production_stories(world, random.Random(0), deep=deep, wide=wide, flush=target.capabilities.supports_reset)
        except Exception as exc:
            story = getattr(exc, "production_story", None)
            again = "; the conversation is built alone, in a fresh world" if deep and story == "wide" else ""
            exc.add_note(f"{WORLD_CUT_SHORT}the rest of the {policy} world after that call{again}")
            if not radix_waivers or not radix_waivers.at_scale(exc, f"the {policy} production world"):
                raise
            return story or "wide"
        return None

    ended = [build(policy, deep=i == 0) for i, policy in enumerate(policies)]
    if ended[0] == "wide":  # the conversation never ran: its own bugs (a recursive lock walk) must still be met
        build(policies[0], deep=True, wide=False)


def test_tier_state_machine(target, page_size, radix_waivers) -> None:
    """Every write policy in turn; the first failure is the test's (its note names the policy)."""
    for policy in target.capabilities.write_policies:
        machine = tier_machine_for(target.factory, page_size, policy, name=f"{target.name}_{policy}_p{page_size}")
        try:
            run_machine(machine, waived=radix_waivers or None)
        except Exception as exc:
            exc.add_note(f"radixcheck: write policy {policy}, page size {page_size}")
            raise
