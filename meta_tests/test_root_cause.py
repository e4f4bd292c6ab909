"""One finding per root cause, grouped by replay (issue 40, item 5): with ``--repro``, each
finding's reduced program is replayed with every oracle, past each failure, and two findings whose
programs each show the other are one (:mod:`radixcheck.properties.findings.root_cause`).

The fast tests judge the mechanism in this process; the audits (a subprocess each) are ``deep``."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis.errors import FlakyFailure

from radixcheck import profiles
from radixcheck.audit import Verdict, findings_of, report_card
from radixcheck.oracles.violations import RefcountViolation, SlotViolation
from radixcheck.properties.cache.batches import ServingRun
from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import PerHandleLockReference, SplitKeepsStaleValues, TrustingReference
from radixcheck.properties.conformance import test_construction as construction
from radixcheck.properties.findings.construction_replay import FOREIGN_HANDLE_TEST, construction_program, shown_by_construction_test
from radixcheck.properties.findings.failures import leaves
from radixcheck.properties.findings.repro import _as_its_failure
from radixcheck.properties.findings.root_cause import checked_after_every_act, same_causes, shown_by, shown_by_serving, signature
from radixcheck.properties.findings.transcript import Act
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import load_target
from radixcheck.properties.tiers.window_mutants import LoadBackSkipsDeviceWindow, WindowTierMutant
from radixcheck.reference import RadixCache
from radixcheck.reference.tiered_window_cache import NONE

SLOTS = ("3 slot conservation", "free() of ids not in use (double free or never allocated): […]")
EVICTED = ("return values", "evict(N) returned N but freed N slots")
MATCHED = ("1 prefix-set model", "match_prefix([…]) returned N values: more than the query or not page-aligned")
LRU = ("4 LRU order", "")


def test_two_findings_are_one_only_when_each_program_shows_the_other() -> None:
    # mutual: one; one-way (an echo: the LRU program shows the slots finding, not the other way): two
    assert same_causes({EVICTED: [EVICTED, SLOTS], SLOTS: [SLOTS, EVICTED], LRU: [LRU, SLOTS]}) == [[EVICTED, SLOTS], [LRU]]
    # transitive: a chain of mutual pairs is one cause
    assert same_causes({EVICTED: [EVICTED, SLOTS], SLOTS: [SLOTS, EVICTED, MATCHED], MATCHED: [MATCHED, SLOTS]}) == [
        [EVICTED, SLOTS, MATCHED]]
    # another oracle is shown in any of its shapes; the finding's own oracle only in its own shape
    other_shape = ("3 slot conservation", "slots freed while still cached or held: […]")
    assert same_causes({EVICTED: [EVICTED, other_shape], SLOTS: [SLOTS, EVICTED]}) == [[EVICTED, SLOTS]]
    assert same_causes({SLOTS: [SLOTS, EVICTED], other_shape: [other_shape, EVICTED]}) == [[SLOTS], [other_shape]]
    # no program: a finding of its own
    assert same_causes({EVICTED: [], SLOTS: [SLOTS, EVICTED]}) == [[EVICTED], [SLOTS]]


SPLIT = [Act("_insert_request", ((0, 1, 2, 3),)), Act("_insert_request", ((0, 1, 5, 6),))]  # the second splits the first's node


def test_a_program_is_replayed_past_each_failure_with_every_oracle() -> None:
    """Two inserts, the second splitting the first's node: the split that copies the wrong slots
    shows the prefix set (the end-of-program match), the slots and the sizes; the correct cache
    shows nothing."""
    shown = shown_by(machine_for(SplitKeepsStaleValues, DEFAULT_CAPABILITIES, 1, "meta_split"), SPLIT)
    assert MATCHED in shown and SLOTS in shown and any(oracle == "2 refcount safety" for oracle, _ in shown), shown
    assert shown_by(machine_for(RadixCache, DEFAULT_CAPABILITIES, 1, "meta_split"), SPLIT) == []
    acts = [a.name for a in checked_after_every_act([*SPLIT, Act("sizes_add_up", ())])]
    assert acts == ["_insert_request", "sizes_add_up", "slots_conserved"] * 2 + ["_match", "sizes_add_up", "slots_conserved"] * 2 + [
        "_evict_everything", "sizes_add_up", "slots_conserved"]


def test_a_serving_run_is_judged_by_the_cache_machine() -> None:
    run = ServingRun(((0, 1, 2, 3), (0, 1, 5, 6)), 4, 1)
    shown = shown_by_serving(machine_for(SplitKeepsStaleValues, DEFAULT_CAPABILITIES, 1, "meta_serving"), run)
    assert SLOTS in shown, shown
    assert shown_by_serving(machine_for(RadixCache, DEFAULT_CAPABILITIES, 1, "meta_serving"), run) == []


def test_a_construction_test_s_program_shows_its_own_finding_and_a_correct_cache_s_nothing() -> None:
    """The foreign-handle test's program (its calls as the machine's acts, in its order): a cache that
    accepts another cache's handle shows the test's own failure first; the reference, one with per-handle
    locks and one that trusts its callers (never sent a foreign handle) show nothing."""
    broken = load_target("radixcheck.properties.cache.mutants:ForeignHandleAccepted")
    for page_size in (1, 4):
        with pytest.raises(RefcountViolation) as failed:
            construction.test_handle_from_another_cache_is_refused(broken, page_size)
        shown = shown_by_construction_test(FOREIGN_HANDLE_TEST, page_size, broken.factory, broken.capabilities)
        assert shown and shown[0] == signature(failed.value), (signature(failed.value), shown)
    for correct in (RadixCache, PerHandleLockReference, TrustingReference):
        assert shown_by_construction_test(FOREIGN_HANDLE_TEST, 1, correct, correct.capabilities) == []
    assert construction_program("test_reset_empties_the_cache", 1, DEFAULT_CAPABILITIES) is None  # no twin: its own finding


def test_a_program_s_foreign_handle_is_replayed_in_the_construction_test_s_order_too() -> None:
    acts = checked_after_every_act([Act("_insert_request", ((0, 1),)), Act("_refuse_foreign", ("inc_lock_ref", (0, 1)))])
    assert [a.name for a in acts][3:9] == ["_refuse_foreign", "sizes_add_up", "slots_conserved",
                                           "_refuse_foreign_twin", "sizes_add_up", "slots_conserved"]
    assert acts[6].args == ("inc_lock_ref", (0, 1))


def test_a_refused_legal_call_is_one_event_whatever_the_cache_said() -> None:
    """A wire server numbering handles per cache refused legal locks in two words (which other cache had
    been dropped): the same event for the root cause. Another call, or another exception, is another event."""
    said = "inc_lock_ref(handle<[…]>) raised WireRefused: {}; the call was legal"
    stale, foreign = (("2 refcount safety", said.format(words))
                      for words in ("unknown or stale handle N", "handle N belongs to another worker"))
    accepted = ("2 refcount safety", "inc_lock_ref of a handle from another cache: inc_lock_ref accepted it instead of raising")
    assert same_causes({accepted: [accepted, stale], foreign: [foreign, accepted]}) == [[accepted, foreign]]
    unlock = ("2 refcount safety", "dec_lock_ref(handle<[…]>) raised WireRefused: unknown or stale handle N; the call was legal")
    crash = ("2 refcount safety", "inc_lock_ref(handle<[…]>) raised KeyError: N; the call was legal")
    assert same_causes({accepted: [accepted, unlock, crash], foreign: [foreign, accepted]}) == [[accepted], [foreign]]


class _LiesOnce(RadixCache):
    """``total_size()`` is one too many on the 40th call in the process only: a run fails, and Hypothesis's
    replay of it passes (its ``FlakyFailure`` of one failure), as a wire server whose state outlives its
    caches failed a stream's state machine."""

    calls = itertools.count()

    def total_size(self) -> int:
        return super().total_size() + (next(type(self).calls) == 40)


