"""Waivers end to end: ``radixcheck audit --waive FILE --repro DIR`` on caches with two bugs, then each
repro file run on each bug alone and on the fix (after_verdict_trial.md friction 4).

The all-layers cache of the layers trial (``reports/findings/layers_trial``), with two tenant leaks
(``twobugs:iso_iso``): a host store keyed by tokens (the known one) and a quarantine that frees every
tenant's host copies (the unknown one). Named by its oracle alone, the known leak's line waives both, and
the card says it waived two shapes; the slot leak the quarantine then leaves is the finding, and its file
goes on past the waived leak. Named by ``said:``, the quarantine's leak is the finding. A tenant tree with a
match bug waived by ``said:`` and an eviction bug behind it: its file (radixcheck's test, rerun) gets the
run's waivers. The correct cache with the waivers: no finding. Small worlds only (``--no-production``),
seed 1, no shrink: the same findings on every run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.deep  # audits in subprocesses, then their files

ROOT = Path(__file__).resolve().parents[1]
TRIAL = ROOT / "reports" / "findings" / "layers_trial"
CACHES = '''from hicache import make_cache
from mycache_adapter import make as _make


def _with(*bugs):
    made = make_cache("priority", frozenset(bugs))
    made.tier_capabilities = _make.tier_capabilities
    return made


iso_iso = _with("host_falls_back_default_ns", "quarantine_purges_host_twins")  # the trial's two leaks
host_lookup = _with("host_falls_back_default_ns")  # the known one alone
quarantine = _with("quarantine_purges_host_twins")  # the unknown one alone
'''
OLD_WAY = "twobugs:*  *  10 tenant isolation  # known: host store keyed by tokens (my ticket 2)\n"
BY_SHAPE = "twobugs:*  *  10 tenant isolation  said: counted * tokens on host past  # known: host store keyed by tokens (ticket 2)\n"


def _audit(project: Path, spec: str, waivers: str, *more: str) -> tuple[subprocess.CompletedProcess, dict, list[Path]]:
    (project / "waive.txt").write_text(waivers)
    shutil.rmtree(project / "repros", ignore_errors=True)
    run = subprocess.run([sys.executable, "-m", "radixcheck", "audit", spec, "-n", "0", "--seed", "1", "--waive", "waive.txt",
                          "--repro", "repros", "--json", "audit.json", *more], cwd=project, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "RADIXCHECK_SHRINK_SECONDS": "0"})
    saved = json.loads((project / "audit.json").read_text()) if (project / "audit.json").exists() else {}
    return run, saved, sorted((project / "repros").glob("repro-*.py"))


def _exit_codes(project: Path, repro: Path, written: str, others: list[str]) -> list[int]:
    """The file's exit code as written, then with its factory import made each of ``others``."""
    text = repro.read_text()
    assert written in text, text[:2000]
    codes = []
    for factory in [written, *others]:
        (project / "swapped.py").write_text(text.replace(written, factory))
        codes.append(subprocess.run([sys.executable, "swapped.py"], cwd=project, capture_output=True, timeout=300).returncode)
    return codes


@pytest.fixture
def trial(tmp_path: Path) -> Path:
    for name in ("hicache.py", "mycache_adapter.py", "mybugs.py"):
        shutil.copy(TRIAL / name, tmp_path / name)
    (tmp_path / "twobugs.py").write_text(CACHES)
    return tmp_path


WRITTEN = "from twobugs import iso_iso as make"
ALONE = ["from twobugs import quarantine as make", "from twobugs import host_lookup as make", "from mycache_adapter import make"]


def test_a_line_naming_the_oracle_waives_both_leaks_says_so_and_the_file_past_them_shows_the_slot_leak(trial: Path) -> None:
    run, saved, repros = _audit(trial, "twobugs:iso_iso", OLD_WAY, "--no-production", "--page-sizes", "1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert {w["message"].split(" ")[0] for w in saved["waived"]} == {"match_prefix([2,", "evict_prefix"}, saved["waived"]
    assert all("one of 2 findings of different shapes this line waived" in w["shapes_waived"] for w in saved["waived"])
    assert [f["oracle"] for f in saved["findings"]] == ["3h host slot conservation"]
    [repro] = repros  # it used to have none: its file stopped at the waived leak ("exited 2, not 1")
    assert "w = PastWaived(" in repro.read_text()
    assert _exit_codes(trial, repro, WRITTEN, ALONE) == [1, 1, 0, 0]  # the quarantine's own, not the known leak's


def test_a_line_naming_the_known_leak_by_its_shape_leaves_the_other_leak_a_finding(trial: Path) -> None:
    run, saved, repros = _audit(trial, "twobugs:iso_iso", BY_SHAPE, "--no-production", "--page-sizes", "1")
    assert run.returncode == 1, run.stdout + run.stderr
    [waived] = saved["waived"]
    # the shape, not the count: how many tokens the leak counts is the stream's (a new tier rule moved it, 1 -> 8)
    assert re.search(r"counted \d+ tokens on host past", waived["message"]) and not waived.get("shapes_waived")
    [finding] = saved["findings"]
    assert finding["oracle"] == "10 tenant isolation" and "evict_prefix" in finding["reason"], finding
    [repro] = repros
    assert _exit_codes(trial, repro, WRITTEN, ALONE) == [1, 1, 0, 0]


def test_the_correct_cache_with_both_waiver_files_has_no_finding(trial: Path) -> None:
    run, saved, _ = _audit(trial, "mycache_adapter:make", OLD_WAY.replace("twobugs", "mycache_adapter") +
                           BY_SHAPE.replace("twobugs", "mycache_adapter"), "--no-production", "--page-sizes", "1")
    assert run.returncode == 0 and not saved["findings"] and not saved["waived"], run.stdout + run.stderr
    assert len(saved["unmatched_waivers"]) == 2


def test_a_tenant_trees_file_reruns_its_test_with_the_runs_waivers(tmp_path: Path) -> None:
    spec = "meta_tests.two_bugs:LosesTimesAndNamesUnavailable"
    shutil.copytree(ROOT / "meta_tests", tmp_path / "meta_tests", ignore=shutil.ignore_patterns("__pycache__", "test_*"))
    waiver = "*  *  11 tenant-tree model  said: which are not available  # known: a match names an unavailable tenant\n"
    run, saved, repros = _audit(tmp_path, spec, waiver)
    assert run.returncode == 1, run.stdout + run.stderr
    assert [f["oracle"] for f in saved["findings"]] == ["11 tenant-tree eviction"]
    [repro] = repros  # the threads test's waived match finding has none: a waived finding is no finding
    assert "radix_waivers = WaiverLog([" in repro.read_text()
    written = f"load_target({spec!r}"
    others = [f"load_target('radixcheck.properties.tenant_tree.mutants:{name}'"
              for name in ("SplitLosesOtherTenantsTimes", "MatchNamesUnavailableTenant")]
    assert _exit_codes(tmp_path, repro, written, [*others, "load_target('radixcheck.reference.tenant_tree:TenantTree'"]) == [1, 1, 0, 0]
