"""`radixcheck audit` refuses what it cannot test with exit 2 and one clear message, and its
report card says what a user needs. (The full installed flow, exit 0 and 1 on real runs, is
.ci/installed-path.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from radixcheck.audit import AuditResult, Verdict, cost_line, print_summary, report_card, tier_lines
from radixcheck.cli import main
from radixcheck.properties.cache.contract import Capabilities
from radixcheck.properties.target import Target, load_target


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["audit", ""], "empty"),
        (["audit", "radixcheck.reference"], "must look like"),
        (["audit", "no_such_module_xyz:make"], "cannot import"),
        (["audit", "radixcheck.reference:NoSuchFactory"], "no attribute"),
        (["audit", "radixcheck.reference:RadixCache", "--page-sizes", "7"], "declares"),
    ],
)
def test_an_untestable_target_is_exit_2_with_a_reason(argv, phrase, capsys) -> None:
    assert main(argv) == 2
    assert phrase in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["audit", "x:y", "-n", "banana"], ["audit", "x:y", "--op-timeout", "-1"], ["nosuch"],
                                  ["audit", "radixcheck.reference:RadixCache", "--page-sizes", "a,b"]])
def test_bad_arguments_are_exit_2(argv, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc on this system")
def test_a_repro_directory_that_cannot_be_made_is_exit_2_even_as_root(capsys) -> None:
    """/proc passes os.access(W_OK) for root, and mkdir there then fails (an INTERNALERROR in the
    plugin once): the directory is probed by making one, so the audit refuses it before any test."""
    with pytest.raises(SystemExit) as stopped:
        main(["audit", "radixcheck.reference:RadixCache", "--repro", "/proc/radixcheck-repros"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "cannot be written" in err and err.count("\n") == 1


@pytest.mark.parametrize(("option", "where", "phrase"), [
    ("--report", "a_dir", "is a directory"), ("--json", "a_file/audit.json", "is a file"), ("--report", "", "is empty"),
])
def test_an_output_file_that_cannot_be_written_is_exit_2_before_the_audit(tmp_path: Path, capsys, option: str, where: str,
                                                                           phrase: str) -> None:
    """Checked with the arguments: a conforming cache's audit once ran for 20 s and then died in a
    traceback, exit 1, on a --json under a file or a --report naming a directory."""
    (tmp_path / "a_dir").mkdir()
    (tmp_path / "a_file").write_text("")
    value = str(tmp_path / where) if where else ""
    with pytest.raises(SystemExit) as stopped:
        main(["audit", "radixcheck.reference:RadixCache", option, value])
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert phrase in err and err.count("\n") == 1 and out == ""


def test_the_report_card_names_the_oracle_the_program_and_what_was_skipped() -> None:
    result = AuditResult(
        target="mine:make", capabilities="Capabilities(...)", not_exercised=["reset() (supports_reset=False: never sent)"],
        profile="ci", seconds=3.0, pytest_exit=1,
        verdicts=[Verdict("test_cache_state_machine[page_size=16]", "failed", 1.0, "2 refcount safety",
                          "evict() removed locked page(s)", "state = mine_make_page16()\nstate.evict(amount=...)"),
                  Verdict("test_reset_empties_the_cache[page_size=16]", "skipped", 0.0, "", "mine:make has no reset")],
    )
    card = report_card(result)
    assert not result.conforms
    for phrase in ("does not conform", "2 refcount safety", "state.evict", "supports_reset=False", "has no reset"):
        assert phrase in card


def test_a_tier_card_names_its_write_policies_and_its_production_world() -> None:
    """A new user read "a production-scale finding is not shrunk" on a tier card and could not tell
    whether a production world had run; and the card named page sizes, not the policies run. The
    tier production world now runs in the audit (a wide tree and a deep conversation): the card says so."""
    target = load_target("radixcheck.reference.tiered_cache:TieredRadixCache")
    policies, worlds = tier_lines(target)
    result = AuditResult(target=target.spec, capabilities=repr(target.capabilities), not_exercised=[], profile="ci",
                         seconds=3.0, verdicts=[Verdict("test_tier_state_machine[page_size=1]", "passed", 1.0)],
                         page_sizes=target.page_sizes_shown(), write_policies=policies, worlds=worlds)
    card = report_card(result)
    assert "Write policies: run write_through, write_back" in card
    assert "never sent: write_through_selective" in card
    assert "tier production world at page size 1: in each write policy a wide tree" in card
    assert "and in write_through a conversation 1200 pages deep" in card
    assert f"python -m radixcheck.reports.tier_scale --target {target.spec}" in card
    assert "production-scale finding" not in card  # the plain cache's world's shrink line: not this one
    assert tier_lines(load_target("radixcheck.reference:RadixCache")) == ("", "")  # a cache's production world runs


@pytest.mark.parametrize("spec", ["radixcheck.reference.tenant_tree:TenantTree", "radixcheck.reference.kv_index:KvIndex"])
def test_an_index_or_tree_card_says_where_its_cost_at_scale_is_measured(spec) -> None:
    """A router trial's two planted O(n) bugs passed every audit while the tree's card said "Not
    exercised: nothing": the card now names the bench that measures them."""
    target = load_target(spec)
    result = AuditResult(target=target.spec, capabilities=repr(target.capabilities), not_exercised=[], profile="ci",
                         seconds=3.0, verdicts=[Verdict("test_x", "passed", 1.0)], cost=cost_line(target))
    assert f"Cost at scale: not measured here (the audit's worlds hold tens of prompts); `radixcheck bench {spec}`" \
        in report_card(result)


