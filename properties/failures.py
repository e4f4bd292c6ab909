"""What a failure of the conformance tests means, read from the exception itself: the oracle
(by the exception's type, one class per oracle) and the program Hypothesis printed."""

from __future__ import annotations

from radixcheck.oracles.violations import ContractViolation
from radixcheck.properties.target import caused_by_hang

INVARIANT_STEPS = ("state.sizes_add_up()", "state.slots_conserved()")  # the machine's @invariant methods


def oracle_of(exc: BaseException) -> str:
    """The oracle that judged ``exc``; a hang or an exception of the cache's own is named as such."""
    if isinstance(exc, ContractViolation):
        return exc.oracle
    if caused_by_hang(exc):
        return "hang (per-operation time limit)"
    if isinstance(exc, AssertionError):
        return "assertion"
    return f"crash ({type(exc).__name__} raised during a legal call)"


def program_of(exc: BaseException) -> str:
    """The failing program from Hypothesis's notes, without the invariant checks between steps."""
    lines = "\n".join(getattr(exc, "__notes__", [])).splitlines()
    return "\n".join(ln for ln in lines if ln.strip() and ln.strip() not in INVARIANT_STEPS
                     and not ln.startswith("You can reproduce this test case"))


def describe_failure(exc: BaseException) -> dict[str, str]:
    return {
        "violation": type(exc).__name__,
        "oracle": oracle_of(exc),
        "reason": str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        "program": program_of(exc),
    }
