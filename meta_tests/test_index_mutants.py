"""The index suite proves it can fail and does not cry wolf: every index mutant (one per bug class
Dynamo's router met in production) is caught by the oracle its class predicts, the reference
index and every correct variant pass (one trusts its publishers, one counts vLLM's duplicate
copies, one needs leaves removed first and offers no sizes, dump or memory count, one has one
rank per worker), and the oracle itself is checked against hand-made event streams."""

from __future__ import annotations

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.kv_index import IndexModel
from radixcheck.oracles.violations import BadInputViolation, EngineEventsViolation, IndexMemoryViolation, IndexViolation
from radixcheck.properties.findings.repro import repro_for, run_repro
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, IndexCapabilities, StoredBlock
from radixcheck.properties.index.machine import index_machine_for
from radixcheck.properties.index.mutants import (
    CORRECT_INDEX_VARIANTS,
    INDEX_MUTANTS,
    PrunesSuffixWithAncestor,
    machine_for_index_mutant,
)
from radixcheck.properties.target import TargetError, check_target, load_target
from radixcheck.reference.kv_index import KvIndex

VARIANT_EXAMPLES = 8  # the gate shows each passes; the evidence is 50 full random streams per variant and machine
# (reports/INDEX_CATALOGUE.md). At 30 the seven runs cost the gate 3.9 s of CPU (Zen 5); at 15, 2 s


def find_only() -> settings:
    return profiles.SETTINGS["mutation"]


@pytest.mark.parametrize("churn", [False, True], ids=["ordinary", "churn"])
def test_the_reference_index_passes(churn: bool) -> None:
    """At the variants' budget (the gate's time; 50 full streams per machine pass in INDEX_CATALOGUE.md)."""
    search = settings(find_only(), max_examples=VARIANT_EXAMPLES)
    run_machine(index_machine_for(KvIndex, KvIndex.capabilities, "meta_reference_index", churn=churn), search)


@pytest.mark.sampled  # a catalogue that grows with each contract (conftest.FAST_SAMPLE)
@pytest.mark.parametrize("variant", CORRECT_INDEX_VARIANTS, ids=lambda v: v.__name__)
def test_correct_index_variant_passes(variant) -> None:
    """Each asserts what its capabilities leave to its callers (no malformed event, no dp rank but
    0, leaves removed first, no sizes/dump/resident asked): passing shows none of it was sent."""
    run_machine(machine_for_index_mutant(variant, f"variant_{variant.__name__}"), settings(find_only(), max_examples=VARIANT_EXAMPLES))


@pytest.mark.sampled  # a catalogue that grows with each contract (conftest.FAST_SAMPLE)
@pytest.mark.parametrize("mutant", INDEX_MUTANTS, ids=lambda m: m.bug_class)
def test_index_mutant_is_caught(mutant) -> None:
    """Caught, for the right reason; and its standalone repro file (plain calls, then the check)
    exits 1 with the finding on the mutant, and 0 on the reference index."""
    with pytest.raises(Exception) as caught:
        run_machine(machine_for_index_mutant(mutant), find_only(), transcript=True)
    assert isinstance(caught.value, mutant.caught_by), (
        f"{mutant.__name__} was caught, but by {type(caught.value).__name__}, not {mutant.caught_by}: {str(caught.value)[:1500]}"
    )
    repro = repro_for(caught.value, f"radixcheck.properties.index.mutants:{mutant.__name__}")
    assert repro.text is not None, repro.why_not
    assert repro.exit_code == 1 and "BUG (radixcheck" in repro.output, repro.output[-2000:]
    assert "hypothesis" not in repro.text.lower() and "index_machine" not in repro.text
    fixed = repro.text.replace(f"from radixcheck.properties.index.mutants import {mutant.__name__} as make",
                               "from radixcheck.reference.kv_index import KvIndex as make")
    assert fixed != repro.text
    code, printed = run_repro(fixed)
    assert code == 0 and "no bug" in printed, printed[-2000:]


@pytest.mark.deep  # two index machines to a verdict
def test_a_pruned_suffix_is_caught_only_where_removal_order_is_free() -> None:
    """Declared leaves first, the engines never remove a parent before its children, so the pruning
    index is right there (the capability is what the finding depends on)."""
    leaves_first = IndexCapabilities(accepts_any_removal_order=False)
    search = settings(find_only(), max_examples=VARIANT_EXAMPLES)
    run_machine(index_machine_for(PrunesSuffixWithAncestor, leaves_first, "meta_prunes_leaves_first"), search)


