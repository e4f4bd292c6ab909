"""Known findings (`radixcheck audit --waive FILE`, issue 20 item 5): a waived finding is reported
as waived, the state machine looks past it to the next bug in the same test, and a cache whose
only findings are waived conforms (exit 0)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from radixcheck import profiles
from radixcheck.cli import main
from radixcheck.oracles import violations
from radixcheck.oracles.violations import LRUOrderViolation, RefcountViolation, SlotViolation
from radixcheck.properties.cache.contract import Capabilities
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import MostRecentFirst, machine_for_mutant
from radixcheck.properties.findings.failures import oracle_of
from radixcheck.properties.findings.names import oracle_names
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.findings.waivers import WaiverError, WaiverLog, parse_waivers, read_waivers

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
             "misspelled oracle": "* * 4 evicton amount  # reason", "unknown test": "* test_lru_order 4 LRU order  # reason"}


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
    assert "(mini_sglang.txt:6: finding 2)" in card


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
    [found] = log.findings()
    assert found["cut_short"].startswith("the production world stopped here; not built: a history "), found
    assert "requests on" in found["cut_short"] and "memory pressure" in found["cut_short"]
    assert cut_short(found).endswith("the verdict does not cover it") and cut_short({"oracle": "x"}) == ""
