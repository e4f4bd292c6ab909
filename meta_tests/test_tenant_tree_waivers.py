"""A waived tenant-tree eviction finding leaves no echo (router trial, session 53): the model takes
the tree's word for what each tenant holds after the finding, as the cache machine adopts a cache's
victims. Before, a user who waived their tree's known order bug (`11 tenant-tree eviction`) still
got a failing audit: `sizes() disagrees ...: r0: tree 1, inserts 3`, the model having evicted
what LRU says while the tree had evicted something else."""

from __future__ import annotations

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.tenant_tree import TenantTreeModel
from radixcheck.oracles.violations import TenantTreeViolation
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.findings.waivers import WaiverLog, parse_waivers
from radixcheck.properties.tenant_tree.mutants import (
    MatchNamesUnavailableTenant,
    SplitLosesOtherTenantsTimes,
    machine_for_tenant_tree_mutant,
)
from radixcheck.reference.tenant_tree import TenantTree

ORDER_WAIVED = "* * 11 tenant-tree eviction  # a split loses other tenants' times (known)"
FEW = settings(profiles.SETTINGS["mutation"], max_examples=25)


def _log() -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(ORDER_WAIVED), ("x:y",), "test_tenant_tree_state_machine")


def test_adopt_takes_the_trees_word_for_what_a_tenant_holds() -> None:
    m = TenantTreeModel()
    m.add("a"), m.add("b")
    m.insert("hello", "a", 1.0)
    m.insert("hex", "a", 3.0)
    m.insert("help", "b", 2.0)
    evicted: dict = {}
    assert m.evict("a", 3, evicted) == ["hello", "hell", "hel"]  # LRU's choice
    assert evicted == {"hello": 1.0, "hell": 1.0, "hel": 1.0}
    tree_holds = {"h", "he", "hel", "hell", "hello"}  # the tree took 'hex' instead
    m.adopt("a", tree_holds.__contains__, evicted)
    assert m.times["a"] == {"h": 3.0, "he": 3.0, "hel": 1.0, "hell": 1.0, "hello": 1.0}
    assert m.truth("hex", ["a"]) == 2 and m.truth("hello", ["a"]) == 5
    assert m.holders_of("hel", ["a", "b"]) == {"a", "b"} and m.holders_of("hex", ["a", "b"]) == set()
    assert m.eviction_bounds("a", 1) == (1, 3)  # the order is rebuilt: hello hell hel (1.0) first again
    m.adopt("b", lambda prefix: True, {})  # nothing to change: a no-op
    assert m.sizes() == {"a": 5, "b": 4}


@pytest.mark.deep  # a machine run to its end past a waived finding
def test_a_waived_order_finding_leaves_no_echo() -> None:
    """The catalogue's order mutant: caught without the waiver; with it, the whole search passes
    and the log holds the eviction finding alone."""
    with pytest.raises(Exception) as caught:
        run_machine(machine_for_tenant_tree_mutant(SplitLosesOtherTenantsTimes), FEW)
    assert isinstance(caught.value, SplitLosesOtherTenantsTimes.caught_by)
    log = _log()
    run_machine(machine_for_tenant_tree_mutant(SplitLosesOtherTenantsTimes), FEW, waived=log)
    [found] = log.findings()
    assert found["oracle"] == "11 tenant-tree eviction" and found["times_met"] >= 1


class LosesTimesAndNamesUnavailable(SplitLosesOtherTenantsTimes, MatchNamesUnavailableTenant):
    """The waived order bug, and a real match bug behind it."""


@pytest.mark.deep
def test_a_real_bug_behind_the_waived_order_finding_is_still_caught() -> None:
    with pytest.raises(TenantTreeViolation):
        run_machine(machine_for_tenant_tree_mutant(LosesTimesAndNamesUnavailable), FEW, waived=_log())


def test_a_correct_tree_passes_with_the_waiver_unmet() -> None:
    log = _log()
    run_machine(machine_for_tenant_tree_mutant(TenantTree, "waiver_unmet_reference"), settings(FEW, max_examples=10),
                waived=log)
    assert log.findings() == []


def test_a_tenant_tree_failure_says_its_repro_file_reruns_the_test() -> None:
    """The note above a failing program named the repro file as "this program as plain calls on your
    factory", which a tenant tree's file is not (it reruns radixcheck's test)."""
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any finding: the note is the subject
        run_machine(machine_for_tenant_tree_mutant(MatchNamesUnavailableTenant), FEW)
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "is radixcheck's state machine" in notes, notes
    assert "reruns radixcheck's test on your factory" in notes and "as plain calls" not in notes, notes
