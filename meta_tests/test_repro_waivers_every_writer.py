"""Every repro writer embeds the waivers its calls meet and goes on past them, labelled as waived
(one findings pipeline: :mod:`radixcheck.properties.findings.repro_waivers`), not only the tier writer.

- A plain-call cache file: a waived crash in an earlier call was written under a "refused, as it must be"
  ``suppress`` (mislabelled, and any exception there swallowed); now ``with past_waived():``.
- An index file: a legal event the run's waiver let the index refuse was written through ``may_refuse``
  (any exception swallowed, no waiver named); now ``with past_waived(<oracle>, <message>):``, judged by the
  finding the run made of it (``said:`` reads that finding's message).
- A tier file meeting a ``known:`` line: it stopped at the known order bug (exit 2); now its world keeps
  the deviation, as the run's did, and goes on past it.

Each file exits 1 on its bug (with the waived one there or fixed) and 0 on its fix; where the waived bug is
there, it prints it as waived. Hand-made stories (no Hypothesis): the same calls on every run. Deep: the same
through ``radixcheck audit --waive --repro`` (no shrink; the first of 6 streams whose file meets the waived
finding, so a change to the machine's draws moves no pin)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from radixcheck.oracles.violations import ContractViolation, HostEvictionAmountViolation, HostEvictionOrderViolation, LRUOrderViolation
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.findings.reduce import Reduced, reduce, replay
from radixcheck.properties.findings.repro import _Writer, repro_for
from radixcheck.properties.findings.standalone import run_file, run_repro
from radixcheck.properties.findings.waivers import WaiverLog, parse_waivers
from radixcheck.properties.index.contract import AllBlocksCleared, BlockStored, IndexCapabilities, StoredBlock
from radixcheck.properties.index.machine import index_machine_for
from radixcheck.properties.index.repro import failing_program, index_script
from radixcheck.properties.tiers.repro import tier_script
from radixcheck.properties.tiers.world import TierWorld

from . import two_bugs


def _log(text: str, spec: str, test: str) -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(text, "waive.txt"), (spec,), test)


def _codes(text: str, written: str, factories: list[str]) -> list[tuple[int, str]]:
    assert written in text, text[:3000]
    return [run_repro(text.replace(written, factory)) for factory in [written, *factories]]


# ---- a plain-call cache file ----------------------------------------------------------------------------------

CACHE = "meta_tests.two_bugs:EmptyEvictMiscountsAndRaises"
CACHE_TEST = "test_cache_state_machine[page_size=1]"
CRASH = "*  *  RuntimeError  said: empty tree  # known: evict() of an empty tree raises (ticket 8)"
CACHE_IMPORT = "from meta_tests.two_bugs import EmptyEvictMiscountsAndRaises as make"
CACHE_OTHERS = ["from meta_tests.two_bugs import EmptyEvictMiscounts as make", "from meta_tests.two_bugs import EmptyEvictRaises as make",
                "from radixcheck.reference.radix_cache import RadixCache as make"]


def _cache_failure() -> tuple[ContractViolation, WaiverLog]:
    """An evict of the empty tree (the waived crash, in the call that miscounts), then the sizes: the finding."""
    log = _log(CRASH, CACHE, CACHE_TEST)
    cache = two_bugs.EmptyEvictMiscountsAndRaises
    machine = type("wv_cache", (machine_for(cache, cache.capabilities, 1, "wv_cache"),), {"records": True})()
    with pytest.raises(RuntimeError) as crash:
        machine._evict(4)
    assert log(crash.value)
    with pytest.raises(ContractViolation) as caught:
        machine.sizes_add_up()
    caught.value.radixcheck_machine = machine
    return caught.value, log


@functools.cache
def _cache_file() -> str:
    """The file's text, as repro_for writes it (its reduction replays past the waived crash), not yet run."""
    failure, log = _cache_failure()
    reduced = reduce(failure.radixcheck_machine, failure, log, seconds=5)  # type: ignore[attr-defined]
    assert reduced is not None and [type(e).__name__ for e in reduced.replay.waived] == ["RuntimeError"]
    return _Writer(reduced, CACHE, CACHE_TEST, waivers=log.applicable).script()


def test_a_cache_files_waived_crash_is_gone_past_as_waived_not_as_refused() -> None:
    text = _cache_file()
    assert "with past_waived():  # waived in the run (RuntimeError)" in text, text
    assert "refused, as it must be (RuntimeError)" not in text and "WAIVED = [" in text
    codes = _codes(text, CACHE_IMPORT, CACHE_OTHERS)
    assert [code for code, _ in codes] == [1, 1, 0, 0], codes
    assert "waived (waive.txt:1: known: evict() of an empty tree raises (ticket 8)): RuntimeError: evict of an empty tree" in codes[0][1]


