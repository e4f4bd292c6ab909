"""The report card's "Layers driven together" (:mod:`radixcheck.layer_card`) says which declared layers the
machines met in one step (:mod:`radixcheck.properties.layer_tally`), and plainly which pair they never met.

The gap it exists for (reports/findings/layers_trial.md, gap 1): the tier lifecycle's running requests
never carried a tenant's namespace, and the card said nothing. Undoing that fix for a test (the rule's
namespace draw answers the default) must make the card say "never driven together: tenants × running
requests"; the same run without the undo drives the pair.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from radixcheck.audit import AuditResult, Verdict, report_card, write_outputs
from radixcheck.layer_card import gaps_line, layers_driven
from radixcheck.properties.cache.layers import UNSAID
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.layer_tally import TALLY, declared_layers
from radixcheck.properties.tiers.lifecycle import TierLifecycleRules
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.reference.tier_requests import RequestTiers

DECLARED = ["tenants", "running requests", "host tier"]  # RequestTiers: namespaces, lifecycle="requests", a host tier
SMALL = settings(max_examples=5, stateful_step_count=20, derandomize=True, database=None, deadline=None,
                 suppress_health_check=list(HealthCheck))


def _small_run(name: str) -> dict[str, int]:
    """The tier machine on RequestTiers, a few derandomized examples in each write policy: its tally."""
    TALLY.reset()
    for policy in RequestTiers.tier_capabilities.write_policies:
        run_machine(tier_machine_for(RequestTiers, 1, policy, name=name), SMALL)
    return TALLY.as_dict()


def _result(tally: dict[str, Any], failed: bool = False) -> AuditResult:
    return AuditResult(target="radixcheck.reference.tier_requests:RequestTiers", capabilities="TierCapabilities(...)",
                       not_exercised=[], profile="gate", seconds=1.0, pytest_exit=1 if failed else 0,
                       verdicts=[Verdict("test_tier_state_machine[page_size=1]", "failed" if failed else "passed", 1.0,
                                         "2 refcount safety" if failed else "", layers=tally)],
                       layers_declared=declared_layers(RequestTiers.tier_capabilities, tier=True))


def test_the_declared_layers_are_read_from_the_capabilities() -> None:
    from radixcheck.properties.cache import policies
    from radixcheck.properties.cache.contract import Capabilities, StatePool

    assert declared_layers(RequestTiers.tier_capabilities, tier=True) == DECLARED
    assert declared_layers(Capabilities()) == []  # LRU is the base contract's order: no layer
    assert declared_layers(Capabilities(eviction_policy=policies.lru(), namespaces=True)) == ["tenants"]
    assert declared_layers(Capabilities(eviction_policy=policies.fifo(), second_pool=StatePool(), lifecycle="tree")) == [
        "policy", "running requests", "second pool"]


def test_the_card_says_which_layers_a_small_run_drove_together(tmp_path: Path) -> None:
    tally = _small_run("layercard_small")
    steps = layers_driven(DECLARED, [Verdict("t", "passed", 0.0, layers=tally)]).total
    assert steps["tenants × running requests"] > 0 and steps["every declared layer at once"] > 0  # this stream meets all
    card = report_card(_result(tally))
    assert "Layers driven together (state-machine steps that touched each declared layer" in card
    for row in ("tenants", "running requests", "host tier", "tenants × running requests", "tenants × host tier",
                "running requests × host tier", "every declared layer at once"):
        line = next(line for line in card.splitlines() if line.startswith(f"| {row} "))
        assert [cell.strip() for cell in line.strip("|").split("|")] == [row, str(steps[row])]
    assert "Every declared pair was driven together in at least one step." in card
    assert "never driven" not in card
    write_outputs(_result(tally), None, tmp_path / "a.json")
    said = json.loads((tmp_path / "a.json").read_text())["layers_driven"]
    assert said["declared"] == DECLARED and said["never_driven_together"] == [] and not said["never_all_at_once"]
    assert said["steps"] == {row: steps[row] for row in said["steps"]} and said["sets"] == tally
    assert said["by_contract"]["test_tier_state_machine"] == said["steps"]


def test_the_card_names_each_declared_pair_and_layer_never_driven() -> None:
    tally = {"tenants + host tier": 4, "running requests": 2}  # a run that never met tenants with requests, nor the tier with them
    card = report_card(_result(tally, failed=True))
    assert ("**Declared, never driven together: tenants × running requests; running requests × host tier; never all 3 "
            "declared layers in one step.** A failing test stops its machine at its first failure") in card
    assert gaps_line(layers_driven(DECLARED, [])) == (
        "Declared, never driven: tenants, running requests, host tier; declared, never driven together: tenants × running "
        "requests; tenants × host tier; running requests × host tier; never all 3 declared layers in one step.")
    no_layers = AuditResult(target="x:y", capabilities="Capabilities()", not_exercised=[], profile="gate")
    assert "Layers driven together" not in report_card(no_layers)  # a target that declares none: no section


def test_a_pair_the_machine_cannot_reach_is_reported_as_never_driven(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fix 1 of the layers trial undone (every running request in the default namespace): the pair
    is never met, and the card says so; the tenants and the requests are each still driven."""
    monkeypatch.setattr(TierLifecycleRules, "_request_namespace", lambda self, data: UNSAID)
    tally = _small_run("layercard_small")  # the same stream as the test above, which meets the pair
    card = report_card(_result(tally))
    assert "**Declared, never driven together: tenants × running requests; never all 3 declared layers in one step.**" in card
    steps = layers_driven(DECLARED, [Verdict("t", "passed", 0.0, layers=tally)]).total
    assert steps["tenants"] > 0 and steps["running requests"] > 0 and steps["tenants × host tier"] > 0


