"""`radixcheck audit` reports one finding per root cause, most fundamental first, naming every
test it failed; a crash or an ExceptionGroup keeps each exception's type, message and program
(issue 20, items 3 and 4)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixcheck import profiles
from radixcheck.audit import HOLD_SECONDS, AuditResult, Verdict, _Collector, findings_of, print_summary, report_card, write_outputs
from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES, Capabilities
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import EvictsLockedLeaf, LockCountWraps10Bit, MostRecentFirst
from radixcheck.properties.cache.scale_machine import (
    CROWD,
    CROWD_CHECKPOINTS,
    LOCK_COUNTER_BITS_CHECKED,
    runs_world_at,
    scale_machine_for,
)
from radixcheck.properties.findings.failures import describe_failure, shape_of
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference import RadixCache

MACHINES = {"test_cache_state_machine": machine_for, "test_cache_at_production_scale": scale_machine_for}


def _verdict(test: str, run) -> Verdict:  # noqa: ANN001 - a callable that must fail
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any failure is a verdict
        run()
    d = describe_failure(caught.value)
    return Verdict(test, "failed", 0.0, d["oracle"], d["reason"], d["program"], d["exceptions"])


def _machine_verdict(cache: type[RadixCache], test: str, page_size: int) -> Verdict:
    machine = MACHINES[test](cache, DEFAULT_CAPABILITIES, page_size, cache.__name__)
    return _verdict(f"{test}[page_size={page_size}]", lambda: run_machine(machine, profiles.SETTINGS["mutation"]))


@pytest.mark.deep  # an audit in a subprocess
def test_one_root_cause_in_several_tests_and_page_sizes_is_one_finding() -> None:
    """EvictsLockedLeaf fails both machines at two page sizes, with four different messages:
    one finding naming the four tests; a second root cause (MostRecentFirst's LRU order) stays
    apart and is listed after it (refcounts before LRU)."""
    locked = [_machine_verdict(EvictsLockedLeaf, test, p) for test in MACHINES for p in (1, 4)]
    assert len({v.reason for v in locked}) > 1, "the four failures differ in their specifics"
    lru = _machine_verdict(MostRecentFirst, "test_cache_state_machine", 4)
    findings = findings_of([lru, *locked, Verdict("test_reset_empties_the_cache[page_size=4]", "passed", 0.0)])
    assert [f.oracle for f in findings] == ["2 refcount safety", "4 LRU order"]
    assert sorted(findings[0].tests) == sorted(v.test for v in locked)
    assert findings[1].tests == [lru.test]
    assert "state." in findings[0].program


def test_findings_are_listed_most_fundamental_first() -> None:
    oracles = ["6 DFS bound", "4 LRU order", "2 refcount safety", "hang (per-operation time limit)",
               "1 prefix-set model", "3 slot conservation", "error"]
    verdicts = [Verdict(f"t{i}", "failed", 0.0, oracle, f"reason {i}") for i, oracle in enumerate(oracles)]
    assert [f.oracle for f in findings_of(verdicts)] == [
        "error", "1 prefix-set model", "3 slot conservation", "2 refcount safety",
        "hang (per-operation time limit)", "4 LRU order", "6 DFS bound"]


class EvictsLockedLeafThenRefusesItsHandle(RadixCache):
    """The cause: eviction ignores locks. Its echo: the cache's own handle check (the reference's
    ``_path``) later refuses the evicted node's unlock with ``ValueError: stale handle``."""

    def _evictable_leaf(self, node) -> bool:  # noqa: ANN001
        return node is not self.root and not node.children


def _echoing_run() -> list[Verdict]:
    """The state machine's finding (the refcount oracle sees the eviction) and the serving protocol's
    (the DFS test, where no oracle watches evictions: the unlock raises), as one audit meets them."""
    from radixcheck.properties.conformance.test_scheduling import test_bound_holds_under_any_budget

    target = SimpleNamespace(factory=EvictsLockedLeafThenRefusesItsHandle)
    crash = _verdict("test_bound_holds_under_any_budget[page_size=1]",
                     lambda: test_bound_holds_under_any_budget(target=target, extreme_page_size=1))
    cause = _machine_verdict(EvictsLockedLeafThenRefusesItsHandle, "test_cache_state_machine", 1)
    return [crash, cause]


