"""Known findings (`radixcheck audit --waive FILE`, issue 20 item 5): a waived finding is reported
as waived, the state machine looks past it to the next bug in the same test, and a cache whose
only findings are waived conforms (exit 0)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from radixcheck import profiles
from radixcheck.cli import main
from radixcheck.oracles import violations
from radixcheck.oracles.policy import Choice, LeafStats
from radixcheck.oracles.violations import EvictionOrderViolation, LRUOrderViolation, RefcountViolation, SlotViolation
from radixcheck.properties.cache.contract import Capabilities
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import LfuReference, MostRecentFirst, SplitRefreshesSuffix, machine_for_mutant
from radixcheck.properties.findings.failures import oracle_of
from radixcheck.properties.findings.names import oracle_names
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.findings.waivers import WaiverError, WaiverLog, parse_waivers, read_waivers

from . import user_lfu_recency
from .test_findings import ACCEPTS_BAD_PAGE_SIZES, audit_construction

FEW = settings(profiles.SETTINGS["mutation"], max_examples=25)  # a waived run must search to the end: keep it short


def test_the_file_format() -> None:
    waivers = parse_waivers(textwrap.dedent("""
        # known findings of mine:make
        mine:*   test_cache_state_machine[page_size=16]   4 LRU order   # splits keep the old stamp (upstream #7)

        *        test_*                                    RuntimeError  # evict crashes on an empty tree
    """), "known.txt")
    assert [(w.target, w.test, w.finding, w.where) for w in waivers] == [
        ("mine:*", "test_cache_state_machine[page_size=16]", "4 LRU order", "known.txt:3"),
        ("*", "test_*", "RuntimeError", "known.txt:5")]
    assert waivers[0].reason == "splits keep the old stamp (upstream #7)"
    lru = waivers[0]
    assert lru.applies_to(("mine:make",), "test_cache_state_machine[page_size=16]")  # brackets: literally
    assert not lru.applies_to(("mine:make",), "test_cache_state_machine[page_size=1]")
    assert not lru.applies_to(("yours:make",), "test_cache_state_machine[page_size=16]")
    assert lru.waives(LRUOrderViolation("x")) and not lru.waives(RefcountViolation("x"))
    assert waivers[1].applies_to(("x:y",), "test_no_order_beats_dfs[page_size=1]")  # the name without parameters
    assert waivers[1].waives(RuntimeError("boom")) and not waivers[1].waives(KeyError("boom"))
    [as_lru] = parse_waivers("* test_cache_state_machine 4 eviction order as lru  # evicts as LRU (upstream #3)")
    assert (as_lru.finding, as_lru.follows, as_lru.reason) == ("4 eviction order", "lru", "evicts as LRU (upstream #3)")
    assert str(as_lru) == "*  test_cache_state_machine  4 eviction order as lru  # evicts as LRU (upstream #3)"
    assert not as_lru.waives(EvictionOrderViolation("x"))  # an order finding with no choice on it: not this bug
    by_base_class = parse_waivers("* * ContractViolation  # every oracle")[0]
    assert by_base_class.waives(LRUOrderViolation("x")) and not by_base_class.waives(RuntimeError("x"))


@pytest.mark.parametrize(("text", "phrase"), [
    ("* * 4 LRU order", "needs a reason"),
    ("* * 4 LRU order #   ", "needs a reason"),
    ("* test_x  # reason", "expected '<target glob> <test glob>"),
    ("* 'test_x 4 LRU  # reason", "No closing quotation"),
    ("mine:make  4 eviction amount  # the test column left out", "test glob '4' .*is the test column missing"),
    ("* test_cache_state_machine 4 evicton amount  # reason", "unknown oracle .*did you mean '4 eviction amount'\\?"),
    ("* test_cache_state_machin 4 LRU order  # reason", "test glob .*did you mean 'test_cache_state_machine'\\?"),
    ("* test_* mycache.StaleHandle  # reason", "by its class name alone \\('StaleHandle'\\)"),
    ("* * slot conservation  # reason", "unknown oracle .*did you mean '3 slot conservation'"),
    ("* * 4 eviction order as  # reason", "'as' needs a policy name \\(lru, lfu, "),
    ("* * 4 eviction order as lfru  # reason", "unknown policy 'lfru' after 'as' \\(did you mean 'lru'\\?\\)"),
    ("* * 4 LRU order as lfu  # reason", "'as lfu' .* applies to '4 eviction order' alone, not '4 LRU order'"),
    ("* * RuntimeError as lru  # reason", "'as lru' .* applies to '4 eviction order' alone, not 'RuntimeError'"),
])
def test_a_malformed_line_names_the_file_and_line(text: str, phrase: str) -> None:
    with pytest.raises(WaiverError, match=phrase) as refused:
        parse_waivers(f"# header\n{text}\n", "known.txt")
    assert str(refused.value).startswith("known.txt:2: ")


@pytest.mark.parametrize("finding", ["4 LRU order", "4 *", "crash *", "crash (KeyError raised during a legal call)", "assertion",
                                     "RuntimeError", "StaleHandleError", "*Error", "error"])
def test_an_oracle_name_a_class_name_or_a_glob_of_either_loads(finding: str) -> None:
    """A finding with a space or a leading digit must be an oracle's name (or glob one); a bare
    identifier is a class name, the cache's own included (struct's is ``error``)."""
    [waiver] = parse_waivers(f"* test_cache_state_machine[page_size=16] {finding}  # reason")
    assert waiver.finding == finding


def test_every_name_oracle_of_gives_is_a_known_oracle() -> None:
    """The known names come from the oracle classes and oracle_of: a finding of each loads as a waiver."""
    classes = [c for c in vars(violations).values() if isinstance(c, type) and issubclass(c, violations.ContractViolation)]
    names = [oracle_of(cls("x")) for cls in classes] + [oracle_of(AssertionError()), oracle_of(KeyError("k"))]
    assert "4 eviction amount" in names and "crash (KeyError raised during a legal call)" in names
    for name in names:
        assert parse_waivers(f"* * {name}  # reason")[0].finding == name
    assert len(oracle_names()) == len(set(oracle_names())) >= len(classes)


def test_the_shipped_waiver_files_load() -> None:
    files = sorted((Path(__file__).resolve().parents[1] / "reports" / "waivers").glob("*.txt"))
    assert files
    for path in files:
        assert read_waivers(path), path


BAD_LINES = {"no reason": "* * 4 LRU order", "no test column": "radixcheck.reference:RadixCache  4 eviction amount  # reason",
             "misspelled oracle": "* * 4 evicton amount  # reason", "unknown test": "* test_lru_order 4 LRU order  # reason",
             "unknown policy": "* * 4 eviction order as lfru  # reason"}


@pytest.mark.parametrize("content", [None, *BAD_LINES.values()], ids=["missing", *BAD_LINES])
def test_a_bad_waiver_file_is_exit_2_with_one_line(tmp_path: Path, capsys, content: str | None) -> None:
    path = tmp_path / "known.txt"
    if content is not None:
        path.write_text(f"# known findings\n{content}\n")
    assert main(["audit", "radixcheck.reference:RadixCache", "--waive", str(path)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("radixcheck: error: ") and err.count("\n") == 1 and "known.txt" in err
    assert content is None or "known.txt:2: " in err
    assert out == ""  # refused before the audit started


def _pytest_construction(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--pyargs",
                           "radixcheck.properties.conformance.test_construction", "--radix-target", "lenient:make", *args],
                          cwd=project, capture_output=True, text=True, timeout=120)


@pytest.mark.deep  # pytest in a subprocess
def test_the_plugin_refuses_a_bad_waiver_file_before_any_test(tmp_path: Path) -> None:
    """The plugin reads the file with the audit's reader (every kind of bad line is tested above, in
    the audit): one bad line is enough to show it stops the run before any test."""
    line = BAD_LINES["misspelled oracle"]
    (tmp_path / "lenient.py").write_text(textwrap.dedent(ACCEPTS_BAD_PAGE_SIZES))
    (tmp_path / "known.txt").write_text(f"# known findings\n{line}\n")
    run = _pytest_construction(tmp_path, "-n", "0", "--radix-waive", "known.txt")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert re.search(r"^ERROR: radixcheck: known\.txt:2: ", run.stderr, re.M), run.stderr
    assert not re.search(r"passed|failed|xfailed", run.stdout)  # nothing ran


@pytest.mark.deep  # pytest in a subprocess
def test_a_waiver_that_matched_nothing_is_a_warning_in_the_summary(tmp_path: Path) -> None:
    """Line 2 waives the construction tests' finding, line 3 names a test that passes: only line 3
    is warned about, when the waivers match in pytest-xdist's workers (the harder case: in one
    process the audit's own test below sees the same)."""
    workers = "2"
    (tmp_path / "lenient.py").write_text(textwrap.dedent(ACCEPTS_BAD_PAGE_SIZES))
    (tmp_path / "known.txt").write_text("# known findings\nlenient:* test_bad_page_size_is_refused bad input*  # clamped\n"
                                        "* test_reset_empties_the_cache RuntimeError  # fixed long ago\n")
    run = _pytest_construction(tmp_path, "-n", workers, "--radix-waive", "known.txt")
    assert run.returncode == 0 and "5 xfailed" in run.stdout, run.stdout[-2000:]
    warnings = [ln for ln in run.stdout.splitlines() if ln.startswith("radixcheck: waiver ")]
    expected = "radixcheck: waiver known.txt:3 matched no finding: *  test_reset_empties_the_cache  RuntimeError  # fixed long ago"
    assert warnings == [expected]


