"""``radixcheck audit --no-production``: the production-scale worlds left out while a user iterates on
a bug (a tier audit's world took 38-366 s, 55-75 % of the audit: reports/findings/layers_trial.md,
friction 2). The run is said to be partial wherever its verdict is read (the live lines, the card,
the JSON, the last line), so it never reads as a full "conforms"; a target whose tests build no
such world refuses the flag (exit 2, one line)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from radixcheck.audit import LEFT_OUT, AuditResult, Verdict, cost_line, print_summary, report_card, tier_lines, write_outputs
from radixcheck.cli import main, parse_args
from radixcheck.properties.target import load_target

TIER = "radixcheck.properties.tiers.mutants:TieredLfu"


def _result(production_worlds: str, failed: bool = False) -> AuditResult:
    verdicts = [Verdict("test_tier_state_machine[page_size=1]", "failed" if failed else "passed", 1.0,
                        "4h host eviction order" if failed else "", "host evicted the wrong leaf" if failed else ""),
                Verdict("test_tier_at_production_scale[page_size=1]", "skipped", 0.0, "", LEFT_OUT)]
    return AuditResult(target=TIER, capabilities="TierCapabilities(...)", not_exercised=["reset() of both tiers (never sent)"],
                       profile="ci", seconds=3.0, pytest_exit=1 if failed else 0, verdicts=verdicts,
                       production_worlds=production_worlds)


def test_the_flag_parses_and_takes_no_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["audit", "m:f", "--no-production"]).no_production is True
    assert parse_args(["audit", "m:f"]).no_production is False
    with pytest.raises(SystemExit) as stopped:
        parse_args(["audit", "m:f", "--no-production=yes"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1 and "--no-production" in err, err


@pytest.mark.parametrize(("spec", "kind"), [("radixcheck.reference.kv_index:KvIndex", "KV-event index"),
                                            ("radixcheck.reference.tenant_tree:TenantTree", "tenant prefix tree")])
def test_a_target_without_a_production_world_refuses_the_flag_in_one_line(spec: str, kind: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Leaving out what a target's tests never build would be a silent no-op: it is a usage error."""
    assert main(["audit", spec, "--no-production"]) == 2
    out, err = capsys.readouterr()
    assert err == f"radixcheck: error: --no-production: {spec} is a {kind}, whose tests build no production-scale world " \
                  "(nothing to leave out)\n"
    assert out == ""


def test_a_partial_pass_is_never_a_plain_conforms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _result(LEFT_OUT)
    assert result.conforms and result.partial  # exit 0: no finding in what ran
    card = report_card(result)
    assert "Verdict: conforms in a partial run (production-scale worlds not run: --no-production); not checked: reset()" in card
    assert "Production-scale worlds: not run (--no-production): the verdict covers the small worlds only" in card
    assert "production world is not shrunk" not in card  # the shrink budget says nothing of a world not built
    assert "production world is not shrunk" in report_card(_result("run"))
    assert re.search(r"\| `test_tier_at_production_scale\[page_size=1\]` \| skip +\| production-scale worlds: not run "
                     r"\(--no-production\)", card), card
    print_summary(result)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"radixcheck: {TIER} conforms in a partial run (production-scale worlds not run: --no-production)")
    write_outputs(result, None, tmp_path / "audit.json")
    payload = json.loads((tmp_path / "audit.json").read_text())
    assert payload["conforms"] is True and payload["partial"] is True
    assert payload["production_worlds"] == "production-scale worlds: not run (--no-production)"


def test_a_partial_failure_says_it_was_partial(capsys: pytest.CaptureFixture[str]) -> None:
    result = _result(LEFT_OUT, failed=True)
    assert "**does not conform**: 1 finding(s) in 1 failing test(s) (a partial run)" in report_card(result)
    print_summary(result)
    assert "; a partial run: production-scale worlds: not run (--no-production); 3 s" in capsys.readouterr().out


def test_a_full_run_says_nothing_of_it(tmp_path: Path) -> None:
    result = _result("run")
    assert not result.partial
    card = report_card(result)
    assert "partial" not in card and "Production-scale worlds:" not in card
    write_outputs(result, None, tmp_path / "audit.json")
    payload = json.loads((tmp_path / "audit.json").read_text())
    assert payload["partial"] is False and payload["production_worlds"] == "run"


def test_the_worlds_and_cost_lines_say_the_world_was_not_run() -> None:
    """A tier card's "Worlds" line described the production world it had not built; a cache card's "Cost at
    scale" said the production world judged match_prefix and insert."""
    _, worlds = tier_lines(load_target(TIER), production=False)
    assert worlds.endswith("the tier production world: not run (--no-production)") and "1500 requests" not in worlds
    line = cost_line(load_target("radixcheck.reference:RadixCache"), production=False)
    assert line.startswith("not judged in this run (production-scale worlds: not run (--no-production), and with it the "
                           "step-cost watch on match_prefix and insert)"), line


@pytest.mark.deep  # an audit in process, two tier machines' worth of examples (~10-40 s)
def test_an_audit_without_its_production_world_runs_the_small_worlds_and_says_so(tmp_path: Path,
                                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", TIER, "--page-sizes", "1", "--profile", "gate", "-n", "0", "--no-production",
                 "--report", str(tmp_path / "audit.md"), "--json", str(tmp_path / "audit.json")])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert "radixcheck: production-scale worlds: not run (--no-production): the verdict will cover the small worlds only" in out
    lines = [line for line in out.splitlines() if line.startswith("[")]
    assert "ok   test_tier_state_machine[page_size=1]" in lines[0], lines  # the small world first, run
    assert lines[1].endswith("skip test_tier_at_production_scale[page_size=1] (0.0 s)  " + LEFT_OUT), lines
    assert f"radixcheck: {TIER} conforms in a partial run" in out.strip().splitlines()[-1]
    assert "Verdict: conforms in a partial run" in (tmp_path / "audit.md").read_text()
    assert json.loads((tmp_path / "audit.json").read_text())["partial"] is True