def test_every_index_mutant_is_in_the_catalogue() -> None:
    from radixcheck.reports.index_catalogue import INDEX_OBLIGATIONS

    listed = {m for *_, mutants in INDEX_OBLIGATIONS for m in mutants}
    assert listed == {m.__name__ for m in INDEX_MUTANTS}


def _stored(parent, *blocks):
    return BlockStored(parent, tuple(StoredBlock(h, t) for h, t in blocks))


def test_the_oracle_on_a_hand_made_stream() -> None:
    """Two ranks share a prefix; one loses its parent block and keeps the child (which matches again
    when the parent comes back); copies count only when declared; clear is per rank."""
    model = IndexModel()
    a, b = (1, 0), (1, 1)
    model.store(a, None, [(10, 1), (11, 2)])
    model.store(b, None, [(10, 1)])
    assert model.overlaps([1, 2, 3]) == {a: 2, b: 1}
    model.remove(a, [10])
    assert model.overlaps([1, 2]) == {b: 1} and model.holds(a, 11)
    model.store(a, None, [(10, 1)])
    assert model.overlaps([1, 2]) == {a: 2, b: 1}
    model.clear(b)
    assert model.overlaps([1]) == {a: 1} and model.sizes() == {a: 2}
    counted = IndexModel(counts_copies=True)
    counted.store(a, None, [(10, 1)])
    counted.store(a, None, [(10, 1)])
    counted.remove(a, [10])
    assert counted.overlaps([1]) == {a: 1}
    with pytest.raises(EngineEventsViolation):
        model.store(a, None, [(12, 1)])  # the same chain under another block hash


def test_the_reference_refuses_malformed_events_and_changes_nothing() -> None:
    index = KvIndex()
    index.apply_event(3, 0, _stored(None, (10, 1), (11, 2)))
    before = (index.find_matches([1, 2, 5]), index.sizes(), index.resident())
    for bad in (_stored(11, (11, 5)), _stored(None, (20, 1)), _stored(99, (21, 1)), BlockRemoved((99,)), _stored(None, (-1, 3)),
                _stored(None, (2**64, 3)), BlockRemoved((10, 10))):
        with pytest.raises(ValueError):
            index.apply_event(3, 0, bad)
        assert (index.find_matches([1, 2, 5]), index.sizes(), index.resident()) == before
    index.apply_event(3, 0, AllBlocksCleared())
    assert index.resident() == 0 and index.dump() == []


def test_an_index_factory_is_loaded_and_checked() -> None:
    target = load_target("radixcheck.reference.kv_index:KvIndex")
    assert target.kind == "index"
    check_target(target)
    with pytest.raises(TargetError, match="lacks sizes"):
        check_target(load_target("meta_tests.test_index_mutants:_index_without_sizes"))


def _index_without_sizes() -> object:
    class NoSizes:
        def apply_event(self, *args): ...
        def find_matches(self, hashes): return {}
        def remove_worker(self, worker_id): ...
        def dump(self): return []
        def resident(self): return 0
    return NoSizes()


_index_without_sizes.capabilities = IndexCapabilities()  # type: ignore[attr-defined]


@pytest.mark.deep  # an index machine shrunk to its failure
def test_an_index_failure_names_the_events(monkeypatch) -> None:
    """The program shows each event sent above its step, blocks by their chains."""
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "1")
    with pytest.raises(IndexViolation) as caught:
        run_machine(machine_for_index_mutant(PrunesSuffixWithAncestor), profiles.SETTINGS["audit"])
    program = "\n".join(caught.value.__notes__)
    assert "#   call " in program and "apply_event(worker " in program and "BlockRemoved([" in program, program


def test_an_index_repro_lets_a_waived_refusal_refuse_again() -> None:
    """A legal event the index refused while the run went on (a waived finding) is sent through
    ``may_refuse`` in the file, so the file reaches the finding it is about."""
    from types import SimpleNamespace

    from radixcheck.oracles.violations import Check
    from radixcheck.properties.index.machine import IndexCall
    from radixcheck.properties.index.repro import IndexProgram, index_script

    refused = IndexCall("apply_event", (1, 0, AllBlocksCleared()), True, raised=RuntimeError("known"))
    stored = IndexCall("apply_event", (1, 0, _stored(None, (10, 1))), True)
    last = IndexCall("sizes", (), False)
    found = IndexProgram([stored, refused], last, Check("per_rank(result) == held", "per_rank(result)", {"held": {}}), {"held": {}})
    text, calls = index_script(SimpleNamespace(capabilities=KvIndex.capabilities), IndexViolation("sizes() disagrees: x"), "m:make",
                               "t", found)
    assert calls == 3
    assert "may_refuse(1, 0, AllBlocksCleared())  # refused in the run (a waived finding)" in text
    assert "\n    index.apply_event(1, 0, BlockStored(None, (StoredBlock(10, 1),)))" in text  # up to the check: exit 2 if it raises
    assert "def may_refuse(" in text


