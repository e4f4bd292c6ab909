"""The audit's tier production world (``radixcheck.properties.tiers.scale``) catches the two
production-scale bugs of a new user's tiered cache (reports/findings/hybrid_trial.md), each for its
own reason, and a lookup whose cost grows with the tree (its step-cost watch), and is silent on
correct caches, the trusting one included.

No wall-clock figure is asserted: the scanning eviction counts the nodes it visits and stands in
for the CPU limit by work (it raises the limit's own ``OperationTimeout`` past
:data:`WORK_LIMIT` visits in one call, about a second of Python), and the recursive lock walk fails
by depth (a ``RecursionError``), not by time. The step-cost verdict is a ratio of like calls' CPU
times within one world (``radixcheck.properties.cache.step_cost``), on whatever load the machine has."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from radixcheck.oracles.violations import HostSlotViolation, LRUOrderViolation, StepCostViolation
from radixcheck.properties.cache.flush import FLUSH
from radixcheck.properties.conformance.test_tier_machine import test_tier_at_production_scale as production_world
from radixcheck.properties.findings.standalone import run_file
from radixcheck.properties.findings.waivers import WaiverLog, parse_waivers
from radixcheck.properties.target import OperationTimeout, caused_by_hang, forget_hangs, load_target
from radixcheck.properties.tiers.repro import tier_repro
from radixcheck.properties.tiers.scale import MASS_EVICTION_LEAVES, production_stories, world_for
from radixcheck.reference.tiered_cache import TieredRadixCache

from . import planted_tier_order as planted

pytestmark = pytest.mark.deep

WORK_LIMIT = 10**6  # node visits in one call: ~1 s of Python, well past what any correct eviction walks here


class ScansPerLeaf(TieredRadixCache):
    """Device eviction orders each candidate leaf by a walk over every node: O(n) a leaf, O(n * leaves) a call."""

    most_visits = 0  # the most nodes one evict call visited (the executed work, read by the test)

    def evict(self, num_tokens: int) -> int:
        self._visits = 0
        try:
            return super().evict(num_tokens)
        finally:
            type(self).most_visits = max(type(self).most_visits, self._visits)

    def _next_tip(self) -> Any:
        # Each leaf the call takes: "is there an older leaf anywhere?", the scan the trial's EvictScansLeaves makes
        # (the reference keys its tips once, in a queue: the scan goes where evict takes a leaf).
        for _ in self._nodes():
            self._visits += 1
            if self._visits > WORK_LIMIT:
                raise OperationTimeout(f"evict did not return within {WORK_LIMIT} node visits (the CPU limit, by work)")
        return super()._next_tip()


class RecursiveLocks(TieredRadixCache):
    """``inc_lock_ref`` recurses up the path: a conversation > ~1000 pages deep overflows the stack."""

    def inc_lock_ref(self, handle: Any) -> None:
        self._lock_up(handle)

    def _lock_up(self, node: Any) -> None:
        if node.parent is not None:
            node.lock_ref += 1
            self._lock_up(node.parent)


class HostLookupWalksTree(TieredRadixCache):
    """A match looks for each page it cannot find on device (where a host copy would continue it)
    among every node of the tree, as a cache whose host copies are kept beside the tree would search
    them: every request whose prompt is not wholly on device pays a walk of the tree. Its answers are
    the reference's (the node it finds is the child the reference follows)."""

    def _walk(self, key: tuple[int, ...], namespace: Any = None) -> list[Any]:
        p, node, path = self.page_size, self._root_for(namespace), []
        for pos in range(0, len(key) // p * p, p):
            page = key[pos : pos + p]
            child = node.children.get(page)
            if child is None or child.device is None:  # not on device: the host lookup, a walk of every node
                child = next((n for n in self._nodes() if n.parent is node and n.key == page), None)
            if child is None:
                break
            path.append(child)
            node = child
        return path


def _run(spec: str, waivers: str | WaiverLog = "") -> BaseException | None:
    """The production test's failure on ``spec`` (``None``: it passed), with the waivers of ``waivers`` (a waiver file's text)."""
    forget_hangs()  # a hang is remembered within one test only (as the plugin does between tests)
    target = load_target(spec)
    log = waivers if isinstance(waivers, WaiverLog) else _log(waivers)
    try:
        production_world(target, page_size=min(target.capabilities.page_sizes_tested()), radix_waivers=log)
    except Exception as exc:  # noqa: BLE001 - the test's failure is what is judged
        return exc
    return None


def _log(waivers: str) -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(waivers), ("x:y",), "test_tier_at_production_scale[page_size=1]")


def _note(exc: BaseException) -> str:
    return " ".join(getattr(exc, "__notes__", []))