def test_a_failure_whose_replay_passed_is_judged_by_the_run_that_failed() -> None:
    _LiesOnce.calls = itertools.count()
    machine = machine_for(_LiesOnce, DEFAULT_CAPABILITIES, 1, "meta_flaky")
    with pytest.raises(FlakyFailure) as failed:
        run_machine(machine, settings(profiles.SETTINGS["ci"], database=None), transcript=True)
    [leaf] = leaves(failed.value)
    failing = _as_its_failure(leaf, failed.value)
    assert failing is leaf and isinstance(leaf, SlotViolation | RefcountViolation), leaf
    # the instance whose check failed (its transcript ends there), not Hypothesis's replay that passed
    assert failing.radixcheck_machine.transcript[-1].name == "sizes_add_up", failing.radixcheck_machine.transcript[-3:]


def _failed(test: str, oracle: str, message: str, shows: list) -> Verdict:
    exception = {"type": "X", "message": message, "oracle": oracle, "program": "state.f()", "raised_at": ""}
    return Verdict(test, "failed", 0.0, oracle, message, "state.f()", [exception],
                   repro={"oracle": oracle, "message": message, "path": f"repros/{test}.py",
                                     "shows": [list(s) for s in shows]})


def test_merged_findings_are_one_with_the_others_listed_in_the_card_and_the_json() -> None:
    verdicts = [_failed("test_cache_state_machine[page_size=1]", "return values", "evict(2) returned 3 but freed 4 slots",
                        [EVICTED, SLOTS]),
                _failed("test_dfs_order_meets_the_bound[page_size=1]", SLOTS[0], "free() of ids not in use (double free or "
                        "never allocated): [7]", [SLOTS, EVICTED]),
                _failed("test_cache_state_machine[page_size=4]", "4 LRU order", "evicted the wrong leaf", [LRU, SLOTS])]
    first, second = findings_of(verdicts)
    assert (first.oracle, second.oracle) == (SLOTS[0], "4 LRU order")  # slots before return values (RANKS), order last
    assert first.also == ["return values: evict(2) returned 3 but freed 4 slots"]
    assert first.tests == ["test_cache_state_machine[page_size=1]", "test_dfs_order_meets_the_bound[page_size=1]"]
    assert second.also == []
    from radixcheck.audit import AuditResult

    card = report_card(AuditResult("t:make", "Capabilities()", [], "ci", verdicts, pytest_exit=1))
    assert "Same root cause (1 more finding(s)" in card and "- return values: evict(2) returned 3 but freed 4 slots" in card