def test_a_cache_card_says_where_the_cost_the_audit_cannot_judge_is_measured() -> None:
    """A wire trial's O(n) ``evictable_size`` passed its audit and the card never pointed to the bench:
    a cache's production world judges matches and inserts only, and a wire server's cost not at all."""
    from radixcheck.properties.adapters.wire import WireFactory

    line = cost_line(load_target("radixcheck.reference:RadixCache"))
    assert "judges match_prefix and insert" in line and "`radixcheck bench radixcheck.reference:RadixCache`" in line
    wire = Target("radixcheck.properties.adapters.wire:server", WireFactory(), Capabilities())  # not started: not needed
    line = cost_line(wire)
    assert line.startswith("not judged here: the wire server computes in its own process"), line
    assert "`RADIXCHECK_WIRE_CMD=... radixcheck bench radixcheck.properties.adapters.wire:server`" in line
    assert "counting the server's CPU time" in line


def test_several_tier_findings_get_the_grouping_a_cache_s_get(capsys: pytest.CaptureFixture[str]) -> None:
    """A tier target's findings are grouped by replay as a cache's are (``shown_by_tier``), so its card
    and summary say nothing a cache's would not: no sentence that they were grouped by shape only (the
    card said so long after tier programs were replayed past their failures; a new user read it beside
    two findings of one cause, layers_trial.md)."""
    target = load_target("radixcheck.reference.tiered_cache:TieredRadixCache")
    policies, worlds = tier_lines(target)
    failed = [Verdict("test_tier_state_machine[page_size=1]", "failed", 1.0, "3h host slot conservation", "host slots leaked"),
              Verdict("test_tier_state_machine[page_size=1]", "failed", 1.0, "14 transfers in flight", "host slots 3 freed")]

    def said(verdicts: list[Verdict], policies: str) -> tuple[str, str]:
        result = AuditResult(target=target.spec, capabilities="", not_exercised=[], profile="ci", seconds=3.0, pytest_exit=1,
                             verdicts=verdicts, write_policies=policies, worlds=worlds)
        print_summary(result)
        return report_card(result), capsys.readouterr().out

    for text in (*said(failed, policies), *said(failed, "")):
        assert "grouped by oracle and message shape only" not in text and "may share one root cause" not in text, text


def test_tier_findings_at_several_page_sizes_get_one_grouping_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    """Two tier findings met at page sizes 1 and 2 only: the one reason they may share a cause (met at
    different page sizes) is said once, on the card and in the summary, as a cache's would be."""
    target = load_target("radixcheck.reference.tiered_cache:TieredRadixCache")
    policies, worlds = tier_lines(target)
    failed = [Verdict("test_tier_state_machine[page_size=1]", "failed", 1.0, "3h host slot conservation", "host slots leaked"),
              Verdict("test_tier_state_machine[page_size=2]", "failed", 1.0, "14 transfers in flight", "host slots 3 freed")]
    result = AuditResult(target=target.spec, capabilities="", not_exercised=[], profile="ci", seconds=3.0, pytest_exit=1,
                         verdicts=failed, write_policies=policies, worlds=worlds)
    print_summary(result)
    for text in (report_card(result), capsys.readouterr().out):
        assert text.count("may share one root cause") == 1, text
        assert "grouped by oracle and message shape only" not in text and "met at different page sizes only" in text, text


@pytest.mark.deep  # an audit in a subprocess
def test_a_reader_that_leaves_early_does_not_change_the_verdict() -> None:
    # `radixcheck audit ... | head -1`: the exit code is still the verdict's, with no traceback.
    cmd = [sys.executable, "-m", "radixcheck", "audit", "radixcheck.properties.cache.mutants:EvictsLockedLeaf",
           "--page-sizes", "1", "-n", "0", "--profile", "mutation"]  # no shrinking: the verdict, not its program, is tested
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
        assert run.stdout.readline().startswith("radixcheck: auditing")
        run.stdout.close()  # the reader leaves
        stderr = run.stderr.read()
        assert run.wait(timeout=300) == 1, stderr
    assert "BrokenPipeError" not in stderr and "Traceback" not in stderr


def test_a_tier_card_says_where_the_cost_the_audit_cannot_judge_is_measured() -> None:
    """A tier target's card had no "Cost at scale" line: its production world watches matches and inserts
    only, so an O(n) ``device_size`` or ``evict`` passes; the line names the bench that measures them."""
    spec = "radixcheck.reference.tiered_cache:TieredRadixCache"
    line = cost_line(load_target(spec))
    assert line.startswith("the tier production world's wide tree judges match_prefix and insert"), line
    assert "(device_size, host_size), evict, evict_host, load_back and evict_prefix are not judged here" in line
    assert f"`radixcheck bench {spec}`" in line and "CPU time beside its wall time" in line
    assert "tier production world" not in cost_line(load_target("radixcheck.reference:RadixCache"))