def _log(text: str) -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(text), ("x:y",), "test_cache_state_machine[page_size=1]")


@pytest.mark.deep  # a machine run past a waived finding
def test_the_machine_looks_past_a_waived_finding() -> None:
    """MostRecentFirst fails the LRU-order oracle; waived, its whole search passes, and the log
    has the finding, with the rule that met it and its waiver."""
    with pytest.raises(LRUOrderViolation):
        run_machine(machine_for_mutant(MostRecentFirst), FEW)
    log = _log("* * 4 LRU order  # MRU on purpose")
    run_machine(machine_for_mutant(MostRecentFirst), FEW, waived=log)
    [found] = log.findings()
    assert (found["oracle"], found["type"], found["waiver"]) == ("4 LRU order", "LRUOrderViolation", "<waivers>:1: MRU on purpose")
    assert found["times_met"] >= 1 and found["step"]


class FixedPoolMostRecentFirst(MostRecentFirst):
    """MostRecentFirst over a fixed pool (``max_cached_pages``): the suite evicts to make room
    before its inserts, and those evictions meet the (waived) LRU finding."""

    capabilities = Capabilities(max_cached_pages=12)


@pytest.mark.deep  # a machine run past a waived finding
def test_a_waived_finding_in_the_eviction_that_makes_room_leaks_no_caller_slot() -> None:
    """A caller makes room before it allocates its request's slots (as a scheduler evicts, then
    allocates): a waived finding in that eviction ends the step before any slot is the caller's,
    so nothing leaks. (Allocated first, the insert's slots were held by nobody once the step
    ended: slot conservation failed after every such finding, the SGLang FULL+SWA lifecycle row's
    "8 slots leaked".)"""
    machine = machine_for(FixedPoolMostRecentFirst, FixedPoolMostRecentFirst.capabilities, 1, "meta_fixed_pool_mru")
    log = _log("* * 4 LRU order  # MRU on purpose")
    run_machine(machine, FEW, waived=log)
    [found] = log.findings()
    assert found["oracle"] == "4 LRU order" and found["times_met"] >= 1