PREFIX = ("1 prefix-set model", "match_prefix([…]) returned N values: more than the query or not page-aligned")
DFS = ("6 DFS bound", "DFS order computed 8, the best order 7, the bound is 8 for […]")


def test_a_dfs_bound_its_serving_run_shows_another_finding_of_is_that_findings_echo() -> None:
    """A DFS-bound figure computed through a cache its own replayed run finds wrong (a split that
    copies the wrong slots: unshrunk, the DFS tests failed the bound instead of crashing) is listed
    after the other findings as that one's possible echo; the machine's program cannot compute the
    figure, so the two never meet both ways. A bound whose run replays clean, or shows an oracle no
    finding of the audit has, stays a finding of its own."""
    split = _failed("test_cache_state_machine[page_size=1]", PREFIX[0], "match_prefix([2, 0]) returned 17 values: more than "
                    "the query or not page-aligned", [PREFIX, SLOTS])
    lru = _failed("test_cache_state_machine[page_size=4]", "4 LRU order", "evicted the wrong leaf", [LRU])
    dfs = _failed("test_no_order_beats_dfs[page_size=1]", DFS[0], DFS[1].replace("[…]", "[(1,), (1, 2)]"), [DFS, SLOTS, PREFIX])
    found = findings_of([dfs, lru, split])
    assert [(f.oracle, f.echo_of) for f in found] == [(PREFIX[0], ""), ("4 LRU order", ""), (DFS[0], "finding 1 (1 prefix-set model)")]
    assert not findings_of([dfs, lru])[-1].echo_of  # it shows slots and the prefix set, which no finding here is
    clean = _failed("test_no_order_beats_dfs[page_size=1]", DFS[0], DFS[1], [DFS])
    assert [(f.oracle, f.echo_of) for f in findings_of([clean, split])] == [(PREFIX[0], ""), (DFS[0], "")]


def test_a_dfs_bound_is_explained_by_a_signature_merged_into_a_finding() -> None:
    """The bound's run showed only the slot oracle's signature, merged into the return-values finding (``also``)."""
    returned = _failed("test_cache_state_machine[page_size=1]", "return values", "evict(2) returned 3 but freed 4 slots",
                       [EVICTED, SLOTS])
    slots = _failed("test_cache_at_production_scale[page_size=1]", SLOTS[0], "free() of ids not in use (double free or never "
                    "allocated): [7]", [SLOTS, EVICTED])
    dfs = _failed("test_no_order_beats_dfs[page_size=1]", DFS[0], DFS[1], [DFS, SLOTS])
    first, echo = findings_of([dfs, returned, slots])
    assert first.also and echo.echo_of == f"finding 1 ({first.oracle})"


def test_a_merged_finding_keeps_one_repro_file_the_one_its_card_cites(tmp_path: Path) -> None:
    """One finding, one file: the findings merged into another wrote files of their own under their
    oracles; the audit removes those (a new user's trial found a finding with two files and a card
    citing one). A finding of its own keeps its file; the head's file is cited, else a merged one's."""
    from radixcheck.audit import AuditResult, one_file_per_finding

    verdicts = [_failed("test_cache_state_machine[page_size=1]", "return values", "evict(2) returned 3 but freed 4 slots",
                        [EVICTED, SLOTS]),
                _failed("test_dfs_order_meets_the_bound[page_size=1]", SLOTS[0], "free() of ids not in use (double free or "
                        "never allocated): [7]", [SLOTS, EVICTED]),
                _failed("test_cache_state_machine[page_size=4]", "4 LRU order", "evicted the wrong leaf", [LRU])]
    for v in verdicts:
        v.repro["path"] = str(tmp_path / f"{v.oracle}.py")
        Path(v.repro["path"]).write_text("# a repro\n")
    result = AuditResult("t:make", "Capabilities()", [], "ci", verdicts, pytest_exit=1)
    assert one_file_per_finding(result) == [str(tmp_path / "return values.py")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["3 slot conservation.py", "4 LRU order.py"]
    assert [f.repro for f in result.findings] == [str(tmp_path / "3 slot conservation.py"), str(tmp_path / "4 LRU order.py")]
    card = report_card(result)
    assert card.count("Repro: `") == 2 and "return values.py" not in card

    del verdicts[1].repro["path"]  # the head wrote no file: the merged finding's is cited and kept
    verdicts[1].repro["why_not"] = "not offered: it exited 0"
    verdicts[0].repro["path"] = str(tmp_path / "return values.py")
    Path(verdicts[0].repro["path"]).write_text("# a repro\n")
    assert one_file_per_finding(result) == [] and result.findings[0].repro == str(tmp_path / "return values.py")


def _audit(project: Path, target: str) -> tuple[subprocess.CompletedProcess, dict]:
    # unshrunk: the same first failures on every machine (a shrink stops at its time budget, so what it
    # reaches, and how the DFS tests fail, depended on the box's load)
    run = subprocess.run([sys.executable, "-m", "radixcheck", "audit", target, "--page-sizes", "1,4", "--repro", "repros",
                          "--json", "audit.json", "-n", "2"], cwd=project, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "RADIXCHECK_SHRINK_SECONDS": "0"})
    return run, json.loads((project / "audit.json").read_text())


