"""A tier cache's own request methods (``TierCapabilities(lifecycle="requests")``) can fail, for the
right reason, and correct caches pass them:

* an abort that frees the pages its load-back still fills (``AbortFreesLoadingPages``) is oracle 14;
* an abort after a load-back that keeps its lock (``AbortKeepsItsLock``) keeps pages nobody holds
  from eviction (oracle 4t);
* a publish that keeps its lock where it was while its chunk's write-through is in flight
  (``PublishSkipsRelockWhileBacking``): once the write lands an eviction takes pages the request
  reads (oracle 2);
* a publish that leaves the request's row on the duplicates it freed (``PublishReadsFreedDuplicates``)
  is a slot violation;
* each is correct where its trigger is absent; the reference's request steps, a cache that
  trusts its callers and one whose load-back holds a load lock until it lands pass every story in
  both write policies; a repro file of a request-method bug exits 1, and 0 with the correct cache.

The fast tier runs one test (the four stories, a few calls each); the rest is ``deep``. Kill rates
over the tier machine are the catalogue's (``python -m radixcheck.reports.tier_catalogue --only
AbortFreesLoadingPages --only AbortKeepsItsLock --only PublishSkipsRelockWhileBacking --only
PublishReadsFreedDuplicates --only RequestTiers --only TrustingRequestTiers``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from meta_tests.audit_repro import assert_audit_repro_round_trip
from radixcheck import profiles
from radixcheck.oracles.violations import (
    ContractViolation,
    EvictionAmountViolation,
    LRUOrderViolation,
    RefcountViolation,
    ReturnValueViolation,
    SlotViolation,
    TransferInFlightViolation,
)
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import TargetError, check_target, load_target
from radixcheck.properties.tiers.contract import TierRequest
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import LoadLockedRequestTiers, machines_for_mutant
from radixcheck.properties.tiers.request_mutants import (
    REQUEST_TIER_MUTANTS,
    AbortFreesLoadingPages,
    AbortKeepsItsLock,
    PublishReadsFreedDuplicates,
    PublishSkipsRelockWhileBacking,
    TrustingRequestTiers,
)
from radixcheck.properties.tiers.requests import RequestsTierWorld, TierRequestRules
from radixcheck.reference.tier_requests import RequestTiers
from radixcheck.reference.tiered_cache import TieredRadixCache

from .test_tier_lifecycle import _on_host as on_host

CORRECT = [RequestTiers, TrustingRequestTiers, LoadLockedRequestTiers]
POLICIES = ["write_through", "write_back"]


def _on_host(factory: Any, policy: str, tokens: list[int]) -> RequestsTierWorld:
    """``tokens`` cached, then evicted to host only (every transfer landed)."""
    world = on_host(factory, policy, tokens, world_class=RequestsTierWorld)
    assert isinstance(world, RequestsTierWorld)
    return world


def _settle(world: RequestsTierWorld) -> None:
    """Every transfer lands, a fresh prompt is served and the device evicted: a lock nobody owns shows."""
    world.complete_all()
    world.serve([3])  # the newest page
    world.finish()
    world.complete_all()
    world.evict(100)
    world.complete_all()
    world.check()


def abort_during_load(factory: Any, policy: str) -> RequestsTierWorld:
    """[1, 2] on host only; a request admitted on it (its load in flight) is aborted before it lands."""
    world = _on_host(factory, policy, [1, 2])
    world.admit([1, 2])
    assert any(t.kind == "load" for t in world.controller.pending)
    world.end(0, "abort")
    _settle(world)
    return world


def evict_after_the_backups_land(factory: Any, policy: str) -> RequestsTierWorld:
    """A request publishes two pages (their write-through backups pending), the backups land, and
    the device is evicted while the request still runs."""
    world = RequestsTierWorld(factory, 1, policy)
    world.admit([1, 2, 3])
    world.compute(0, 2)
    world.publish(0)
    world.complete_all()
    world.evict(100)
    world.end(0, "finish")
    world.complete_all()
    world.check()
    return world


def racing_publish(factory: Any, policy: str) -> RequestsTierWorld:
    """Two requests on one prompt compute the same chunk; the second's publish is all duplicates."""
    world = RequestsTierWorld(factory, 1, policy)
    world.admit([1, 2, 3])
    world.admit([1, 2, 3])
    for index in (0, 1):
        world.compute(index, 2)
        world.publish(index)
    world.check()
    for _ in range(2):
        world.end(0, "finish")
    world.complete_all()
    world.check()
    return world


