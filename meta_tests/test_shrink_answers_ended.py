"""A failure after which the target answers nothing (a panic, a crash right after a refusal, no answer:
``ends_a_replay``) is not shrunk by Hypothesis: its shrink spent its whole budget on one (~15 s of CPU per page
size on ``PanicsOnUnmatchedUnlock``, ~700 programs tried) where the repro file's reduction cuts the same program
to its 3 acts in 0.02 s (``radixcheck.properties.findings.verdict.NOT_SHRUNK_ANSWERS_ENDED``)."""

from __future__ import annotations

import time

import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, rule

from radixcheck import profiles
from radixcheck.properties.findings.failures import oracle_of
from radixcheck.properties.findings.verdict import NOT_SHRUNK_ANSWERS_ENDED, SHRINK_ENV, run_machine
from radixcheck.properties.target import no_longer_answers


class _Panics(RuleBasedStateMachine):
    """Fails after three ``count`` steps and a ``poke``: the failure says the target answers nothing (``tagged``)
    or is a plain wrong answer."""

    tagged = True

    def __init__(self) -> None:
        super().__init__()
        self.counted, self.poked = 0, False

    @rule()
    def count(self) -> None:
        self.counted += 1
        self._check()

    @rule()
    def poke(self) -> None:
        self.poked = True
        self._check()

    def _check(self) -> None:
        if self.counted >= 3 and self.poked:
            failure = RuntimeError("offline: it panicked")
            raise no_longer_answers(failure) if self.tagged else failure


@pytest.fixture
def a_shrink_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SHRINK_ENV, "1")


def test_a_failure_that_ends_the_target_s_answers_is_not_shrunk(a_shrink_budget: None) -> None:
    machine = type("meta_panics_not_shrunk", (_Panics,), {})
    with pytest.raises(RuntimeError, match="offline: it panicked") as caught:
        run_machine(machine, settings(profiles.SETTINGS["ci"], stateful_step_count=10))
    notes = caught.value.__notes__
    assert NOT_SHRUNK_ANSWERS_ENDED in notes and not any("radixcheck: shrunk for" in n for n in notes), notes
    assert caught.value.radixcheck_machine is not None  # the instance that failed: what its repro file is reduced from


def test_any_other_failure_is_shrunk_as_before(a_shrink_budget: None) -> None:
    machine = type("meta_panics_untagged", (_Panics,), {"tagged": False})
    with pytest.raises(RuntimeError, match="offline: it panicked") as caught:
        run_machine(machine, settings(profiles.SETTINGS["ci"], stateful_step_count=10))
    notes = caught.value.__notes__
    assert NOT_SHRUNK_ANSWERS_ENDED not in notes and any("radixcheck: shrunk for" in n for n in notes), notes


@pytest.mark.deep
def test_a_planted_panic_gets_its_verdict_in_seconds_and_its_repro_stays_small() -> None:
    """``PanicsOnUnmatchedUnlock`` at page size 4, the audit's stream: before, the shrink spent its whole 15 s
    budget (load ~7-12, Zen 4); now the verdict costs the search alone, and the reduction cuts the found program
    (61 acts) to 4, as it cut the shrunk one (24 acts)."""
    from meta_tests.replay_hang_mutants import PanicsOnUnmatchedUnlock
    from radixcheck.properties.cache.machine import machine_for
    from radixcheck.properties.findings.reduce import reduce
    from radixcheck.properties.target import load_target

    target = load_target("meta_tests.replay_hang_mutants:PanicsOnUnmatchedUnlock")
    assert target.factory is PanicsOnUnmatchedUnlock
    started = time.process_time()
    with pytest.raises(Exception) as caught:
        run_machine(machine_for(target.factory, target.capabilities, 4, target.name), profiles.SETTINGS["ci"], transcript=True)
    spent = time.process_time() - started
    assert oracle_of(caught.value) == "crash (RuntimeError raised during a legal call)", caught.value
    assert NOT_SHRUNK_ANSWERS_ENDED in caught.value.__notes__
    assert spent < 5.0, f"the verdict cost {spent:.1f} s of CPU: the failure was shrunk"
    reduced = reduce(caught.value.radixcheck_machine, caught.value)
    assert reduced is not None and len(reduced.replay.acts) <= 4, [a.name for a in reduced.replay.acts]  # the shrunk program reduced: 4
