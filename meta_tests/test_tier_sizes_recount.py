"""The reference tiered cache's kept sizes (``device_size``/``host_size``: counts moved with its nodes, not a
walk) against a walk of its tree after every call, under the tier machine: every correct tier variant (the
composed and request references, the trusting ones), and every tier mutant, whose bugs move nodes in ways
the references do not (a subtree orphaned by a host eviction, a window duplicate released): a mutant's
sizes must read as the walk read them before the counts, so its catalogue row and its finding do not move.
The fast test (``tests/test_tier_sizes.py``) drives the three references by hand."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from meta_tests.recounting import recounting
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import CORRECT_TIER_VARIANTS, TIER_MUTANTS
from radixcheck.reference.tiered_cache import TieredRadixCache

pytestmark = pytest.mark.deep

CALLS = ("match_prefix", "insert", "load_back", "inc_lock_ref", "dec_lock_ref", "evict", "evict_host", "evict_prefix",
         "transfer_done", "reset", "match_req", "lock_req", "cache_unfinished_req", "cache_finished_req", "retract_req",
         "abort_req")
SMALL = settings(max_examples=8, stateful_step_count=40, derandomize=True, database=None, deadline=None,
                 suppress_health_check=list(HealthCheck))


def _recounted(base: type, drift: list[str]) -> type:
    return recounting(base, CALLS, lambda c: (c._device_tokens, c._host_tokens), drift)


def _tiered(factories: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(name, f) for name, f in factories if isinstance(f, type) and issubclass(f, TieredRadixCache)]


def _drive(factory: type) -> list[str]:
    drift: list[str] = []
    for policy in factory.tier_capabilities.write_policies:
        try:
            run_machine(tier_machine_for(_recounted(factory, drift), 1, policy, name=f"Recount_{factory.__name__}_{policy}"),
                        settings(SMALL, max_examples=4))  # a mutant's run stops at its finding: few examples suffice
        except Exception:  # noqa: BLE001, S110 - a mutant's finding: only the sizes are judged here
            pass
    return drift


@pytest.mark.parametrize(("name", "factory"), _tiered(list(CORRECT_TIER_VARIANTS.items())), ids=lambda x: x if isinstance(x, str) else "")
def test_a_correct_variants_kept_sizes_equal_a_walk_after_every_call(name: str, factory: type) -> None:
    drift: list[str] = []
    for policy in factory.tier_capabilities.write_policies:
        run_machine(tier_machine_for(_recounted(factory, drift), 1, policy, name=f"Recount_{name}_{policy}"), SMALL)
    assert not drift, drift[:3]


def test_every_tier_mutants_kept_sizes_equal_a_walk_after_every_call() -> None:
    drift = [d for _, m in _tiered([(m.__name__, m) for m in TIER_MUTANTS]) for d in _drive(m)[:1]]
    assert not drift, drift
