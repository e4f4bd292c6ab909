"""Target selection fails loudly and clearly, never by silently testing something else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from radixcheck.properties.cache.contract import Capabilities
from radixcheck.properties.target import TargetError, load_target
from radixcheck.pytest_plugin import named_specs, report_header

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("spec", "phrase"),
    [
        ("radixcheck.reference", "must look like"),
        ("", "empty"),
        ("   ", "empty"),
        ("no_such_module_xyz:factory", "cannot import"),
        ("radixcheck.reference:NoSuchFactory", "no attribute"),
        ("radixcheck.reference.radix_cache:_EMPTY", "not callable"),
    ],
)
def test_bad_target_spec_is_a_clear_error(spec: str, phrase: str) -> None:
    with pytest.raises(TargetError, match=phrase):
        load_target(spec)


def test_default_target_is_the_reference() -> None:
    target = load_target("radixcheck.reference:RadixCache")
    assert isinstance(target.capabilities, Capabilities)


def test_the_header_names_the_target() -> None:
    header = "\n".join(report_header(load_target("radixcheck.properties.cache.mutants:EvictsLockedLeaf"), "ci"))
    assert "radixcheck target: radixcheck.properties.cache.mutants:EvictsLockedLeaf" in header
    assert "capabilities" in header and "time limit" in header


@pytest.mark.deep  # pytest in a subprocess
def test_a_typo_in_the_target_stops_the_run() -> None:
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-n", "0", "--radix-target", "radixcheck.reference:RadixCach",
           "properties/conformance/test_construction.py"]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "has no attribute 'RadixCach'" in result.stderr + result.stdout


def _pytest(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:randomly", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.deep  # pytest in a subprocess
def test_several_targets_run_as_one_matrix() -> None:
    """Repeated --radix-target: every test is parametrized by target x page size (what xdist
    distributes); a target that cannot be loaded fails its own items with the reason, not the run."""
    targets = ["--radix-target", "ref=radixcheck.reference:RadixCache",
               "--radix-target", "trusting=radixcheck.properties.cache.mutants:TrustingReference",
               "--radix-target", "broken=no_such_module_xyz:make"]
    test = "properties/conformance/test_construction.py::test_handle_from_another_cache_is_refused"
    result = _pytest("-rA", test, *targets)
    out = result.stdout
    assert "PASSED " + test + "[ref-page_size=16]" in out
    assert "SKIPPED" in out and "trusts its callers" in out  # the trusting target declares checks_locks=False
    assert "ERROR " + test + "[broken-unloadable]" in out and "cannot import module 'no_such_module_xyz'" in out
    assert "3 passed, 3 skipped, 1 error" in out


def test_a_repeated_target_name_is_a_usage_error() -> None:
    class Config:  # what named_specs reads of pytest's config
        @staticmethod
        def getoption(name: str) -> list[str]:
            return ["a=radixcheck.reference:RadixCache", "a=radixcheck.properties.cache.mutants:LockSkipsSelf"]

    with pytest.raises(pytest.UsageError, match="repeated"):
        named_specs(Config())


@pytest.mark.deep  # pytest in a subprocess
def test_a_forced_seed_still_fails_a_broken_cache(tmp_path: Path) -> None:
    """--hypothesis-seed turns off Hypothesis's example database, which the bounded shrink
    replays from: the first failure must still be the verdict (it once came out as 'skipped')."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:randomly", "-o", "addopts=", "--hypothesis-profile=ci",
         "--hypothesis-seed=1", "--pyargs", "radixcheck.properties.conformance.test_cache_machine", "-k", "test_cache_state_machine",
         "--radix-target", "radixcheck.properties.cache.mutants:EvictsLockedLeaf", "--radix-page-sizes", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "1 failed" in result.stdout, result.stdout[-2000:]
    assert "not shrunk (with a forced seed" in result.stdout


@pytest.mark.parametrize("spec", ["radixcheck.reference:RadixCache", "radixcheck.reference.kv_index:KvIndex",
                                  "radixcheck.reference.tenant_tree:TenantTree",
                                  "radixcheck.reference.tiered_cache:TieredRadixCache"])
def test_every_kind_of_target_gets_a_header_with_its_tenant_isolation_line(spec: str) -> None:
    # The CLI, the plugin and the report card ask every target's capabilities the same questions.
    header = report_header(load_target(spec), "ci")
    assert sum(line.startswith("radixcheck tenant isolation: ") for line in header) == 1