def test_a_negative_resident_count_is_caught_by_the_memory_check() -> None:
    """A count of entries below 0 would pass every upper bound (a leak hidden); oracle 8 names it."""

    class NegativeResident(KvIndex):
        def resident(self) -> int:
            return super().resident() - 2 * len(self._held) - 1

    with pytest.raises(IndexMemoryViolation, match="a negative count of entries"):
        run_machine(index_machine_for(NegativeResident, KvIndex.capabilities, "meta_negative_resident"), find_only())


class _DumpsWrongTokensHash(KvIndex):
    """A dump that keeps each block's parent but not its tokens hash (a u64 kept as i63, say)."""

    def dump(self):
        return [(w, r, BlockStored(e.parent_hash, tuple(StoredBlock(b.block_hash, b.tokens_hash ^ 1) for b in e.blocks)))
                for w, r, e in super().dump()]


def test_a_dump_with_the_wrong_tokens_hash_is_said_so_not_blamed_on_its_parent() -> None:
    """Issue from the index trial (reports/findings/index_trial.md): the message named only the parent,
    "under parent None; it was stored under None", when the tokens hash was what differed."""
    from radixcheck.properties.index.machine import Blocks

    machine = machine_for_index_mutant(_DumpsWrongTokensHash, name="dump_tokens")()
    machine.start_workers(workers=2, ranks=[1, 1, 1, 1])
    machine.serve_everywhere(machine.new_sequence(Blocks(blocks=1, seed=0)))
    with pytest.raises(IndexViolation) as caught:
        machine.check_dump()
    message = str(caught.value)
    assert "with tokens hash" in message and "under parent" not in message, message


class _DumpsChildrenFirst(KvIndex):
    """A dump in the wrong order: each rank's deepest blocks first (the index trial's B10: set order)."""

    def dump(self):
        return list(reversed(super().dump()))


def test_a_dump_that_lists_a_child_before_its_parent_is_caught() -> None:
    """Replayed in order (a warm restart), such a dump stores a child under a parent not held yet: a
    validating index refuses it. The set of blocks is right, so only the order shows it."""
    from radixcheck.properties.index.machine import Blocks

    machine = machine_for_index_mutant(_DumpsChildrenFirst, name="dump_order")()
    machine.start_workers(workers=2, ranks=[1, 1, 1, 1])
    machine.serve_everywhere(machine.new_sequence(Blocks(blocks=2, seed=0)))
    with pytest.raises(IndexViolation, match="before its parent"):
        machine.check_dump()
    right = machine_for_index_mutant(KvIndex, name="dump_order_reference")()
    right.start_workers(workers=2, ranks=[1, 1, 1, 1])
    right.serve_everywhere(right.new_sequence(Blocks(blocks=2, seed=0)))
    right.check_dump()


@pytest.mark.deep  # an index machine to a verdict, and its repro file run twice
def test_a_dump_out_of_order_has_a_repro_file_that_exits_1_then_0() -> None:
    with pytest.raises(IndexViolation, match="before its parent") as caught:
        run_machine(machine_for_index_mutant(_DumpsChildrenFirst, name="dump_order_repro"), find_only(), transcript=True)
    repro = repro_for(caught.value, "meta_tests.test_index_mutants:_DumpsChildrenFirst")
    assert repro.text is not None, repro.why_not
    assert repro.exit_code == 1 and "BUG (radixcheck" in repro.output, repro.output[-2000:]
    fixed = repro.text.replace("from meta_tests.test_index_mutants import _DumpsChildrenFirst as make",
                               "from radixcheck.reference.kv_index import KvIndex as make")
    assert fixed != repro.text
    code, printed = run_repro(fixed)
    assert code == 0 and "no bug" in printed, printed[-2000:]


_DumpsChildrenFirst.capabilities = KvIndex.capabilities  # type: ignore[attr-defined]