@pytest.mark.deep  # an audit in a subprocess
def test_a_crash_of_the_targets_own_check_is_listed_after_the_oracle_finding_as_its_possible_echo(capsys) -> None:  # noqa: ANN001
    crash, cause = _echoing_run()
    assert crash.oracle == "crash (ValueError raised during a legal call)" and "stale handle" in crash.reason
    assert cause.oracle == "2 refcount safety"
    alone = findings_of([crash])  # with no oracle finding, nothing to be the echo of
    assert [(f.oracle, f.echo_of) for f in alone] == [(crash.oracle, "")]
    result = AuditResult("mine:make", "Capabilities(...)", [], "ci", [crash, cause], 1.0, 1)
    assert [(f.oracle, f.echo_of) for f in result.findings] == [
        (cause.oracle, ""), (crash.oracle, "finding 1 (2 refcount safety)")]
    card = report_card(result)
    assert card.index("### 1. 2 refcount safety") < card.index("### 2. crash (ValueError")
    assert "possibly an echo of finding 1 (2 refcount safety)" in card
    print_summary(result)
    out = capsys.readouterr().out
    assert "--- finding 2 of 2 (crash or hang; possibly an echo of finding 1 (2 refcount safety))" in out
    assert "(2 refcount safety, crash (ValueError raised during a legal call))" in out.splitlines()[-1]


@pytest.mark.deep  # an audit in a subprocess
def test_a_crash_after_an_oracle_fail_line_says_it_may_be_its_echo(capsys) -> None:  # noqa: ANN001
    """Live, the audit cannot know what comes later; but a crash after an oracle's FAIL line says so."""
    crash, cause = _echoing_run()
    collector = _Collector(0.0)
    collector._add(cause)
    collector._add(crash)
    first, second = capsys.readouterr().out.splitlines()
    assert "possibly an echo" not in first
    assert second.endswith("(possibly an echo of 2 refcount safety, FAIL above)")


@pytest.mark.deep  # an audit in a subprocess
def test_a_crash_waits_for_the_small_machines_verdict_and_then_says_it_may_be_its_echo(capsys, monkeypatch) -> None:  # noqa: ANN001
    """A new user's first FAIL line was the crash: the DFS test's unshrunk crash landed while the
    state machine was still shrinking its cause. The crash's line waits for the small machines of
    the run, so the cause is said first; a crash with no small machine still to come is said at once."""
    crash, cause = _echoing_run()
    collector = _Collector(0.0)
    collector._expect(["test_cache_machine.py::test_cache_state_machine[page_size=1]", "x.py::" + crash.test])
    collector._add(crash)  # arrives first
    assert capsys.readouterr().out == ""
    collector._add(cause)
    first, second = capsys.readouterr().out.splitlines()
    assert cause.test in first and "possibly an echo" not in first
    assert crash.test in second and second.endswith("(possibly an echo of 2 refcount safety, FAIL above)")
    collector._add(crash)  # no small machine left: at once
    assert crash.test in capsys.readouterr().out
    clock = [100.0]  # a crash that is the bug itself is not held back long: at most HOLD_SECONDS
    monkeypatch.setattr("radixcheck.audit.time.monotonic", lambda: clock[0])
    waiting = _Collector(0.0)
    waiting._expect(["test_cache_machine.py::test_cache_state_machine[page_size=1]"])
    waiting._add(crash)
    waiting._release_held(older_than=HOLD_SECONDS)  # what every report that comes in does first
    assert capsys.readouterr().out == ""
    clock[0] += HOLD_SECONDS
    waiting._release_held(older_than=HOLD_SECONDS)
    assert crash.test in capsys.readouterr().out
    several = _Collector(0.0, one_target=False)  # the matrix: another target's oracle is no cause of this crash
    several._expect(["test_cache_machine.py::test_cache_state_machine[other-page_size=1]"])
    several._add(cause)
    several._add(crash)
    assert "possibly an echo" not in capsys.readouterr().out