STORIES: dict[type, tuple[Callable[[Any, str], RequestsTierWorld], tuple[str, ...], Any, str]] = {
    AbortFreesLoadingPages: (abort_during_load, ("write_through", "write_back"), TransferInFlightViolation,
                             r"device slots \[\d+\] freed while a transfer still reads or fills them"),
    AbortKeepsItsLock: (abort_during_load, ("write_through", "write_back"), (LRUOrderViolation, EvictionAmountViolation),
                        r"while the unlocked device leaf Page\(\[1, 2\]"),
    PublishSkipsRelockWhileBacking: (evict_after_the_backups_land, ("write_through",), RefcountViolation,
                                     r"Page\(\[1(, 2)?\].*left the device while a request holds a lock"),
    PublishReadsFreedDuplicates: (racing_publish, ("write_through", "write_back"), SlotViolation,
                                  r"after cache_unfinished_req.*slots \[\d+, \d+\] were freed and it still reads them"),
}


def test_each_request_method_mutant_fails_its_story_and_correct_caches_pass_them() -> None:
    """The gate's one test of the request methods on the tiers (a few calls per story)."""
    assert [m for m in REQUEST_TIER_MUTANTS if m not in STORIES] == []
    for mutant, (story, policies, caught_by, says) in STORIES.items():
        for policy in policies:
            with pytest.raises(caught_by, match=says):
                story(mutant, policy)
    for factory in CORRECT:
        for story, _, _, _ in STORIES.values():
            for policy in POLICIES:
                story(factory, policy)


# ---- each mutant is correct without its trigger (deep) ---------------------------------------------

def _finishes_after_a_load(factory: Any, policy: str) -> None:
    world = _on_host(factory, policy, [1, 2])
    world.admit([1, 2])
    world.admit([1, 2, 3])
    world.compute(1, 1)
    world.end(1, "finish")
    world.end(0, "finish")
    _settle(world)


@pytest.mark.deep
@pytest.mark.parametrize("mutant", [AbortFreesLoadingPages, AbortKeepsItsLock], ids=lambda m: m.__name__)
@pytest.mark.parametrize("policy", POLICIES)
def test_the_abort_mutants_are_correct_when_requests_finish(mutant: Any, policy: str) -> None:
    _finishes_after_a_load(mutant, policy)


@pytest.mark.deep
@pytest.mark.parametrize("mutant", [AbortFreesLoadingPages, AbortKeepsItsLock], ids=lambda m: m.__name__)
def test_the_abort_mutants_are_correct_without_a_load_back(mutant: Any) -> None:
    world = RequestsTierWorld(mutant, 1, "write_through")
    world.admit([1, 2])
    world.compute(0, 2)
    world.publish(0)
    world.end(0, "abort")
    _settle(world)


@pytest.mark.deep
def test_skipping_the_relock_is_correct_under_write_back() -> None:
    evict_after_the_backups_land(PublishSkipsRelockWhileBacking, "write_back")


@pytest.mark.deep
@pytest.mark.parametrize("policy", POLICIES)
def test_a_row_left_on_duplicates_is_correct_without_duplicates(policy: str) -> None:
    world = RequestsTierWorld(PublishReadsFreedDuplicates, 1, policy)
    world.admit([1, 2, 3])
    world.compute(0, 2)
    world.publish(0)
    world.compute(0, 1)
    world.end(0, "finish")
    world.complete_all()
    world.check()


# ---- the world's own checks (deep) ------------------------------------------------------------------

class PublishKeepsDuplicates(RequestTiers):
    """Publishes without freeing the request's copies of pages the tree already had."""

    def _free_own(self, slots: np.ndarray) -> None:
        pass


class AbortFreesAnothersSlots(RequestTiers):
    """An abort frees, besides its own slots, those of the request admitted after it (a row mix-up)."""

    others: list[TierRequest] = []

    def match_req(self, req: TierRequest) -> None:
        super().match_req(req)
        self.others.append(req)

    def cache_finished_req(self, req: TierRequest, insert: bool = True) -> None:
        super().cache_finished_req(req, insert)
        other = next(r for r in self.others if r is not req)
        self.allocator.free(other.slots[other.protected : other.filled])


class MatchReqKeepsHostPart(RequestTiers):
    """``match_req`` counts the host part in ``filled`` as if it were on device."""

    def match_req(self, req: TierRequest) -> None:
        super().match_req(req)
        req.filled += req.host_length


