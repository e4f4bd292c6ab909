"""Repro files you can trust (issue 40, items 1-3): every file replays exactly the target that was
audited, from the directory it is run in, and its exit code means what it says (1: the finding's
check failed; 0: fixed; 2: it cannot run to its check); a hang's file hangs; a file radixcheck ran
that did not show its finding is not offered; a file writes nothing where it runs.

Each test runs files as a user does (``python file.py``, a fresh interpreter): the ``deep`` tier,
except the first, which runs frames in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from radixcheck import profiles
from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.findings.failures import oracle_of
from radixcheck.properties.findings.repro import repro_for
from radixcheck.properties.findings.standalone import (
    CANNOT_RUN_LINES,
    NOT_OFFERED,
    Repro,
    bug_lines,
    confirm,
    run_repro,
    runs_to_the_check,
)
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import TIMEOUT_ENV
from radixcheck.reference import RadixCache

ROOT = Path(__file__).resolve().parents[1]


def _run(path: Path, cwd: Path, **env: str | None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run([sys.executable, str(path)], cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)


def _failure(machine, profile: str = "mutation") -> BaseException:  # noqa: ANN001 - a machine class
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any failure is a verdict
        run_machine(machine, profiles.SETTINGS[profile], transcript=True)
    return caught.value


def _frame(body: list[str]) -> str:
    return "\n".join(["import sys", "import traceback", "", *bug_lines("9 some oracle"), "", *CANNOT_RUN_LINES, "",
                      *runs_to_the_check(body), "print('no bug')"]) + "\n"


def test_the_frame_exits_2_when_the_file_cannot_run_and_1_only_for_the_check() -> None:
    """The frame every file has (in process: cheap, the fast tier): a name error in the file, or a
    call before the check that raises, is exit 2, never Python's 1; the failed check is 1; else 0."""
    assert run_repro(_frame(["undefined_name"]))[0] == 2
    assert run_repro(_frame(["{}['missing']", "bug('x', got=1)"]))[0] == 2
    code, printed = run_repro(_frame(["bug('the check failed', got=1)"]))
    assert code == 1 and "BUG (radixcheck oracle 9 some oracle): the check failed" in printed
    assert run_repro(_frame(["x = 1"])) == (0, "no bug\n")


@pytest.mark.deep
def test_a_file_that_does_not_show_its_finding_is_not_offered() -> None:
    shown = confirm(Repro("import sys\nprint('BUG (radixcheck oracle x): the finding')\nsys.exit(1)\n"))
    assert shown.text is not None and shown.exit_code == 1 and not shown.why_not
    for text, said in [("print('no bug')\n", "exited 0, not 1"), ("import sys\nsys.exit(1)\n", "exited 1 without the finding"),
                       ("undefined_name\n", "exited 1 without the finding"), ("import sys\nsys.exit(2)\n", "exited 2, not 1")]:
        repro = confirm(Repro(text))
        assert repro.text is None and repro.why_not.startswith(f"{NOT_OFFERED}: radixcheck ran the file it wrote and it {said}"), repro


TIER_PROJECT = '''
from radixcheck.properties.tiers.mutants import HostEvictionOrphansSubtree


def make(device, host, controller, page_size, write_policy):
    return HostEvictionOrphansSubtree(device, host, controller, page_size, write_policy)


make.tier_capabilities = HostEvictionOrphansSubtree.tier_capabilities
'''


@pytest.mark.deep
def test_a_tier_repro_runs_from_the_project_reduced_exits_1_then_0_once_fixed(tmp_path: Path, monkeypatch) -> None:
    """The tier file imports the user's factory from where it is run (it raised ModuleNotFoundError,
    exit 1, bug or no bug), and is reduced: the run's operations that do not matter are left out."""
    from radixcheck.properties.tiers.machine import tier_machine_for

    (tmp_path / "mytier.py").write_text(TIER_PROJECT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "3")
    import mytier

    failure = _failure(tier_machine_for(mytier.make, 1, "write_through", "meta_trust_tier"), "audit")
    operations = sum(not line.startswith("#") for line in failure.radixcheck_machine.world.log)
    repro = repro_for(failure, "mytier:make", seconds=float("inf"), replays=400)
    assert repro.text is not None and repro.exit_code == 1, repro.why_not
    assert repro.calls < operations and "Reduced from" in repro.text, (repro.calls, operations)
    path = tmp_path / "repros" / "tier.py"
    path.parent.mkdir()
    path.write_text(repro.text)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    bug = _run(path.relative_to(tmp_path), tmp_path)
    assert bug.returncode == 1 and "BUG (radixcheck oracle 16 host eviction orphans nothing)" in bug.stdout, bug.stdout + bug.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no __pycache__, nothing else
    elsewhere = _run(path, tmp_path.parent)
    assert elsewhere.returncode == 2 and "cannot import the factory mytier:make" in elsewhere.stderr, elsewhere.stderr
    (tmp_path / "mytier.py").write_text(TIER_PROJECT.replace("HostEvictionOrphansSubtree(", "TieredRadixCache(")
                                        + "from radixcheck.reference.tiered_cache import TieredRadixCache\n")
    fixed = _run(path, tmp_path)
    assert fixed.returncode == 0 and "no bug" in fixed.stdout, fixed.stdout + fixed.stderr


