"""The audit's tier production world (``radixcheck.properties.tiers.scale``) catches the two
production-scale bugs of a new user's tiered cache (reports/findings/hybrid_trial.md), each for its
own reason, and is silent on correct caches, the trusting one included.

No wall-clock figure is asserted: the scanning eviction counts the nodes it visits and stands in
for the CPU limit by work (it raises the limit's own ``OperationTimeout`` past
:data:`WORK_LIMIT` visits in one call, about a second of Python), and the recursive lock walk fails
by depth (a ``RecursionError``), not by time."""

from __future__ import annotations

from typing import Any

import pytest

from radixcheck.properties.conformance.test_tier_machine import test_tier_at_production_scale as production_world
from radixcheck.properties.target import OperationTimeout, caused_by_hang, forget_hangs, load_target
from radixcheck.properties.tiers.scale import MASS_EVICTION_LEAVES
from radixcheck.reference.tiered_cache import TieredRadixCache

pytestmark = pytest.mark.deep

WORK_LIMIT = 10**6  # node visits in one call: ~1 s of Python, well past what any correct eviction walks here


class ScansPerLeaf(TieredRadixCache):
    """Device eviction orders each candidate leaf by a walk over every node: O(n) a leaf, O(n * leaves) a call."""

    most_visits = 0  # the most nodes one evict call visited (the executed work, read by the test)

    def evict(self, num_tokens: int) -> int:
        self._visits = 0
        try:
            return super().evict(num_tokens)
        finally:
            type(self).most_visits = max(type(self).most_visits, self._visits)

    def _eviction_key(self, node: Any) -> tuple[Any, int]:
        for _ in self._nodes():  # "is there an older leaf anywhere?": the scan the trial's EvictScansLeaves makes
            self._visits += 1
            if self._visits > WORK_LIMIT:
                raise OperationTimeout(f"evict did not return within {WORK_LIMIT} node visits (the CPU limit, by work)")
        return super()._eviction_key(node)


class RecursiveLocks(TieredRadixCache):
    """``inc_lock_ref`` recurses up the path: a conversation > ~1000 pages deep overflows the stack."""

    def inc_lock_ref(self, handle: Any) -> None:
        self._lock_up(handle)

    def _lock_up(self, node: Any) -> None:
        if node.parent is not None:
            node.lock_ref += 1
            self._lock_up(node.parent)


def _run(spec: str) -> BaseException | None:
    forget_hangs()  # a hang is remembered within one test only (as the plugin does between tests)
    target = load_target(spec)
    try:
        production_world(target, page_size=min(target.capabilities.page_sizes_tested()))
    except Exception as exc:  # noqa: BLE001 - the test's failure is what is judged
        return exc
    return None


def _note(exc: BaseException) -> str:
    return " ".join(getattr(exc, "__notes__", []))


def test_an_eviction_that_scans_per_leaf_hangs_in_the_wide_tree() -> None:
    ScansPerLeaf.most_visits = 0
    failure = _run(f"{__name__}:ScansPerLeaf")
    assert failure is not None and caused_by_hang(failure), failure
    note = _note(failure)
    assert "in the call evict" in note and "a wide tree of" in note and "per-operation limit" in note, note
    assert f"at least {MASS_EVICTION_LEAVES} leaves" in note
    assert ScansPerLeaf.most_visits > WORK_LIMIT  # the work itself, counted: quadratic in the tree


def test_a_recursive_lock_walk_crashes_in_the_long_conversation() -> None:
    failure = _run(f"{__name__}:RecursiveLocks")
    assert isinstance(failure, RecursionError), failure
    note = _note(failure)
    assert "in the call inc_lock_ref" in note and "a conversation of" in note and "pages deep" in note, note


@pytest.mark.parametrize("spec", [
    "radixcheck.reference.tiered_cache:TieredRadixCache",
    "radixcheck.properties.tiers.mutants:TrustingTenantTiers",  # trusts its callers, as SGLang's HiRadixCache does
])
def test_correct_caches_pass_the_production_world(spec: str) -> None:
    assert _run(spec) is None

