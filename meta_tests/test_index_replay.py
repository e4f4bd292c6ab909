"""One finding per root cause for index programs: each finding's (reduced) program is replayed past
its failures on a fresh index, then with every hash's top bit flipped
(:mod:`radixcheck.properties.index.replay`), and findings whose programs each show the other's are
one (:func:`radixcheck.properties.findings.root_cause.same_causes`).

A hash-width bug (hashes kept as signed 63-bit keys: the index trial's B6) reads differently by which
of a block's hashes has its top bit set: a dumped block no rank holds, a wrong tokens hash, a wrong
parent. Before, those were a finding each. Two bugs in one index stay two, and a correct index's
program shows nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from meta_tests.index_replay_mutants import Keeps63Bits, TwoBugs
from meta_tests.test_index_mutants import _ParksOrphanStores
from radixcheck.oracles.violations import IndexViolation
from radixcheck.properties.findings.failures import signature_of
from radixcheck.properties.findings.root_cause import same_causes, signature
from radixcheck.properties.index.contract import AllBlocksCleared, BlockStored, StoredBlock
from radixcheck.properties.index.machine import Blocks, KvIndexMachine
from radixcheck.properties.index.mutants import BadStoreHalfApplied, machine_for_index_mutant
from radixcheck.properties.index.replay import flip, mirrored, shown_by_index
from radixcheck.properties.index.repro import IndexProgram, failing_program
from radixcheck.reference.kv_index import KvIndex

HIGH = 2**63  # a hash at or above this has its top bit set


def _one_store_then_dump(index: type, blocks: list[tuple[int, int]]) -> tuple[KvIndexMachine, BaseException]:
    """Rank (1, 0) stores ``blocks`` (a chain from a sequence's start, as (block hash, tokens hash)), then
    the dump is checked: the machine that recorded it, and its failure."""
    machine = type("meta_replay", (machine_for_index_mutant(index, name="meta_replay"),), {"records": True})()
    machine.start_workers(workers=2, ranks=[2, 1, 1, 1])
    machine._send((1, 0), BlockStored(None, tuple(StoredBlock(h, t) for h, t in blocks)))
    with pytest.raises(IndexViolation) as caught:
        machine.check_dump()
    return machine, caught.value


def _shown(machine: KvIndexMachine, failure: BaseException) -> list:
    return shown_by_index(machine, failing_program(machine, failure))


# two-block chains whose dumps read differently first (each chain's hashes have and lack the top bit)
TOKENS_HIGH = [(5, HIGH + 9), (HIGH + 6, 10)]  # first read: block 5's tokens hash (5 sorts before the masked 6)
BLOCK_HIGH = [(HIGH + 5, 9), (6, 10)]  # first read: the masked 5, which no rank holds
PARENT_HIGH = [(HIGH + 5, 9), (3, 10)]  # first read: block 3 under the masked parent 5


def test_a_hash_flipped_stays_a_hash_and_a_malformed_field_stays_as_sent() -> None:
    assert flip(5) == HIGH + 5 and flip(HIGH + 5) == 5 and flip(-2) == -2 and flip(2**64) == 2**64 and flip(None) is None
    assert mirrored(BlockStored(HIGH + 1, (StoredBlock(2, -1),))) == BlockStored(1, (StoredBlock(HIGH + 2, -1),))


def test_a_correct_index_s_program_shows_nothing_and_flipped_nothing_either() -> None:
    machine = type("meta_replay_ok", (machine_for_index_mutant(KvIndex, name="meta_replay_ok"),), {"records": True})()
    machine.start_workers(workers=2, ranks=[2, 1, 1, 1])
    for rank, blocks in [((1, 0), PARENT_HIGH), ((1, 1), TOKENS_HIGH), ((7, 0), [(HIGH + 5, 9), (HIGH + 8, 11)])]:
        machine._send(rank, BlockStored(None, tuple(StoredBlock(h, t) for h, t in blocks)))
    machine.check_dump()
    calls = machine.sent_calls
    assert shown_by_index(machine, IndexProgram(calls[:-1], calls[-1], None, {})) == []


def test_one_hash_width_bug_read_three_ways_is_one_root_cause() -> None:
    """Each reading's program shows its own finding first, and (flipped) the others': one group.
    Without the flipped replay each showed its own reading only (three findings)."""
    shows = {}
    for blocks, said in [(TOKENS_HIGH, "with tokens hash"), (BLOCK_HIGH, "which does not hold it"), (PARENT_HIGH, "under parent")]:
        machine, failure = _one_store_then_dump(Keeps63Bits, blocks)
        assert said in str(failure)
        shown = _shown(machine, failure)
        assert shown[0] == signature(failure), shown
        shows[signature(failure)] = shown
    assert len(shows) == 3 and len(same_causes(shows)) == 1, shows


def test_two_bugs_in_one_index_stay_two_root_causes() -> None:
    """The dump's program shows nothing of the clear; the clear's program shows the dump's readings
    (any store does, flipped), but not the other way round: two."""
    dump, dump_failure = _one_store_then_dump(TwoBugs, BLOCK_HIGH)
    clear = type("meta_replay_two", (machine_for_index_mutant(TwoBugs, name="meta_replay_two"),), {"records": True})()
    clear.start_workers(workers=2, ranks=[2, 1, 1, 1])
    stored = BlockStored(None, (StoredBlock(5, 9),))
    clear._send((1, 0), stored)
    clear._send((1, 1), stored)
    clear._send((1, 0), AllBlocksCleared())
    with pytest.raises(IndexViolation) as caught:
        clear.sizes_agree()
    shows = {signature(dump_failure): _shown(dump, dump_failure), signature(caught.value): _shown(clear, caught.value)}
    assert len(same_causes(shows)) == 2, shows


# The streams tried in turn until one meets two readings of the 63-bit keys: the churn test reads "not held" in
# every stream, and the state machine mostly too; these are the streams of 0-39 whose state machine read it
# otherwise (a scan when written, unshrunk). Which stream does moves with every rule the index machine draws from.
HASH_WIDTH_SEEDS = (17, 25, 29, 34, 37)
SEEDS = range(8)  # the streams tried in turn until one meets both of two bugs


def _audit(spec: str, seed: int, tmp: Path) -> dict:
    """``radixcheck audit spec --seed seed --repro`` in a subprocess, unshrunk (the readings a stream meets
    do not hang on how far a shrink's CPU budget gets): its JSON."""
    out = tmp / f"seed{seed}.json"
    env = {**os.environ, "RADIXCHECK_SHRINK_SECONDS": "0"}
    subprocess.run([sys.executable, "-m", "radixcheck", "audit", spec, "--seed", str(seed), "-n", "0", "--json", str(out),
                    "--repro", str(tmp / f"repro{seed}")], env=env, cwd=Path(__file__).resolve().parents[1],
                   capture_output=True, text=True, timeout=600)
    return json.loads(out.read_text())


def _readings(result: dict) -> set[tuple[str, str]]:
    return {(v["oracle"], signature_of(v["oracle"], v["reason"])) for v in result["verdicts"] if v["outcome"] == "failed"}


@pytest.mark.deep  # audits in a subprocess, stream by stream
def test_an_audit_of_one_hash_width_bug_read_two_ways_gives_one_finding_naming_both(tmp_path: Path) -> None:
    """The first stream whose failing tests read the 63-bit keys two ways (seed 17 when written: a wrong
    tokens hash in the state machine, a block no rank holds in the churn test; two findings before)."""
    for seed in HASH_WIDTH_SEEDS:
        result = _audit("meta_tests.index_replay_mutants:Keeps63Bits", seed, tmp_path)
        if len(readings := _readings(result)) >= 2:
            break
    else:
        raise AssertionError(f"no stream of {HASH_WIDTH_SEEDS} read the bug two ways")
    findings = result["findings"]
    assert len(findings) == 1, [f["reason"] for f in findings]
    named = {(f["oracle"], signature_of(f["oracle"], f["reason"])) for f in findings}
    named |= {(a.partition(": ")[0], signature_of(a.partition(": ")[0], a.partition(": ")[2])) for a in findings[0]["also"]}
    assert readings <= named, (readings, named)


@pytest.mark.deep  # audits in a subprocess, stream by stream
def test_an_audit_of_two_bugs_in_one_index_gives_two_findings(tmp_path: Path) -> None:
    """The clear that clears every rank of a worker and the 63-bit keys, in the first stream whose failing
    tests meet both (seed 0 when written: the clear's sizes in the state machine, the dump in the churn
    test): neither finding joins the other, though the clear's program shows the dump's readings (any
    store does, flipped), since the dump's program shows nothing of the clear."""
    def kind(reason: str) -> str:
        return "dump" if "dump()" in reason else "clear"

    for seed in SEEDS:
        result = _audit("meta_tests.index_replay_mutants:TwoBugs", seed, tmp_path)
        if {kind(v["reason"]) for v in result["verdicts"] if v["outcome"] == "failed"} == {"dump", "clear"}:
            break
    else:
        raise AssertionError(f"no stream of {list(SEEDS)} met both bugs")
    findings = result["findings"]
    kinds = [{kind(said) for said in [f["reason"], *f["also"]]} for f in findings]
    assert sorted(map(sorted, kinds)) == [["clear"], ["dump"]], [[f["reason"], *f["also"]] for f in findings]


def _bad_events(index: type, kinds: list[str]) -> tuple[KvIndexMachine, BaseException | None]:
    machine = type("meta_replay_bad", (machine_for_index_mutant(index, name="meta_replay_bad"),), {"records": True})()
    machine.start_workers(workers=2, ranks=[1, 1, 1, 1])
    machine.serve(0, (0, 1), 0, Blocks(blocks=1, seed=3), aligned=False)
    try:
        machine.bad_events(kinds, pick=0)
    except Exception as exc:  # noqa: BLE001 - the finding the test wants
        return machine, exc
    return machine, None


@pytest.mark.parametrize("index, kind", [(BadStoreHalfApplied, "good_block_then_bad_hash"), (_ParksOrphanStores, "unknown_parent")])
def test_a_malformed_event_s_finding_replays_as_itself_and_the_reference_s_shows_nothing(index: type, kind: str) -> None:
    """A malformed event is replayed as the machine sent it (refused, nothing changed), and the query after a
    refused store's parent came is the stays-refused check: each finding's program shows its own first."""
    machine, failure = _bad_events(index, [kind])
    assert failure is not None
    shown = _shown(machine, failure)
    assert shown and shown[0] == signature(failure), shown
    right, none = _bad_events(KvIndex, [kind, "remove_unheld", "huge_hash"])
    calls = right.sent_calls
    assert none is None and shown_by_index(right, IndexProgram(calls[:-1], calls[-1], None, {})) == []


def test_a_replay_ends_where_the_index_stops_answering(monkeypatch) -> None:
    """An index that panicked on a self-parent store answers no call after it, and its ``dump()`` loops
    on the cycle the store left. Its program shows its own finding, and the replay ends there: before,
    it went on into ``dump()``, which cost one whole per-operation limit (5 s of CPU) and added a hang
    to what the program shows. A tiny limit here keeps the old cost small enough to measure."""
    import time

    from radixcheck.oracles.violations import BadInputViolation
    from radixcheck.properties.index.mutants import SelfParentPanics
    from radixcheck.properties.target import TIMEOUT_ENV

    monkeypatch.setenv(TIMEOUT_ENV, "0.5")
    machine = type("meta_panics", (machine_for_index_mutant(SelfParentPanics, name="meta_panics"),), {"records": True})()
    machine.start_workers(workers=2, ranks=[1, 1, 1, 1])
    with pytest.raises(BadInputViolation) as caught:
        machine.bad_events(kinds=["self_parent"], pick=0)
    assert "no longer answers" in str(caught.value)
    cpu = time.process_time()
    shown = _shown(machine, caught.value)
    cpu = time.process_time() - cpu
    assert shown == [signature(caught.value)], shown  # before: a hang of dump() too
    assert cpu < 0.4, f"the replay spent {cpu:.2f} s of CPU: it waited for a call to hang"
