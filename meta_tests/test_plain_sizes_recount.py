"""The plain reference cache's kept sizes (``total_size``/``protected_size``/``evictable_size``: counts
moved as nodes join and leave the tree and are locked, not a walk) against a walk of its tree after every
call, under the conformance machine: every correct variant (policies, namespaces, second pools, composed
references) and every mutant, whose bugs edit the tree in ways the reference does not (a split dropping a
lock, a lock count wrapping, a reset clearing one root): a mutant's sizes must read as the walk read them
before the counts, so its catalogue row and its finding do not move. The fast test
(``tests/test_plain_sizes.py``) drives the reference by hand."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from meta_tests.recounting import recounting
from radixcheck.properties.cache.mutants import CORRECT_VARIANTS, MUTANTS, machine_for_mutant
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.reference import RadixCache

pytestmark = pytest.mark.deep

CALLS = ("match_prefix", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "evict_prefix", "reset", "match_req", "lock_req",
         "cache_unfinished_req", "cache_finished_req", "retract_req", "abort_req")
SMALL = settings(max_examples=6, stateful_step_count=40, derandomize=True, database=None, deadline=None,
                 suppress_health_check=list(HealthCheck))


def _recounted(base: type, drift: list[str]) -> type:
    return recounting(base, CALLS, lambda c: (c._kept_total, c._kept_protected, c._kept_evictable), drift)


def _drive(factory: type, drift: list[str], examples: int) -> None:
    cls = _recounted(factory, drift)
    for attr in ("capabilities", "page_size_for_test", "scale"):  # what machine_for_mutant reads, as the class declares it
        if attr in vars(factory):
            setattr(cls, attr, vars(factory)[attr])
    run_machine(machine_for_mutant(cls, f"recount_{factory.__name__}"), settings(SMALL, max_examples=examples))


def _plain(classes: list[type]) -> list[type]:
    return [c for c in classes if issubclass(c, RadixCache) and not getattr(c, "scale", False)]


@pytest.mark.parametrize("factory", _plain(CORRECT_VARIANTS), ids=lambda c: c.__name__)
def test_a_correct_variants_kept_sizes_equal_a_walk_after_every_call(factory: type) -> None:
    drift: list[str] = []
    _drive(factory, drift, 6)
    assert not drift, drift[:3]


def test_every_mutants_kept_sizes_equal_a_walk_after_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SHRINK_ENV, "0")  # the finding is not judged here: no shrinking
    drift: list[str] = []
    for mutant in _plain(MUTANTS):
        found: list[str] = []
        try:
            _drive(mutant, found, 3)  # a mutant's run stops at its finding: few examples suffice
        except Exception:  # noqa: BLE001, S110 - a mutant's finding: only the sizes are judged here
            pass
        drift += found[:1]
    assert not drift, drift
