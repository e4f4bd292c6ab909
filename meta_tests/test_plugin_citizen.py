"""The installed plugin is a good citizen: in an unrelated project, with its own Hypothesis
profile and ``RADIXCHECK_TARGET`` exported, pytest runs exactly as with radixcheck disabled
(``-p no:radixcheck``): the same settings reach the project's tests, exit 0, no radixcheck header.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.deep  # the deep tier (docs/reference/test-tiers.md): runs pytest in subprocesses, as a user's project would

CONFTEST = """
from datetime import timedelta
from hypothesis import settings
settings.register_profile("mine", max_examples=7, deadline=timedelta(milliseconds=123))
settings.load_profile("mine")
"""

TESTS = """
import json, os
from pathlib import Path
from hypothesis import given, settings, strategies as st

RUNS = []

@given(st.integers())
def test_a_property(x):
    RUNS.append(settings().deadline)

def test_zz_record_what_the_property_saw():
    s = settings()
    Path(os.environ["OBSERVED"]).write_text(json.dumps({
        "profile": settings.get_current_profile_name(), "max_examples": s.max_examples, "deadline": str(s.deadline),
        "derandomize": s.derandomize, "database": type(s.database).__name__, "phases": [p.name for p in s.phases],
        "runs": len(RUNS), "deadline_inside": sorted({str(d) for d in RUNS}),
    }))
"""


def _run(project: Path, ci: bool, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    observed = project / f"observed{len(extra)}.json"
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(project)), "OBSERVED": str(observed),
           "RADIXCHECK_TARGET": "no_such_module_xyz:make"}  # exported, as a user of both might have it
    if ci:
        env["CI"] = "true"
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra], cwd=project, env=env,
                            capture_output=True, text=True, timeout=120)
    return result, json.loads(observed.read_text()) if observed.is_file() else {}


@pytest.mark.parametrize(("own_profile", "ci"), [(True, False), (False, True)], ids=["own-profile", "CI-default"])
def test_an_unrelated_project_runs_as_without_radixcheck(tmp_path: Path, own_profile: bool, ci: bool) -> None:
    if own_profile:
        (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_mine.py").write_text(TESTS)
    with_radixcheck, seen = _run(tmp_path, ci)
    assert with_radixcheck.returncode == 0, with_radixcheck.stdout[-2000:] + with_radixcheck.stderr
    plugins, _, rest = with_radixcheck.stdout.partition("plugins:")[2].partition("\n")
    assert "radixcheck-" in plugins  # the installed plugin was loaded (its entry point)...
    assert "radixcheck" not in rest + with_radixcheck.stderr  # ...and said nothing
    if own_profile:  # the project's own profile, untouched: the same as with radixcheck disabled
        without, seen_without = _run(tmp_path, ci, "-p", "no:radixcheck")
        assert without.returncode == 0 and seen == seen_without
        assert (seen["profile"], seen["max_examples"], seen["deadline"], seen["runs"]) == ("mine", 7, "0:00:00.123000", 7)
    else:  # Hypothesis's own `ci` profile on a CI machine (hypothesis/_settings.py), not radixcheck's
        assert {k: seen[k] for k in ("profile", "derandomize", "database", "max_examples", "deadline", "runs")} == {
            "profile": "ci", "derandomize": True, "database": "NoneType", "max_examples": 100, "deadline": "None", "runs": 100}


def test_ini_options_name_the_target_and_page_sizes(tmp_path: Path) -> None:
    """``radix_target`` / ``radix_page_sizes`` in the project's ini file, instead of ``addopts``;
    the header appears because conformance tests are collected."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nradix_target = radixcheck.properties.cache.mutants:TrustingReference\n"
                                         "radix_page_sizes = 1\n")
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path))}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "--pyargs",
                             "radixcheck.properties.conformance.test_construction"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "radixcheck target: radixcheck.properties.cache.mutants:TrustingReference" in result.stdout
    assert "radixcheck page sizes: declared (1, 2, 4), run (1,) (ini radix_page_sizes)" in result.stdout


def _conformance_run(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(project))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


def test_under_xdist_the_controller_prints_the_header_once_with_both_page_size_lists(tmp_path: Path) -> None:
    """With ``-n 2`` the workers collect, and what they report goes nowhere: the controller prints
    the header, once, with the declared page sizes beside those the run tests; and the verdict with
    what was not checked, last."""
    result = _conformance_run(tmp_path, "-n", "2", "--pyargs", "radixcheck.properties.conformance.test_construction",
                              "--radix-target", "radixcheck.properties.cache.mutants:TrustingReference", "--radix-page-sizes", "1")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stdout.count("radixcheck target: radixcheck.properties.cache.mutants:TrustingReference") == 1
    assert "radixcheck page sizes: declared (1, 2, 4), run (1,) (--radix-page-sizes)" in result.stdout
    assert "page_sizes=(1, 2, 4)" in result.stdout and "page_sizes=(1,)" not in result.stdout  # the declaration, as declared
    assert "radixcheck not exercised: lock counters wider than 10 bits" in result.stdout
    assert "radixcheck not exercised: refusal of unmatched unlocks" in result.stdout  # TrustingReference: checks_locks=False
    assert "radixcheck tenant isolation: not exercised: no namespaces declared" in result.stdout
    last = [line for line in result.stdout.splitlines() if line.startswith("radixcheck: ")]
    assert len(last) == 1 and last[0].startswith("radixcheck: radixcheck.properties.cache.mutants:TrustingReference conforms; "
                                                 "not checked: refusal of unmatched unlocks"), last  # the run's verdict, last


