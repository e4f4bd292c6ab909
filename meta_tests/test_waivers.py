"""Known findings (`radixcheck audit --waive FILE`, issue 20 item 5): a waived finding is reported
as waived, the state machine looks past it to the next bug in the same test, and a cache whose
only findings are waived conforms (exit 0)."""

from __future__ import annotations

import json
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
from radixcheck.oracles.violations import LRUOrderViolation, RefcountViolation, SlotViolation
from radixcheck.properties.cache.mutants import MostRecentFirst, machine_for_mutant
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.findings.waivers import WaiverError, WaiverLog, parse_waivers

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
])
def test_a_malformed_line_names_the_file_and_line(text: str, phrase: str) -> None:
    with pytest.raises(WaiverError, match=phrase) as refused:
        parse_waivers(f"# header\n{text}\n", "known.txt")
    assert str(refused.value).startswith("known.txt:2: ")


@pytest.mark.parametrize("content", [None, "* * 4 LRU order\n"], ids=["missing", "no reason"])
def test_a_bad_waiver_file_is_exit_2_with_one_line(tmp_path: Path, capsys, content: str | None) -> None:
    path = tmp_path / "known.txt"
    if content is not None:
        path.write_text(content)
    assert main(["audit", "radixcheck.reference:RadixCache", "--waive", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("radixcheck: error: ") and err.count("\n") == 1 and "known.txt" in err


def _log(text: str) -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(text), ("x:y",), "test_cache_state_machine[page_size=1]")


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
