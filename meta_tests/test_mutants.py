"""The suite proves it can fail: every deliberately broken cache must be caught, for the
reason its bug class predicts."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from meta_tests.mutants import MUTANTS
from properties.cache_machine import machine_for
from properties.contract import DEFAULT_CAPABILITIES


def _messages(exc: BaseException) -> str:
    """Every message in an exception, including each member of an ExceptionGroup."""
    parts = [str(exc)]
    for sub in getattr(exc, "exceptions", ()):
        parts.append(_messages(sub))
    return "\n".join(parts)


# No shrinking: the meta-test only needs to know the mutant is caught, and why.
FIND_ONLY = settings(
    max_examples=300,
    stateful_step_count=50,
    phases=[Phase.explicit, Phase.generate],
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.bug_class)
def test_mutant_is_caught(mutant) -> None:
    page_size = getattr(mutant, "page_size_for_test", None) or getattr(mutant, "page_size", 1)
    machine = machine_for(mutant, DEFAULT_CAPABILITIES, page_size, f"mutant_{mutant.__name__}")
    with pytest.raises(Exception) as caught:
        run_state_machine_as_test(machine, settings=FIND_ONLY)
    expected = mutant.caught_by if isinstance(mutant.caught_by, tuple) else (mutant.caught_by,)
    assert any(phrase in _messages(caught.value) for phrase in expected), (
        f"{mutant.__name__} was caught, but not by the oracle for {mutant.bug_class}:\n{_messages(caught.value)[:2000]}"
    )


def test_reference_passes_the_same_settings() -> None:
    """The mutants' settings find nothing in the reference itself: no false alarm."""
    from reference import RadixCache

    for page_size in (1, 2):
        run_state_machine_as_test(machine_for(RadixCache, DEFAULT_CAPABILITIES, page_size, "reference_meta"), settings=FIND_ONLY)
