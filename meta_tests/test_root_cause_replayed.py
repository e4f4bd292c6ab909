"""One finding per root cause for tenant-tree and tier programs: each finding's program is replayed
past its failures (:mod:`radixcheck.properties.tenant_tree.replay`,
:func:`radixcheck.properties.tiers.repro.shown_by_tier`), and findings whose programs each show the
other's are one (:func:`radixcheck.properties.findings.root_cause.same_causes`).

Their probes read only (matches): a tenant-tree probe that also trimmed each tenant (and routed
every key to every tenant) joined a router trial's T1 and T2 (two findings each), but it joined a tree's two
distinct bugs too, in every stream; :func:`test_two_bugs_in_one_tenant_tree_stay_two_findings_in_every_stream`
is what failed. Two bugs in one tiered cache stay two as well. A correct tree's and a correct tiered
cache's programs show nothing; a broken one's shows its own finding first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.audit import Verdict, findings_of
from radixcheck.properties.cache.layers import UNSAID
from radixcheck.properties.findings.failures import describe_failure
from radixcheck.properties.findings.root_cause import signature
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tenant_tree.machine import TenantTreeMachine, stress_with_threads, tenant_tree_machine_for
from radixcheck.properties.tenant_tree.mutants import EvictionCrossesTenants, MatchLongerThanQuery
from radixcheck.properties.tenant_tree.replay import shown_by_tenant_tree
from radixcheck.properties.tiers.lifecycle import LifecycleTierWorld
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import (
    MruFirstTier,
    TieredPriority,
    TierEvictHostOvershoots,
    TierEvictOvershoots,
    WritesPageReversed,
)
from radixcheck.properties.tiers.repro import shown_by_tier
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tenant_tree import TenantTree
from radixcheck.reference.tiered_cache import TieredRadixCache

SEEDS = range(3)  # as `radixcheck audit --seed 0..2`: the machine's stream is named by its seed
# The streams tried in turn until one meets both readings of one cause. The host reading is the rare one: each
# stream fails on the device order first in most of its four machines. Measured (session 61, with the reset
# drain's draw): stream 12 is the first of 0..11 to meet both; before that draw, one of 0..11 did. Each stream
# costs ~1 s of CPU, so a wide bound is cheap and a new rule's draw does not need a new pin.
STREAMS = range(64)


def _stream_meeting(factory: Any, oracles: set[str]) -> list[Verdict]:
    """The verdicts of the first stream of :data:`STREAMS` whose failures meet every oracle of ``oracles``: which
    stream does moves with every rule the tier machine draws from; what the test judges does not."""
    met: list[set[str]] = []
    for seed in STREAMS:
        verdicts = _tier_verdicts(factory, seed)
        met.append({v.oracle for v in verdicts if v.outcome == "failed"})
        if oracles <= met[-1]:
            return verdicts
    raise AssertionError(f"no stream of {list(STREAMS)} met {sorted(oracles)}: each met {met}")


def _seeded() -> settings:
    """The audit's search for one ``--seed`` stream: derandomized by the machine's name."""
    return settings(profiles.SETTINGS["audit"], derandomize=True, database=None)


def _verdict(test: str, run: Callable[[], None]) -> Verdict:
    """``run``'s failure as the audit's verdict of ``test``, with what its program shows replayed on
    (what ``--repro`` adds to each failing test's report)."""
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - the finding is what the test wants
        said = describe_failure(exc)
        machine = getattr(exc, "radixcheck_machine", None)
        shows = shown_by_tenant_tree(machine) if isinstance(machine, TenantTreeMachine) and machine.program else []
        return Verdict(test, "failed", 0.1, said["oracle"], said["reason"], said["program"], said["exceptions"],
                       repro={"oracle": said["oracle"], "message": said["reason"], "why_not": "", "shows": [list(s) for s in shows]})
    return Verdict(test, "passed", 0.1)


def _audit(factory: Any, seed: int) -> list[Verdict]:
    """The two tenant-tree tests of an audit of ``factory`` with ``--seed seed``."""
    name = f"meta_replayed_{factory.__name__}_seed{seed}"
    machine = tenant_tree_machine_for(factory, factory.capabilities, name)
    return [_verdict("test_tenant_tree_state_machine", lambda: run_machine(machine, _seeded())),
            _verdict("test_tenant_tree_under_threads", lambda: stress_with_threads(factory, factory.capabilities))]


class _TwoBugs(MatchLongerThanQuery, EvictionCrossesTenants):
    """Two bugs of one thread: a match longer than the query, and an eviction that takes other tenants' prefixes."""


@pytest.mark.deep
def test_two_bugs_in_one_tenant_tree_stay_two_findings_in_every_stream() -> None:
    for seed in SEEDS:
        findings = findings_of(_audit(_TwoBugs, seed))
        assert len(findings) >= 2, (seed, [f"{f.oracle}: {f.reason}" for f in findings])


def _tree_program(tree: type) -> tuple[TenantTreeMachine, BaseException | None]:
    """A short program on ``tree`` (tenants join, share prefixes, are trimmed and one leaves), up to
    its first failure: the machine that recorded it, and that failure (``None``: it passed)."""
    machine = tenant_tree_machine_for(tree, tree.capabilities, "meta_program")()
    try:
        machine.start(3)
        for n, (key, tenant) in enumerate([("abab", "r0"), ("abé", "r1"), ("aba", "r2"), ("bb", "r0"), ("abéa", "r0")]):
            machine._insert(key, tenant)
            machine._match(key[: n % 3 + 1], frozenset(machine.present))
        machine._evict("r0", 2)
        machine._remove("r1")
        machine._check_every_known()
    except Exception as exc:  # noqa: BLE001 - the program ends where it failed
        return machine, exc
    return machine, None


def test_a_correct_tree_s_program_shows_nothing_and_a_broken_one_its_own_finding_first() -> None:
    machine, failure = _tree_program(TenantTree)
    assert failure is None and len(machine.program) == 16 and shown_by_tenant_tree(machine) == []
    machine, failure = _tree_program(EvictionCrossesTenants)
    shown = shown_by_tenant_tree(machine)
    assert failure is not None and shown[0] == signature(failure), shown


def _tier_world(factory: Any) -> TierWorld:
    """A few operations of a serving engine on ``factory``'s tiers: requests share prefixes, the device is trimmed."""
    world = TierWorld(factory, page_size=1)
    for tokens in ([1, 2, 3, 4], [1, 2, 5], [6, 7, 8, 9, 10], [1, 2, 3, 4, 11]):
        world.serve(tokens)
        world.finish()
    world.complete_all()
    world.evict(3)
    world.serve([1, 2, 3])
    world.finish()
    world.check()
    return world


def test_a_correct_tiered_cache_s_program_shows_nothing() -> None:
    world = _tier_world(TieredRadixCache)
    assert shown_by_tier(TieredRadixCache, world) == []


@pytest.mark.deep
def test_a_tier_program_replayed_on_shows_its_own_finding_first() -> None:
    machine = tier_machine_for(TierEvictOvershoots, 1, "write_through", name="meta_replayed_overshoot")
    try:
        run_machine(machine, settings(profiles.SETTINGS["mutation"], derandomize=True, database=None))
    except Exception as exc:  # noqa: BLE001 - its eviction is the finding
        failing = exc.radixcheck_machine  # type: ignore[attr-defined]
        shown = shown_by_tier(TierEvictOvershoots, failing.world)
        assert shown and shown[0] == signature(exc), (signature(exc), shown)
    else:
        pytest.fail("TierEvictOvershoots passed")


class _TwoTierBugs(TierEvictOvershoots, WritesPageReversed):
    """Two tier bugs: an eviction that keeps going past its amount, and a write that copies a page reversed."""


def _tier_verdict(page_size: int, seed: int) -> Verdict:
    """The tier machine's verdict on :class:`_TwoTierBugs` at ``page_size`` (stream ``seed``), with what its
    failing program shows replayed on."""
    machine = tier_machine_for(_TwoTierBugs, page_size, "write_through", name=f"meta_replayed_two_p{page_size}_seed{seed}")
    try:
        run_machine(machine, _seeded())
    except Exception as exc:  # noqa: BLE001 - the finding is what the test wants
        said = describe_failure(exc)
        shows = shown_by_tier(_TwoTierBugs, exc.radixcheck_machine.world)  # type: ignore[attr-defined]
        return Verdict(f"test_tier_state_machine[page_size={page_size}]", "failed", 0.1, said["oracle"], said["reason"],
                       said["program"], said["exceptions"],
                       repro={"oracle": said["oracle"], "message": said["reason"], "why_not": "", "shows": [list(s) for s in shows]})
    return Verdict(f"test_tier_state_machine[page_size={page_size}]", "passed", 0.1)


@pytest.mark.deep
def test_two_bugs_in_one_tiered_cache_stay_two_findings_in_every_stream() -> None:
    for seed in SEEDS:
        verdicts = [_tier_verdict(page_size, seed) for page_size in (1, 2, 4)]
        findings = findings_of(verdicts)
        assert len(findings) >= 2, (seed, [f"{f.oracle}: {f.reason}" for f in findings])


class _InsertDropsPriority(TieredPriority):
    """One tier bug that reads as two: an insert drops the request's priority (each page keeps 0),
    so a page's eviction key is wrong on whichever tier evicts it, device (4) or host (4h), as a
    trial cache's ``publish_drops_priority`` did (reports/findings/layers_trial.md: two findings)."""

    def insert(self, tokens: Any, values: Any, namespace: Any = None, priority: int = 0) -> int:
        return super().insert(tokens, values, namespace, 0)


class _DeviceOrderAndHostAmount(MruFirstTier, TierEvictHostOvershoots):
    """Two tier bugs: device eviction takes the most recent leaf first, and host eviction frees one leaf too many."""


def _tier_verdicts(factory: Any, seed: int) -> list[Verdict]:
    """The tier machine's verdicts on ``factory`` at page sizes 1 and 2, in both write policies (stream
    ``seed``), each failure's program replayed past its failures as ``--repro`` does."""
    verdicts = []
    for page_size in (1, 2):
        for policy in ("write_through", "write_back"):
            test = f"test_tier_state_machine[{policy}-page_size={page_size}]"
            machine = tier_machine_for(factory, page_size, policy, name=f"meta_cause_{factory.__name__}_{policy}_p{page_size}_s{seed}")
            try:
                run_machine(machine, _seeded())
            except Exception as exc:  # noqa: BLE001 - the finding is what the test wants
                said = describe_failure(exc)
                shows = shown_by_tier(factory, exc.radixcheck_machine.world)  # type: ignore[attr-defined]
                verdicts.append(Verdict(test, "failed", 0.1, said["oracle"], said["reason"], said["program"], said["exceptions"],
                                        repro={"oracle": said["oracle"], "message": said["reason"], "why_not": "",
                                               "shows": [list(s) for s in shows]}))
            else:
                verdicts.append(Verdict(test, "passed", 0.1))
    return verdicts


@pytest.mark.deep
def test_one_wrong_eviction_key_met_on_both_tiers_is_one_finding_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its device-order and host-order failures are one finding, the other named in ``also``: each
    program's failing state, evicted on both tiers (``across_tiers``), shows the other tier's order.
    Not shrunk: a shrink may slip from one reading to the other, by how far its CPU budget gets."""
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    verdicts = _stream_meeting(_InsertDropsPriority, {"4 eviction order", "4h host eviction order"})
    met = {v.oracle for v in verdicts if v.outcome == "failed"}
    findings = findings_of(verdicts)
    assert len(findings) == 1, [f"{f.oracle}: {f.reason}" for f in findings]
    named = {findings[0].oracle, *(also.partition(": ")[0] for also in findings[0].also)}
    assert named == met, named


@pytest.mark.deep
def test_a_device_order_bug_and_a_host_amount_bug_stay_two_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    # not shrunk: on a quiet machine the shrink slipped from the device-order failure to the simpler host-amount one
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    verdicts = _stream_meeting(_DeviceOrderAndHostAmount, {"4 LRU order", "4h host eviction amount"})
    findings = findings_of(verdicts)
    assert len(findings) >= 2, [f"{f.oracle}: {f.reason}" for f in findings]


class _MatchesCounted(LifecycleTierWorld):
    """A lifecycle world that keeps every prompt matched alone (``w.match``), as the replay's probes match them."""

    matched: list[tuple[int, ...]] = []

    def match(self, tokens: Any, namespace: Any = UNSAID) -> None:
        type(self).matched.append(tuple(int(t) for t in tokens))
        super().match(tokens, namespace)


def test_a_lifecycle_world_s_admitted_prompts_are_matched_again_by_the_replay() -> None:
    """A lifecycle world's requests are admitted (``w.admit``), not served: the replay's probes matched
    only ``w.serve`` prompts, so a lifecycle program was probed with no match at all."""
    world = _MatchesCounted(TieredRadixCache, page_size=1)
    for tokens in ([1, 2, 3, 4], [1, 2, 5]):
        world.admit(tokens)
        world.compute(0, 4)
        world.publish(0)
        world.end(0, "finish")
    world.check()
    _MatchesCounted.matched = []
    assert shown_by_tier(TieredRadixCache, world) == []
    assert {(1, 2, 3, 4), (1, 2, 5)} <= set(_MatchesCounted.matched), _MatchesCounted.matched
