"""A tier cache's own request methods with a second pool (``TierCapabilities(lifecycle="requests",
second_pool=...)``, the tier contract's "A second pool with the request methods") can fail, for the
right reason, and correct caches pass them:

* a publish that inserts without the request's state (``PublishWithoutState``), or gives the
  aligned part of an unaligned chunk the state of its end (``PublishStateOnAlignedPart``), or an
  abort that leaves the request's state on the node it held (``AbortLeavesStateOnItsNode``): oracle 20
  when a forward reads those pages' states;
* a publish that inserts without the request's window (``PublishWithoutWindow``): its re-match
  stops short where the window was live, oracle 20w;
* a publish whose re-match a tombstoned window stops short, that drops its tail from the row
  without freeing it (``ShortRematchKeepsItsTail``): device conservation finds the leak;
* each is correct where its trigger is absent; the references and the caches that trust their
  callers pass every story in both write policies and page sizes.

The fast tier runs one test (the stories, a few calls each); the rest is ``deep``. Kill rates over
the tier machine are the catalogue's (``python -m radixcheck.reports.tier_catalogue --only
PublishWithoutState ...``, reports/TIER_CATALOGUE.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from meta_tests.audit_repro import assert_audit_repro_round_trip
from radixcheck import profiles
from radixcheck.oracles.violations import SecondValueViolation, SlotViolation, TierWindowViolation
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import machines_for_mutant
from radixcheck.properties.tiers.pool_request_mutants import (
    CORRECT_POOL_REQUEST_TIERS,
    POOL_REQUEST_MUTANTS,
    AbortLeavesStateOnItsNode,
    PublishStateOnAlignedPart,
    PublishWithoutState,
    PublishWithoutWindow,
    ShortRematchKeepsItsTail,
)
from radixcheck.properties.tiers.requests import RequestsTierWorld, TierRequestRules

CORRECT = list(CORRECT_POOL_REQUEST_TIERS.values())
POLICIES = ["write_through", "write_back"]


def publish_then_read(factory: Any, policy: str, page_size: int) -> None:
    """A request publishes a chunk of 3 tokens (page-aligned at page size 1, ending inside a page at
    2), then one more token, and reads its prefix at its next forward; a second request on the
    prompt reads it too."""
    world = RequestsTierWorld(factory, page_size, policy)
    world.admit([1, 2, 3, 4, 5, 6])
    world.compute(0, 3)
    world.publish(0)
    world.compute(0, 1)
    world.publish(0)
    world.compute(0, 2)
    world.end(0, "finish")
    world.admit([1, 2, 3, 4, 5, 6])
    world.end(0, "finish")
    world.complete_all()
    world.check()


def abort_then_resume(factory: Any, policy: str, page_size: int) -> None:
    """A request on a cached prompt's first two tokens (no insert ended there) computes one more
    and is aborted; the prompt is served again and reads its pages' states."""
    world = RequestsTierWorld(factory, page_size, policy)
    world.serve([1, 2, 3, 4])
    world.finish()
    world.complete_all()
    world.admit([1, 2, 5, 5])
    world.compute(0, 1)
    world.end(0, "abort")
    world.serve([1, 2, 3, 4])
    world.finish()
    world.complete_all()
    world.check()


def short_rematch(factory: Any, policy: str, page_size: int) -> None:
    """[1..6] cached, its window live at its end only; a request on [1, 2, 3, 4, 7, 7] resumes from
    nothing, computes 5 tokens and publishes: its re-match stops short at the tombstoned window of
    the pages the tree had (it resumes there, its tail after the inserted pages freed)."""
    world = RequestsTierWorld(factory, page_size, policy)
    world.serve([1, 2, 3, 4, 5, 6])
    world.finish()
    world.complete_all()
    world.admit([1, 2, 3, 4, 7, 7])
    world.compute(0, 5)
    world.publish(0)
    world.check()
    world.end(0, "finish")
    world.complete_all()
    world.check()