def test_the_crowd_is_the_measure_of_lock_counters_not_exercised() -> None:
    """Every crowd passes every checkpoint, so a counter of LOCK_COUNTER_BITS_CHECKED bits or fewer
    wraps at one; none reaches the next power of two, so a wider one never wraps."""
    assert CROWD[0] > max(CROWD_CHECKPOINTS) == 2**LOCK_COUNTER_BITS_CHECKED
    assert CROWD[1] < 2 ** (LOCK_COUNTER_BITS_CHECKED + 1)
    assert LOCK_COUNTER_BITS_CHECKED == LockCountWraps10Bit._BITS  # the widest counter mutant the suite kills
    assert f"lock counters wider than {LOCK_COUNTER_BITS_CHECKED} bits" in DEFAULT_CAPABILITIES.not_exercised()[-1]


def test_a_profile_below_one_world_builds_it_at_the_smallest_page_size_only() -> None:
    """`ci`, `audit` and `thorough` build a production world at every page size; the `gate` profile
    (radixcheck's own run) buys less than one, so one world, at the page size with the deep history."""
    for name in ("ci", "audit", "thorough", "dev"):
        assert all(runs_world_at(p, (1, 4, 16), profiles.SETTINGS[name]) for p in (1, 4, 16)), name
    assert [p for p in (1, 4, 16) if runs_world_at(p, (1, 4, 16), profiles.SETTINGS["gate"])] == [1]
    assert [p for p in (4, 16) if runs_world_at(p, (4, 16), profiles.SETTINGS["gate"])] == [4]


def test_a_conforming_verdict_says_what_it_did_not_check(capsys) -> None:  # noqa: ANN001
    caps = Capabilities(eviction_policy="fifo")
    result = AuditResult("mine:make", repr(caps), caps.not_exercised(), "ci", [Verdict("t", "passed", 0.0)], 1.0, 0)
    print_summary(result)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("radixcheck: mine:make conforms; not checked: eviction order, tenant isolation, "
                           "the request lifecycle, lock counters wider than 10 bits (")
    assert ("Verdict: conforms; not checked: eviction order, tenant isolation, the request lifecycle, lock counters wider than 10 "
            "bits,") in report_card(result)
    card = report_card(result)
    assert "tenant isolation (no namespaces declared" in card, card  # the report card says why it was not exercised


@pytest.mark.parametrize(("one", "other"), [
    ("evict(2) returned 3 but freed 4 slots", "evict(8) returned 12 but freed 16 slots"),
    ("evict() removed locked page(s) ending prefix [3, 0], [3, 0, 2]", "evict() removed locked page(s) ending prefix [0, 0, 0, 0]"),
    ("stale handle Node(key=(0, 0), lock_ref=0, dead)", "stale handle Node(key=(7,), lock_ref=1, dead)"),
    ("match_prefix([1, 2, … 4, 5] (3000 tokens)) returned 9 values", "match_prefix([1]) returned 2 values"),
    # a handle held by the machine, or by a running request (the lifecycle's record): the same argument; a wire
    # server numbering handles per cache failed so at page size 1 and 4 (two findings)
    ("inc_lock_ref(handle<[5]>) raised WireRefused: unknown handle", "inc_lock_ref(request<[5, 6]>) raised WireRefused: unknown handle"),
    # ... and a tenant's running request: its namespace is said up to the '>' that closes the record (CI's two findings)
    ("inc_lock_ref(handle<[]>) raised WireRefused: ValueError: unknown handle Node(key=(1, 2), lock_ref=1, linked)",
     "inc_lock_ref(request<[3, 3, … 0, 3] (21 tokens), namespace=(None, 'X')>) raised WireRefused: ValueError: unknown "
     "handle Node(key=(2, 0, 3), lock_ref=1, linked)"),
])
def test_the_same_failure_with_other_specifics_has_one_shape(one: str, other: str) -> None:
    assert shape_of(one) == shape_of(other)