class TwoBugs(RuleBasedStateMachine):
    """A machine whose first bug is always an LRU finding, met in a step that also feeds a
    bundle, and whose second bug (a crash) can only come after it; one invariant breaks a waived
    slot oracle now and then."""

    items = Bundle("items")

    def __init__(self) -> None:
        super().__init__()
        self.lru_seen = 0

    @rule(target=items, n=st.integers(0, 3))
    def add(self, n: int) -> int:
        if n == 3:
            self.lru_seen += 1
            raise LRUOrderViolation("evict(1) evicted a page last used by call 2 while an older one survived")
        return n

    @rule(item=items)
    def use(self, item: int) -> None:
        if self.lru_seen and item == 2:
            raise RuntimeError("reset blew up")

    @invariant()
    def slots(self) -> None:
        if self.lru_seen == 2:
            raise SlotViolation("slot 7 leaked")


def test_the_search_goes_on_to_the_next_bug_in_the_same_test() -> None:
    with pytest.raises(LRUOrderViolation):
        run_machine(TwoBugs, FEW)
    log = _log("* * LRUOrderViolation  # known\n* * 3 slot*  # known too")
    with pytest.raises(RuntimeError, match="reset blew up") as caught:
        run_machine(TwoBugs, FEW, waived=log)
    assert "state.use(" in "\n".join(caught.value.__notes__)
    assert {(f["oracle"], f["step"]) for f in log.findings()} >= {("4 LRU order", "add")}


def test_a_waiver_that_does_not_apply_changes_nothing() -> None:
    log = _log("other:* * 4 LRU order  # another target's")
    assert not log
    with pytest.raises(LRUOrderViolation):
        run_machine(machine_for_mutant(MostRecentFirst), FEW, waived=log or None)