def _served(cache: str) -> str:
    return f"{sys.executable} -m radixcheck.reference.wire_server --cache {cache}"


@pytest.mark.deep
def test_a_wire_repro_replays_its_server_and_refuses_without_one(tmp_path: Path, monkeypatch) -> None:
    """A cache served over the wire: the file records the server audited; run without
    RADIXCHECK_WIRE_CMD it refuses (exit 2, one line: every such file exited 0 on radixcheck's
    reference); with the buggy server it exits 1, with a fixed one 0."""
    from radixcheck.properties.adapters.wire import server

    buggy = _served("radixcheck.properties.cache.mutants:EvictsLockedLeaf")
    monkeypatch.setenv("RADIXCHECK_WIRE_CMD", buggy)
    try:
        failure = _failure(machine_for(server, server.capabilities, 1, "meta_trust_wire"))
        repro = repro_for(failure, "radixcheck.properties.adapters.wire:server", replays=30)
    finally:
        server.close()
    assert repro.text is not None and repro.exit_code == 1, repro.why_not
    assert f"AUDITED_SERVER = {buggy!r}" in repro.text
    path = tmp_path / "wire_repro.py"
    path.write_text(repro.text)
    alone = _run(path, tmp_path, RADIXCHECK_WIRE_CMD=None)
    assert alone.returncode == 2 and alone.stdout == "" and len(alone.stderr.strip().splitlines()) == 1, alone
    assert "no wire server" in alone.stderr and buggy in alone.stderr
    assert _run(path, tmp_path, RADIXCHECK_WIRE_CMD=buggy).returncode == 1
    fixed = _run(path, tmp_path, RADIXCHECK_WIRE_CMD=_served("radixcheck.reference:RadixCache"))
    assert fixed.returncode == 0 and "no bug" in fixed.stdout, fixed.stdout + fixed.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wire_repro.py"]


class HangsOnThirdEvict(RadixCache):
    """A cache whose third ``evict`` (of this cache) never returns: the two before it do."""

    def evict(self, num_tokens: int) -> int:
        self.evicts = getattr(self, "evicts", 0) + 1
        while self.evicts == 3:  # computes for ever: the limit counts CPU time
            pass
        return super().evict(num_tokens)