def test_a_cache_file_does_not_swallow_an_exception_no_waiver_of_its_run_names() -> None:
    """With main's ``suppress(Exception)`` any exception there passed; now one no embedded line waives stops the file."""
    unwaived = _cache_file().replace("said: empty tree", "x").replace("'empty tree'", "'another message'")
    code, printed = run_repro(unwaived)
    assert code == 2 and "did not run to the check: RuntimeError: evict of an empty tree" in printed, printed


LOCK = "meta_tests.two_bugs:LockRefusedAndEmptyEvictMiscounts"
LOCK_REFUSED = "*  *  2 refcount safety  said: lock table full  # known: locks refused (ticket 10)"
LOCK_IMPORT = "from meta_tests.two_bugs import LockRefusedAndEmptyEvictMiscounts as make"
LOCK_OTHERS = ["from meta_tests.two_bugs import EmptyEvictMiscounts as make", "from meta_tests.two_bugs import LockRefused as make",
               "from radixcheck.reference.radix_cache import RadixCache as make"]


def test_a_cache_file_written_from_the_run_itself_judges_a_refusal_by_the_runs_finding() -> None:
    """Not replayed (no reduction): a refused legal lock was the run's ``2 refcount safety`` finding, waived by its
    ``said:`` words; the file was judged on the raw ``RuntimeError`` (class waivers only) and wrote the refusal under
    ``suppress(Exception)  # refused, as it must be``. Now it is judged as the run's finding, as a replay judges it."""
    log = _log(LOCK_REFUSED, LOCK, CACHE_TEST)
    cache = two_bugs.LockRefusedAndEmptyEvictMiscounts
    machine = type("wv_lock", (machine_for(cache, cache.capabilities, 1, "wv_lock"),), {"records": True})()
    record = machine._match((1, 2))
    with pytest.raises(ContractViolation) as refused:
        machine._lock(record)
    assert log(refused.value)
    machine._evict(4)
    with pytest.raises(ContractViolation) as caught:
        machine.sizes_add_up()
    reduced = reduce(machine, caught.value, log, seconds=0)  # the run's own transcript, as written when its replay fails
    assert reduced is not None and reduced.replay.waived is None
    text = _Writer(reduced, LOCK, CACHE_TEST, waivers=log.applicable).script()
    assert "with past_waived('2 refcount safety', 'inc_lock_ref(" in text and "refused, as it must be" not in text, text
    codes = _codes(text, LOCK_IMPORT, LOCK_OTHERS)
    assert [code for code, _ in codes] == [1, 1, 0, 0], codes
    said = "waived (waive.txt:1: known: locks refused (ticket 10)): 2 refcount safety: inc_lock_ref("
    assert said in codes[0][1] and said in codes[2][1], codes


OVER = "meta_tests.two_bugs:EvictOvershootsAndEmptyEvictMiscounts"
OVER_WAIVED = "*  *  4 eviction amount  # known: evict empties the tree (ticket 11)"
OVER_IMPORT = "from meta_tests.two_bugs import EvictOvershootsAndEmptyEvictMiscounts as make"
OVER_OTHERS = ["from meta_tests.two_bugs import EmptyEvictMiscounts as make",
               "from radixcheck.properties.cache.mutants import EvictOvershoots as make",
               "from radixcheck.reference.radix_cache import RadixCache as make"]


@pytest.mark.parametrize("replayed", [False, True], ids=["the run itself", "replayed"])
def test_a_cache_file_says_where_its_run_waived_an_oracle_finding(replayed: bool) -> None:
    """An evict of the empty tree (the phantom token: the finding, checked at the end), then an evict that empties
    the tree (``4 eviction amount``, waived: radixcheck's check, no call raised). The file checks only at its end,
    so it went past the waived finding silently; now a comment names it, and the waiver, after the calls."""
    log = _log(OVER_WAIVED, OVER, CACHE_TEST)
    cache = two_bugs.EvictOvershootsAndEmptyEvictMiscounts
    machine = type("wv_over", (machine_for(cache, cache.capabilities, 1, "wv_over"),), {"records": True})()
    machine._evict(4)
    machine._insert_request((1, 2))
    machine._insert_request((3, 4))
    with pytest.raises(ContractViolation) as amount:
        machine._evict(1)
    assert log(amount.value)
    with pytest.raises(ContractViolation) as caught:
        machine.sizes_add_up()
    reduced = reduce(machine, caught.value, log, seconds=0)
    if replayed:  # the run's acts sent again (no reduction): the file is written from the replay's machine
        again = replay(type(machine), list(machine.transcript), machine.options, log)
        assert again.failure is not None and again.waived, again
        reduced = Reduced(again, machine.options, len(machine.transcript), list(machine.transcript))
    text = _Writer(reduced, OVER, CACHE_TEST, waivers=log.applicable).script()
    said = "# waived in the run (waive.txt:1: known: evict empties the tree (ticket 11)): 4 eviction amount: evict(1) kept going"
    assert said in text, text
    codes = _codes(text, OVER_IMPORT, OVER_OTHERS)
    assert [code for code, _ in codes] == [1, 1, 0, 0], codes


