"""A running request carries its priority (contract: "The request lifecycle" with "Eviction policies"):
for a target whose declared policy takes priorities, the plain lifecycle's requests carry the priority
the machine draws (``Request.priority``, SGLang's ``req.priority``), their publishes and finishes cache
their pages at it, and the model gives those pages that priority, as the tier requests' already do.
Never sent otherwise. A priority cache whose request methods insert at priority 0 is caught by the order
oracle in every pinned stream; the correct priority caches pass; the layer card sees policy × running
requests driven (it said "never all 3 declared layers in one step" for ``RadixCache.with_policy(priority())``)."""

from __future__ import annotations

import dataclasses
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


# ---- SGLang's prompt split: a request's prompt one priority above its output (declared, not failed) ----


class PromptOneHigher(RadixCache):
    """SGLang 0.5.23's request steps under ``priority``: once a request's publish or finish caches
    pages past its prompt, ``checkpoint`` inserts the prompt's whole pages again at
    ``req.priority + 1`` ("so eviction can drop the output KV without the prompt"). Correct by
    design; declared as ``policies.priority(prompt_bonus=1)``."""

    policy = policies.priority(prompt_bonus=1)
    capabilities = dataclasses.replace(RadixCache.capabilities, eviction_policy=policy)

    def __init__(self, allocator: Any, page_size: int = 1) -> None:
        super().__init__(allocator, page_size)
        self._prompts: dict[int, int] = {}  # id(request) -> its prompt's length (SGLang's origin_input_ids)

    def match_req(self, req: Any) -> None:
        self._prompts[id(req)] = len(req.tokens)  # match_req starts a request: an id may be a freed one's
        super().match_req(req)

    def _insert_req(self, req: Any) -> int:
        aligned = super()._insert_req(req)
        prompt = min(self._prompts[id(req)], req.filled) // self.page_size * self.page_size
        if 0 < prompt < aligned:
            self.insert(req.tokens[:prompt], req.slots[:prompt], namespace=req.namespace, priority=req.priority + 1)
        return aligned

    def cache_finished_req(self, req: Any, insert: bool = True) -> None:
        super().cache_finished_req(req, insert)
        self._prompts.pop(id(req), None)


# The same cache declaring plain priority (the bonus undeclared), and the plain priority cache declaring it.
UNDECLARED = type("PromptOneHigherUndeclared", (PromptOneHigher,), {
    "capabilities": dataclasses.replace(PromptOneHigher.capabilities, eviction_policy=policies.priority())})
OVERDECLARED = type("PriorityClaimingPromptBonus", (PRIORITY_REQUESTS,), {
    "capabilities": dataclasses.replace(PRIORITY_REQUESTS.capabilities, eviction_policy=policies.priority(prompt_bonus=1))})


def test_a_declared_prompt_bonus_gives_the_prompt_one_more_priority() -> None:
    """A request (prompt 7 8 9, admitted at 2) that decodes two tokens and finishes: the cache and the
    model both give the prompt's pages 3 and the decoded ones 2; a request that never passed its prompt
    gives none more."""
    machine = machine_for(PromptOneHigher, PromptOneHigher.capabilities, 1, "prompt_bonus_drive")()
    machine.request_priority = 2
    record = machine._admit_request((7, 8, 9), False, True)
    machine._compute(record, 5, 0)  # the prompt's 3 tokens and 2 decoded
    machine._end(record, "finish")
    _, prompt_node = machine.cache.match_prefix([7, 8, 9])
    assert prompt_node.priority == 3 and prompt_node.children and all(c.priority == 2 for c in prompt_node.children.values())
    stats = [machine.model.leaf_stats(leaf) for leaf in machine.model.unlocked_leaf_list()]
    assert [s.priority for s in stats] == [2]  # the decoded leaf; its parent, the prompt, at 3
    assert machine.model.longest_cached((7, 8, 9), None)[-1].priority == 3
    short = machine._admit_request((4, 5), False, True)
    machine._compute(short, 2, 0)
    machine._end(short, "finish")
    assert machine.model.longest_cached((4, 5), None)[-1].priority == 2


def test_a_prompt_bonus_needs_a_policy_that_takes_priorities() -> None:
    with pytest.raises(ValueError, match="takes no priority"):
        policies.Policy(key=lambda s: s.last_use, name="x", prompt_priority_bonus=1)
    with pytest.raises(TypeError, match="prompt_priority_bonus must be an int >= 0"):
        policies.priority(prompt_bonus=-1)


def _outcomes(factory: type, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    search, outcomes = _seeded(monkeypatch), []
    for seed in SEEDS:
        try:
            run_machine(machine_for(factory, factory.capabilities, 1, f"prompt_bonus_{factory.__name__}_seed{seed}"), search)
            outcomes.append("pass")
        except Exception as exc:  # noqa: BLE001 - any finding counts; its class is what is judged
            outcomes.append(type(exc).__name__)
    return outcomes


@pytest.mark.deep  # five audit-sized streams per cache
def test_the_prompt_bonus_declared_passes_and_misdeclared_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang's prompt split, declared, passes every pinned stream; the same cache declaring plain
    priority, and the plain priority cache declaring the bonus, are caught by the order oracle."""
    assert _outcomes(PromptOneHigher, monkeypatch) == ["pass"] * len(SEEDS)
    for wrong in (UNDECLARED, OVERDECLARED):
        got = _outcomes(wrong, monkeypatch)
        assert EvictionOrderViolation.__name__ in got and set(got) <= {"pass", EvictionOrderViolation.__name__}, (wrong, got)
