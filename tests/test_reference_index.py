"""The reference index's own promises, checked by hand on examples small enough to read: each
malformed event is refused with a message that names the problem and changes nothing, and the
edges of the legal inputs (hash 0 and 2**64 - 1, worker 0) are taken. The contract only asks an
index to refuse and stay unchanged (the index machine's ``bad_events``); the messages are the
reference's promise to a user. These kill the reference index's mutants (reports/MUTATION.md)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, StoredBlock
from radixcheck.properties.index.mutants import CopyCountingKvIndex
from radixcheck.reference.kv_index import KvIndex

TOP = 2**64 - 1  # the largest legal hash


@pytest.fixture(autouse=True)
def _fail_a_hang_fast() -> Iterator[None]:
    """A mutant can loop forever (a clear whose drop never reaches the rank's copy): fail in 2 s."""
    def hung(*_: object) -> None:
        raise TimeoutError("the reference index hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _stored(parent, *blocks) -> BlockStored:
    return BlockStored(parent, tuple(StoredBlock(h, t) for h, t in blocks))


def _state(index: KvIndex) -> tuple:
    return index.find_matches([1, 2, 3]), index.find_matches([5]), index.sizes(), index.dump(), index.resident()


@pytest.fixture
def index() -> KvIndex:
    """Rank (3, 0) holds the chain 10 -> 11 (tokens 1, 2)."""
    index = KvIndex()
    index.apply_event(3, 0, _stored(None, (10, 1), (11, 2)))
    return index


@pytest.mark.parametrize(
    ("event", "error", "phrases"),
    [
        (_stored(99, (21, 1)), ValueError, ["parent 99", "rank (3, 0) does not hold"]),
        (_stored(-5, (21, 1)), ValueError, ["parent_hash must be an int in [0, 2**64)", "-5"]),
        (_stored(2**64, (21, 1)), ValueError, ["parent_hash", "[0, 2**64)", str(2**64)]),
        (BlockStored(None, [StoredBlock(21, 5)]), ValueError, ["BlockStored.blocks", "tuple of StoredBlock", "[StoredBlock"]),
        (BlockStored(None, ((21, 5),)), ValueError, ["BlockStored.blocks", "tuple of StoredBlock", "((21, 5),)"]),
        (BlockStored(None, None), ValueError, ["BlockStored.blocks", "tuple of StoredBlock", "None"]),
        (_stored(11, (11, 5)), ValueError, ["under 11", "names a block twice or as its own parent"]),
        (_stored(None, (20, 5), (20, 6)), ValueError, ["under None", "a cycle"]),
        (_stored(None, (-1, 5)), ValueError, ["block_hash must be an int in [0, 2**64)", "-1"]),
        (_stored(None, (True, 5)), ValueError, ["block_hash", "True"]),
        (_stored(None, (21, 2**64)), ValueError, ["tokens_hash must be an int in [0, 2**64)", str(2**64)]),
        (_stored(None, (21, 5.0)), ValueError, ["tokens_hash", "5.0"]),
        (_stored(None, (11, 7)), ValueError, ["block 11 is already known under parent 10 with tokens hash 2"]),
        (_stored(10, (12, 2)), ValueError, ["tokens hash 2 under parent 10 is already block 11, not 12"]),
        (_stored(None, (21, 5), (22, 5), (11, 2)), ValueError, ["block 11 is already known under parent 10"]),
        (BlockRemoved([10]), ValueError, ["BlockRemoved.block_hashes", "must be a tuple", "[10]"]),
        (BlockRemoved((10, -3)), ValueError, ["block hash must be an int", "-3"]),
        (BlockRemoved((99,)), ValueError, ["block 99", "rank (3, 0) does not hold", "(1 copy)"]),
        (BlockRemoved((10, 10)), ValueError, ["block 10", "rank (3, 0) does not hold", "(2 copies)"]),
        ("BlockRemoved", TypeError, ["not a KV event", "'BlockRemoved'"]),
    ],
)
def test_a_malformed_event_is_refused_by_name_and_changes_nothing(index, event, error, phrases) -> None:
    before = _state(index)
    with pytest.raises(error) as raised:
        index.apply_event(3, 0, event)
    missing = [p for p in phrases if p not in str(raised.value)]
    assert not missing, f"message {str(raised.value)!r} does not mention {missing}"
    assert _state(index) == before


def test_a_store_under_a_parent_from_a_rank_that_holds_nothing_is_refused_by_name(index) -> None:
    before = _state(index)
    with pytest.raises(ValueError, match=r"BlockStored under parent 10, which rank \(9, 0\) does not hold"):
        index.apply_event(9, 0, _stored(10, (21, 5)))
    assert _state(index) == before


@pytest.mark.parametrize(("worker_id", "dp_rank", "named"), [(-1, 0, "worker_id"), (3, -1, "dp_rank"), (True, 0, "worker_id"),
                                                              (3, False, "dp_rank"), (3.0, 0, "worker_id"), (3, "0", "dp_rank")])
def test_a_bad_rank_is_refused_by_name(index, worker_id, dp_rank, named) -> None:
    before = _state(index)
    with pytest.raises(ValueError, match=f"{named} must be a non-negative int, got {dp_rank if named == 'dp_rank' else worker_id!r}"):
        index.apply_event(worker_id, dp_rank, AllBlocksCleared())
    with pytest.raises(ValueError, match="worker_id must be a non-negative int"):
        index.remove_worker(-1)
    assert _state(index) == before


def test_a_bad_query_is_refused_by_name(index) -> None:
    for bad in (-1, 2**64, 1.0, False):
        with pytest.raises(ValueError, match=r"tokens hash must be an int in \[0, 2\*\*64\)"):
            index.find_matches([1, bad])


def test_the_edges_of_the_legal_inputs_are_taken() -> None:
    """Hash 0 and 2**64 - 1, worker 0 and rank 0: legal, stored and matched."""
    index = KvIndex()
    index.apply_event(0, 0, _stored(None, (0, 0), (TOP, TOP)))
    index.apply_event(0, 0, _stored(TOP, (1, 0)))
    assert index.find_matches([0, TOP, 0]) == {(0, 0): 3}
    assert index.sizes() == {(0, 0): 3}
    index.apply_event(0, 0, BlockRemoved((0, TOP, 1)))
    assert index.find_matches([0]) == {} and index.resident() == 0


def test_a_store_checks_every_block_against_the_one_before_it() -> None:
    """A chain's second block is checked under the first (not under the event's parent): storing
    10 -> 11 again is legal, and so is a new chain whose second block reuses tokens hash 1."""
    index = KvIndex()
    index.apply_event(3, 0, _stored(None, (10, 1), (11, 2)))
    index.apply_event(3, 0, _stored(None, (10, 1), (11, 2)))
    index.apply_event(3, 0, _stored(None, (20, 5), (21, 1)))
    assert index.find_matches([1, 2]) == {(3, 0): 2} and index.find_matches([5, 1]) == {(3, 0): 2}


def test_removing_a_worker_clears_each_of_its_ranks_and_no_other_worker() -> None:
    index = KvIndex()
    for worker, rank in ((3, 0), (3, 1), (4, 0)):
        index.apply_event(worker, rank, _stored(None, (10, 1)))
    index.remove_worker(3)
    assert index.find_matches([1]) == {(4, 0): 1} and index.sizes() == {(4, 0): 1}
    assert index.dump() == [(4, 0, _stored(None, (10, 1)))]
    index.apply_event(3, 1, _stored(None, (10, 1)))  # back, empty
    assert index.find_matches([1]) == {(3, 1): 1, (4, 0): 1}


def test_a_clear_drops_every_copy_of_the_rank_only() -> None:
    """A rank that counts copies holds two of block 10; a clear takes both, not the other rank's."""
    index = CopyCountingKvIndex()
    for _ in range(2):
        index.apply_event(3, 0, _stored(None, (10, 1)))
    index.apply_event(3, 1, _stored(None, (10, 1)))
    index.apply_event(3, 0, AllBlocksCleared())
    assert index.find_matches([1]) == {(3, 1): 1}
    index.apply_event(3, 1, AllBlocksCleared())
    assert index.resident() == 0


def test_the_dump_lists_parents_first_and_only_chains_the_rank_holds_whole() -> None:
    """Block hashes fall from root to leaf (30 -> 20 -> 10), so a set of them iterates leaf first:
    the dump must still list parents first (a fresh index rebuilt from it refuses a block before
    its parent). Rank 1 loses the root, so neither 20 (its parent gone) nor 10 (its grandparent
    gone) is listed for it."""
    index = KvIndex()
    for rank in (0, 1):
        index.apply_event(3, rank, _stored(None, (30, 1), (20, 2), (10, 3)))
    index.apply_event(3, 1, BlockRemoved((30,)))
    dumped = index.dump()
    assert [(w, r, e.parent_hash, e.blocks[0].block_hash) for w, r, e in dumped] == [(3, 0, None, 30), (3, 0, 30, 20),
                                                                                     (3, 0, 20, 10)]
    rebuilt = KvIndex()
    for worker, rank, event in dumped:
        rebuilt.apply_event(worker, rank, event)
    assert rebuilt.find_matches([1, 2, 3]) == {(3, 0): 3}


def test_the_resident_count_is_never_negative() -> None:
    """Four ranks share one chain: the count of entries stays a count (the memory check bounds it
    from above only; below 0 it would hide a leak), and is 0 once they all let go."""
    index = KvIndex()
    for rank in range(4):
        index.apply_event(3, rank, _stored(None, (10, 1), (11, 2)))
    assert index.resident() > 0
    for rank in range(4):
        index.apply_event(3, rank, AllBlocksCleared())
    assert index.resident() == 0