def test_an_eviction_that_scans_per_leaf_hangs_in_the_wide_tree() -> None:
    ScansPerLeaf.most_visits = 0
    failure = _run(f"{__name__}:ScansPerLeaf")
    assert failure is not None and caused_by_hang(failure), failure
    note = _note(failure)
    assert "in the call evict" in note and "a wide tree of" in note and "per-operation limit" in note, note
    assert f"at least {MASS_EVICTION_LEAVES} leaves" in note
    assert ScansPerLeaf.most_visits > WORK_LIMIT  # the work itself, counted: quadratic in the tree


def test_a_recursive_lock_walk_crashes_in_the_long_conversation() -> None:
    failure = _run(f"{__name__}:RecursiveLocks")
    assert isinstance(failure, RecursionError), failure
    note = _note(failure)
    assert "in the call inc_lock_ref" in note and "a conversation of" in note and "pages deep" in note, note


def test_a_host_lookup_that_walks_the_tree_fails_the_step_cost_watch_in_the_wide_tree() -> None:
    failure = _run(f"{__name__}:HostLookupWalksTree")
    assert isinstance(failure, StepCostViolation), failure
    assert str(failure).startswith("match_prefix of "), failure  # the lookup; its inserts cost what the reference's do
    assert "a wide tree of" in _note(failure) and "write_through" in _note(failure), _note(failure)


@pytest.mark.parametrize("spec", [
    "radixcheck.reference.tiered_cache:TieredRadixCache",
    "radixcheck.reference.tiered_state_cache:TieredStateCache",
    "radixcheck.reference.tier_requests:RequestWindowTiers",  # the request methods and a window: the most each call does
    "radixcheck.properties.tiers.mutants:TrustingTenantTiers",  # trusts its callers, as SGLang's HiRadixCache does
])
def test_correct_caches_pass_the_production_world(spec: str) -> None:
    """Both stories, the wide tree in each write policy, under the step-cost watch too."""
    assert _run(spec) is None



# ---- one findings pipeline: a waiver silences its finding in the production world too, and nothing else ----

SCALE_WAIVER = "*  *  4 LRU order  known: suffix-refreshed-on-mid-edge-use  # as reports/waivers/sglang_hicache.txt waives #3"
SUFFIX_REFRESHED = f"{planted.__name__}:SuffixRefreshedTiers"  # SGLang's #3 planted in the reference tiered cache


class SuffixRefreshedMruTiers(planted.SuffixRefreshedTiers):
    """#3, and a different device-order bug behind it: the most recently used leaf goes first."""

    def _eviction_key(self, node: Any) -> tuple[int, int]:
        return -node.last_access, node.serial


class SuffixRefreshedRecursiveLocks(planted.SuffixRefreshedTiers, RecursiveLocks):
    """Two bugs: #3 (the wide tree's mass evict) and a recursive lock walk (the conversation)."""


def test_3_at_scale_is_waived_as_the_same_known_cause_in_every_world() -> None:
    """#3 planted fails the wide tree's mass evict (4 LRU order) unwaived; under its ``known:``
    waiver the world keeps #3's order beside the model, the finding is re-judged and explained by
    it: waived once per write policy's world, with what it left unbuilt, never 'not re-judged'."""
    unwaived = _run(SUFFIX_REFRESHED)
    assert isinstance(unwaived, LRUOrderViolation) and "a wide tree of" in _note(unwaived), unwaived
    log = _log(SCALE_WAIVER)
    assert _run(SUFFIX_REFRESHED, log) is None
    [found] = log.findings()
    assert found["oracle"] == "4 LRU order" and found["known_deviation"] == "suffix-refreshed-on-mid-edge-use", found
    assert "not_rejudged" not in found, found
    policies = planted.SuffixRefreshedTiers.tier_capabilities.write_policies
    assert found["times_met"] == len(policies), found  # every policy's world was built, each re-judged
    assert all(f"the rest of the {policy} world" in found["cut_short"] for policy in policies), found
    assert log.met() == ["<waivers>:1"]


@pytest.mark.parametrize("spec", [
    "radixcheck.properties.tiers.mutants:MruFirstTier",  # another LRU-order bug alone
    f"{__name__}:SuffixRefreshedMruTiers",  # another one behind #3
])
def test_a_different_order_bug_under_the_same_known_waiver_still_fails_at_scale(spec: str) -> None:
    """The same oracle (4 LRU order), the same waiver, a different cause: #3's order does not explain
    the pick, so the production world fails with it, and the waiver records nothing."""
    log = _log(SCALE_WAIVER)
    failure = _run(spec, log)
    assert isinstance(failure, LRUOrderViolation) and failure.explained_by == frozenset(), failure
    assert "a wide tree of" in _note(failure) and log.findings() == [], (failure, log.findings())