def test_the_aborts_a_quarantine_forces_do_not_count_as_the_requests_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tenant's ``quarantine`` aborts every running request first: counted, that step would credit
    "tenants × running requests" though no request ran under a tenant (it hid the trial's gap)."""
    from radixcheck.properties.tiers.requests import RequestsTierWorld

    world = RequestsTierWorld(RequestTiers, 1, "write_through")
    world.admit([0, 1, 2, 0])
    TALLY.reset()
    TALLY.begin_step()
    world.quarantine([0, 1], namespace="tenant")
    TALLY.end_step()
    assert TALLY.as_dict() == {"tenants": 1}


SESSION = """
import json, pytest
from radixcheck.audit import CONFORMANCE, SESSION_ARGS, _Collector
collector = _Collector(0.0)
pytest.main(["--pyargs", CONFORMANCE, "--radix-target", "radixcheck.reference.tier_requests:RequestTiers", "-k",
             "test_tier_state_machine", "--hypothesis-profile=gate", *SESSION_ARGS, "-n", "2"], plugins=[collector])
print("LAYERS " + json.dumps({v.test: v.layers for v in collector.verdicts}))
"""


@pytest.mark.deep
def test_each_workers_tally_reaches_the_audit(tmp_path: Path) -> None:
    """Under pytest-xdist each test's tally is made in a worker: it reaches the audit's collector on
    the test's report (``radixcheck_layers``), one per test, and the section sums them."""
    import os
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", SESSION], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "RADIXCHECK_SHRINK_SECONDS": "0"})
    line = next((line for line in run.stdout.splitlines() if line.startswith("LAYERS ")), None)
    assert line is not None, run.stdout[-2000:] + run.stderr[-2000:]
    tallies = json.loads(line.removeprefix("LAYERS "))
    assert sorted(tallies) == ["test_tier_state_machine[page_size=1]", "test_tier_state_machine[page_size=2]"]
    assert all(tallies.values())
    driven = layers_driven(DECLARED, [Verdict(test, "passed", 0.0, layers=t) for test, t in tallies.items()])
    assert gaps_line(driven) == ""
    assert driven.total["tenants × running requests"] == sum(
        steps for name, steps in driven.sets.items() if {"tenants", "running requests"} <= set(name.split(" + ")))


def test_an_eviction_while_requests_hold_locks_drives_the_policy_with_them() -> None:
    """Under a policy that takes no priorities (LFU) only evictions drive the policy, and no request step
    evicts: an eviction made while running requests hold locks is where the two meet (the requests'
    locks bound what it may take). Counted so, a correct LFU cache with the lifecycle is not told in bold
    that policy × running requests were never driven (the wire trial's card said so)."""
    from radixcheck.properties.cache import policies
    from radixcheck.properties.cache.contract import Capabilities
    from radixcheck.properties.cache.machine import machine_for
    from radixcheck.reference import RadixCache

    lfu = RadixCache.with_policy(policies.lfu())
    caps = Capabilities(eviction_policy=policies.lfu(), lifecycle="tree", checks_locks=False, validates_input=False)
    machine = machine_for(lfu, caps, 1, "layercard_lfu_requests")()
    TALLY.reset()
    for running in (False, True):
        if running:
            machine._admit_request((7, 8, 9), False, True)
        TALLY.begin_step()
        machine._call("evict", 1)
        TALLY.end_step()
    assert TALLY.as_dict() == {"policy": 1, "policy + running requests": 1}