def test_a_finding_under_other_namespaces_has_one_shape() -> None:
    """The namespaces a test draws differ from run to run and page size to page size: a message
    that names them (a tier page is named with its tenant) is the same finding."""
    one = ("match_prefix([0, 0] under namespace (None, 'X')) counted 2 tokens on host past the 0 its namespace has: "
           "those are the host copies of Page([0] under namespace ('X', None), host)")
    other = ("match_prefix([0, 0, 0, 0] under namespace 5) counted 4 tokens on host past the 0 its namespace has: "
             "those are the host copies of Page([0, 0] under namespace ('lora-7', None, (12,)), host) under namespace None")
    assert shape_of(one) == shape_of(other)
    assert shape_of("Page([1] under namespace 'a', device+host) left the device while a request holds a lock on it") == (
        shape_of("Page([1, 2], device+host) left the device while a request holds a lock on it"))
    assert "its namespace has" in shape_of(one)  # a word after "namespace" is not a namespace


def test_a_request_of_another_tenant_has_one_shape() -> None:
    """A window trial's planted bug (a load-back reviving each page's window from its parent's host
    copy) gave two 20w findings, one per page size, because one test's request was a tenant's and
    the other's the default namespace's (reports/findings/window_trial.md, friction 5): one shape."""
    tenant = ("windows() of Request([0, 0, 0, 0], namespace=('X', None), 4 cached)'s handle: token 2 (in Page([0, 0, 0, 0] "
              "under namespace ('X', None), device+host)) reports window value 899537215, not its own 271006842 (restored "
              "from its host copy by the load-back of operation 11, within the last 4 tokens)")
    default = ("windows() of Request([0, 0], 2 cached)'s handle: token 1 (in Page([0, 0], device+host)) reports window value 1, "
               "not its own 512697015 (restored from its host copy by the load-back of operation 11, within the last 4 tokens)")
    assert shape_of(tenant) == shape_of(default)
    tombstoned = ("windows() of Request([0, 0], 2 cached)'s handle: token 1 (in Page([0, 0], device+host)) reports a live "
                  "window value 1, but it is tombstoned there (given by the insert of operation 3)")
    assert shape_of(tombstoned) != shape_of(default)  # another wrong value: another finding


def test_a_tier_machine_s_steps_honour_the_shrink_budget() -> None:
    """A new user's trial: a tier target's shrink ran 19 s against its 15 s budget, since only a
    guarded call checked the budget and a tier world calls its cache directly. Every step of a
    machine checks it now (measured: a 1 s budget ended each tier mutant's shrink within 1.1 s,
    up to 24 s without the check)."""
    from radixcheck.properties.findings.verdict import naming_steps
    from radixcheck.properties.target import BudgetSpent, time_budget
    from radixcheck.properties.tiers.machine import tier_machine_for
    from radixcheck.reference.tiered_cache import TieredRadixCache

    state = naming_steps(tier_machine_for(TieredRadixCache))()
    state.serve(base=(0, 1), cut=2, tail=[], load=True, hold=False)  # within no budget: runs
    with time_budget(-1.0), pytest.raises(BudgetSpent):
        state.serve(base=(0, 1), cut=2, tail=[], load=True, hold=False)


def test_different_calls_have_different_shapes() -> None:
    assert shape_of("evict(2) returned 3 but freed 4 slots") != shape_of("evict_prefix([2]) returned 3 but freed 4 slots")
    assert shape_of("protected_size() is 0, but 64 cached tokens are under a lock") != shape_of(
        "evict() removed locked page(s) ending prefix [0]")


class CrashesInEvict(RadixCache):
    def evict(self, num_tokens: int) -> int:
        if num_tokens > 0 and self.evictable_size() > 0:
            raise RuntimeError("evict blew up")
        return super().evict(num_tokens)