@pytest.mark.deep
def test_a_hang_is_the_call_that_hung_and_its_file_hangs(monkeypatch) -> None:
    """The finding names the call that did not return (the third evict, not the first: a replay
    said "evict not called: it already hung" there, with a program that does not hang), its
    program is reduced (the acts the hang does not need left out), and its file runs that call
    under the time limit and exits 1; on a cache that returns, 0."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.5")
    failure = _failure(machine_for(HangsOnThirdEvict, DEFAULT_CAPABILITIES, 1, "meta_trust_hang"), "ci")
    assert oracle_of(failure).startswith("hang") and "not called" not in str(failure), failure
    calls = [c for a in failure.radixcheck_machine.transcript for c in a.calls if c.name == "evict"]
    assert len(calls) == 3 and calls[-1].raised is not None and all(c.raised is None for c in calls[:2]), calls
    acts = len(failure.radixcheck_machine.transcript)
    repro = repro_for(failure, f"{__name__}:HangsOnThirdEvict")
    assert repro.text is not None and repro.exit_code == 1, repro.why_not
    assert "Reduced from" in repro.text and repro.calls < sum(len(a.calls) for a in failure.radixcheck_machine.transcript), (
        acts, repro.calls)  # delta-debugged: the acts that do not lead to the third evict left out
    assert "BUG (radixcheck: hang (per-operation time limit)): evict(...) did not return within 0.5 s" in repro.output
    assert repro.text.count("cache.evict(") == 3 and "within_limit(lambda: cache.evict(" in repro.text
    fixed = run_repro(repro.text.replace(f"from {__name__} import HangsOnThirdEvict as make",
                                         "from radixcheck.reference import RadixCache as make"))
    assert fixed[0] == 0 and "returned within the limit" in fixed[1], fixed


@pytest.mark.deep
def test_a_plain_test_s_repro_runs_and_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    """A conformance test that is its own repro: it uses its module's private helpers (its file
    failed with NameError: name '_second_values' is not defined), exits 1 on the bug, and a tenant
    tree's (which runs Hypothesis) leaves no .hypothesis/ where it runs."""
    from radixcheck.properties.conformance.test_construction import test_handle_from_another_cache_is_refused as construction
    from radixcheck.properties.conformance.test_tenant_tree_machine import test_tenant_tree_state_machine as tenant_tree
    from radixcheck.properties.target import load_target

    monkeypatch.chdir(tmp_path)
    for test, spec, parameters, radix in [(construction, "radixcheck.properties.cache.mutants:ForeignHandleAccepted", {"page_size": 1}, {}),
                                          (tenant_tree, "radixcheck.properties.tenant_tree.mutants:MatchLongerThanQuery", {},
                                           {"radix_waivers": None})]:
        target = load_target(spec)
        with pytest.raises(AssertionError) as caught:
            test(target, **parameters, **radix)
        repro = repro_for(caught.value, spec, test.__name__, plain_test=(test, parameters, target.capabilities))
        assert repro.text is not None and repro.exit_code == 1, repro.why_not
        path = tmp_path.parent / f"{tmp_path.name}-{test.__name__}.py"
        path.write_text(repro.text)
        for leftover in tmp_path.iterdir():  # this process's own run of the test (not the file's)
            subprocess.run(["rm", "-rf", str(leftover)], check=True)
        assert _run(path, tmp_path).returncode == 1
        assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())
        lines = repro.text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith(f"def {test.__name__}(")) + 1
        path.write_text("\n".join([*lines[:at], "    undefined_name  # a name error in the file", *lines[at:]]) + "\n")
        broken = _run(path, tmp_path)
        assert broken.returncode == 2, broken.stdout + broken.stderr


FLAKY = '''
import sys

from radixcheck import Capabilities
from radixcheck.reference import RadixCache


class OnlyUnderPytest(RadixCache):
    """Evicts a locked leaf, but only in a process that imported pytest: its repro file does not."""

    def _evictable_leaf(self, node):
        if "pytest" in sys.modules:
            return not node.children and node is not self.root
        return super()._evictable_leaf(node)


def make(allocator, page_size):
    return OnlyUnderPytest(allocator, page_size)


make.capabilities = Capabilities(page_sizes=(1,))
'''