STORIES: dict[type, tuple[Callable[[Any, str, int], None], int, Any, str]] = {
    PublishWithoutState: (publish_then_read, 1, SecondValueViolation,
                          r"Page\(\[1, 2, 3\], device.*\) reports state -1, but it has the state \d+ inserted there"),
    PublishStateOnAlignedPart: (publish_then_read, 2, SecondValueViolation,
                                r"Page\(\[1, 2\], device.*\) reports state \d+, but it has none"),
    AbortLeavesStateOnItsNode: (abort_then_resume, 1, SecondValueViolation,
                                r"Page\(\[1, 2\], device.*\) reports state \d+, but it has none"),
    PublishWithoutWindow: (publish_then_read, 1, TierWindowViolation,
                           r"the re-match of cache_unfinished_req.*its device part stops after 0 tokens, short of 3"),
    ShortRematchKeepsItsTail: (short_rematch, 2, SlotViolation, r"device slots leaked \[\d+\]"),
}


def test_each_pool_request_mutant_fails_its_story_and_correct_caches_pass_them() -> None:
    """The gate's one test of the request methods with a second pool (a few calls per story)."""
    assert [m for m in POOL_REQUEST_MUTANTS if m not in STORIES] == []
    for mutant, (story, page_size, caught_by, says) in STORIES.items():
        for policy in POLICIES:
            with pytest.raises(caught_by, match=says):
                story(mutant, policy, page_size)
    for factory in CORRECT:
        for story in (publish_then_read, abort_then_resume, short_rematch):
            for page_size in (1, 2):
                story(factory, "write_through", page_size)


# ---- each mutant is correct without its trigger, and the correct caches in every policy (deep) ---

@pytest.mark.deep
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
def test_correct_caches_pass_every_story_in_every_policy_and_page_size(factory: Any, policy: str) -> None:
    for story in (publish_then_read, abort_then_resume, short_rematch):
        for page_size in (1, 2):
            story(factory, policy, page_size)


@pytest.mark.deep
@pytest.mark.parametrize("policy", POLICIES)
def test_the_unaligned_state_and_the_kept_tail_are_correct_with_whole_page_chunks(policy: str) -> None:
    publish_then_read(PublishStateOnAlignedPart, policy, 1)
    short_rematch(ShortRematchKeepsItsTail, policy, 1)


@pytest.mark.deep
@pytest.mark.parametrize("policy", POLICIES)
def test_the_abort_state_mutant_is_correct_when_requests_finish(policy: str) -> None:
    publish_then_read(AbortLeavesStateOnItsNode, policy, 1)
    world = RequestsTierWorld(AbortLeavesStateOnItsNode, 1, policy)
    world.serve([1, 2, 3, 4])
    world.finish()
    world.admit([1, 2, 5, 5])
    world.compute(0, 1)
    world.end(0, "finish")
    world.serve([1, 2, 3, 4])
    world.finish()
    world.complete_all()
    world.check()


@pytest.mark.deep
@pytest.mark.parametrize("policy", POLICIES)
def test_the_publish_without_a_window_is_correct_when_requests_never_publish(policy: str) -> None:
    world = RequestsTierWorld(PublishWithoutWindow, 1, policy)
    world.admit([1, 2, 3, 4])
    world.compute(0, 4)
    world.end(0, "finish")
    world.admit([1, 2, 3, 4, 5])
    world.compute(0, 1)
    world.end(0, "finish")
    world.complete_all()
    world.check()


# ---- the tier machine (deep) ------------------------------------------------------------------------

@pytest.mark.deep
def test_the_machine_composes_the_pool_rules_with_the_request_story() -> None:
    for factory in CORRECT:
        machine = tier_machine_for(factory)
        assert issubclass(machine, TierRequestRules) and machine.world_class is RequestsTierWorld
        assert hasattr(machine, "states_through_host") or hasattr(machine, "windows_through_host")


@pytest.mark.deep
@pytest.mark.parametrize("mutant", POOL_REQUEST_MUTANTS, ids=lambda m: m.__name__)
def test_pool_request_mutants_die_in_every_write_policy_by_their_oracle(mutant: Any) -> None:
    for machine in machines_for_mutant(mutant):
        with pytest.raises(mutant.caught_by):
            run_machine(machine, profiles.SETTINGS["mutation"])


@pytest.mark.deep  # an audit in a subprocess, then its repro file on the bug and on the fix
def test_the_audit_writes_a_repro_that_exits_1_on_the_bug_and_0_on_the_fix(tmp_path: Path) -> None:
    text = assert_audit_repro_round_trip(tmp_path, "radixcheck.properties.tiers.pool_request_mutants:PublishWithoutState",
                                         "radixcheck.reference.tier_requests:RequestStateTiers", "20 second-pool value", timeout=600)
    assert "RequestsTierWorld(make, page_size=1" in text and "w.admit(" in text and "import hypothesis" not in text