# ---- an index file --------------------------------------------------------------------------------------------

INDEX = "meta_tests.two_bugs:ClearsEveryRankThenRaises"
INDEX_TEST = "test_index_state_machine"
REFUSED = "*  *  7 index model  said: raised RuntimeError: cleared  # known: a clear's flush hook fails (ticket 9)"
INDEX_IMPORT = "from meta_tests.two_bugs import ClearsEveryRankThenRaises as make"
INDEX_OTHERS = ["from radixcheck.properties.index.mutants import ClearedClearsEveryRank as make",
                "from meta_tests.two_bugs import ClearedThenRaises as make", "from radixcheck.reference.kv_index import KvIndex as make"]


@functools.cache
def _index_file() -> str:
    """Two ranks of worker 1 store a block each; rank (1, 0) clears (the index clears both, then raises:
    the waived refusal); the sizes: rank (1, 1)'s block is gone, the finding."""
    machine = type("wv_index", (index_machine_for(two_bugs.ClearsEveryRankThenRaises, IndexCapabilities(), "wv_index"),),
                   {"records": True})()
    log = _log(REFUSED, INDEX, INDEX_TEST)
    machine._send((1, 0), BlockStored(None, (StoredBlock(11, 101),)))
    machine._send((1, 1), BlockStored(None, (StoredBlock(12, 102),)))
    with pytest.raises(ContractViolation) as refused:
        machine._send((1, 0), AllBlocksCleared())
    assert log(refused.value), refused.value
    with pytest.raises(ContractViolation) as caught:
        machine.sizes_agree()
    text, _ = index_script(machine, caught.value, INDEX, INDEX_TEST, failing_program(machine, caught.value), log.applicable)
    return text


def test_an_index_files_waived_refusal_is_gone_past_as_waived() -> None:
    text = _index_file()
    assert "with past_waived('7 index model'" in text and "may_refuse(" not in text, text
    codes = _codes(text, INDEX_IMPORT, INDEX_OTHERS)
    assert [code for code, _ in codes] == [1, 1, 0, 0], codes
    assert "waived (waive.txt:1: known: a clear's flush hook fails (ticket 9)): 7 index model: apply_event" in codes[0][1], codes[0][1]


# ---- a tier file meeting a known: line ------------------------------------------------------------------------

TIER = "meta_tests.two_bugs:SuffixRefreshedAndHostStopsShort"
KNOWN_3 = ("*  *  4 LRU order  known: suffix-refreshed-on-mid-edge-use  # SGLang #3 (known)\n"
           "*  *  4h host eviction order  known: suffix-refreshed-on-mid-edge-use  # SGLang #3 on the host tier")
TIER_IMPORT = "from meta_tests.two_bugs import SuffixRefreshedAndHostStopsShort as make"
TIER_OTHERS = ["from radixcheck.properties.tiers.mutants import TierEvictHostStopsShort as make",
               "from meta_tests.planted_tier_order import SuffixRefreshedTiers as make",
               "from radixcheck.reference.tiered_cache import TieredRadixCache as make"]
STORY = ["w.serve([0, 0, 0])", "w.finish()", "w.serve([1])", "w.finish()", "w.match([0])", "w.complete_all()", "w.evict(1)",
         "w.complete_all()", "w.evict(10**6)", "w.complete_all()", "w.evict_host(1)", "w.evict_host(10**6)"]


@functools.cache
def _tier_file() -> str:
    """#3's story (a match ends inside [0, 0, 0]; evict(1): the known order bug, waived by its deviation), then
    everything evicted to host and off it: the host eviction stops short, the finding."""
    log = _log(KNOWN_3, TIER, "test_tier_state_machine[page_size=1]")
    world = TierWorld(two_bugs.SuffixRefreshedAndHostStopsShort, 1, "write_through")
    world.model.deviations = [make() for make in log.deviations()]  # as the tier machine keeps them
    for step in STORY:
        try:
            exec(step, {"w": world})  # noqa: S102 - the story's own lines
        except Exception as exc:  # noqa: BLE001
            if not log(exc):
                assert isinstance(exc, HostEvictionAmountViolation), exc
                assert [w["oracle"] for w in log.findings()] == [LRUOrderViolation.oracle, HostEvictionOrderViolation.oracle]
                return tier_script(world, exc, TIER, waivers=log.applicable)
    raise AssertionError("the host eviction's bug was not met")