@pytest.mark.deep
def test_the_audit_says_when_a_file_is_not_offered(tmp_path: Path) -> None:
    """A cache whose bug the file cannot show (here: it needs pytest in the process): no file is
    offered, and the audit says why on stderr, on the report card and in the JSON."""
    (tmp_path / "flaky.py").write_text(textwrap.dedent(FLAKY))
    run = subprocess.run([sys.executable, "-m", "radixcheck", "audit", "flaky:make", "-n", "0", "--repro", "repros",
                          "--report", "card.md", "--json", "audit.json"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "radixcheck: no repro file for 2 refcount safety" in run.stderr and "not offered" in run.stderr, run.stderr[-2000:]
    assert not list((tmp_path / "repros").glob("*.py")) if (tmp_path / "repros").exists() else True
    card = (tmp_path / "card.md").read_text()
    assert "Repro: (none: not offered: radixcheck ran the file it wrote and it exited 0, not 1" in card, card
    findings = json.loads((tmp_path / "audit.json").read_text())["findings"]
    assert any(f["repro"].startswith("(none: not offered") for f in findings), findings


@pytest.mark.deep
def test_a_serving_run_that_hangs_has_a_file_that_hangs(monkeypatch) -> None:
    """The DFS tests' serving protocol: its file runs every call under the limit and exits 1 when
    one does not return (it waited for ever); on a cache that returns, 0."""
    from radixcheck.properties.cache.batches import tokens_computed
    from radixcheck.properties.target import Target

    monkeypatch.setenv(TIMEOUT_ENV, "0.5")
    hangs = Target(f"{__name__}:HangsOnThirdEvict", HangsOnThirdEvict, DEFAULT_CAPABILITIES)
    with pytest.raises(Exception) as caught:  # noqa: PT011 - a hang: OperationTimeout
        tokens_computed(hangs, [(0, 0, 1, 2), (3, 4, 5, 6), (7, 8, 9, 9), (1, 2, 3, 4), (5, 6, 7, 8)], 1, 2)
    assert oracle_of(caught.value).startswith("hang"), caught.value
    repro = repro_for(caught.value, hangs.spec)
    assert repro.text is not None and repro.exit_code == 1 and "did not return within the limit" in repro.output, repro.why_not
    fixed = run_repro(repro.text.replace(f"from {__name__} import HangsOnThirdEvict as make",
                                         "from radixcheck.reference import RadixCache as make"))
    assert fixed[0] == 0, fixed


@pytest.mark.deep
def test_a_production_world_finding_of_a_users_cache_is_reduced_to_a_page() -> None:
    """A user's LFU whose counter a re-insert does not bump fails only in the production world:
    its file was 56,415 lines, unreduced at 5 s (one replay of a world costs seconds). A world's
    budget is 60 s by default; counted in replays here (the verdict must not depend on the
    machine's speed): 45 took 17 s on 2 loaded Zen 5 cores."""
    from radixcheck.properties.cache.scale_machine import ProductionScaleMachine, scale_machine_for
    from radixcheck.properties.findings.reduce import reduce_seconds
    from radixcheck.properties.target import load_target

    assert reduce_seconds(ProductionScaleMachine) == 60 and reduce_seconds(None) == 5
    target = load_target("meta_tests.user_lfu_recency:make_unbumped")
    failure = _failure(scale_machine_for(target.factory, target.capabilities, 1, "meta_trust_scale"), "ci")
    assert len(failure.radixcheck_machine.transcript) > 10_000
    repro = repro_for(failure, target.spec, seconds=float("inf"), replays=60)
    assert repro.text is not None and repro.exit_code == 1, repro.why_not
    lines, size = len(repro.text.splitlines()), len(repro.text.encode())
    assert lines <= 120 and size <= 16 * 1024, f"{lines} lines, {size} bytes"


def test_the_reason_a_file_is_not_offered_quotes_whole_words() -> None:
    from radixcheck.properties.findings.standalone import last_words

    said = "the page is " + "not at or below its cut, " * 20 + "done"
    assert last_words("short enough") == "short enough"
    cut = last_words(said)
    assert cut.startswith("…") and said.endswith(cut[1:]) and len(cut) <= 301
    assert cut[1:].split(" ", 1)[0] in said.split(" ")  # a whole word, not "ot"


class SizesStaleAfterUnlock(RadixCache):
    """Keeps its sizes until the tree changes, and forgets that an unlock changes them: only a read of
    the sizes between a lock and its unlock shows it (a wire trial's Node.js cache had this bug)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self._sizes: tuple[int, int, int] | None = None

    def _read(self) -> tuple[int, int, int]:
        if self._sizes is None:
            self._sizes = (super().total_size(), super().evictable_size(), super().protected_size())
        return self._sizes

    def total_size(self) -> int:
        return self._read()[0]

    def evictable_size(self) -> int:
        return self._read()[1]

    def protected_size(self) -> int:
        return self._read()[2]


def _forgetting_sizes(method):  # noqa: ANN001, ANN202
    def changes(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        self._sizes = None
        return method(self, *args, **kwargs)
    return changes


for _name in ("insert", "inc_lock_ref", "evict", "evict_prefix", "reset"):  # every change but dec_lock_ref (the bug)
    setattr(SizesStaleAfterUnlock, _name, _forgetting_sizes(getattr(RadixCache, _name)))


@pytest.mark.deep  # a state machine, its reduction and a run of the file
def test_a_finding_that_needs_a_read_of_the_sizes_has_a_file_that_reads_them() -> None:
    """A cache whose reads change what it answers (sizes kept until a change it forgets): the reduction
    keeps the invariant's read the failure needs, and the file makes it too, so it exits 1 (it used to
    leave every read out, exit 0, and not be offered)."""
    failure = _failure(machine_for(SizesStaleAfterUnlock, DEFAULT_CAPABILITIES, 1, "SizesStaleAfterUnlock"))
    assert oracle_of(failure) == "2 refcount safety", failure
    repro = repro_for(failure, "meta_tests.test_repro_trust:SizesStaleAfterUnlock", seconds=float("inf"), replays=40)
    assert repro.text is not None, repro.why_not
    assert repro.exit_code == 1 and "sizes()  # radixcheck read the sizes here" in repro.text