@pytest.mark.parametrize("waiver", [
    "*  *  4h host eviction order  known: suffix-refreshed-on-mid-edge-use  # the host tier's, not the device's",
    "*  *  4 eviction amount  # another oracle of the same eviction",
    "*  test_tier_state_machine  4 LRU order  # the small worlds' test only",
])
def test_a_waiver_of_another_finding_or_test_leaves_the_production_worlds_failure(waiver: str) -> None:
    log = _log(waiver)
    assert isinstance(_run(SUFFIX_REFRESHED, log), LRUOrderViolation)
    assert log.findings() == []


def test_a_waived_wide_tree_still_builds_the_conversation_whose_own_bug_fails() -> None:
    """The waived order finding ends each wide tree before the conversation: the conversation is
    then built alone, and a second bug there (a recursive lock walk) is still the test's failure."""
    log = _log(SCALE_WAIVER)
    failure = _run(f"{__name__}:SuffixRefreshedRecursiveLocks", log)
    assert isinstance(failure, RecursionError), failure
    assert "a conversation of" in _note(failure)
    assert [f["oracle"] for f in log.findings()] == ["4 LRU order"]


@pytest.mark.parametrize("spec", [
    "radixcheck.reference.tiered_cache:TieredRadixCache",
    "radixcheck.properties.tiers.mutants:TrustingTenantTiers",
])
def test_correct_caches_meet_no_waiver_in_the_production_world(spec: str) -> None:
    log = _log(SCALE_WAIVER)
    assert _run(spec, log) is None and log.findings() == [] and log.met() == []


# ---- the world's end: one flush, as the plain production world's (radixcheck.properties.cache.flush) ----

class ResetKeepsHostCopies(TieredRadixCache):
    """``reset`` flushes the device tier only: each node's host copy is forgotten, not freed, as a
    HiCache reset that resets the device tree and not the host pool would leave it."""

    def reset(self) -> None:
        for node in list(self._nodes()):
            node.host = None
        super().reset()


class ResetsRecursively(TieredRadixCache):
    """``reset`` frees the tree depth first, one frame a level: the 1,200-page conversation overflows it."""

    def reset(self) -> None:
        for root in list(self.roots.values()):
            self._free_below(root)
        super().reset()

    def _free_below(self, node: Any) -> None:
        for child in node.children.values():
            self._free_below(child)


def test_a_reset_that_keeps_the_host_pages_fails_the_flush() -> None:
    """The flush's leak, named on the host tier, in the flush story (found by radixcheck's check
    after the reset returned)."""
    failure = _run(f"{__name__}:ResetKeepsHostCopies")
    assert isinstance(failure, HostSlotViolation), failure
    assert str(failure).startswith("host slots leaked: reset() left "), failure
    assert f"while: {FLUSH}" in _note(failure), _note(failure)


def test_the_flush_finding_has_a_repro_that_exits_1_on_the_bug_and_0_on_the_fix() -> None:
    """The same stories, smaller (a conversation of 40 turns, then the flush): the repro file,
    reduced from the world's log, exits 1 on the mutant and 0 on the reference, the fix."""
    spec = f"{__name__}:ResetKeepsHostCopies"
    world = world_for(ResetKeepsHostCopies, 1, "write_through", device_slots=256, host_slots=512)
    with pytest.raises(HostSlotViolation) as caught:
        production_stories(world, random.Random(0), turns=40, wide=False, flush=True)
    repro = tier_repro(world, caught.value, spec, ResetKeepsHostCopies, seconds=20)
    assert repro.exit_code == 1 and "BUG (radixcheck oracle 3h host slot conservation)" in repro.output, repro.why_not
    assert repro.text is not None and "w.reset()" in repro.text and repro.calls < 20, repro.text
    fixed = repro.text.replace(f"from {__name__} import ResetKeepsHostCopies as make",
                               "from radixcheck.reference.tiered_cache import TieredRadixCache as make")
    assert fixed != repro.text, repro.text[:2000]
    assert run_file(fixed, 60.0)[0] == 0


def test_a_reset_that_recurses_down_the_conversation_fails_the_flush() -> None:
    failure = _run(f"{__name__}:ResetsRecursively")
    assert isinstance(failure, RecursionError), failure
    assert FLUSH in _note(failure) and "in the call reset" in _note(failure), _note(failure)


def test_a_cache_without_a_declared_reset_is_never_flushed() -> None:
    """The same recursive reset, undeclared: never sent, the world passes."""
    assert _run(f"{__name__}:UndeclaredRecursiveReset") is None


class UndeclaredRecursiveReset(ResetsRecursively):
    tier_capabilities = dataclasses.replace(TieredRadixCache.tier_capabilities, supports_reset=False)