class _DumpKeepsRemoved(KvIndex):
    """A dump that still lists every block a rank ever stored (a stale snapshot)."""

    def __init__(self) -> None:
        super().__init__()
        self.ever: dict[tuple[int, int, int], BlockStored] = {}

    def apply_event(self, worker_id, dp_rank, event) -> None:
        super().apply_event(worker_id, dp_rank, event)
        if isinstance(event, BlockStored):
            parent = event.parent_hash
            for b in event.blocks:
                self.ever[(worker_id, dp_rank, b.block_hash)] = BlockStored(parent, (b,))
                parent = b.block_hash

    def dump(self):
        return [(w, r, e) for (w, r, _), e in self.ever.items()]


def test_a_dump_finding_after_a_long_program_is_reduced() -> None:
    """A dump check names one block; its expected values were never recomputed, so a dump finding's
    repro file kept every call of its run (a churn test's: 6,001 calls, 1.8 MB; index trial, B6).
    The reduction keeps a shorter program while the oracle still says what the check assumes."""
    from radixcheck.oracles.violations import Check
    from radixcheck.properties.index.machine import IndexCall
    from radixcheck.properties.index.repro import IndexProgram, shortest_program

    rank = (1, 0)
    events = []
    for n in range(40):  # churn: distinct one-block prompts, each stored then removed
        events += [_stored(None, (1000 + n, 500 + n)), BlockRemoved((1000 + n,))]
    program = [IndexCall("apply_event", (*rank, e), shown=True) for e in events]
    check = Check("block not in listed(result)", "sorted(listed(result))", {"block": (rank, 1039)})
    found = IndexProgram(program, IndexCall("dump", (), shown=True), check, dict(check.names))

    def fails(candidate: IndexProgram) -> bool:
        index = _DumpKeepsRemoved()
        for call in candidate.program:
            index.apply_event(*call.args)
        listed = {((w, r), b.block_hash) for w, r, e in index.dump() for b in e.blocks}
        return candidate.names["block"] in listed

    assert fails(found)
    shortest = shortest_program(found, counts_copies=False, fails=fails, seconds=30)
    assert len(shortest.program) <= 2, [c.args for c in shortest.program]


class _ParksOrphanStores(KvIndex):
    """Refuses nothing it could use later: a store under a parent the rank does not hold waits, and
    is applied once that parent is stored (an index tolerant of out-of-order delivery; index trial, B4)."""

    def __init__(self) -> None:
        super().__init__()
        self.parked: list[tuple[int, int, BlockStored]] = []

    def apply_event(self, worker_id, dp_rank, event) -> None:
        held = self._held.get((worker_id, dp_rank), ())
        if isinstance(event, BlockStored) and event.parent_hash is not None and event.parent_hash not in held:
            self.parked.append((worker_id, dp_rank, event))
            return
        super().apply_event(worker_id, dp_rank, event)
        waiting, self.parked = self.parked, []
        for parked in waiting:
            try:
                self.apply_event(*parked)
            except ValueError:
                pass


_ParksOrphanStores.capabilities = KvIndex.capabilities  # type: ignore[attr-defined]


def test_a_refused_store_applied_once_its_parent_comes_is_caught() -> None:
    """Before, the malformed store's parent was a hash no rank ever stored: parking it changed
    nothing the suite could see, and the index conformed in 4 of 4 streams."""
    machine = machine_for_index_mutant(_ParksOrphanStores, name="parks_orphans")()
    machine.start_workers(workers=2, ranks=[1, 1, 1, 1])
    with pytest.raises(BadInputViolation, match="applied later"):
        machine.bad_events(["unknown_parent"], pick=0)
    right = machine_for_index_mutant(KvIndex, name="parks_orphans_reference")()
    right.start_workers(workers=2, ranks=[1, 1, 1, 1])
    right.bad_events(["unknown_parent", "remove_unheld", "unknown_parent"], pick=1)


def test_redelivery_declared_with_copies_counted_is_said_not_exercised() -> None:
    """Index trial: an index reading vLLM's raw stream that also declared tolerates_redelivery=True got
    no redelivery (the machine never sends it with counts_copies) and a card that did not say so."""
    said = IndexCapabilities(counts_copies=True, tolerates_redelivery=True).not_exercised()
    assert any("delivered twice" in gap for gap in said), said
    assert not any("delivered twice" in gap for gap in IndexCapabilities(tolerates_redelivery=True).not_exercised())


class _RawStreamReadAsSet(KvIndex):
    """Declares vLLM's raw stream but keeps one copy per block: the first copy's remove drops the
    block while the rank still holds another copy (index trial, B2)."""

    capabilities = IndexCapabilities(counts_copies=True)

    def __init__(self) -> None:
        super().__init__()
        self.counts_copies = False