def test_a_crash_keeps_its_program_type_message_and_place() -> None:
    v = _machine_verdict(CrashesInEvict, "test_cache_state_machine", 1)
    assert v.oracle == "crash (RuntimeError raised during a legal call)"
    [e] = v.exceptions
    assert (e["type"], e["message"]) == ("RuntimeError", "evict blew up")
    assert "state." in e["program"] and "state.sizes_add_up()" not in e["program"]
    assert e["raised_at"].startswith(__file__) and e["raised_at"].endswith("in evict")


def _two_bugs() -> None:
    @settings(database=None, derandomize=True, report_multiple_bugs=True, max_examples=200)
    @given(st.integers(0, 100))
    def two_bugs(n: int) -> None:
        if n % 2 and n > 10:
            raise RuntimeError(f"odd {n}")
        if n > 10:
            raise KeyError(f"even {n}")

    two_bugs()


def test_an_exception_group_keeps_every_exception_in_the_card_and_the_json(tmp_path: Path) -> None:
    """Hypothesis reports two distinct bugs as an ExceptionGroup: each keeps its type, message
    and program, in the verdict, the findings, the report card and the JSON."""
    v = _verdict("test_dfs_order_meets_the_bound[page_size=1]", _two_bugs)
    assert sorted(e["type"] for e in v.exceptions) == ["KeyError", "RuntimeError"]
    assert all("two_bugs(" in e["program"] for e in v.exceptions)
    assert "KeyError" in v.reason and "RuntimeError" in v.reason
    result = AuditResult("mine:make", "Capabilities(...)", [], "ci", [v], 1.0, 1)
    assert sorted(f.exception for f in result.findings) == ["KeyError", "RuntimeError"]
    card = report_card(result)
    assert "no program" not in card
    for e in v.exceptions:
        assert e["message"] in card and e["program"].splitlines()[0] in card
    write_outputs(result, None, tmp_path / "audit.json")
    saved = json.loads((tmp_path / "audit.json").read_text())
    assert sorted(e["type"] for e in saved["verdicts"][0]["exceptions"]) == ["KeyError", "RuntimeError"]
    assert sorted(f["exception"] for f in saved["findings"]) == ["KeyError", "RuntimeError"]


ACCEPTS_BAD_PAGE_SIZES = """
    from radixcheck import Capabilities
    from radixcheck.reference import RadixCache

    def make(allocator, page_size):
        if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
            page_size = 1  # the bug: a bad page size is accepted
        return RadixCache(allocator, page_size)

    make.capabilities = Capabilities(page_sizes=(1, 2))
"""


def audit_construction(project: Path, *args: str) -> subprocess.CompletedProcess:
    """``radixcheck audit`` over the construction tests only (seconds, not a minute)."""
    program = ("import sys, radixcheck.audit as audit; audit.CONFORMANCE = 'radixcheck.properties.conformance.test_construction'; "
               "from radixcheck.cli import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", program, "audit", "lenient:make", "-n", "0", *args],
                          cwd=project, capture_output=True, text=True, timeout=120)


@pytest.mark.deep  # an audit in a subprocess
def test_the_audit_prints_one_finding_for_five_failing_tests(tmp_path: Path) -> None:
    (tmp_path / "lenient.py").write_text(textwrap.dedent(ACCEPTS_BAD_PAGE_SIZES))
    run = audit_construction(tmp_path, "--json", "audit.json", "--report", "audit.md")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 finding(s) in 5 failing test(s)" in run.stdout
    [line] = [ln for ln in run.stdout.splitlines() if ln.startswith("failed 5 test(s): ")]
    assert all(f"test_bad_page_size_is_refused[{p}]" in line for p in ("0", "-1", "1.5", "True", "None"))
    [finding] = json.loads((tmp_path / "audit.json").read_text())["findings"]
    assert finding["oracle"] == "bad input refused, state unchanged" and len(finding["tests"]) == 5
    assert "### 1. bad input refused" in (tmp_path / "audit.md").read_text()


