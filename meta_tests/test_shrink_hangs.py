"""A hang that Hypothesis's shrink meets, when the failure it shrinks is not one: it costs a tenth of the
per-operation limit and drops that candidate (``radixcheck.properties.target.shrinking_limits``). Before,
each such candidate cost the whole limit and the shrinker, which takes any smaller failure, slipped to
the hang: the verdict named a hang instead of the failure found."""

from __future__ import annotations

import time

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from radixcheck import profiles
from radixcheck.properties.budget_clock import budget_cpu
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine, run_property
from radixcheck.properties.target import TIMEOUT_ENV, caused_by_hang, guarded


def _spin() -> None:
    while True:  # computes for ever: the limit counts CPU time
        pass


class _HangsOnceFound(RuleBasedStateMachine):
    """Wrong after four ``count`` steps and an ``other``. Once that is found, an ``other`` step reached by a sequence of
    steps no failing program took hangs: a shrink candidate that keeps an ``other`` meets a state the
    found program never did (as an evict reached after a panic), while the found program (and any
    failing one) replays as it ran."""

    failed: set[tuple[str, ...]] = set()  # every sequence of steps a failing program began with

    def __init__(self) -> None:
        super().__init__()
        self.trail: list[str] = []

    @rule()
    def count(self) -> None:
        self.trail.append("count")
        if self.trail.count("count") >= 4 and "other" in self.trail:
            self.failed.update(tuple(self.trail[:i]) for i in range(len(self.trail) + 1))
            raise AssertionError("wrong after four counts and another")

    @rule()
    def other(self) -> None:
        self.trail.append("other")
        if self.failed and tuple(self.trail) not in self.failed:
            guarded("other", _spin)


@pytest.fixture
def short_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")
    monkeypatch.setenv(SHRINK_ENV, "2")


def test_a_machine_shrink_meeting_a_hang_keeps_the_failure_found(short_limits: None) -> None:
    machine = type("meta_hangs_once_found", (_HangsOnceFound,), {"failed": set()})
    started = budget_cpu()
    with pytest.raises(Exception) as caught:
        run_machine(machine, settings(profiles.SETTINGS["ci"], stateful_step_count=20))
    assert not caused_by_hang(caught.value) and "wrong after four counts and another" in str(caught.value), caught.value
    assert any("radixcheck: shrunk for" in note for note in caught.value.__notes__), caught.value.__notes__
    assert budget_cpu() - started < 3.0  # before: a whole limit per hang, and past the budget


def test_a_property_shrink_meeting_a_hang_keeps_the_failure_found(short_limits: None) -> None:
    found: list[bool] = []

    def property_(xs: list[int]) -> None:
        if len(xs) >= 5:
            found.append(True)
            raise AssertionError("wrong at five")
        if found and xs:
            guarded("spin", _spin)

    started = time.process_time()
    with pytest.raises(AssertionError, match="wrong at five") as caught:
        run_property(property_, profiles.SETTINGS["ci"], xs=st.lists(st.integers(0, 3)))
    assert not caused_by_hang(caught.value)
    assert time.process_time() - started < 3.0