SPLIT_PROJECT = '''
from radixcheck.properties.cache.mutants import MostRecentFirst, SplitKeepsStaleValues


class TwoBugs(SplitKeepsStaleValues, MostRecentFirst):
    """The split that copies the wrong slots, and an eviction of the most recently used leaf."""


def split(allocator, page_size):
    return SplitKeepsStaleValues(allocator, page_size)


def two(allocator, page_size):
    return TwoBugs(allocator, page_size)
'''


@pytest.mark.deep  # two audits in a subprocess
def test_a_split_that_copies_the_wrong_slots_is_one_finding_and_two_bugs_stay_two(tmp_path: Path) -> None:
    """The split failed three oracles (return values, slot conservation, the prefix set) in six
    tests: one finding, the other two listed as the same root cause; what it does to the DFS
    tests' figures (the bound missed) is said its possible echo. With an LRU-order bug added, that
    one stays a finding of its own."""
    (tmp_path / "mycache.py").write_text(textwrap.dedent(SPLIT_PROJECT))
    run, result = _audit(tmp_path, "mycache:split")
    assert run.returncode == 1, run.stdout + run.stderr
    causes = [f for f in result["findings"] if not f["echo_of"]]
    assert len(causes) == 1, [(f["oracle"], f["reason"]) for f in result["findings"]]
    assert {line.partition(":")[0] for line in causes[0]["also"]} >= {"3 slot conservation", "1 prefix-set model"} - {
        causes[0]["oracle"]}, causes[0]
    assert "Same root cause" in run.stdout
    run, result = _audit(tmp_path, "mycache:two")
    causes = [f for f in result["findings"] if not f["echo_of"]]
    said = [(f["oracle"], f["reason"], f["also"]) for f in result["findings"]]
    [lru] = [f for f in causes if f["oracle"] == "4 LRU order"]
    split = {"3 slot conservation", "1 prefix-set model", "return values"}
    assert not split & {line.partition(":")[0] for line in lru["also"]}, said  # the order bug is not merged into the split
    assert any(f["oracle"] in split for f in causes), said
    # (unshrunk, one machine program of the two-bug cache also fails 5 evict-equals-never-saw, and shows the split's
    # signature while the split's programs do not show it: a one-way echo the grouping leaves a finding of its own)


def _header(oracle: str, message: str, spec: str) -> str:
    return f'"""radixcheck finding ({oracle}): {message}\n\nTarget {spec}, page size 1, in test_x.\n"""\n'


def test_a_finding_with_a_pasteable_file_in_the_directory_points_to_it(tmp_path: Path) -> None:
    """A production-scale finding whose finding already has a small file in the --repro directory
    (the same target, oracle and signature) points to it instead of writing a second copy; a long
    file, another target's or another finding's is not that file."""
    from radixcheck.properties.findings.standalone import PASTEABLE_LINES, small_repro_of

    order = "4 eviction order"
    (tmp_path / "repro-a.py").write_text(_header(order, "evict(1) evicted [0, 1] before [2] (hits 3 > 1)", "mine:make"))
    (tmp_path / "repro-b.py").write_text(_header("return values", "evict(2) returned 3 but freed 4 slots", "mine:make")
                                         + "x = 1\n" * PASTEABLE_LINES)
    assert small_repro_of(tmp_path, "mine:make", order, "") == tmp_path / "repro-a.py"  # an order finding: any shape
    assert small_repro_of(tmp_path, "theirs:make", order, "") is None
    assert small_repro_of(tmp_path, "mine:make", "return values", "evict(N) returned N but freed N slots") is None  # too long
    assert small_repro_of(tmp_path, "mine:make", "1 prefix-set model", "") is None
    assert small_repro_of(tmp_path / "absent", "mine:make", order, "") is None


