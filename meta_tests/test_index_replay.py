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
from typing import Any

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.audit import Verdict, findings_of
from radixcheck.oracles.violations import IndexViolation
from radixcheck.properties.findings.failures import describe_failure
from radixcheck.properties.findings.root_cause import same_causes, signature
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.index.contract import AllBlocksCleared, BlockStored, StoredBlock
from radixcheck.properties.index.machine import KvIndexMachine
from radixcheck.properties.index.mutants import ClearedClearsEveryRank, machine_for_index_mutant
from radixcheck.properties.index.replay import flip, mirrored, shown_by_index
from radixcheck.properties.index.repro import IndexProgram, failing_program
from radixcheck.reference.kv_index import KvIndex

HIGH = 2**63  # a hash at or above this has its top bit set
I63 = HIGH - 1


def _i63(h: Any) -> Any:
    return h & I63 if isinstance(h, int) else h


class _DumpKeeps63Bits(KvIndex):
    """Its dump (a router's warm restart) writes hashes as signed 63-bit keys: one at or above 2**63
    comes back masked (the index trial's B6, in the dump alone)."""

    def dump(self) -> list[tuple[int, int, BlockStored]]:
        return [(w, r, BlockStored(_i63(e.parent_hash), tuple(StoredBlock(_i63(b.block_hash), _i63(b.tokens_hash)) for b in e.blocks)))
                for w, r, e in super().dump()]


class _TwoBugs(ClearedClearsEveryRank, _DumpKeeps63Bits):
    """Two bugs of one index: a rank's clear clears its worker's other ranks, and the 63-bit dump."""


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
        machine, failure = _one_store_then_dump(_DumpKeeps63Bits, blocks)
        assert said in str(failure)
        shown = _shown(machine, failure)
        assert shown[0] == signature(failure), shown
        shows[signature(failure)] = shown
    assert len(shows) == 3 and len(same_causes(shows)) == 1, shows


def test_two_bugs_in_one_index_stay_two_root_causes() -> None:
    """The dump's program shows nothing of the clear; the clear's program shows the dump's readings
    (any store does, flipped), but not the other way round: two."""
    dump, dump_failure = _one_store_then_dump(_TwoBugs, BLOCK_HIGH)
    clear = type("meta_replay_two", (machine_for_index_mutant(_TwoBugs, name="meta_replay_two"),), {"records": True})()
    clear.start_workers(workers=2, ranks=[2, 1, 1, 1])
    stored = BlockStored(None, (StoredBlock(5, 9),))
    clear._send((1, 0), stored)
    clear._send((1, 1), stored)
    clear._send((1, 0), AllBlocksCleared())
    with pytest.raises(IndexViolation) as caught:
        clear.sizes_agree()
    shows = {signature(dump_failure): _shown(dump, dump_failure), signature(caught.value): _shown(clear, caught.value)}
    assert len(same_causes(shows)) == 2, shows
