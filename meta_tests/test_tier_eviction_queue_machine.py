"""The tiered reference's queued device eviction against the heap over every candidate it replaced
(``tests/tier_full_heap.py``), under the tier machine: every correct tier variant and every tier mutant,
each run twice with the same derandomized stream, must take the same pages in the same order in every
evict call and stop where it stopped (its finding, word for word): so no catalogue row moves. The fast
test (``tests/test_tier_eviction_queue.py``) drives the three references by hand."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import CORRECT_TIER_VARIANTS, TIER_MUTANTS
from radixcheck.reference.tiered_cache import TieredRadixCache
from tests.tier_full_heap import full_heap_evict, traced

pytestmark = pytest.mark.deep

SMALL = settings(max_examples=6, stateful_step_count=40, derandomize=True, database=None, deadline=None,
                 suppress_health_check=list(HealthCheck))


def _run(factory: type, policy: str) -> list[Any]:
    trace: list[Any] = []
    try:
        run_machine(tier_machine_for(traced(factory, trace), 1, policy, name=f"Queue_{factory.__name__}_{policy}"), SMALL)
    except Exception as caught:  # noqa: BLE001 - a mutant's finding: it must be the same both ways
        trace.append(("caught", type(caught).__name__, str(caught)))
    return trace


def _both(factory: type, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    differ = []
    for policy in factory.tier_capabilities.write_policies:
        kept = _run(factory, policy)
        with monkeypatch.context() as m:
            m.setattr(TieredRadixCache, "evict", full_heap_evict)
            full = _run(factory, policy)
        if kept != full:
            at = next((i for i, (a, b) in enumerate(zip(kept, full, strict=False)) if a != b), min(len(kept), len(full)))
            differ.append(f"{factory.__name__} {policy} at event {at}: queue {kept[at:at + 2]} vs full heap {full[at:at + 2]}")
    return differ


def _tiered(classes: list[Any]) -> list[type]:
    return [c for c in classes if isinstance(c, type) and issubclass(c, TieredRadixCache)]


@pytest.mark.parametrize("factory", _tiered(list(CORRECT_TIER_VARIANTS.values())), ids=lambda c: c.__name__)
def test_a_correct_variant_evicts_the_same_pages_in_the_same_order(factory: type, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _both(factory, monkeypatch) == []


def test_every_tier_mutant_evicts_the_same_pages_and_stops_at_the_same_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SHRINK_ENV, "0")
    differ = [d for m in _tiered(TIER_MUTANTS) for d in _both(m, monkeypatch)]
    assert differ == [], differ