@pytest.mark.parametrize(("target", "small", "world"), [
    ("radixcheck.reference:RadixCache", "test_cache_state_machine", "test_cache_at_production_scale"),
    ("radixcheck.properties.tiers.mutants:TieredLfu", "test_tier_state_machine", "test_tier_at_production_scale"),
])
def test_the_small_machine_is_dispatched_first_and_the_production_world_last(tmp_path: Path, target: str, small: str,
                                                                             world: str) -> None:
    """pytest-xdist hands out items in collection order, and in process they run in it: the small state
    machine (the cause, in a few calls) comes first, the other small tests next, the production-scale
    worlds last (a tier audit's world took 38-366 s, and a small world's FAIL waited for it:
    reports/findings/layers_trial.md, friction 2)."""
    result = _conformance_run(tmp_path, "--collect-only", "-q", "--pyargs", "radixcheck.properties.conformance",
                              "--radix-target", target, "--radix-page-sizes", "1,2" if "tiers" in target else "1,4")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    tests = [line.partition("::")[2].partition("[")[0] for line in result.stdout.splitlines() if "::" in line]
    assert tests[:2] == [small] * 2
    assert tests[-2:] == [world] * 2 and tests.count(world) == 2, tests
    if "tiers" not in target:
        assert tests.index("test_dfs_order_meets_the_bound") < tests.index(world)


def test_no_production_skips_the_worlds_and_says_the_run_was_partial(tmp_path: Path) -> None:
    """``--radix-no-production``: the production-scale test is skipped with the reason, the header says
    so, and the verdict line calls the run partial (never a plain "conforms")."""
    result = _conformance_run(tmp_path, "-rs", "-n", "0", "--pyargs", "radixcheck.properties.conformance",
                              "-k", "production_scale or reset_empties", "--radix-target", "radixcheck.reference:RadixCache",
                              "--radix-page-sizes", "1", "--radix-no-production")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "radixcheck production-scale worlds: not run (--radix-no-production): the verdict covers the small worlds only" \
        in result.stdout
    assert "SKIPPED [1]" in result.stdout and "1 passed, 1 skipped" in result.stdout
    last = [line for line in result.stdout.splitlines() if line.startswith("radixcheck: ")]
    assert last == ["radixcheck: radixcheck.reference:RadixCache conforms in a partial run (production-scale worlds: not run "
                    "(--radix-no-production)); not checked: lock counters wider than 10 bits"], last
    several = _conformance_run(tmp_path, "--collect-only", "-q", "--pyargs", "radixcheck.properties.conformance.test_cache_machine",
                               "--radix-target", "a=radixcheck.reference:RadixCache", "--radix-target",
                               "b=radixcheck.reference.kv_index:KvIndex", "--radix-no-production")  # an index: nothing to skip
    assert several.returncode == 0, several.stdout[-2000:] + several.stderr[-2000:]
    assert "radixcheck production-scale worlds: not run (--radix-no-production): the verdicts cover the small worlds only" \
        in several.stdout


def test_a_several_target_run_says_each_verdict_and_which_are_partial(tmp_path: Path) -> None:
    """A several-target run ended with no verdict line at all, so ``--radix-no-production`` said "partial" in its
    header only: now one line per target, named, "in a partial run" for the kinds that have a world to leave out
    (not an index), and a target that cannot be loaded says so."""
    result = _conformance_run(tmp_path, "-n", "0", "--pyargs", "radixcheck.properties.conformance",
                              "-k", "reset_empties or production_scale or index_under_churn",
                              "--radix-target", "a=radixcheck.reference:RadixCache", "--radix-target",
                              "a-k=radixcheck.reference.kv_index:KvIndex", "--radix-target", "bad=no_such_module_xyz:make",
                              "--radix-page-sizes", "1", "--radix-no-production")
    last = [line for line in result.stdout.splitlines() if line.startswith("radixcheck: ")][-3:]  # after the error's report
    assert last == ["radixcheck: a (radixcheck.reference:RadixCache) conforms in a partial run (production-scale worlds: "
                    "not run (--radix-no-production)); not checked: lock counters wider than 10 bits",
                    "radixcheck: a-k (radixcheck.reference.kv_index:KvIndex) conforms; not checked: vLLM's raw duplicate copies",
                    "radixcheck: bad: cannot be tested: target 'no_such_module_xyz:make': cannot import module "
                    "'no_such_module_xyz': ModuleNotFoundError: No module named 'no_such_module_xyz'"], last