WRONG_ID_SERVER = '''
"""radixcheck's reference wire server, with one bug: the reply to an evict that freed slots carries the previous id."""
import sys

from radixcheck.reference import wire_server


class WrongId(wire_server.Server):
    def respond(self, line):
        reply = super().respond(line)
        if reply.get("freed") and b'"evict"' in line:
            reply["id"] = reply["id"] - 1
        return reply


wire_server.Server = WrongId
wire_server.main(sys.argv[1:])
'''


PER_CACHE_SERVER = '''
"""radixcheck's reference wire server, with one bug: handles are numbered per cache, so two caches' handles share ids."""
import sys

from radixcheck.reference import wire_server


class PerCache(wire_server.Server):
    def handle_id(self, cache_id, handle):
        hid = self.handle_ids.get(id(handle))
        if hid is None:
            counters = self.__dict__.setdefault("counters", {})
            hid = self.handle_ids[id(handle)] = counters[cache_id] = counters.get(cache_id, 0) + 1
            self.handles[hid] = (cache_id, handle)
            self.__dict__.setdefault("kept", []).append(handle)
        return hid


wire_server.Server = PerCache
wire_server.main(sys.argv[1:])
'''


@pytest.mark.deep  # an audit of a wire server in a subprocess
@pytest.mark.parametrize(("server", "page_sizes", "oracle", "said"), [
    # every test that evicts meets the protocol error; the server is restarted for the next cache inside the factory
    # call, which counts against init's limit: never a second finding blaming ``factory``
    (WRONG_ID_SERVER, "1", "crash (WireProtocolError: the wire server's reply broke the protocol)", "has id"),
    # a handle of another cache is taken for this one's: at page size 1 through a handle the machine holds, at 4
    # through a running request's (handle<…> and request<…>: one shape)
    (PER_CACHE_SERVER, "1,4", "2 refcount safety", "unknown handle"),
], ids=["wrong reply id", "per-cache handle numbering"])
def test_a_wire_server_s_bug_is_one_finding(server: str, page_sizes: str, oracle: str, said: str, tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(textwrap.dedent(server))
    # Not shrunk: a shrink stops at its time budget, so on another machine it stops at another failure; the first
    # failures found are the same on every machine (and a harder test: their specifics are not shrunk away).
    env = {**os.environ, "RADIXCHECK_WIRE_CMD": f"{sys.executable} {tmp_path / 'server.py'}", "RADIXCHECK_SHRINK_SECONDS": "0"}
    run = subprocess.run([sys.executable, "-m", "radixcheck", "audit", "radixcheck.properties.adapters.wire:server", "--page-sizes",
                          page_sizes, "--repro", "repros", "--json", "audit.json", "-n", "2"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    [finding] = json.loads((tmp_path / "audit.json").read_text())["findings"]
    assert finding["oracle"] == oracle and said in finding["reason"], finding


TRIAL_SERVER = Path(__file__).resolve().parents[1] / "reports" / "findings" / "wire_trial" / "router_server.py"


@pytest.mark.deep  # an audit of a wire server in a subprocess
def test_a_server_numbering_handles_per_cache_is_one_finding_with_its_construction_test(tmp_path: Path) -> None:
    """The wire trial's planted server (handle ids counted per worker), the profile's own stream: the
    construction test sees another cache's handle accepted, the state machine a legal lock refused
    once another cache came. The construction test's program replayed as the machine's acts shows the
    refusal, the machine's program replayed with its foreign handle sent in the test's order shows the
    acceptance: one finding naming both tests. (The stream was once pinned with ``--seed 6``: the
    default one gave 1 finding in one checkout and 2 in another, because an earlier example's cache
    was dropped on the server whenever the garbage collector freed it, and the machine's finding was
    then one whose replay passed; a run's caches are now dropped when the next run begins.)"""
    env = {**os.environ, "RADIXCHECK_WIRE_CMD": f"{sys.executable} {TRIAL_SERVER} --bug handles-per-cache",
           "RADIXCHECK_SHRINK_SECONDS": "0"}
    run = subprocess.run([sys.executable, "-m", "radixcheck", "audit", "radixcheck.properties.adapters.wire:server", "--page-sizes",
                          "1", "--repro", "repros", "--json", "audit.json", "-n", "2"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    findings = json.loads((tmp_path / "audit.json").read_text())["findings"]
    assert len(findings) == 1, [(f["oracle"], f["reason"], f["tests"], f["also"]) for f in findings]
    [finding] = findings
    assert finding["oracle"] == "2 refcount safety" and "of a handle from another cache" in finding["reason"], finding
    assert {t.partition("[")[0] for t in finding["tests"]} >= {"test_handle_from_another_cache_is_refused",
                                                              "test_cache_state_machine"}, finding["tests"]


@pytest.mark.deep  # pytest in a subprocess
def test_each_conformance_test_starts_the_wire_server_afresh(tmp_path: Path) -> None:
    """A bug that leaks between one server's caches must show the same way whichever tests ran
    before in that worker (CI's schedule is not this machine's): each test gets its own server."""
    (tmp_path / "server.py").write_text(textwrap.dedent(f'''
        import os, sys
        with open({str(tmp_path / "pids")!r}, "a") as out:
            out.write(f"{{os.getpid()}}\\n")
        from radixcheck.reference import wire_server
        wire_server.main(sys.argv[1:])
        '''))
    env = {**os.environ, "RADIXCHECK_WIRE_CMD": f"{sys.executable} {tmp_path / 'server.py'}"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "--pyargs",
                          "radixcheck.properties.conformance", "--radix-target", "radixcheck.properties.adapters.wire:server",
                          "--radix-page-sizes", "1", "-k", "reset_empties or handle_from_another or bad_page_size"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    ran = int(re.search(r"(\d+) passed", run.stdout)[1])
    assert ran >= 3 and len(set((tmp_path / "pids").read_text().split())) >= ran, run.stdout[-2000:]


# ---- a tier target: one bug at two page sizes (one test's request a tenant's) is one finding ----------

def _window_story(factory: type, page_size: int, tenant: bool, extension: list[int]) -> Verdict:
    """[1, 2] and ``extension`` cached, both sent to host, the extension loaded back and read: the
    test's verdict (at ``page_size``; every request a tenant's when ``tenant``)."""
    from radixcheck.properties.findings.failures import describe_failure
    from radixcheck.properties.tiers.world import TierWorld

    said = {"namespace": ("X", None)} if tenant else {}
    world = TierWorld(factory, page_size, "write_through")
    try:
        for tokens in ([1, 2], extension, None):
            if tokens is None:  # all to host, then the extension again
                for _ in range(6):
                    world.evict(10**6)
                    world.complete_all()
                tokens = extension
            world.serve(tokens, **said)
            world.finish()
        world.check()
    except Exception as exc:  # noqa: BLE001 - the finding is what the test wants
        said = describe_failure(exc)
        return Verdict(f"test_tier_state_machine[page_size={page_size}]", "failed", 0.1, said["oracle"], said["reason"],
                       said["program"], said["exceptions"])
    return Verdict(f"test_tier_state_machine[page_size={page_size}]", "passed", 0.1)


def test_a_tier_bug_met_by_a_tenant_at_one_page_size_and_the_default_at_another_is_one_finding() -> None:
    """A window trial's planted bugs each gave two 20w findings of one cause, one per page size: one
    test's request was a tenant's (``Request(..., namespace=('X', None), ...)``), the other's the
    default namespace's (reports/findings/window_trial.md, friction 5). A cache with two window bugs
    (a load-back that restores no window; one that restores another page's further back) still
    gives two findings."""
    from radixcheck.properties.tiers.window_mutants import (
        WINDOW_TIERS,
        LoadBackRestoresBeyondWindowFromWrongPage,
        LoadBackRestoresNoWindow,
    )

    tenants = dataclasses.replace(WINDOW_TIERS, namespaces=True)
    one = type("NoWindow", (LoadBackRestoresNoWindow,), {"tier_capabilities": tenants})
    two = type("TwoBugs", (LoadBackRestoresNoWindow, LoadBackRestoresBeyondWindowFromWrongPage), {"tier_capabilities": tenants})
    same = [_window_story(one, 1, False, [1, 2, 0, 1, 2, 3]), _window_story(one, 2, True, [1, 2, 0, 1, 2, 3])]
    assert [v.oracle for v in same] == ["20w window values through the host tier"] * 2
    assert "namespace=" in same[1].reason and "namespace=" not in same[0].reason
    assert [f.tests for f in findings_of(same)] == [[v.test for v in same]]
    distinct = [_window_story(two, 1, False, [1, 2, 0, 1, 2, 3]), _window_story(two, 2, True, [1, 2, 0, 1, 2])]
    assert "neither its own" in distinct[0].reason and "reports -1 (tombstoned)" in distinct[1].reason
    assert len(findings_of(distinct)) == 2


def test_a_wrong_window_value_loaded_back_within_the_window_or_further_back_is_one_finding() -> None:
    """A window trial's B1 (a load-back giving each page a value of another's host copy) gave two
    20w findings: a page loaded within the window "not its own X (restored ..., within the last W
    tokens)", one further back "neither its own X (...) nor -1 (loaded back ..., further back ...)".
    Where the program's path ended is not the bug: one wording, one shape. A cache that also
    revives no tombstone of a device page (two bugs) still gives two findings."""
    from radixcheck.properties.tiers.window_mutants import TrustingWindowTiers
    from radixcheck.reference.tiered_window_cache import TieredWindowCache

    one = [_window_story(_LoadsBackOffByOne, 1, False, [1, 2, 0, 1, 2, 3]), _window_story(_LoadsBackOffByOne, 2, False, [1, 2])]
    reasons = [v.reason for v in one]
    assert "further back than the window" in reasons[0] and "within the last" in reasons[1], reasons
    assert [f.tests for f in findings_of(one)] == [[v.test for v in one]], reasons
    from meta_tests.test_tier_windows import _revived

    two = type("TwoBugs", (_LoadsBackOffByOne, LoadBackSkipsDeviceWindow), {"first_token": 3})  # off by one on paths from 3 only
    distinct = [_verdict("test_tier_state_machine[page_size=1]", lambda: _restored_then_read(two, False, first=3)),
                _verdict("test_tier_state_machine[page_size=2]", lambda: _revived(two, "write_through"))]
    assert "neither its own" in distinct[0].reason and "revived from its host copy" in distinct[1].reason, distinct
    assert len(findings_of(distinct)) == 2
    for correct in (TieredWindowCache, TrustingWindowTiers):
        assert [_window_story(correct, p, False, ext).outcome for p, ext in ((1, [1, 2, 0, 1, 2, 3]), (2, [1, 2]))] == ["passed"] * 2


class _LoadsBackOffByOne(WindowTierMutant):
    """A load-back gives each page it loads its host copy's window values plus one (within the window and further back)."""

    first_token: int | None = None  # set: only on a path starting with that token

    def _restore(self, node: Any, in_window: bool) -> None:
        if self.first_token is not None and self._path(node)[0].key[0] != self.first_token:
            return super()._restore(node, in_window)
        host = self.host_window.get(node)
        self.device_window[node] = np.where(host == NONE, NONE, host + 1) if host is not None else self._none()



class _TwoPageSizeBugs:
    """Two bugs of one load-back, each at one page size: at page size 1 it restores no window, at 2
    it restores each page's window reversed (``fixed``: the page sizes whose bug is fixed)."""

    fixed: tuple[int, ...] = ()

    def _restore(self: Any, node: Any, in_window: bool) -> None:
        super()._restore(node, in_window)  # type: ignore[misc]
        if in_window and self.page_size not in self.fixed:
            self.device_window[node] = self._none() if self.page_size == 1 else self.device_window[node][::-1].copy()


def test_findings_met_at_different_page_sizes_only_are_said_to_maybe_share_a_cause() -> None:
    """Why a program is not replayed at the other finding's page size to merge them: one story shows
    the first bug at page size 1 and the second at 2, so each finding's program would show the other
    both ways, yet fixing the first leaves the second. The card and the summary say instead that the
    two may be one cause; findings that share a page size are not said so."""
    from radixcheck.audit import AuditResult, Finding, page_sizes_apart
    from radixcheck.reference.tiered_window_cache import TieredWindowCache

    def cache(fixed: tuple[int, ...]) -> type:
        return type("TwoPageSizeBugs", (_TwoPageSizeBugs, TieredWindowCache), {"fixed": fixed})

    story = [1, 2, 0, 1, 2, 3]
    verdicts = [_window_story(cache(()), size, False, story) for size in (1, 2)]
    findings = findings_of(verdicts)
    assert len(findings) == 2, [f.reason for f in findings]
    first_fixed = [_window_story(cache((1,)), size, False, story) for size in (1, 2)]
    assert [v.outcome for v in first_fixed] == ["passed", "failed"] and first_fixed[1].reason == verdicts[1].reason  # two bugs
    said = page_sizes_apart(findings)
    assert "Findings 1 and 2 (page size 2 against 1) were met at different page sizes only" in said, said
    assert said in report_card(AuditResult("m:two", "TierCapabilities()", [], "ci", verdicts))
    shared = [Finding("r", "o", "a", ["t[page_size=1]"], ""), Finding("r", "o", "b", ["t[page_size=1]", "t[page_size=2]"], "")]
    assert page_sizes_apart(shared) == "" and page_sizes_apart(findings[:1]) == ""


def _verdict(test: str, story: Any) -> Verdict:
    """``story``'s failure as the verdict of ``test``."""
    from radixcheck.properties.findings.failures import describe_failure

    try:
        story()
    except Exception as exc:  # noqa: BLE001 - the finding is what the test wants
        said = describe_failure(exc)
        return Verdict(test, "failed", 0.1, said["oracle"], said["reason"], said["program"], said["exceptions"])
    return Verdict(test, "passed", 0.1)


def _restored_then_read(factory: type, twin: bool, first: int = 1) -> None:
    """[1, 2, 3] (or from ``first`` on) cached, sent to host only and served again: its load-back
    restores its window; the forward reads it at once, or (``twin``, every request a tenant's)
    after namespace 'b' caches [1, 2, 3, 4] (whose first token's window has slid: tombstoned)."""
    from radixcheck.properties.tiers.world import TierWorld

    world = TierWorld(factory, 1, "write_through")
    a = {"namespace": "a"} if twin else {}
    prompt = [first, first + 1, first + 2]
    world.serve(prompt, **a)
    world.finish()
    world.complete_all()
    world.evict(100)
    world.complete_all()
    world.serve(prompt, **a)
    if twin:
        world.serve([*prompt, first + 3], namespace="b")
        world.finish()
    world.finish()
    world.check()


class _TwoLoadBackBugs(LoadBackSkipsDeviceWindow):
    """Two load-back bugs: it revives no device page's window (``LoadBackSkipsDeviceWindow``), and
    restores no window on a page it loads whose path starts with token 3 (``LoadBackRestoresNoWindow``'s
    idea, kept off the other stories)."""

    def _restore(self, node: Any, in_window: bool) -> None:
        super()._restore(node, in_window and self._path(node)[0].key[0] != 3)


def _revived_then_read(factory: type) -> None:
    """Tenant 'b''s [2] is on device with its window tombstoned and live in its host copy; b's [2, 1]
    is served, whose load-back revives it; then tenant 'a' caches [2, 1, 1, 1, 2] (its first token's
    window slid), and b's forward reads [2, 1]."""
    from radixcheck.properties.tiers.world import TierWorld

    world = TierWorld(factory, 1, "write_through")
    world.serve([2, 1, 1], namespace="b")
    world.finish()
    world.serve([2, 1, 1, 1, 2], namespace="a")
    world.evict(2)
    world.complete_all()
    world.evict(2)
    world.serve([2, 1], namespace="b")
    world.complete_all()
    world.serve([2, 2, 1, 1], namespace="a")
    world.finish(0)  # a's [2, 1, 1, 1, 2]: its insert lands on b's twins
    world.finish(0)
    world.check()


def test_a_window_lost_after_it_went_live_is_one_finding_however_it_went_live() -> None:
    """A window trial's B10 (a tenant's insert writes its window onto the other tenants' twin pages)
    split into two 20w findings in a fresh audit: the lost value was "restored from its host copy"
    by a load-back in one test, "revived" in the other. That is history, not the cause: read later
    than the event, it is said after "since operation N:" and left out of the shape. Read right
    after its load-back, the event is the likely cause and stays in the shape: a cache whose
    load-back restores no window and skips the device pages' (two bugs) still gives two findings."""
    from meta_tests.test_tier_windows import TwinWindowOverwrite, _revived
    from radixcheck.properties.tiers.window_mutants import TrustingWindowTiers
    from radixcheck.reference.tiered_window_cache import TieredWindowCache

    one = [_verdict("test_tier_state_machine[page_size=1]", lambda: _restored_then_read(TwinWindowOverwrite, True)),
           _verdict("test_tier_state_machine[page_size=2]", lambda: _revived_then_read(TwinWindowOverwrite))]
    reasons = [v.reason for v in one]
    assert [f.tests for f in findings_of(one)] == [[v.test for v in one]], reasons
    assert "since operation 7: restored" in reasons[0] and "since operation 9: revived" in reasons[1], reasons

    two = [_verdict("test_tier_state_machine[page_size=1]", lambda: _restored_then_read(_TwoLoadBackBugs, False, first=3)),
           _verdict("test_tier_state_machine[page_size=2]", lambda: _revived(_TwoLoadBackBugs, "write_through"))]
    reasons = [v.reason for v in two]
    assert "(restored from its host copy by the load-back of operation" in reasons[0], reasons
    assert "(revived from its host copy by the load-back of operation" in reasons[1], reasons
    assert len(findings_of(two)) == 2
    for correct in (TieredWindowCache, TrustingWindowTiers):
        _restored_then_read(correct, True)
        _revived_then_read(correct)


def test_a_replay_ends_where_the_cache_stops_answering(monkeypatch) -> None:
    """A cache that refused an unmatched unlock and answers nothing since (its ``evict`` loops): its
    program shows its finding (the size read after the refusal raised) alone, and the replay ends there.
    Before, it went on into the end-of-program eviction, which cost one whole per-operation limit and
    added a hang."""
    import time

    from meta_tests.replay_hang_mutants import PanicsOnUnmatchedUnlock
    from radixcheck.properties.cache.machine import HandleRecord
    from radixcheck.properties.target import TIMEOUT_ENV

    monkeypatch.setenv(TIMEOUT_ENV, "0.5")
    record = HandleRecord(None, [], (0, 1, 2))
    acts = [Act("_insert_request", ((0, 1, 2),)), Act("_match", ((0, 1, 2),), result=record), Act("_unlock_unpaired", (record,))]
    cpu = time.process_time()
    shown = shown_by(machine_for(PanicsOnUnmatchedUnlock, DEFAULT_CAPABILITIES, 1, "meta_panics"), acts)
    cpu = time.process_time() - cpu
    assert shown == [("crash (RuntimeError raised during a legal call)", "cache offline: it panicked on an unmatched unlock")], shown
    assert cpu < 0.4, f"the replay spent {cpu:.2f} s of CPU: it waited for a call to hang"
    assert shown_by(machine_for(RadixCache, DEFAULT_CAPABILITIES, 1, "meta_panics"), acts) == []