def test_a_raw_stream_read_as_a_set_is_caught_by_a_duplicate_copy_evicted() -> None:
    from radixcheck.properties.index.machine import Blocks
    from radixcheck.properties.index.mutants import CopyCountingKvIndex

    for index, wrong in ((_RawStreamReadAsSet, True), (CopyCountingKvIndex, False), (KvIndex, False)):
        machine = machine_for_index_mutant(index, name="duplicate_copy")()
        machine.start_workers(workers=2, ranks=[1, 1, 1, 1])
        base = machine.new_sequence(Blocks(blocks=2, seed=0))
        if wrong:
            with pytest.raises(IndexViolation, match="disagrees with what the events say"):
                machine.duplicate_then_evict_one(rank=0, base=base)
        else:
            machine.duplicate_then_evict_one(rank=0, base=base)
            machine.duplicate_then_evict_one(rank=0, base=base)


def test_a_reduced_program_keeps_a_redelivery_after_its_first_delivery() -> None:
    """Without its first delivery a redelivered store (sent through may_refuse, left out of the
    oracle) is a first delivery a correct index takes, and the file failed on the reference: two index
    mutants' files did, once the duplicate-copy rule moved their streams (index trial)."""
    from radixcheck.oracles.violations import Check
    from radixcheck.properties.index.machine import IndexCall
    from radixcheck.properties.index.repro import IndexProgram, shortest_program

    store = _stored(None, (10, 1), (11, 2))
    program = [IndexCall("apply_event", (1, 0, store), shown=True), IndexCall("apply_event", (1, 0, store), shown=True, may_refuse=True)]
    check = Check("result <= limit", "result", {"limit": 24})
    found = IndexProgram(program, IndexCall("resident", (), shown=False), check, dict(check.names))
    shortest = shortest_program(found, counts_copies=False, fails=lambda candidate: bool(candidate.program), seconds=30)
    kinds = [c.may_refuse for c in shortest.program]
    assert kinds in ([], [False], [False, True]), kinds  # never the redelivery alone


def _pairs_then_a_clear() -> tuple:
    """A query, then a chain of 10 blocks stored one by one and removed leaves first, then the store
    and clear a memory finding needs; the check: nothing held, nothing dumped."""
    from radixcheck.oracles.violations import Check
    from radixcheck.properties.index.machine import IndexCall
    from radixcheck.properties.index.repro import IndexProgram

    program = [IndexCall("find_matches", ([1],), shown=True)]
    program += [IndexCall("apply_event", (1, 0, _stored(100 + n - 1 if n else None, (100 + n, n))), shown=True) for n in range(10)]
    program += [IndexCall("apply_event", (1, 0, BlockRemoved((100 + n,))), shown=True) for n in reversed(range(10))]
    needed = [IndexCall("apply_event", (1, 0, _stored(None, (7, 70))), shown=True),
              IndexCall("apply_event", (1, 0, AllBlocksCleared()), shown=True)]
    check = Check("not listed(result)", "listed(result)")
    return IndexProgram(program + needed, IndexCall("dump", (), shown=False), check, {}), needed


def test_a_reduction_cut_short_by_its_budget_is_said_in_the_file() -> None:
    """The index trial's B7 file kept 112 calls of its program at load 24-26, and its header did not
    say whether the reduction's budget had run out; now it says so, and only then."""
    from types import SimpleNamespace

    from radixcheck.properties.index.repro import index_script, shortest_program

    found, needed = _pairs_then_a_clear()
    shortest = shortest_program(found, counts_copies=False, seconds=0, fails=lambda candidate: True)  # no time: nothing tried
    assert shortest.program == found.program and shortest.cut_short == 0
    text, _ = index_script(SimpleNamespace(capabilities=KvIndex.capabilities),
                           IndexMemoryViolation("no rank holds anything, but dump() lists 1 block(s)"), "m:make", "", shortest)
    assert "Reduction stopped at its budget" in text and "RADIXCHECK_REDUCE_SECONDS=60" in text
    full, _ = index_script(SimpleNamespace(capabilities=KvIndex.capabilities),
                           IndexMemoryViolation("no rank holds anything, but dump() lists 1 block(s)"), "m:make", "",
                           shortest_program(found, counts_copies=False, seconds=30, fails=lambda c: all(x in c.program for x in needed)))
    assert "Reduction stopped" not in full
