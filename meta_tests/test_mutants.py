"""The suite proves it can fail: every deliberately broken cache must be caught, for the
reason its bug class predicts."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from meta_tests.mutants import MUTANTS, machine_for_mutant
from properties.cache_machine import machine_for
from properties.contract import DEFAULT_CAPABILITIES


def _messages(exc: BaseException) -> str:
    """Every message in an exception, including each member of an ExceptionGroup."""
    parts = [str(exc)]
    for sub in getattr(exc, "exceptions", ()):
        parts.append(_messages(sub))
    return "\n".join(parts)


def find_only() -> settings:
    """The `ci` search without shrinking (the `mutation` profile): every mutant must die within
    the gate's own budget, and the meta-test only needs to know that it died, and why."""
    return settings.get_profile("mutation")


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.bug_class)
def test_mutant_is_caught(mutant) -> None:
    machine = machine_for_mutant(mutant)
    with pytest.raises(Exception) as caught:
        run_state_machine_as_test(machine, settings=find_only())
    expected = mutant.caught_by if isinstance(mutant.caught_by, tuple) else (mutant.caught_by,)
    assert any(phrase in _messages(caught.value) for phrase in expected), (
        f"{mutant.__name__} was caught, but not by the oracle for {mutant.bug_class}:\n{_messages(caught.value)[:2000]}"
    )


def test_reference_passes_the_same_settings() -> None:
    """The mutants' settings find nothing in the reference itself: no false alarm, whatever the
    target the gate was pointed at."""
    from reference import RadixCache

    run_state_machine_as_test(machine_for(RadixCache, DEFAULT_CAPABILITIES, 2, "reference_meta"), settings=find_only())