def test_a_tier_file_goes_past_a_finding_a_known_line_waived() -> None:
    text = _tier_file()
    assert "w.model.deviations = [make() for make in DEVIATIONS]" in text, text
    codes = _codes(text, TIER_IMPORT, TIER_OTHERS)
    assert [code for code, _ in codes] == [1, 1, 0, 0], codes  # it stopped at the known order bug: exit 2
    assert "waived (waive.txt:1: SGLang #3 (known)): 4 LRU order:" in codes[0][1], codes[0][1]


@pytest.mark.deep  # the whole writer: reduced, run once in a fresh interpreter, then on each bug alone and the fix
def test_the_written_cache_file_exits_1_on_its_bug_and_0_once_fixed_past_the_waived_crash() -> None:
    failure, log = _cache_failure()
    repro = repro_for(failure, CACHE, CACHE_TEST, waived=log, seconds=5, waivers=log.applicable)
    assert repro.text is not None and repro.exit_code == 1 and "with past_waived():" in repro.text, repro.why_not
    assert [run_file(repro.text.replace(CACHE_IMPORT, factory))[0] for factory in CACHE_OTHERS] == [1, 0, 0]


# ---- end to end: radixcheck audit --waive --repro, then the file on each bug alone and the fix ----------------

ROOT = Path(__file__).resolve().parents[1]


def _first_stream_with_a_file_past_the_waiver(tmp_path: Path, spec: str, waiver: str, marker: str, *more: str) -> tuple[Path, str]:
    """The first ``--seed`` (of 6) whose audit writes a repro file that meets the waived finding (``marker`` in
    it): a stream that never meets it, or whose reduction leaves it out, is not this test's premise."""
    shutil.copytree(ROOT / "meta_tests", tmp_path / "meta_tests", ignore=shutil.ignore_patterns("__pycache__", "test_*"))
    (tmp_path / "waive.txt").write_text(waiver + "\n")
    for seed in range(6):
        shutil.rmtree(tmp_path / "repros", ignore_errors=True)
        run = subprocess.run([sys.executable, "-m", "radixcheck", "audit", spec, "-n", "0", "--seed", str(seed), "--waive", "waive.txt",
                              "--repro", "repros", *more], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                             env={**os.environ, "RADIXCHECK_SHRINK_SECONDS": "0"})
        assert run.returncode == 1, run.stdout + run.stderr
        for repro in sorted((tmp_path / "repros").glob("repro-*.py")):
            if marker in (text := repro.read_text()):
                return tmp_path, text
    raise AssertionError(f"no stream of 6 wrote a file past the waived finding ({marker!r})")


def _file_codes(project: Path, text: str, written: str, others: list[str]) -> list[int]:
    codes = []
    for factory in [written, *others]:
        (project / "swapped.py").write_text(text.replace(written, factory))
        codes.append(subprocess.run([sys.executable, "swapped.py"], cwd=project, capture_output=True, timeout=300).returncode)
    return codes


@pytest.mark.deep
def test_an_audits_cache_file_goes_past_the_waived_crash(tmp_path: Path) -> None:
    project, text = _first_stream_with_a_file_past_the_waiver(tmp_path, CACHE, CRASH, "with past_waived():", "--no-production",
                                                               "--page-sizes", "1")
    assert _file_codes(project, text, CACHE_IMPORT, CACHE_OTHERS) == [1, 1, 0, 0]


@pytest.mark.deep
def test_an_audits_index_file_goes_past_the_waived_refusal(tmp_path: Path) -> None:
    project, text = _first_stream_with_a_file_past_the_waiver(tmp_path, INDEX, REFUSED, "with past_waived('7 index model'")
    assert _file_codes(project, text, INDEX_IMPORT, INDEX_OTHERS) == [1, 1, 0, 0]


def test_a_router_pairs_file_reruns_its_test_with_the_runs_waivers() -> None:
    """A router pair's file is radixcheck's test, rerun (as a tenant tree's: meta_tests/test_repro_waivers.py):
    the run's waivers are its ``radix_waivers``, so it goes past what the run went past. (So already on main.)"""
    from radixcheck.properties.conformance.test_router import test_router_follows_engine
    from radixcheck.properties.findings.repro import _plain_test_script

    waivers = parse_waivers("*  *  RuntimeError  said: empty tree  # known (ticket 8)", "w.txt")
    text = _plain_test_script(RuntimeError("x"), test_router_follows_engine, {"page_size": 1}, None, "mymodule:make",
                              "test_router_follows_engine[page_size=1]", waivers=waivers)
    compile(text, "repro.py", "exec")
    assert "test_router_follows_engine(target, page_size=1, radix_waivers=radix_waivers)" in text
