"""Standalone repro files (issue 20 item 1): reduced but the same finding, written by the plugin
and the audit one per finding, and runnable as files: exit 1 while the bug is there, 0 once it is
fixed. (Every catalogued mutant's file is run on the mutant and on the reference, and a
production-scale one must stay short, in meta_tests/test_mutants.py.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from radixcheck import profiles
from radixcheck.properties.cache.batches import tokens_computed
from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES, SlotAllocator
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import EvictsLockedLeaf, machine_for_mutant
from radixcheck.properties.findings.reduce import Reduced, finding_of, reduce, renamed
from radixcheck.properties.findings.repro import (
    Repro,
    _checked,
    _ints,
    _loops,
    budget_advice,
    file_name,
    finding_site,
    literal,
    reduction_note,
    repro_for,
    run_repro,
)
from radixcheck.properties.findings.second_pool_repro import SecondPool
from radixcheck.properties.findings.transcript import Act
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import TIMEOUT_ENV, Target

from .test_mutants import HangsOnEvict


def _failure(machine, profile: str = "mutation") -> BaseException:  # noqa: ANN001 - a machine class
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any failure is a verdict
        run_machine(machine, profiles.SETTINGS[profile], transcript=True)
    return caught.value


def test_a_reduced_failure_is_smaller_and_the_same_finding() -> None:
    """The program of EvictsLockedLeaf sends calls that do not matter (the invariant checks, other
    steps' inserts): the reduced replay sends fewer, and fails for the same reason."""
    failure = _failure(machine_for_mutant(EvictsLockedLeaf))
    machine = failure.radixcheck_machine
    reduced = reduce(machine, failure, seconds=float("inf"), replays=30)
    assert reduced is not None and finding_of(reduced.replay.failure) == finding_of(failure)
    assert len(reduced.replay.acts) < len(machine.transcript)
    sent = sum(len(a.calls) for a in reduced.replay.machine.transcript)
    assert sent < sum(len(a.calls) for a in machine.transcript)



class SlowEvictsLockedLeaf(EvictsLockedLeaf):
    """EvictsLockedLeaf whose inserts wait (no CPU spent) once ``waits`` is set: a server on a loaded machine."""

    waits = False

    def insert(self, *args, **kwargs) -> int:  # noqa: ANN002, ANN003 - the reference's
        if SlowEvictsLockedLeaf.waits:
            time.sleep(0.02)
        return super().insert(*args, **kwargs)


def test_the_reduction_reports_the_cpu_seconds_its_budget_counts_not_the_wall_clock(monkeypatch) -> None:
    """The header's "N replays, X s" counts what the budget counts (CPU; a wire server's too): it read the
    wall clock, 50 times the CPU at a load of 25, while a budget of 60 s of CPU bounded the reduction."""
    failure = _failure(machine_for(SlowEvictsLockedLeaf, DEFAULT_CAPABILITIES, 1, "meta_repro_slow_evicts"))
    monkeypatch.setattr(SlowEvictsLockedLeaf, "waits", True)
    started = time.monotonic()
    reduced = reduce(failure.radixcheck_machine, failure, seconds=float("inf"), replays=3)
    wall = time.monotonic() - started
    assert reduced is not None and reduced.replays == 3 and wall > 0.1, (reduced and reduced.replays, wall)
    assert reduced.seconds < wall / 2, (reduced.seconds, wall)
    assert f"3 replays, {reduced.seconds:g} s of CPU" in reduction_note(reduced)

def test_runs_of_calls_in_arithmetic_progression_become_loops() -> None:
    matches = [[f"_, h[{2 + 2 * i}] = cache.match_prefix(T1)", f"cache.inc_lock_ref(h[{2 + 2 * i}])"] for i in range(5)]
    splits = [[f"cache.match_prefix(T1[:{99 - i}])  # -> [{i}]"] for i in range(4)]
    [crowd, history] = _loops(matches + splits)
    assert crowd == ["for i in range(5):", "    _, h[2 + 2 * i] = cache.match_prefix(T1)", "    cache.inc_lock_ref(h[2 + 2 * i])"]
    assert history == ["for i in range(4):", "    cache.match_prefix(T1[:99 - i])"]
    scattered = [[f"insert([0], allocator.take([{slot}]))"] for slot in (7, 3, 12, 5)]
    assert _loops(scattered) == scattered  # no progression: each call stays as it is


def test_slot_and_token_lists_are_written_as_ranges() -> None:
    assert _ints(list(range(5, 12005))) == "list(range(5, 12005))"
    assert _ints([*range(0, 16), 9, *range(20, 24)]) == "list(range(0, 16)) + [9] + list(range(20, 24))"
    assert _ints([7, 3, 12, 5]) == "[7, 3, 12, 5]"  # no run: as it is


def test_a_hybrid_insert_brings_its_window_or_state_by_id() -> None:
    """A window is written as the tree's values (the first ``owned``), the run that slid out of the
    request's window (-1) and the fresh slots it takes by id; a state is taken by id, or -1 for none."""
    window = SecondPool("window", "window slots")
    brought = np.array([40, -1, 7, -1, -1, 5, 6])  # one token of the tree's, then the request's own
    assert window.brought(brought, 1, _ints) == ("np.concatenate([np.array([40]), np.full(1, -1), second_allocator.take([7]), "
                                                 "np.full(2, -1), second_allocator.take([5, 6])])")
    assert window.brought(np.array([3, 4]), 0, _ints, "other_second") == "other_second.take([3, 4])"
    state = SecondPool("state", "states")
    assert (state.brought(9, 0, _ints), state.brought(-1, 0, _ints)) == ("int(second_allocator.take([9])[0])", "-1")


def test_tokens_are_renamed_by_prefix_in_the_order_they_are_sent() -> None:
    """A renaming keeps which prefixes two sequences share, so a 3,000-token prompt of random ids
    is written as list(range(0, 3000)) and a prompt that extends it goes on from there."""
    history = tuple(range(150_000, 147_000, -1))
    acts = [Act("_insert_request", (history,)), Act("_match_along", (np.asarray(history[:2000]), [], None)),
            Act("_insert_request", (history[:10] + (99, 98),)), Act("_evict", (100,))]
    first, chain, branch, evict = renamed(acts)
    assert first.args == (tuple(range(3000)),)
    assert chain.args[0].tolist() == list(range(2000)) and chain.args[1:] == ([], None)
    assert branch.args == ((*range(10), 3000, 3001),) and evict.args == (100,)


def test_the_header_advises_a_longer_budget_only_when_a_shorter_one_ran_out() -> None:
    ran_out = ["reduction stopped at its budget (5 s of CPU, RADIXCHECK_REDUCE_SECONDS)"]
    assert "RADIXCHECK_REDUCE_SECONDS=60" in budget_advice(Reduced(None, None, 0, notes=ran_out, budget=5.0))
    assert budget_advice(Reduced(None, None, 0, notes=ran_out, budget=60.0)) == ""  # the trial's: 60 s was what it had
    assert budget_advice(Reduced(None, None, 0, notes=["reduction stopped after 8 replays"], budget=5.0)) == ""


def test_the_header_says_what_the_reduction_did_before_any_advice() -> None:
    """A new user's file read '2053 contract calls, as a serving engine makes them.  A longer budget
    ... may give a shorter file': the advice without the sentence it belongs to."""
    ran_out = ["the 5 s budget ran out"]
    note = reduction_note(Reduced(None, None, 12, replays=3, seconds=5.0, notes=ran_out, budget=5.0))
    assert note.startswith("No act left out (3 replays, 5 s of CPU; the 5 s budget ran out).") and "RADIXCHECK_REDUCE_SECONDS=60" in note
    assert reduction_note(Reduced(None, None, 12)) == ""  # nothing tried, nothing to say


def test_one_finding_at_two_page_sizes_has_one_file_name() -> None:
    assert file_name("2 refcount safety", "evict() removed locked page(s) ending prefix [0], [0, 0]") == file_name(
        "2 refcount safety", "evict() removed locked page(s) ending prefix [0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]")
    assert file_name("2 refcount safety", "x") != file_name("4 LRU order", "x")


def test_an_order_finding_of_two_shapes_has_one_file_name() -> None:
    """An order oracle's findings on one target are one finding whatever their shape (``signature_of``),
    so one file: a new user's LFU finding at page sizes 1 and 2 wrote two, and the card cited one."""
    one = ("evict(1000000) freed Page([0], device+host) (last used by the match_prefix([0, 0]) of operation 35, cached at "
           "time 7, 3 hits, priority 0, key (3, 14)) while the unlocked Page([1], device) stays")
    other = ("evict(2) freed Page([0, 0, 0, 0], device+host) (last used by the insert([0, 0, 0, 0]) of operation 9, cached "
             "at time 2, 2 hits, priority 0, key (2, 9)) while Page([5, 5], device) under namespace 'a' stays")
    assert file_name("4 eviction order", one, "a:make") == file_name("4 eviction order", other, "a:make")
    assert file_name("4 eviction order", one, "a:make").startswith("repro-eviction-order-")
    assert file_name("13 tier residency and KV", one, "a:make") != file_name("13 tier residency and KV", other, "a:make")


def test_two_findings_never_share_a_file_name() -> None:
    """A new user's trial: two caches' refcount findings of one message shape went into one
    --repro directory under one name, the second replacing the first. The target and a crash's
    site are part of the name's hash (not a line number: an edit elsewhere keeps the name)."""
    evicted = "evict() removed locked page(s) ending prefix [0], [0, 0]"
    assert file_name("2 refcount safety", evicted, "a:make") != file_name("2 refcount safety", evicted, "b:make")
    assert file_name("2 refcount safety", evicted, "a:make") == file_name(
        "2 refcount safety", "evict() removed locked page(s) ending prefix [0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]", "a:make")

    def crash(depth: int) -> BaseException:
        try:
            return crash(depth + 1) if depth < 3 else [][0]
        except IndexError as exc:
            return exc

    site = finding_site(crash(0))
    assert site == "test_repro.py in crash", site
    crashed = "crash (IndexError raised during a legal call)"
    assert file_name(crashed, "list index out of range", "a:make", site) != file_name(
        crashed, "list index out of range", "a:make", "mycache.py in evict")


@pytest.mark.deep  # its repro file is run as a user runs it: a fresh interpreter
def test_a_serving_protocol_failure_is_its_requests_served_in_order() -> None:
    """The DFS-bound tests drive the serving protocol: a cache that evicts a running request's
    leaf makes its own unlock raise there; the file serves the same requests with the same budget."""
    broken = Target("radixcheck.properties.cache.mutants:EvictsLockedLeaf", EvictsLockedLeaf, DEFAULT_CAPABILITIES)
    with pytest.raises(ValueError, match="stale handle") as caught:
        tokens_computed(broken, [(0, 0)], 1, 1)
    repro = repro_for(caught.value, broken.spec)
    assert repro.exit_code == 1 and "REQUESTS = [[0, 0]]" in repro.text, repro.output
    fixed = repro.text.replace("from radixcheck.properties.cache.mutants import EvictsLockedLeaf as make",
                               "from radixcheck.reference import RadixCache as make")
    assert run_repro(fixed)[0] == 0


@pytest.mark.deep
def test_a_hang_is_written_with_the_time_limit_and_its_file_hangs(monkeypatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")
    failure = _failure(machine_for(HangsOnEvict, DEFAULT_CAPABILITIES, 1, "meta_repro_hangs"), "ci")
    repro = repro_for(failure, "meta_tests.test_mutants:HangsOnEvict")
    assert repro.exit_code == 1 and "within_limit(lambda: cache.evict(" in repro.text and "did not return within" in repro.output


@pytest.mark.deep
def test_a_file_that_fails_without_the_finding_is_not_counted_as_the_finding() -> None:
    # exit 1 from a traceback (a NameError in a written file) once passed for "reproduced"
    failure = AssertionError("the finding")
    broken = _checked(Repro("import sys\nundefined_name\n"), failure)
    assert broken.exit_code == 1 and broken.text is None and broken.why_not.startswith("not offered"), broken
    right = _checked(Repro("import sys\nprint('BUG (radixcheck oracle x): the finding')\nsys.exit(1)\n"), failure)
    assert right.exit_code == 1 and right.text is not None and not right.why_not, right


def test_take_refuses_a_slot_in_use_and_changes_nothing() -> None:
    allocator = SlotAllocator(64)
    held = allocator.alloc(4)
    before = (set(allocator.in_use), allocator.available())
    for bad in ([int(held[0])], [70], [9, 9]):
        with pytest.raises(ValueError, match="take"):
            allocator.take(bad)
        assert (set(allocator.in_use), allocator.available()) == before
    taken = allocator.take([9, 10])
    assert taken.dtype == np.int64 and {9, 10} <= allocator.in_use
    assert not {9, 10} & set(allocator.alloc(60 - len(allocator.in_use)).tolist())  # alloc never hands them out again


BROKEN = '''
from radixcheck import Capabilities
from radixcheck.reference import RadixCache


class Broken(RadixCache):
    def _evictable_leaf(self, node):
        return not node.children and node is not self.root  # the bug: a locked leaf is evictable too


def make(allocator, page_size):
    return Broken(allocator, page_size)


make.capabilities = Capabilities(page_sizes=(1,))
'''


@pytest.mark.deep  # pytest in a subprocess, then the repro files
def test_the_plugin_writes_a_file_per_finding_that_runs_from_the_project(tmp_path: Path) -> None:
    """A user's project: the conformance tests with --radix-repro write the file; run from the
    project as ``python repros/<file>``, it exits 1; with the bug fixed in their module, 0."""
    (tmp_path / "mycache.py").write_text(textwrap.dedent(BROKEN))
    run = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "radixcheck.properties.conformance.test_cache_machine",
                          "-k", "state_machine", "--radix-target", "mycache:make", "--radix-repro", "repros", "-p", "no:cacheprovider",
                          "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    [written] = list((tmp_path / "repros").glob("repro-refcount-safety-*.py"))
    assert f"radixcheck repro: {written}" in run.stdout, run.stdout[-2000:]
    bug = subprocess.run([sys.executable, str(written.relative_to(tmp_path))], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bug.returncode == 1 and "BUG (radixcheck oracle 2 refcount safety)" in bug.stdout, bug.stdout + bug.stderr
    (tmp_path / "mycache.py").write_text(textwrap.dedent(BROKEN).replace("return not node.children and node is not self.root",
                                                                         "return super()._evictable_leaf(node)"))
    fixed = subprocess.run([sys.executable, str(written.relative_to(tmp_path))], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert fixed.returncode == 0 and "no bug" in fixed.stdout, fixed.stdout + fixed.stderr


@pytest.mark.deep  # pytest in a subprocess
def test_the_plugin_refuses_a_repro_directory_it_cannot_write_before_any_test(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    run = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "radixcheck.properties.conformance.test_construction",
                          "--radix-repro", "afile/sub", "-p", "no:cacheprovider", "-q"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 4 and "--radix-repro 'afile/sub' is not a directory" in run.stderr, run.stdout + run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_every_bad_namespace_the_machine_sends_can_be_written() -> None:
    """A reduced program may keep a bad-input call with an unhashable namespace (a dict among them:
    `namespace-concatenated`'s file once could not be written when its stream sent one)."""
    from radixcheck.properties.cache.tenants import UNHASHABLE

    for namespace in UNHASHABLE:
        assert eval(literal(namespace)) == namespace  # noqa: S307 - our own literal, read back


def test_a_repro_file_name_keeps_a_lettered_oracle_label() -> None:
    """A window finding's file says 20w (a new user's window trial read "w" alone); a bare number goes."""
    assert file_name("20w window values through the host tier", "windows() of x reports -1", "a:make").startswith(
        "repro-20w-window-values-through-the-host-tier-")
    assert file_name("3h host slot conservation", "host slot 4 leaked", "a:make").startswith("repro-3h-host-slot-")


@pytest.mark.parametrize("oracle", ["20 second-pool value live or tombstoned", "20w window values through the host tier",
                                    "21 tombstone hides nothing", "22 locks hold both pools", "23 hybrid match length"])
def test_second_pool_findings_have_their_own_category(oracle: str) -> None:
    """A window or state finding is filed under the second pool, not "other" (the window trial's friction)."""
    from radixcheck.audit import RANKS, rank_of

    assert RANKS[rank_of(oracle)][0] == "the second pool: window and state values"