@pytest.mark.deep  # an audit to its verdict
def test_an_audit_with_only_waived_findings_conforms(tmp_path: Path) -> None:
    """The construction tests fail five times for one bug; waived, the audit exits 0 and says so in
    the terminal, the report card and the JSON."""
    (tmp_path / "lenient.py").write_text(textwrap.dedent(ACCEPTS_BAD_PAGE_SIZES))
    (tmp_path / "known.txt").write_text("lenient:* test_bad_page_size_is_refused bad input*  # page sizes are clamped on purpose\n")
    run = audit_construction(tmp_path, "--waive", "known.txt", "--json", "audit.json", "--report", "audit.md")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "conforms, with 1 waived finding(s)" in run.stdout
    assert "waived by " in run.stdout and "page sizes are clamped on purpose" in run.stdout
    saved = json.loads((tmp_path / "audit.json").read_text())
    assert saved["conforms"] and not saved["findings"]
    assert [v["outcome"] for v in saved["verdicts"] if v["test"].startswith("test_bad_page")] == ["waived"] * 5
    [waived] = saved["waived"]
    assert waived["oracle"] == "bad input refused, state unchanged" and len(waived["tests"]) == 5
    card = (tmp_path / "audit.md").read_text()
    assert "conforms, with 1 waived finding(s)" in card and "## Waived findings" in card


@pytest.mark.deep  # an audit to its verdict
def test_the_audit_warns_of_a_waiver_that_matched_nothing(tmp_path: Path) -> None:
    """In the audit's stderr, report card and JSON; the waiver that matched is not named there."""
    (tmp_path / "lenient.py").write_text(textwrap.dedent(ACCEPTS_BAD_PAGE_SIZES))
    (tmp_path / "known.txt").write_text("lenient:* test_bad_page_size_is_refused BadInputViolation  # clamped\n"
                                        "* test_reset_empties_the_cache 4 LRU order  # fixed long ago\n")
    run = audit_construction(tmp_path, "--waive", "known.txt", "--json", "audit.json", "--report", "audit.md")
    assert run.returncode == 0, run.stdout + run.stderr
    warning = f"waiver {tmp_path / 'known.txt'}:2 matched no finding: *  test_reset_empties_the_cache  4 LRU order  # fixed long ago"
    assert f"radixcheck: warning: {warning}\n" in run.stderr and "known.txt:1 matched" not in run.stderr
    assert json.loads((tmp_path / "audit.json").read_text())["unmatched_waivers"] == [warning]
    card = (tmp_path / "audit.md").read_text()
    assert f"**Warning:** {warning}" in card and "known.txt:1 matched" not in card


