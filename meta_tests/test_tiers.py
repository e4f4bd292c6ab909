"""The test tiers (docs/reference/test-tiers.md): the fast tier's sampled share holds its budget however many catalogues and
members there are, and the fast and deep tiers together run every test exactly once."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import FAST_SAMPLE, fast_sample

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Member:  # what fast_sample reads of a pytest item
    nodeid: str


def catalogue(name: str, size: int) -> list[Member]:
    return [Member(f"meta_tests/test_{name}.py::test_is_caught[{i}]") for i in range(size)]


def test_the_sampled_share_is_the_budget_whatever_the_catalogues_add() -> None:
    families = {name: catalogue(name, 20) for name in ("cache", "index", "tier")}
    chosen = fast_sample(families, FAST_SAMPLE)
    assert len(chosen) == FAST_SAMPLE
    families["new_contract"] = catalogue("new_contract", 40)  # a new contract's whole catalogue
    families["cache"] += catalogue("cache_more", 30)  # and more mutants in an old one
    assert len(fast_sample(families, FAST_SAMPLE)) == FAST_SAMPLE


def test_every_catalogue_has_a_member_before_any_has_two() -> None:
    families = {name: catalogue(name, 5) for name in "abcd"}
    chosen = fast_sample(families, 6)
    per_family = sorted(sum(m.nodeid in chosen for m in members) for members in families.values())
    assert per_family == [1, 1, 2, 2]


def test_the_sample_is_the_same_in_every_run_and_every_order() -> None:
    families = {name: catalogue(name, 9) for name in ("x", "y")}
    reordered = {name: list(reversed(members)) for name, members in reversed(families.items())}
    assert fast_sample(families, 5) == fast_sample(reordered, 5)


def test_a_budget_larger_than_the_catalogues_takes_them_all() -> None:
    families = {"a": catalogue("a", 2), "b": catalogue("b", 1)}
    assert fast_sample(families, 10) == {m.nodeid for members in families.values() for m in members}


def _collected(*args: str) -> list[str]:
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return [line for line in run.stdout.splitlines() if "::" in line]


@pytest.mark.deep  # collects the whole suite three times in subprocesses
def test_the_fast_and_deep_tiers_together_run_every_test_once() -> None:
    fast, deep, everything = _collected(), _collected("-m", "deep"), _collected("-m", "")
    assert not set(fast) & set(deep)
    assert sorted(fast + deep) == sorted(everything)
    sampled_in_fast = [t for t in fast if "test_mutant_is_caught[" in t]
    assert 0 < len(sampled_in_fast) < FAST_SAMPLE  # the cache catalogue is sampled, and shares the budget
