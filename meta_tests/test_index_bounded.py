"""An index that forgets on its own (``evicts_on_its_own``): the suite accepts exactly the
forgetting its declared promise allows. Correct LRU-bounded indexes pass (refreshed by lookups or
not, copies counted or not, no promise at all); one that forgets the newest, one a block short of
its promise, and one that answers more than the events are caught, each by the check its bug
predicts; and the promise itself is checked against a hand-made sequence of uses."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.kv_index_recent import RecentStores
from radixcheck.oracles.violations import IndexViolation
from radixcheck.properties.findings.repro import repro_for
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.index.bounded import (
    BOUNDED_INDEX_MUTANTS,
    BOUNDED_INDEX_VARIANTS,
    CAPACITY,
    BoundedLruKvIndex,
)
from radixcheck.properties.index.contract import BlockRemoved, BlockStored, IndexCapabilities, StoredBlock
from radixcheck.properties.index.machine import index_machine_for
from radixcheck.reference.kv_index import KvIndex

VARIANT_EXAMPLES = 8  # the gate's budget; the deep test runs 50 per machine and seed


def find_only() -> settings:
    return profiles.SETTINGS["mutation"]


class BoundedOneShort(BoundedLruKvIndex):
    """Keeps one pair fewer than it declares: the promise is tight enough to see it."""

    capacity = CAPACITY - 1


class RefusesForgottenRemove(BoundedLruKvIndex):
    """Refuses the removal of a block it forgot, as the index trial's bounded index did."""

    def _remove(self, rank, event) -> None:
        if any(rank not in self._holders.get(h, ()) for h in event.block_hashes):
            raise ValueError(f"BlockRemoved of a block rank {rank} does not hold")
        super()._remove(rank, event)


def test_the_promise_on_a_hand_made_sequence_of_uses() -> None:
    """An LRU of 2 pairs: a pair is kept while fewer than 2 others were used after its store."""
    recent, r = RecentStores(keep=2), (1, 0)
    recent.stored(r, [1])
    assert recent.kept(r, 1)
    recent.stored(r, [2])
    assert recent.kept(r, 1) and recent.kept(r, 2)  # one other used since 1's store
    recent.used([(r, 2)])  # a lookup of 2 again: still only one other pair since 1's store
    assert recent.kept(r, 1)
    recent.stored(r, [3])  # two others (2, 3) since 1's store: an LRU of 2 may have forgotten it
    assert not recent.kept(r, 1) and recent.kept(r, 2) and recent.kept(r, 3)
    recent.used([(r, 1)])  # a lookup renews no promise: an index refreshed by stores alone may have dropped it
    assert not recent.kept(r, 1)
    recent.removed(r, 3)  # removed (one copy of several, perhaps): no promise until stored again
    assert not recent.kept(r, 3)
    recent.stored(r, [3])
    recent.cleared(r)
    assert not recent.kept(r, 3) and not RecentStores(keep=0).kept(r, 1)


def test_capabilities_say_what_a_forgetting_index_is_not_asked() -> None:
    with pytest.raises(ValueError, match="evicts_on_its_own"):
        IndexCapabilities(keeps_recent_blocks=4)
    with pytest.raises(ValueError, match="keeps_recent_blocks"):
        IndexCapabilities(evicts_on_its_own=True, keeps_recent_blocks=-1)
    gaps = " ".join(BoundedLruKvIndex.capabilities.not_exercised())
    assert "a store under a parent the rank never held" in gaps and f"last {CAPACITY} pairs" in gaps
    assert "exact answers" not in " ".join(KvIndex.capabilities.not_exercised())


@pytest.mark.sampled  # a catalogue (conftest.FAST_SAMPLE): the gate runs a share, the deep tier the rest
@pytest.mark.parametrize("variant", BOUNDED_INDEX_VARIANTS, ids=lambda v: v.__name__)
def test_a_correct_bounded_index_passes(variant) -> None:
    run_machine(index_machine_for(variant, variant.capabilities, f"bounded_{variant.__name__}"),
                settings(find_only(), max_examples=VARIANT_EXAMPLES))


@pytest.mark.deep  # one more machine run
def test_an_index_that_never_forgets_passes_as_one_that_may() -> None:
    caps = dataclasses.replace(KvIndex.capabilities, evicts_on_its_own=True, keeps_recent_blocks=CAPACITY)
    run_machine(index_machine_for(KvIndex, caps, "bounded_reference"), settings(find_only(), max_examples=VARIANT_EXAMPLES))


@pytest.mark.sampled
@pytest.mark.parametrize("mutant", [*BOUNDED_INDEX_MUTANTS, BoundedOneShort], ids=lambda m: m.__name__)
def test_a_bounded_index_that_forgets_the_wrong_blocks_or_answers_more_is_caught(mutant, monkeypatch) -> None:
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    with pytest.raises(IndexViolation) as caught:
        run_machine(index_machine_for(mutant, mutant.capabilities, f"bounded_{mutant.__name__}"), find_only(), transcript=True)
    said = str(caught.value)
    answers_more = mutant.__name__ == "BoundedIgnoresPartlyUnknownRemove"
    assert ("more" in said) if answers_more else ("forgot blocks it promises to keep" in said or "held and kept" in said), said[:1500]
    repro = repro_for(caught.value, f"radixcheck.properties.index.bounded:{mutant.__name__}")
    assert repro.text is None and "forgets on its own" in repro.why_not  # said, not a file that cannot recompute its bounds


def test_a_legal_remove_of_a_forgotten_block_must_be_taken(monkeypatch) -> None:
    """The index trial's bounded index refused it: a legal event refused is the finding."""
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    with pytest.raises(IndexViolation, match="the event was legal"):
        run_machine(index_machine_for(RefusesForgottenRemove, RefusesForgottenRemove.capabilities, "bounded_refuses"), find_only())


def test_the_lru_forgets_and_takes_what_follows() -> None:
    """The variant itself: past its capacity the oldest pair goes; a remove of it, and a store
    under it, are taken."""
    index, r = BoundedLruKvIndex(), (1, 0)
    blocks = [StoredBlock(100 + n, 200 + n) for n in range(CAPACITY + 1)]
    index.apply_event(*r, BlockStored(None, tuple(blocks)))
    assert index.find_matches([b.tokens_hash for b in blocks]) == {}  # the first block is forgotten: no prefix
    index.apply_event(*r, BlockRemoved((100,)))
    index.apply_event(*r, BlockStored(100, (StoredBlock(999, 998),)))  # under the forgotten parent
    assert index.sizes() == {r: CAPACITY}


@pytest.mark.deep  # 4 variants x 2 machines x 3 seeds x 50 streams, and the mutants on 3 seeds each
@pytest.mark.parametrize("seed", range(3))
def test_bounded_indexes_at_depth(seed: int, monkeypatch) -> None:
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    search = settings(find_only(), max_examples=50)
    for variant in BOUNDED_INDEX_VARIANTS:
        for churn in (False, True):
            run_machine(index_machine_for(variant, variant.capabilities, f"deep{seed}_{variant.__name__}", churn=churn), search)
    for mutant in [*BOUNDED_INDEX_MUTANTS, BoundedOneShort]:
        with pytest.raises(IndexViolation):
            run_machine(index_machine_for(mutant, mutant.capabilities, f"deep{seed}_{mutant.__name__}"), find_only())