@pytest.mark.deep  # an audit of two targets
def test_in_a_several_target_run_a_waiver_names_targets_by_name(tmp_path: Path) -> None:
    """The matrix's form: targets named ``name=spec``; a waiver for one name leaves the others alone."""
    (tmp_path / "lenient.py").write_text(textwrap.dedent(ACCEPTS_BAD_PAGE_SIZES))
    (tmp_path / "known.txt").write_text("engine.lenient test_bad_page_size_is_refused BadInputViolation  # clamped\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-rA", "--pyargs",
                          "radixcheck.properties.conformance.test_construction", "-k", "bad_page_size",
                          "--radix-target", "engine.lenient=lenient:make", "--radix-target", "also.lenient=lenient:make",
                          "--radix-waive", "known.txt"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "5 failed" in run.stdout and "5 xfailed" in run.stdout, run.stdout[-2000:]
    assert run.stdout.count("XFAIL ") == 5 and all("[engine.lenient-" in ln for ln in run.stdout.splitlines() if ln.startswith("XFAIL "))


def test_the_matrix_shows_waived_cells_and_links_them_to_their_finding() -> None:
    from radixcheck.reports import matrix

    waived = [{"oracle": "4 LRU order", "type": "LRUOrderViolation", "message": "evict(2) evicted a page ... survived",
               "waiver": "/x/reports/waivers/mini_sglang.txt:6: finding 2", "times_met": 3}]
    rows = [{"name": "mini_sglang.newest", "spec": "m:newest", "seconds": 1.0, "tests": {
        "test_cache_state_machine[page_size=1]": {"outcome": "passed", "waived": waived},
        "test_cache_state_machine[page_size=4]": {"outcome": "waived", "oracle": "4 LRU order", "waived": waived},
        "test_no_order_beats_dfs[page_size=1]": {"outcome": "passed"}}}]
    card = matrix.render(rows, {"command": "x", "xdist": [], "profile": "audit", "wall_seconds": 1, "machine": "2 cores"})
    assert "| `mini_sglang.newest` | pass (waived) | waived | pass |" in card
    assert "| `mini_sglang.newest` | 2 |  |  | 1 | 1.0 |" in card  # passed, failed, skipped, waived
    assert "waived: oracle *4 LRU order* — **finding #2 a split keeps the stale timestamp**" in card
    assert "(mini_sglang.txt, the `4 LRU order` line: finding 2)" in card  # by content: a line number moves


def test_a_finding_met_only_after_a_waived_one_is_said_as_its_possible_echo() -> None:
    """A new user waived ``return values`` (evict returned a node count): the model then never
    applied that eviction, and a sizes finding followed, unlabelled. Now it reads as a possible echo."""
    from radixcheck.audit import Verdict, findings_of

    waived = [{"oracle": "return values", "type": "ReturnValueViolation", "message": "evict(2) returned 1", "waiver": "known.txt:1"}]
    after = Verdict("test_cache_state_machine[page_size=1]", "failed", 1.0, "2 refcount safety",
                    "total_size() is 1, but 4 tokens are cached", waived=waived)
    alone = Verdict("test_cache_state_machine[page_size=4]", "failed", 1.0, "4 LRU order", "evicted [1] before [0]")
    found = {f.oracle: f.echo_of for f in findings_of([after, alone])}
    assert found == {"2 refcount safety": "the waived return values finding (known.txt:1)", "4 LRU order": ""}


def test_a_waived_finding_that_ends_the_production_world_says_what_it_left_out() -> None:
    """A counter of 8 bits wraps in the world's first story (the crowd); waived, the world ends there,
    and the finding records the stories never built, which the audit and the matrix print beside it."""
    from radixcheck.audit import cut_short
    from radixcheck.properties.cache.mutants import LockCountWraps8Bit
    from radixcheck.properties.cache.scale_machine import scale_machine_for

    def world() -> type:
        return scale_machine_for(LockCountWraps8Bit, LockCountWraps8Bit.capabilities, 1, "meta_cut_short")

    with pytest.raises(Exception) as caught:
        run_machine(world(), profiles.SETTINGS["mutation"])
    log = WaiverLog.for_test(parse_waivers(f"* * {type(caught.value).__name__}  # counted in 8 bits on purpose"), ("x:y",),
                             "test_cache_at_production_scale[page_size=1]")
    run_machine(world(), profiles.SETTINGS["mutation"], waived=log)
    # the wrap shows in two shapes (a locked page evicted, a sizes finding): one entry each, the one that ended the world says so
    found = next(f for f in log.findings() if f["message"].startswith("evict() removed locked"))
    assert found["cut_short"].startswith("the production world stopped here; not built: a history "), found
    assert "requests on" in found["cut_short"] and "memory pressure" in found["cut_short"]
    assert cut_short(found).endswith("the verdict does not cover it") and cut_short({"oracle": "x"}) == ""


# ---- a waived choice oracle leaves no echo (issue 40 item 6) -----------------------------------------------

ORDER_WAIVED = "* * 4 eviction order  # the counter is not bumped on re-insert (known)"


def _lfu_machine(factory: Any, page_size: int = 1, **changes: Any) -> type:
    capabilities = dataclasses.replace(factory.capabilities, **changes)
    return machine_for(factory, capabilities, page_size, f"meta_lfu_{factory.__name__}_{sorted(changes)}")


def test_a_waived_order_finding_leaves_the_model_in_step_with_the_cache() -> None:
    """An LFU whose counter is not bumped on re-insert evicts another leaf than its policy says.
    Waived, the model adopts the cache's victims (it applies the whole eviction before the order
    finding is raised), so the search goes on to its end with no echo: before, the model kept the
    leaves the cache had evicted, and the next size check failed ("total_size() is 2, but 3
    tokens are cached")."""
    log = _log(ORDER_WAIVED)
    run_machine(_lfu_machine(user_lfu_recency.make_unbumped), settings(FEW, max_examples=6), waived=log)  # 0.2 s CPU: fast tier
    [found] = log.findings()
    assert found["oracle"] == "4 eviction order" and found["times_met"] >= 1


class UnbumpedKeepsEvictedLeaves(user_lfu_recency.UnbumpedOnReinsert):
    """The LFU bug above, and a real one behind it: ``evict`` frees a leaf's slots but leaves the
    node in the tree (its slots can be handed out again while the cache still serves them)."""

    def _unlink(self, node: Any) -> None:
        pass


def _keeps_evicted_leaves(allocator: Any, page_size: int) -> UnbumpedKeepsEvictedLeaves:
    return UnbumpedKeepsEvictedLeaves(allocator, page_size)


_keeps_evicted_leaves.capabilities = user_lfu_recency.make_unbumped.capabilities


@pytest.mark.deep
def test_a_real_bug_behind_a_waived_order_finding_is_still_caught() -> None:
    """Adopting the cache's victims does not hide a bug in how they were evicted: a node kept in
    the tree after its slots were freed is caught by a prefix-set or size oracle, not waived."""
    log = _log(ORDER_WAIVED)
    with pytest.raises((RefcountViolation, SlotViolation, violations.PrefixSetViolation)):
        run_machine(_lfu_machine(_keeps_evicted_leaves), FEW, waived=log)


@pytest.mark.deep
@pytest.mark.parametrize("checks_locks", [True, False], ids=["checks locks", "trusts its callers"])
def test_a_correct_lfu_passes_with_the_order_waiver_unmet(checks_locks: bool) -> None:
    log = _log(ORDER_WAIVED)
    run_machine(_lfu_machine(user_lfu_recency.make, checks_locks=checks_locks), FEW, waived=log)
    assert log.findings() == []


@pytest.mark.deep
def test_the_lfu_audit_with_its_order_finding_waived_conforms(tmp_path: Path) -> None:
    """The issue's case, end to end: exit 0, "conforms, with 1 waived finding(s)" (it exited 1 on a
    "2 refcount safety" echo, in the state machine and at production scale)."""
    shutil.copy(Path(user_lfu_recency.__file__), tmp_path / "user_lfu.py")
    (tmp_path / "known.txt").write_text(ORDER_WAIVED + "\n")
    run = subprocess.run([sys.executable, "-m", "radixcheck", "audit", "user_lfu:make_unbumped", "--waive", "known.txt",
                          "-n", "0", "--json", "audit.json"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "user_lfu:make_unbumped conforms, with 1 waived finding(s)" in run.stdout
    saved = json.loads((tmp_path / "audit.json").read_text())
    assert saved["conforms"] and not saved["findings"] and [w["oracle"] for w in saved["waived"]] == ["4 eviction order"]


# ---- a waiver names one known order bug by the order the cache follows (issue 40 item 6) -------------------------


class LfuCountsNoHit(LfuReference):
    """The known bug: an LFU cache that never counts a hit, so it evicts as LRU (TokenSpeed's #3)."""

    def _hit(self, node: Any, by: str) -> None:
        pass


class LfuCountsNoHitAndRefreshesSuffix(LfuCountsNoHit, SplitRefreshesSuffix):
    """The known bug, and a new one in the same cache: a split stamps the unmatched suffix as used
    (SGLang's #3), so even as LRU it evicts the wrong leaf."""


AS_LRU = "* * 4 eviction order as lru  # counts no hit: evicts as LRU (known)"


def _policy_run(cache: type, waiver: str, examples: int = 25) -> WaiverLog:
    log = _log(waiver)
    run_machine(machine_for(cache, cache.capabilities, 1, f"meta_as_{cache.__name__}"), settings(FEW, max_examples=examples),
                waived=log)
    return log


def test_a_choice_is_made_by_a_key_when_nothing_left_is_colder() -> None:
    def stats(last_use: int, hits: int) -> LeafStats:
        return LeafStats(last_use=last_use, created=0, hits=hits, priority=0, depth=1, start=0, history=1)

    by_recency, by_hits = (lambda s: s.last_use), (lambda s: (s.hits, s.last_use))
    choice = Choice(freed=(stats(1, 5),), left=(stats(2, 1), stats(3, 1)))  # the oldest went, though hit the most
    assert choice.made_by(by_recency) and not choice.made_by(by_hits)
    assert Choice(freed=(stats(2, 1),), left=(stats(2, 1),)).made_by(by_recency)  # a tie may go either way
    assert Choice(freed=(), left=(stats(1, 1),)).made_by(by_hits) and Choice(freed=(stats(1, 1),), left=()).made_by(by_hits)


def test_a_waiver_as_a_policy_still_catches_a_second_order_bug() -> None:
    """The cache's known bug (it evicts as LRU) is waived by its signature; its second order bug
    is not explained by LRU, and is caught, with the choice that gives it away."""
    with pytest.raises(EvictionOrderViolation) as caught:
        _policy_run(LfuCountsNoHitAndRefreshesSuffix, AS_LRU, examples=10)
    assert not caught.value.choice.made_by(lambda s: s.last_use)


@pytest.mark.deep
def test_a_waiver_as_a_policy_waives_every_instance_of_the_known_bug() -> None:
    """The known bug alone: every one of its order findings is the choice LRU makes, so the run
    conforms; and a correct LFU meets the waiver nowhere."""
    [found] = _policy_run(LfuCountsNoHit, AS_LRU).findings()
    assert found["oracle"] == "4 eviction order" and found["times_met"] > 10
    assert _policy_run(LfuReference, AS_LRU).findings() == []


@pytest.mark.deep
def test_without_a_signature_the_waiver_hides_the_second_bug() -> None:
    """What the signature is for: the oracle waived whole, the same two-bug cache passes."""
    [found] = _policy_run(LfuCountsNoHitAndRefreshesSuffix, "* * 4 eviction order  # every order finding").findings()
    assert found["times_met"] > 10


# ---- one finding per root cause: an order oracle's failures are one finding (issue 40 item 5) --------------------


def test_an_order_oracles_failures_are_one_finding_whatever_their_shape() -> None:
    """The messages of SlruThresholdOffByOne's audit (page sizes 2 and 4, production scale): three
    shapes, one bug; it was three findings (and an LFU counter's four). Other oracles still
    group by shape, and an order finding stays apart from an amount finding."""
    from radixcheck.audit import Verdict, findings_of

    messages = [
        ("test_cache_state_machine[page_size=2]", "evict(2) evicted leaf [0, 0] (last used by call 11: match_prefix([0, 0, 0, 0]), "
         "cached by call 4: insert([0, 0, 0, 0]), 2 hit(s), node at tokens 0-2 of a branch that reached 4, key (1, 7)) while leaf "
         "[1, 1, 1, 1] (last used by call 12: match_prefix([1, 1, 1, 1]), cached by call 5: insert([1, 1, 1, 1]), 1 hit(s), key "
         "(0, 8)) survived: under slru(threshold=2) it goes first"),
        ("test_cache_state_machine[page_size=4]", "evict(4) evicted leaf [0, 0, 0, 0, 0, 0, 0, 0] (last used by call 6: insert([0, 0, "
         "0, 0, 0, 0, 0, 0]), cached by call 4: insert([0, 0, 0, 0, 0, 0, 0, 0]), 2 hit(s), key (1, 3)) while leaf [1, 1, 1, 1, 1, "
         "1, 1, 1] (last used by call 7: match_prefix([1, 1, 1, 1, 1, 1, 1, 1]), cached by call 5: insert([1, 1, 1, 1, 1, 1, 1, "
         "1]), 1 hit(s), key (0, 4)) survived: under slru(threshold=2) it goes first"),
        ("test_cache_at_production_scale[page_size=2]", "evict(9001) evicted out of slru(threshold=2) order: leaf [96741, 31573, "
         "… 132755, 151660] (42 tokens) (last used by call 4134: insert([96741, … 112674] (50 tokens)), cached by call 4133: "
         "insert([96741, … 151660] (42 tokens)), 2 hit(s), node at tokens 36-42 of a branch that reached 50, key (1, 2060)) went "
         "before leaf [130280, … 51659] (30 tokens) (last used by call 4135: insert([130280, … 51659] (30 tokens)), cached by call "
         "4135: insert([130280, … 51659] (30 tokens)), 1 hit(s), node at tokens 18-30 of a branch that reached 30, key (0, 2061))"),
    ]
    order = [Verdict(test, "failed", 1.0, "4 eviction order", message, program=f"state.{i}()")
             for i, (test, message) in enumerate(messages)]
    amount = [Verdict("test_cache_state_machine[page_size=8]", "failed", 1.0, "4 eviction amount",
                      "evict(0) freed 8 tokens; it must free nothing"),
              Verdict("test_cache_state_machine[page_size=16]", "failed", 1.0, "4 eviction amount",
                      "evict(16) freed only 0 tokens but left unlocked leaf [1]")]
    found = findings_of(order + amount)
    assert [(f.oracle, len(f.tests)) for f in found] == [("4 eviction order", 3), ("4 eviction amount", 1), ("4 eviction amount", 1)]
    [order_finding] = [f for f in found if f.oracle == "4 eviction order"]
    assert order_finding.program == "state.0()" and order_finding.reason == messages[0][1]  # the shortest program's


# ---- the tier production world re-judges a known: waiver, and an 'as' waiver without a choice by its finding ----


def test_a_known_waiver_met_in_the_tier_production_world_is_rejudged_an_as_waiver_matched_by_oracle() -> None:
    """The tier production world keeps a ``known:`` line's deviation beside its model (as every
    machine), so ``at_scale`` re-judges the line: an order finding that deviation does not explain
    is not waived, one it explains is (recorded with its ``known_deviation``, nothing said of
    matching by oracle). An order finding without a choice (the tier model now sets one:
    meta_tests/test_tier_as_waivers.py) is matched by an ``as`` line by its oracle alone and the audit
    card says so; a plain waiver says nothing more; a finding of another oracle is not waived."""
    from radixcheck.audit import Verdict, not_rejudged, waived_of
    from radixcheck.properties.findings.waivers import NOT_REJUDGED

    known = "* * 4 LRU order  known: suffix-refreshed-on-mid-edge-use  # #3"
    log = WaiverLog.for_test(parse_waivers(known), ("x:y",), "test_tier_at_production_scale[page_size=1]")
    other_cause = LRUOrderViolation("evict(5) evicted leaf [1] while leaf [0] survived")
    other_cause.explained_by = frozenset()  # the tier model kept #3's order: this pick is wrong by it too
    assert not log.at_scale(other_cause) and not log.at_scale(RefcountViolation("lock count -1"))
    same_cause = LRUOrderViolation("evict(5) evicted leaf [2] while leaf [0] survived")
    same_cause.explained_by = frozenset({"suffix-refreshed-on-mid-edge-use"})
    assert log.at_scale(same_cause, "the write_through production world")
    [found] = log.findings()
    assert found["known_deviation"] == "suffix-refreshed-on-mid-edge-use" and "not_rejudged" not in found, found

    follows = WaiverLog.for_test(parse_waivers("* * 4 eviction order as lru  # a known LFU bug"), ("x:y",),
                                 "test_tier_at_production_scale[page_size=1]")
    order = EvictionOrderViolation("evict(5) evicted leaf [1] while leaf [0] survived: under lfu it goes first")
    assert follows.waiver_for(order) is None  # the state machine's rule: no choice, not waived
    assert follows.at_scale(order, "the write_through production world")
    [found] = follows.findings()
    assert found["not_rejudged"] == NOT_REJUDGED, found
    rejudged = {k: v for k, v in found.items() if k != "not_rejudged"}  # another test's meeting of it, re-judged
    [merged] = waived_of([Verdict("test_tier_state_machine[page_size=1]", "passed", 1.0, waived=[rejudged]),
                          Verdict("test_tier_at_production_scale[page_size=1]", "passed", 1.0, waived=[found])])
    assert not_rejudged(merged) == f" — {NOT_REJUDGED}" and len(merged["tests"]) == 2
    plain = WaiverLog.for_test(parse_waivers("* * 4 LRU order  # every order finding"), ("x:y",), "test_tier_at_production_scale")
    assert plain.at_scale(other_cause) and "not_rejudged" not in plain.findings()[0]
    assert not_rejudged({"oracle": "x"}) == ""


@pytest.mark.deep
def test_the_plain_production_world_rejudges_a_known_waiver() -> None:
    """The plain production-scale machine keeps the deviation's statistics (``known_deviations``, as
    every cache machine), so there a ``known:`` line is re-judged, not matched by oracle: a split
    that refreshes the suffix (#3) at scale is waived; the same finding under another oracle's waiver
    fails; a correct cache meets no waiver."""
    from radixcheck.properties.cache.scale_machine import scale_machine_for
    from radixcheck.reference import RadixCache

    def run(factory: type, waiver: str) -> tuple[BaseException | None, WaiverLog]:
        log = WaiverLog.for_test(parse_waivers(waiver), ("x:y",), "test_cache_at_production_scale[page_size=1]")
        try:
            run_machine(scale_machine_for(factory, factory.capabilities, 1, "meta_plain_scale"), profiles.SETTINGS["mutation"],
                        waived=log)
        except Exception as exc:  # noqa: BLE001 - the failure is what is judged
            return exc, log
        return None, log

    known = "* * 4 LRU order  known: suffix-refreshed-on-mid-edge-use  # 3"
    failure, log = run(SplitRefreshesSuffix, known)
    assert failure is None and [f["oracle"] for f in log.findings()] == ["4 LRU order"], failure
    assert "not_rejudged" not in log.findings()[0]
    failure, log = run(SplitRefreshesSuffix, "* * 4 eviction amount  # another oracle")
    assert isinstance(failure, LRUOrderViolation) and log.findings() == [], failure
    failure, log = run(RadixCache, known)
    assert failure is None and log.findings() == [], failure
