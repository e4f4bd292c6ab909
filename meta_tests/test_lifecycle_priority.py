"""A running request carries its priority (contract: "The request lifecycle" with "Eviction policies"):
for a target whose declared policy takes priorities, the plain lifecycle's requests carry the priority
the machine draws (``Request.priority``, SGLang's ``req.priority``), their publishes and finishes cache
their pages at it, and the model gives those pages that priority, as the tier requests' already do.
Never sent otherwise. A priority cache whose request methods insert at priority 0 is caught by the order
oracle in every pinned stream; the correct priority caches pass; the layer card sees policy × running
requests driven (it said "never all 3 declared layers in one step" for ``RadixCache.with_policy(priority())``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.audit import Verdict
from radixcheck.layer_card import layers_driven
from radixcheck.oracles.violations import EvictionOrderViolation
from radixcheck.properties.cache import policies
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import RequestInsertDropsPriority, machine_for_mutant
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.properties.layer_tally import POLICY, RUNNING, TALLY, declared_layers
from radixcheck.reference import RadixCache
from radixcheck.reference.hybrid_requests import StateRequestsCache, WindowRequestsCache

PRIORITY_REQUESTS = RadixCache.with_policy(policies.priority())  # namespaces, lifecycle="requests", the priority policy
SEEDS = range(5)  # as `radixcheck audit --seed 0..4`: derandomized streams, each named by its seed


def _drive(factory: type, lifecycle: str | None = None, priority: int = 2) -> tuple[Any, Any]:
    """One request's life (admitted at ``priority``, one page computed, published, finished), driven
    step by step on ``factory``'s lifecycle machine: the machine, and the request's record."""
    caps = factory.capabilities if lifecycle is None else type(factory.capabilities)(
        **{**factory.capabilities.__dict__, "lifecycle": lifecycle})
    machine = machine_for(factory, caps, 1, f"priority_drive_{factory.__name__}")()
    machine.request_priority = priority  # what next_requests_priority sets
    TALLY.reset()
    TALLY.begin_step()
    record = machine._admit_request((7, 8, 9), False, True)
    machine.request_priority = 0  # the requests admitted since carry another: this one keeps its own
    machine._compute(record, 3, 0)
    machine._publish(record)
    machine._end(record, "finish")
    TALLY.end_step()
    return machine, record


@pytest.mark.parametrize("lifecycle", ["requests", "tree"])
def test_a_running_request_caches_its_pages_at_its_own_priority(lifecycle: str) -> None:
    """Under a policy that takes priorities the request keeps the priority it was admitted with: the
    cache's nodes and the model's leaves take it, and the step drives policy × running requests."""
    machine, record = _drive(PRIORITY_REQUESTS, lifecycle)
    assert record.priority == 2 and record.request.priority == 2
    _, node = machine.cache.match_prefix([7, 8, 9])
    assert node.priority == 2  # the reference's own record of what the request's inserts carried
    assert [machine.model.leaf_stats(leaf).priority for leaf in machine.model.unlocked_leaf_list()] == [2]
    assert TALLY.as_dict() == {"policy + running requests": 1}
    assert POLICY in declared_layers(PRIORITY_REQUESTS.capabilities) and RUNNING in declared_layers(PRIORITY_REQUESTS.capabilities)


@pytest.mark.parametrize("factory", [RadixCache, RadixCache.with_policy(policies.lfu())], ids=["lru", "lfu"])
def test_no_priority_reaches_a_request_unless_the_policy_takes_one(factory: type) -> None:
    machine, record = _drive(factory)
    assert record.priority == 0 and record.request.priority == 0
    assert TALLY.as_dict() == {"running requests": 1}


def _seeded(monkeypatch: pytest.MonkeyPatch) -> settings:
    monkeypatch.setenv(SHRINK_ENV, "0")  # a finding's class, not its shrunk program, is what is judged
    return settings(profiles.SETTINGS["audit"], derandomize=True, database=None)


@pytest.mark.deep  # five audit-sized streams: tens of seconds of CPU
def test_a_request_path_that_drops_the_priority_is_caught_in_every_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    search, outcomes = _seeded(monkeypatch), []
    for seed in SEEDS:
        try:
            run_machine(machine_for_mutant(RequestInsertDropsPriority, f"mutant_RequestInsertDropsPriority_seed{seed}"), search)
            outcomes.append("pass")
        except Exception as exc:  # noqa: BLE001 - any finding counts; its class is what is judged
            outcomes.append(type(exc).__name__)
    assert outcomes == [EvictionOrderViolation.__name__] * len(SEEDS), outcomes


@pytest.mark.deep  # the false-alarm side, and the card: five audit-sized streams per cache
@pytest.mark.parametrize("factory", [PRIORITY_REQUESTS, StateRequestsCache.with_policy(policies.priority()),
                                     WindowRequestsCache.with_policy(policies.priority())], ids=lambda f: f.__name__)
def test_correct_priority_request_caches_pass_and_drive_policy_with_requests(factory: type,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    search = _seeded(monkeypatch)
    TALLY.reset()
    for seed in SEEDS:
        run_machine(machine_for(factory, factory.capabilities, 1, f"priority_requests_{factory.__name__}_seed{seed}"), search)
    declared = declared_layers(factory.capabilities)
    steps = layers_driven(declared, [Verdict("t", "passed", 0.0, layers=TALLY.as_dict())]).total
    assert steps["policy × running requests"] > 0, steps
    assert steps["every declared layer at once"] > 0, steps