def test_a_finding_after_two_waived_ones_names_both_as_its_possible_cause() -> None:
    """The hybrid trial waived a state finding and a tenant-isolation finding; the slot finding that
    the waived quarantine left behind was said to be an echo of the state finding alone (the first)."""
    from radixcheck.audit import after_waived

    def waiver(oracle: str, line: int) -> dict[str, str]:
        return {"oracle": oracle, "type": "X", "waiver": f"w.txt:{line}: known"}

    state, tenants = waiver("20 second-pool value live or tombstoned", 1), waiver("10 tenant isolation", 2)
    slots = Verdict("t[page_size=1]", "failed", 0.0, "3 slot conservation", "device slots leaked", waived=[state, tenants])
    alone = Verdict("t[page_size=2]", "failed", 0.0, "3 slot conservation", "device slots leaked", waived=[tenants])
    (both,) = after_waived(findings_of([slots]), [slots])
    assert both.echo_of == ("the waived 20 second-pool value live or tombstoned finding (w.txt:1: known) or "
                            "the waived 10 tenant isolation finding (w.txt:2: known)")
    (one,) = after_waived(findings_of([alone]), [alone])
    assert one.echo_of == "the waived 10 tenant isolation finding (w.txt:2: known)"


def test_a_finding_after_a_waived_order_finding_is_not_said_as_its_echo() -> None:
    """The after-verdict trial (session 59): a layers cache with a tenant leak and an order bug, the
    order one waived; the leak (the same program as without the waiver) was said to be "possibly an
    echo of the waived 4 eviction order finding". An order model applies the cache's choice before it
    raises, so a waived order finding leaves no echo (docs/how-to/waivers.md); another waived finding
    beside it still names only itself."""
    from radixcheck.audit import after_waived

    def waiver(oracle: str, line: int) -> dict[str, str]:
        return {"oracle": oracle, "type": "X", "waiver": f"w.txt:{line}: known"}

    order, host_order, tenants = waiver("4 eviction order", 1), waiver("4h host eviction order", 2), waiver("10 tenant isolation", 3)
    leak = Verdict("t[page_size=1]", "failed", 0.0, "10 tenant isolation", "a match counted the default namespace's pages",
                   waived=[order, host_order])
    (alone,) = after_waived(findings_of([leak]), [leak])
    assert alone.echo_of == ""
    slots = Verdict("t[page_size=2]", "failed", 0.0, "3 slot conservation", "device slots leaked", waived=[order, tenants])
    (echo,) = after_waived(findings_of([slots]), [slots])
    assert echo.echo_of == "the waived 10 tenant isolation finding (w.txt:3: known)"


def test_a_finding_whose_replay_never_met_the_waived_one_is_not_said_as_its_echo() -> None:
    """The after-verdict trial (session 59): a layers cache's tenant leak waived, its order bug was said
    to be "possibly an echo of the waived 10 tenant isolation finding", though its reduced program has
    no tenant in it and runs clean on the cache without the order bug. The replay of the reduced
    program records the waived findings it met (``waived_shown``); one that reached the finding
    without meeting the waived one is no echo of it. A replay that met it, or never reached the
    finding, or none at all: the label stays."""
    from radixcheck.audit import after_waived

    tenants = {"oracle": "10 tenant isolation", "type": "X", "waiver": "w.txt:1: known"}
    reason = "evict(4) freed Page([0, 0]) while Page([0, 2]) stayed: under priority it goes first"

    def labelled(**repro: Any) -> str:
        order = Verdict("t[page_size=1]", "failed", 0.0, "4 eviction order", reason, waived=[tenants],
                        repro={"text": None, "why_not": "", "oracle": "4 eviction order", "message": reason, **repro})
        (finding,) = after_waived(findings_of([order]), [order])
        return finding.echo_of

    reached = [["4 eviction order", ""]]  # an order finding's signature has no shape
    assert labelled(shows=reached, waived_shown=[]) == ""
    assert labelled(shows=reached, waived_shown=["10 tenant isolation"]) == "the waived 10 tenant isolation finding (w.txt:1: known)"
    assert labelled(shows=[], waived_shown=[]) == "the waived 10 tenant isolation finding (w.txt:1: known)"  # cut short
    assert labelled(shows=reached) == "the waived 10 tenant isolation finding (w.txt:1: known)"  # no record: cannot say