@pytest.mark.deep
def test_a_duplicate_the_publish_keeps_is_a_leak() -> None:
    with pytest.raises(SlotViolation, match="leaked"):
        racing_publish(PublishKeepsDuplicates, "write_through")


@pytest.mark.deep
def test_a_request_method_may_free_only_its_own_requests_slots() -> None:
    world = RequestsTierWorld(AbortFreesAnothersSlots, 1, "write_through")
    world.cache.others = []
    world.admit([1, 2, 3])
    world.admit([2, 2, 3])
    world.compute(0, 2)
    world.compute(1, 2)
    with pytest.raises(SlotViolation, match="which no cached page holds"):
        world.end(0, "abort")


@pytest.mark.deep
def test_a_match_req_that_leaves_filled_past_protected_is_refused() -> None:
    world = _on_host(MatchReqKeepsHostPart, "write_through", [1, 2])
    with pytest.raises(ReturnValueViolation, match="filled and protected must both be its cached prefix's length"):
        world.admit([1, 2])


# ---- the tier machine and the user paths (deep) ---------------------------------------------------

@pytest.mark.deep
def test_the_machine_has_the_request_story_only_when_requests_are_declared() -> None:
    machine = tier_machine_for(RequestTiers)
    assert issubclass(machine, TierRequestRules) and machine.world_class is RequestsTierWorld
    assert not hasattr(tier_machine_for(TieredRadixCache), "evict_under_a_publish")  # lifecycle="tree"


@pytest.mark.deep
@pytest.mark.parametrize("mutant", REQUEST_TIER_MUTANTS, ids=lambda m: m.__name__)
def test_request_method_mutants_die_in_every_write_policy_by_their_oracle(mutant: Any) -> None:
    for machine in machines_for_mutant(mutant):
        with pytest.raises(mutant.caught_by):
            run_machine(machine, profiles.SETTINGS["mutation"])


@pytest.mark.deep
def test_a_requests_tier_target_lacking_a_request_method_is_refused_at_load(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "half_requests.py").write_text(
        "from radixcheck.properties.tiers.contract import TierCapabilities\n"
        "from radixcheck.reference.tiered_cache import TieredRadixCache\n"
        "class Cache(TieredRadixCache):\n"
        "    tier_capabilities = TierCapabilities(lifecycle='requests')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TargetError, match="lacks match_req, lock_req, cache_unfinished_req, cache_finished_req"):
        check_target(load_target("half_requests:Cache"))


@pytest.mark.deep  # an audit in a subprocess, then its repro file on the bug and on the fix
def test_the_audit_writes_a_repro_that_exits_1_on_the_bug_and_0_on_the_fix(tmp_path: Path) -> None:
    text = assert_audit_repro_round_trip(tmp_path, "radixcheck.properties.tiers.request_mutants:AbortFreesLoadingPages",
                                         "radixcheck.reference.tier_requests:RequestTiers", "14 transfers in flight", timeout=300)
    assert "RequestsTierWorld(make, page_size=1" in text and "w.admit(" in text and "import hypothesis" not in text


class LockReqLoadsTheDefaultTenant(RequestTiers):
    """``lock_req`` re-matches the request's tokens to find its host part, the namespace forgotten: a
    tenant's request loads back the default namespace's host copies (or none) in place of its own.
    It needs namespaces, the host tier and the request methods at once (the layers trial's
    ``reload_default_ns``, ``reports/findings/layers_trial.md``)."""

    def lock_req(self, req: TierRequest) -> None:
        if req.host_length and req.namespace is not None:
            req.host_handle = self.match_prefix(req.tokens, priority=req.priority).host_handle
        super().lock_req(req)


@pytest.mark.deep
@pytest.mark.parametrize("policy", POLICIES)
def test_running_requests_on_a_tier_carry_tenants_namespaces(policy: str) -> None:
    """The tier lifecycle admits requests under the tenants' namespaces too (as the plain machine's
    lifecycle does), so a request method that loses the namespace is caught; before, every running
    request on a tier ran in the default namespace and this mutant conformed."""
    assert LockReqLoadsTheDefaultTenant.tier_capabilities.namespaces
    with pytest.raises(ContractViolation):
        run_machine(tier_machine_for(LockReqLoadsTheDefaultTenant, page_size=1, write_policy=policy),
                    profiles.SETTINGS["mutation"])
