"""``radixcheck audit module:factory``: the conformance tests against one cache, with a verdict.

The target may also be a KV-event index (a router's view, ``radixcheck.properties.index.contract``):
its ``capabilities`` is an ``IndexCapabilities`` (or ``--index``), and the index tests run instead
of the cache tests, with the same verdicts, report card, JSON and findings; or a router's tenant
prefix tree (``radixcheck.properties.tenant_tree.contract``, a ``TenantTreeCapabilities``), and the
tenant-tree tests run.

It checks the target first (one clear error if it cannot be tested at all), then runs the
conformance tests (``radixcheck.properties.conformance``) through pytest and pytest-xdist,
printing each verdict as it arrives, and writes a report card: the target and its capabilities,
what was not exercised and why, a verdict per property and page size, and the findings.

**One finding per root cause.** Failures are grouped by oracle and by the shape of the first
differing call (the failure's message with its numbers and token lists left out: ``evict(2)
returned 3 but freed 4 slots`` at page size 1 and ``evict(8) returned 12 but freed 16 slots`` at
page size 4 are one finding); the failures of an order oracle are one finding whatever their
shape (:func:`~radixcheck.properties.findings.failures.signature_of`). Each exception of an ``ExceptionGroup`` counts on its own. A finding
names every test (and page size) it failed, and shows the shortest program among them (the
ordinary machine's before the production-scale one's, whose single step builds 10^4 nodes). Findings
are listed most fundamental first (:data:`RANKS`): a test that could not run at all; slots and
the prefix set (what a match returns, what evict frees, return values); bad input; what an index
answers (matches, sizes, dump; the engine's events); refcounts; a
crash or a hang in a legal call (after those, because a corrupted tree or a lost lock often
surfaces later as a crash: EvictsLockedLeaf's evicted locked node makes the serving protocol's
unlock raise "stale handle" in the DFS tests; before LRU order and DFS, which a crash keeps from
being judged); eviction amount and order; the DFS bound; the cost of a step (last: it judges how
fast the answers came, not what they were). **The cause before its echo**: in a run
where an oracle found something, a crash of the target's own (its handle check's ``ValueError``)
goes after every oracle's finding and is said to be possibly an echo of the first of them; its
live FAIL line says so too when that oracle's FAIL came first.

**Known findings** (``--waive FILE``, :mod:`radixcheck.properties.findings.waivers`) are reported as
waived, with their waiver's reason, and do not make the cache non-conforming.

Exit codes: 0 the cache conforms (perhaps with waived findings), 1 it does not, 2 usage or load error.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tabulate import tabulate

from radixcheck.cache_dir import hypothesis_storage_in_cache
from radixcheck.layer_card import LayersDriven, gaps_line, layers_driven, layers_section
from radixcheck.properties.findings.failures import signature_of
from radixcheck.properties.findings.repro import file_name
from radixcheck.properties.findings.root_cause import same_causes, shows_cause
from radixcheck.properties.findings.standalone import NOT_OFFERED
from radixcheck.properties.findings.verdict import shrink_seconds
from radixcheck.properties.findings.waivers import read_waivers, unmatched, unmatched_warning
from radixcheck.properties.layer_tally import declared_layers
from radixcheck.properties.target import Target, op_timeout
from radixcheck.pytest_plugin import (
    NO_PRODUCTION,
    SMALL_MACHINES,
    WAIVED_PREFIX,
    WAIVERS_MET,
    WORLD_KINDS,
    in_short,
    production_not_run,
)

CONFORMANCE = "radixcheck.properties.conformance"
EXIT_CONFORMS, EXIT_NONCONFORMING, EXIT_USAGE = 0, 1, 2
NO_PRODUCTION_OPTION = "--no-production"  # the audit's name for the plugin's NO_PRODUCTION
LEFT_OUT = production_not_run(NO_PRODUCTION_OPTION)  # "production-scale worlds: not run (--no-production)"


@dataclass
class Verdict:
    """One conformance test at one page size."""

    test: str  # e.g. test_cache_state_machine[page_size=16]
    outcome: str  # passed | failed | skipped | waived (failed, but only with findings a waiver covers)
    seconds: float
    oracle: str = ""
    reason: str = ""
    program: str = ""
    exceptions: list[dict[str, str]] = field(default_factory=list)  # each one's type, message, oracle, program
    waived: list[dict[str, Any]] = field(default_factory=list)  # findings waived on the way (and their waiver)
    repro: dict[str, Any] = field(default_factory=dict)  # --repro: the file's text (or why there is none), calls, exit code
    layers: dict[str, int] = field(default_factory=dict)  # steps per set of layers touched together (layer_tally)


# The order findings are listed in, most fundamental first: (rank, oracle names starting so).
RANKS: list[tuple[str, tuple[str, ...]]] = [
    ("could not run", ("collection error", "error")),
    ("slots and the prefix set", ("3 slot", "1 prefix-set", "10 tenant isolation", "5 evict-equals", "return values", "contract")),
    ("the tiers: residency, transfers, backups", ("13 ", "14 ", "15 ", "16 ", "17 ", "18 ", "19 ", "3h ")),
    ("the second pool: window and state values", ("20 ", "20w ", "21 ", "22 ", "23 ")),
    ("bad input", ("bad input",)),
    ("what the index answers", ("7 index", "9 engine events")),
    ("what the tenant tree answers", ("11 tenant-tree model",)),
    ("refcounts", ("2 refcount",)),
    ("crash or hang", ("crash", "hang", "assertion")),
    ("eviction amount and order", ("4 ", "4h ", "11 tenant-tree eviction")),
    ("index memory", ("8 index memory", "12 tenant-tree memory")),
    ("DFS bound", ("6 DFS",)),
    ("the cost of a step", ("S step cost",)),
]


def _shrink_budget(result: AuditResult) -> str:
    """The shrink budgets the target's machines used (each machine class may have its own default)."""
    from radixcheck.properties.cache.scale_machine import ProductionScaleMachine
    from radixcheck.properties.index.machine import KvIndexMachine
    from radixcheck.properties.tenant_tree.machine import TenantTreeMachine
    from radixcheck.properties.tiers.machine import TierMachine

    if result.capabilities.startswith("IndexCapabilities"):
        return f"{shrink_seconds(KvIndexMachine):g} s"
    if result.capabilities.startswith("TenantTreeCapabilities"):
        return f"{shrink_seconds(TenantTreeMachine):g} s"
    if result.capabilities.startswith("TierCapabilities"):  # its production world is deterministic: nothing to shrink
        world = "" if result.partial else "; the tier production world is not shrunk (a fixed stream)"
        return f"{shrink_seconds(TierMachine):g} s{world}"
    world = shrink_seconds(ProductionScaleMachine)
    if result.partial:  # no production world ran: its shrink would say nothing
        return f"{shrink_seconds(None):g} s"
    return f"{shrink_seconds(None):g} s; a production-scale finding is " + (
        "not shrunk (reduced instead)" if world <= 0 else f"shrunk for {world:g} s")


def rank_of(oracle: str) -> int:
    return next((i for i, (_, prefixes) in enumerate(RANKS) if oracle.startswith(prefixes)), len(RANKS))


@dataclass
class Finding:
    """One root cause: an oracle and the shape of the failure, with every test it failed."""

    rank: str
    oracle: str
    reason: str  # the message of the shortest program's failure
    tests: list[str]
    program: str
    exception: str = ""  # the exception's type
    raised_at: str = ""  # a crash: where, e.g. mycache.py:42 in evict
    repro: str = ""  # --repro: its standalone repro file (or why there is none)
    echo_of: str = ""  # a crash in a run that also has an oracle's finding: that finding (the likely cause)
    also: list[str] = field(default_factory=list)  # the same root cause, found by other oracles: each "oracle: message"
    shrink: str = ""  # its program's shrink ran out of time: the sentence that says so

    @property
    def heading(self) -> str:
        """Its rank, and for a possible echo, of what (for the finding list and the report card)."""
        return f"{self.rank}; possibly an echo of {self.echo_of}" if self.echo_of else self.rank


# Findings that no oracle judged: the test could not run, or the target itself raised or hung.
NOT_AN_ORACLE = ("collection error", "error", "crash", "hang", "assertion")


def findings_of(verdicts: list[Verdict]) -> list[Finding]:
    """The failing verdicts grouped by root cause (module docstring), most fundamental first."""
    groups: dict[tuple[str, str], list[tuple[str, dict[str, str]]]] = {}
    for v in verdicts:
        if v.outcome != "failed":
            continue
        for e in v.exceptions or [{"type": "", "message": v.reason, "oracle": v.oracle, "program": v.program}]:
            groups.setdefault((e["oracle"], signature_of(e["oracle"], e["message"])), []).append((v.test, e))
    found: dict[tuple[str, str], Finding] = {}
    for (oracle, shape), members in groups.items():
        _, shortest = min(members, key=lambda m: (not m[1]["program"], "production_scale" in m[0],
                                                   len(m[1]["program"].splitlines()), len(m[1]["message"]), m[0]))
        tests = sorted(dict.fromkeys(test for test, _ in members), key=_test_order)
        found[oracle, shape] = Finding(RANKS[rank_of(oracle)][0] if rank_of(oracle) < len(RANKS) else "other", oracle,
                                       shortest["message"], tests, shortest["program"], shortest.get("type", ""),
                                       shortest.get("raised_at", ""), _repro_of(oracle, shape, [v for v in verdicts if v.test in tests]),
                                       shrink=shortest.get("shrink", ""))
    shows = {key: {tuple(s) for v in verdicts if v.repro and v.test in f.tests and v.repro.get("oracle") == key[0]
                   and signature_of(key[0], v.repro.get("message", "")) == key[1] for s in v.repro.get("shows", [])}
             for key, f in found.items()}
    merged = by_root_cause(found, shows)
    merged.sort(key=lambda f: (rank_of(f.oracle), -len(f.tests), f.oracle, f.reason))
    return after_waived(with_echoes_last(merged, shows), verdicts)


def by_root_cause(found: dict[tuple[str, str], Finding], shows: dict[tuple[str, str], set[tuple[str, str]]]) -> list[Finding]:
    """Findings whose programs each show the other's signature (``shows``: what each finding's program showed, replayed)
    merged into one (:mod:`~radixcheck.properties.findings.root_cause`, with ``--repro``): the most fundamental of them
    (:data:`RANKS`, then the most tests) is the finding, the others are listed in its ``also``, and it names every test
    of them all."""
    out = []
    for keys in same_causes(shows):
        members = sorted((found[k] for k in keys), key=lambda f: (rank_of(f.oracle), -len(f.tests), f.oracle, f.reason))
        head, rest = members[0], members[1:]
        tests = sorted(dict.fromkeys(t for f in members for t in f.tests), key=_test_order)
        written = [f.repro for f in members if _is_file(f.repro)]  # the head's file, else the first merged one's
        out.append(dataclasses.replace(head, tests=tests, also=[f"{f.oracle}: {f.reason}" for f in rest],
                                       repro=written[0] if written else head.repro) if rest else head)
    return out


def _is_file(repro: str) -> bool:
    """Whether a finding's ``repro`` names a file (not "(none: why)", nor "")."""
    return bool(repro) and not repro.startswith("(")


def one_file_per_finding(result: AuditResult) -> list[str]:
    """Remove the repro files this run wrote that no finding cites, and return their paths: each
    finding's file is the one its card names. A finding merged into another (the same root cause,
    :func:`by_root_cause`) wrote a file of its own under its oracle; the finding it joined cites one
    file, and a second one beside it would be a second repro of one finding."""
    cited = {f.repro for f in result.findings if _is_file(f.repro)}
    dropped = []
    for verdict in result.verdicts:
        path = verdict.repro.get("path")
        if verdict.outcome == "failed" and path and path not in cited:
            Path(path).unlink(missing_ok=True)
            del verdict.repro["path"]
            verdict.repro["why_not"] = "the same root cause as a finding whose file is cited"
            dropped.append(path)
    return list(dict.fromkeys(dropped))


def after_waived(findings: list[Finding], verdicts: list[Verdict]) -> list[Finding]:
    """A finding met only in tests that looked past a waived finding is said as its possible echo:
    once a waived step has failed, the model and the cache may disagree from there on (a new user
    waived ``return values`` and got a sizes finding the waived eviction had caused). A waived order
    finding (:data:`LEAVE_NO_ECHO`) is no such cause: the model took the cache's choice before it was raised;
    nor is one that the replay of the finding's reduced program (its repro) never met on its way to the
    finding: there the finding happened without it."""
    waived = {v.test: [w for w in v.waived if w["oracle"] not in LEAVE_NO_ECHO and _met_on_the_way(v, w["oracle"])]
              for v in verdicts}

    def causes(f: Finding) -> str:  # every waived finding its tests looked past: the first alone may not be its cause
        met = dict.fromkeys((w["oracle"], w["waiver"]) for t in f.tests for w in waived[t])
        return " or ".join(f"the waived {oracle} finding ({where})" for oracle, where in met)

    return [dataclasses.replace(f, echo_of=causes(f)) if not f.echo_of and f.tests and all(waived.get(t) for t in f.tests)
            else f for f in findings]


def _met_on_the_way(verdict: Verdict, oracle: str) -> bool:
    """Whether the waived finding of ``oracle`` may have come before ``verdict``'s finding: the replay of
    its reduced program met it, or did not reach the finding (no replay, or one cut short: it cannot say)."""
    repro = verdict.repro or {}
    if "waived_shown" not in repro or not repro.get("oracle"):
        return True
    own = [repro["oracle"], signature_of(repro["oracle"], repro.get("message", ""))]
    return own not in [list(s) for s in repro.get("shows", [])] or oracle in repro["waived_shown"]


LEAVE_NO_ECHO = ("4 LRU order", "4 eviction order", "4h host eviction order", "11 tenant-tree eviction")
"""Waived findings that cannot cause a later one: their models apply what the cache chose before the
finding is raised (the cache's, tier's and tenant tree's machines), so the model still holds what the
cache holds. A finding met after one of them is not its echo (a layers cache's tenant leak, met in the
same program with its order bug waived, was said to be one)."""


MEASURED_THROUGH_THE_CACHE = ("6 DFS bound",)
"""Oracles that judge a figure the serving protocol computed by driving the cache (tokens computed),
not a call's answer: a cache that lost or mis-matched what a request left computes a wrong figure."""


def _signatures(f: Finding) -> list[tuple[str, str]]:
    """The signatures a finding stands for: its own and those merged into it (its ``also``)."""
    merged = [line.partition(": ") for line in f.also]
    return [(f.oracle, signature_of(f.oracle, f.reason))] + [(oracle, signature_of(oracle, message)) for oracle, _, message in merged]


def _explained_by(f: Finding, causes: list[Finding], shows: dict[tuple[str, str], set[tuple[str, str]]]) -> Finding | None:
    """The first of ``causes`` whose signature (or one merged into it) ``f``'s replayed program showed."""
    own = (f.oracle, signature_of(f.oracle, f.reason))
    shown = shows.get(own, set())
    return next((c for c in causes if any(shows_cause(shown, key, own) for key in _signatures(c))), None)


def with_echoes_last(findings: list[Finding], shows: dict[tuple[str, str], set[tuple[str, str]]]) -> list[Finding]:
    """Findings that most often echo another go after every other finding and name it as their
    possible cause:

    - a crash the target's own check raised in a legal call (a ``ValueError: stale handle`` from
      its unlock), with an oracle's finding in the same run (a locked node evicted earlier): the
      first of them;
    - a DFS-bound finding whose own serving run, replayed on the cache machine (``shows``), fails
      another finding of this audit: that one. The figure was computed through a cache already
      wrong (a split that copies the wrong slots mis-matches what the previous request left). The
      other way round cannot be asked (no machine program computes the figure), so
      :func:`by_root_cause` never merges the two; a DFS-bound finding whose run replays clean stays
      a finding of its own."""
    judged = [f for f in findings if not f.oracle.startswith(NOT_AN_ORACLE)]
    if not judged:
        return findings
    causes = [f for f in judged if not f.oracle.startswith(MEASURED_THROUGH_THE_CACHE)]
    explained = {id(f): c for f in judged if f.oracle.startswith(MEASURED_THROUGH_THE_CACHE)
                 and (c := _explained_by(f, causes, shows)) is not None}
    first = [f for f in findings if not f.oracle.startswith("crash") and id(f) not in explained]

    def named(cause: Finding) -> str:
        return f"finding {first.index(cause) + 1} ({cause.oracle})"

    measurements = [dataclasses.replace(f, echo_of=named(explained[id(f)])) for f in findings if id(f) in explained]
    oracle_first = next(f for f in first if not f.oracle.startswith(NOT_AN_ORACLE))  # a cause is never moved
    return first + measurements + [dataclasses.replace(f, echo_of=named(oracle_first)) for f in findings if f.oracle.startswith("crash")]


def _repro_of(oracle: str, shape: str, verdicts: list[Verdict]) -> str:
    """The finding's repro file (the plugin wrote it under the finding's name), or why there is none."""
    repros = [v.repro for v in verdicts if v.repro and v.repro.get("oracle") == oracle
              and signature_of(oracle, v.repro.get("message", "")) == shape]
    written = [r for r in repros if r.get("path")]
    if written:  # the shortest program: a production-scale test's of the same finding may be longer, or a rerun of the test
        return min(written, key=lambda r: (r.get("calls", 0) == 0, r.get("calls", 0)))["path"]
    return f"(none: {repros[0]['why_not']})" if repros else ""


def _test_order(test_id: str) -> tuple:
    """Tests by name, then page sizes numerically (1, 4, 16)."""
    name, _, param = test_id.partition("[")
    size = param.rstrip("]").rpartition("page_size=")[2]
    return (name, int(size) if size.isdigit() else -1, param)


def waived_of(verdicts: list[Verdict]) -> list[dict[str, Any]]:
    """Every waived finding (by oracle, exception type, waiver and the shape of its message), with the
    tests it was met in. A line that names an oracle alone and waived findings of more than one shape
    says so beside each (``shapes_waived``): two shapes may be two bugs, and the second would hide behind
    the first (two tenant leaks under one ``10 tenant isolation`` line, after_verdict_trial.md friction 4)."""
    merged: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for v in verdicts:
        for w in v.waived:
            entry = merged.setdefault((w["oracle"], w["type"], w["waiver"], w.get("shape", "")), {**w, "tests": []})
            entry["tests"].append(v.test)
            for key in ("cut_short", "not_rejudged"):  # said of one test's meeting (a production world's), kept whichever came first
                if w.get(key):
                    entry.setdefault(key, w[key])
    shapes = Counter(w for _, _, w, _ in merged)
    for (_, _, waiver, _), entry in merged.items():
        if shapes[waiver] > 1 and not entry.get("named_by_shape"):
            entry["shapes_waived"] = (f"one of {shapes[waiver]} findings of different shapes this line waived: if they are "
                                      "different bugs, name each by 'said: <words of its message>' (docs/how-to/waivers.md)")
    return list(merged.values())


@dataclass
class AuditResult:
    target: str
    capabilities: str
    not_exercised: list[str]
    profile: str
    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0
    pytest_exit: int = 0
    warnings: list[str] = field(default_factory=list)  # e.g. no `capabilities` declared: the defaults applied
    unmatched_waivers: list[str] = field(default_factory=list)  # a warning for each waiver that waived nothing
    page_sizes: str = ""  # declared and run, e.g. "declared (4, 16), run (4,) (--page-sizes)"
    tenant_isolation: str = ""  # checked, or not exercised and why (the capabilities' tenant_isolation())
    seed: int | None = None  # --seed: the stream run (None: the profile's own)
    write_policies: str = ""  # a tier target: the write policies run, and those left out (tier_lines)
    worlds: str = ""  # a tier target: which worlds ran, and where the production-scale one lives (tier_lines)
    cost: str = ""  # where the cost at scale the audit cannot judge is measured (cost_line)
    server: str = ""  # a wire target: the command the audit ran and the name its server gave (server_line)
    production_worlds: str = ""  # a cache or a tier target: "run", or LEFT_OUT (--no-production); "" for a kind with none
    layers_declared: list[str] = field(default_factory=list)  # the layers its capabilities declare (layer_tally.declared_layers)

    @property
    def partial(self) -> bool:
        """Whether the run left its production-scale worlds out: its verdict covers the small worlds only."""
        return self.production_worlds == LEFT_OUT

    @property
    def layers_driven(self) -> LayersDriven:
        """The declared layers and pairs the machines drove, summed over the tests (the card's "Layers driven together")."""
        return layers_driven(self.layers_declared, self.verdicts)

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.outcome == "failed"]

    @property
    def findings(self) -> list[Finding]:
        return findings_of(self.verdicts)

    @property
    def waived(self) -> list[dict[str, Any]]:
        return waived_of(self.verdicts)

    @property
    def not_checked(self) -> str:
        """What was left out, in short (each gap up to its reason), for the verdict line: "" if nothing."""
        return in_short(self.not_exercised)

    @property
    def conforms(self) -> bool:
        return self.pytest_exit in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) and not self.failures


# The conformance session's own pytest options. ``--assert=plain``: pytest rewrites the asserts of every module
# of a plugin's distribution (all of radixcheck's, ~160) in each process, the controller and every xdist worker,
# about 0.9 s of CPU each where no rewritten module can be cached (PYTHONDONTWRITEBYTECODE, a read-only
# install); nothing here needs it: the oracles raise their own violations, and the cache's own code is never
# rewritten (it is neither a test module nor a plugin).
SESSION_ARGS = ("-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:randomly", "-o", "addopts=", "--assert=plain")

HOLD_SECONDS = 5.0  # the longest a crash's FAIL line waits for the small machines' verdicts


class _Collector:
    """A pytest plugin object: gathers one :class:`Verdict` per test and prints it as it lands."""

    def __init__(self, started: float, repro_dir: Path | None = None, one_target: bool = True) -> None:
        self.one_target = one_target  # False (the matrix): no line is held or said an echo, across targets it means nothing
        self.verdicts: list[Verdict] = []
        self.started = started
        self.repro_dir = repro_dir
        self.repros_shown: set[str] = set()
        self.waivers_met: set[str] | None = None  # None: no conformance test reported (the plugin's WaiverUse, for the card)
        self.judged: list[str] = []  # the oracles that failed a test so far, in the order their FAIL lines came
        # A crash's FAIL line waits for the small machines' verdicts, at most HOLD_SECONDS: they name a
        # cause in a few calls but print it after shrinking, and a crash elsewhere is often that
        # cause's echo; a crash that is the bug itself (a RecursionError) is not held back for long.
        self.machines_pending: set[str] | None = None  # the small-machine tests not yet reported; None: not known yet
        self.held: list[tuple[float, Verdict]] = []  # (when it came, the verdict)
        self.held_repros: dict[str, list[str]] = {}  # a held test's repro lines

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:  # in process (-n 0)
        self._expect([item.nodeid for item in items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:  # under pytest-xdist
        self._expect(ids)

    def _expect(self, nodeids: list[str]) -> None:
        if self.machines_pending is None:
            self.machines_pending = {i.rpartition("::")[2] for i in nodeids if i.rpartition("::")[2].startswith(SMALL_MACHINES)}

    def pytest_sessionfinish(self) -> None:
        self._release_held()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._add(Verdict(report.nodeid or "collection", "failed", 0.0, "collection error", str(report.longrepr)[-2000:]))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._release_held(older_than=HOLD_SECONDS)
        repro = dict(report.user_properties).get("radixcheck_repro")
        if report.when == "teardown" and repro:  # a failing test's repro file, written after its verdict
            self._add_repro(report.nodeid.rpartition("::")[2], dict(repro))
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            props = {k.removeprefix("radixcheck_"): v for k, v in report.user_properties if k.startswith("radixcheck_")}
            if WAIVERS_MET in dict(report.user_properties):
                self.waivers_met = (self.waivers_met or set()) | set(dict(report.user_properties)[WAIVERS_MET])
            outcome, reason = report.outcome, props.get("reason", "")
            if str(getattr(report, "wasxfail", "")).startswith(WAIVED_PREFIX):  # failed, but only for waived findings
                outcome = "waived"
            elif report.skipped and isinstance(report.longrepr, tuple):
                reason = report.longrepr[2].removeprefix("Skipped: ")
                reason = LEFT_OUT if reason == production_not_run(NO_PRODUCTION) else reason  # the audit's own option
            if report.failed and not props:  # a failure outside the test body: an error in setup
                props = {"oracle": "error", "reason": str(report.longrepr).strip().splitlines()[-1][:300]}
            self._add(Verdict(report.nodeid.rpartition("::")[2], outcome, round(report.duration, 2),
                              props.get("oracle", ""), reason or props.get("reason", ""), props.get("program", ""),
                              list(props.get("exceptions", [])), list(props.get("waived", [])), layers=props.get("layers", {})))

    def _add(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)
        machine = bool(self.machines_pending) and verdict.test in self.machines_pending
        if machine:  # its verdict is in, whatever it is: a machine's own crash must not wait for itself
            self.machines_pending.discard(verdict.test)
        if verdict.outcome == "failed" and verdict.oracle.startswith("crash") and self.machines_pending and self.one_target:
            self.held.append((time.monotonic(), verdict))
            return
        self._print(verdict)
        if machine and not self.machines_pending:
            self._release_held()

    def _release_held(self, older_than: float = 0.0) -> None:
        now = time.monotonic()
        released = [v for since, v in self.held if now - since >= older_than]
        self.held = [(since, v) for since, v in self.held if now - since < older_than]
        for verdict in released:
            self._print(verdict)
            for line in self.held_repros.pop(verdict.test, []):
                print(f"[{time.monotonic() - self.started:6.1f} s] {line}", flush=True)

    def _print(self, verdict: Verdict) -> None:
        mark = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip", "waived": "waiv"}[verdict.outcome]
        detail = f"  {verdict.oracle}: {verdict.reason}" if verdict.outcome == "failed" else (
            f"  {verdict.reason}" if verdict.outcome == "skipped" else "")
        if verdict.outcome == "failed" and verdict.oracle.startswith("crash") and self.judged and self.one_target:
            detail += f"  (possibly an echo of {self.judged[0]}, FAIL above)"  # the final summary ranks it so
        elif verdict.outcome == "failed" and verdict.oracle and not verdict.oracle.startswith(NOT_AN_ORACLE):
            self.judged.append(verdict.oracle)
        if verdict.waived:
            by_oracle = ", by oracle, not re-judged"  # an as line met in the tier production world
            detail += "  (waived: " + ", ".join(f"{w['oracle']}{known_deviation(w)}{by_oracle if w.get('not_rejudged') else ''} "
                                              f"({w['waiver']})" for w in verdict.waived) + ")"
        print(f"[{time.monotonic() - self.started:6.1f} s] {mark} {verdict.test} ({verdict.seconds:.1f} s){detail}", flush=True)

    def _add_repro(self, test: str, repro: dict[str, Any]) -> None:
        """A failing test's repro (the plugin wrote the file, one per finding): kept with its verdict, shown once."""
        if repro.pop("text", None) and self.repro_dir is not None:  # the file has it; the card and the JSON name the file
            repro["path"] = str(self.repro_dir / (repro.get("name") or file_name(repro["oracle"], repro["message"])))
        for verdict in self.verdicts:
            if verdict.test == test:
                verdict.repro = repro
        path = repro.get("path")
        if not path and str(repro.get("why_not", "")).startswith(NOT_OFFERED):  # written, run, and it did not show the finding
            print(f"radixcheck: no repro file for {repro.get('oracle', 'a finding')} in {test}: {repro['why_not']}",
                  file=sys.stderr, flush=True)
        if path and path not in self.repros_shown:
            self.repros_shown.add(path)
            line = f"repro {path} ({repro.get('size', '')})"
            if any(v.test == test for _, v in self.held):  # after its FAIL line, when that is released
                self.held_repros.setdefault(test, []).append(line)
            else:
                print(f"[{time.monotonic() - self.started:6.1f} s] {line}", flush=True)


def tier_lines(target: Target, production: bool = True) -> tuple[str, str]:
    """For a tier target, the card's "Write policies" and "Worlds" lines: the policies run (each at
    every page size) and the undeclared ones never sent; the worlds: the tier machine's small ones
    and the bounded production-scale one (``radixcheck.properties.tiers.scale``), or that it was
    left out (``production=False``: ``--no-production``)."""
    if target.kind != "tier":
        return "", ""
    from radixcheck.properties.tiers.contract import WRITE_POLICIES

    run = target.capabilities.write_policies
    left = [p for p in WRITE_POLICIES if p not in run]
    policies = f"run {', '.join(run)} (each at every page size)" + (
        f"; not declared, so never sent: {', '.join(left)}" if left else "")
    from radixcheck.properties.tiers.scale import MASS_EVICTION_LEAVES, WIDE_REQUESTS, conversation_turns

    smallest = min(target.capabilities.page_sizes_tested(), default=1)
    if not production:
        return policies, ("the tier machine's small worlds (many short programs, in each write policy at each page size); "
                          f"the tier production world: not run ({NO_PRODUCTION_OPTION})")
    worlds = ("the tier machine's small worlds (many short programs, in each write policy at each page size), and the "
              f"tier production world at page size {smallest}: in each write policy a wide tree of {WIDE_REQUESTS} requests "
              f"then one evict of everything on device (at least {MASS_EVICTION_LEAVES} leaves), and in {run[0]} a "
              f"conversation {conversation_turns(target.capabilities)} pages deep, each call under the per-operation limit "
              "(longer random traffic: "
              f"`python -m radixcheck.reports.tier_scale --target {target.spec}`)")
    return policies, worlds


IDLE_CORES_FOR_WORKERS = 1.5
"""``-n auto`` starts pytest-xdist's workers only when about two cores are idle. Each worker pays the
session's start-up (Python, pytest, Hypothesis, the suite: ~0.5 s of CPU) before its first test, and
on a busy machine two tests at once each run at a fraction of a core: on 2 cores at a load average
of 7-10, a tier cache's first FAIL came at 10.5 s in process against 18.6 s with workers, and a
conforming tier cache's whole audit took 62 s against 78 s (reports/findings/composed_trial.md).
In process, a target that crashes the interpreter (a native extension's segfault) ends the audit
with no verdict, where a worker's crash would be reported: ``-n 2`` keeps workers on a busy machine."""


def workers_for(asked: str, cores: int | None = None, load: float | None = None) -> tuple[str, str]:
    """``-n`` as the audit runs it, and why when ``auto`` chose to stay in process ("" otherwise): a
    number as asked; ``auto``: pytest-xdist's one worker per core when at least
    :data:`IDLE_CORES_FOR_WORKERS` cores are idle (the cores this process may use, less the
    1-minute load average), else in process (``"0"``). The verdicts do not depend on it."""
    if asked != "auto":
        return asked, ""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if load is None:
        if not hasattr(os, "getloadavg"):  # no load average to read (Windows): pytest-xdist's own auto
            return asked, ""
        load = os.getloadavg()[0]
    if cores - load >= IDLE_CORES_FOR_WORKERS:
        return asked, ""
    return "0", (f"in process: -n auto starts workers only with about 2 idle cores, and the load average is {load:.1f} "
                 f"on {cores} core(s); -n N asks for N workers")


def run_audit(target: Target, page_sizes: str | None, profile: str, workers: str, waive: Path | None = None,
              repro: Path | None = None, seed: int | None = None, production: bool = True) -> AuditResult:
    """Run the conformance tests against ``target`` (already loaded and checked); ``waive``: a
    waiver file (already read once, so its errors are the caller's); ``repro``: a directory for a
    standalone repro file per finding; ``seed``: the stream to run (``--radix-seed``); ``production``:
    False leaves the production-scale worlds out (``--no-production``: a cache or a tier target only,
    :func:`~radixcheck.pytest_plugin.no_world_problem`), and the result says the run was partial."""
    started = time.monotonic()
    repro = Path(repro).resolve() if repro else None
    collector = _Collector(started, repro)
    args = ["--pyargs", CONFORMANCE, "--radix-target", target.spec, f"--hypothesis-profile={profile}", *SESSION_ARGS]
    if page_sizes:
        args += ["--radix-page-sizes", page_sizes]
    if waive:
        args += ["--radix-waive", str(Path(waive).resolve())]
    if repro:
        args += ["--radix-repro", str(repro)]
    if seed is not None:
        args += ["--radix-seed", str(seed)]
    if not production:
        args += [NO_PRODUCTION]
    if target.kind == "index" and not target.capabilities_declared:
        args += ["--radix-index"]
    if workers not in ("0", "1"):
        args += ["-n", workers, "--dist", "worksteal"]  # an idle worker takes queued tests from one busy with a long one
    with hypothesis_storage_in_cache():  # Hypothesis's .hypothesis/ goes to the user's cache, not their project
        exit_code = pytest.main(args, plugins=[collector])
    # read from the path the plugin was given, so each names the same file:line as "waived by"
    unmatched_waivers = ([unmatched_warning(w) for w in unmatched(read_waivers(Path(waive).resolve()), collector.waivers_met)]
                         if waive and collector.waivers_met is not None else [])
    result = AuditResult(target.spec, repr(target.declared_capabilities()), target.capabilities.not_exercised(), profile,
                         sorted(collector.verdicts, key=lambda v: v.test), round(time.monotonic() - started, 1),
                         int(exit_code), [w for w in [target.defaults_warning()] if w], unmatched_waivers,
                         target.page_sizes_shown(), target.capabilities.tenant_isolation(), seed,
                         *tier_lines(target, production))
    result.cost = cost_line(target, production)
    result.layers_declared = declared_layers(target.capabilities, tier=target.kind == "tier") if target.kind in ("cache", "tier") else []
    result.server = server_line(target)
    result.production_worlds = ("run" if production else LEFT_OUT) if target.kind in WORLD_KINDS else ""
    for path in one_file_per_finding(result) if repro else ():
        print(f"radixcheck: removed {path}: the same root cause as a finding whose repro file the card cites", flush=True)
    return result


def server_line(target: Target) -> str:
    """A wire target's server: the command the audit ran and the name its ``init`` reply gave. The
    target is the same (``...adapters.wire:server``) for every server, so without this line two
    servers' cards, or a bug's and its fix's, could not be told apart."""
    from radixcheck.properties.adapters.wire import WireFactory

    if not isinstance(target.factory, WireFactory):
        return ""
    connection = target.factory.connection()  # started already, to read its capabilities
    # A verdict of "conforms" covers what the server could declare: say what the protocol cannot carry, so its
    # owner does not read it as covering those (reports/findings/other_language_trial.md), and whether the host
    # tier was audited (a server without one declared is sent no tier op).
    tier = ("its host tier audited over the wire" if connection.tier_capabilities is not None
            else "no host tier declared, so none audited")
    requests = ("its own request methods audited over the wire" if connection.lifecycle == "requests"
                else "no request methods declared, so none audited")
    if connection.tier_capabilities is not None and connection.tier_capabilities.second_pool is not None:
        requests += f"; its second pool ({type(connection.tier_capabilities.second_pool).__name__}) audited over the wire"
    return (f"`{shlex.join(connection.command)}`, which names itself {connection.server_name!r} "
            f"({tier}; {requests}; {WIRE_CANNOT_CARRY}: not audited over the wire)")


WIRE_CANNOT_CARRY = "a second pool without a host tier"
"""What the wire protocol cannot carry (docs/how-to/other-languages.md, "Which layers a wire server can declare")."""


def cost_line(target: Target, production: bool = True) -> str:
    """The card's "Cost at scale" line: where the cost the audit cannot judge is measured. An index's
    or a tenant tree's worlds hold tens of prompts, so a lookup or an eviction that scans passes them;
    a cache's production world judges the CPU time of its matches and inserts only (the step-cost
    watch), and of a wire server none (it computes in its own process). ``radixcheck bench``
    measures each (a wire trial's O(n) ``evictable_size`` passed its audit, and no card said so)."""
    bench = f"`radixcheck bench {target.spec}`"
    grows = "and flags one that grows about linearly"
    if target.kind in ("index", "tenant_tree"):
        ops = {"index": "apply_event (stored, removed) and find_matches", "tenant_tree": "insert, match and evict"}[target.kind]
        return f"not measured here (the audit's worlds hold tens of prompts); {bench} measures how the cost of {ops} grows " \
               f"with the world, {grows}"
    if target.kind not in ("cache", "tier"):
        return ""
    from radixcheck.properties.adapters.wire import CMD_ENV, WireFactory

    if target.kind == "tier":  # the bench's tier trees: each tree's progress line gives CPU time beside wall time
        grows += ", each tree's line giving its CPU time beside its wall time"
        unjudged = "the size calls (device_size, host_size), evict, evict_host, load_back and evict_prefix"
        world = "the tier production world's wide tree"
    else:
        unjudged = "the size calls, evict and evict_prefix"
        world = "the production world"

    if isinstance(target.factory, WireFactory):
        run = f"`{CMD_ENV}=... radixcheck bench {target.spec}` (the same server)" if target.factory.from_environment else bench
        return (f"not judged here: the wire server computes in its own process, whose CPU time the production world's step-cost "
                f"watch does not see; {run} measures how the cost of each operation grows with the cache, counting the "
                f"server's CPU time, {grows} (a round trip costs more than a call in process: give it `--max-seconds 300` "
                f"if its table stops short of 100,008 tokens)")
    if not production:
        return (f"not judged in this run ({LEFT_OUT}, and with it the step-cost watch on match_prefix and insert): "
                f"{bench} measures how the cost of each operation grows with the cache, {grows}")
    return (f"{world} judges match_prefix and insert (`S step cost`); {unjudged} are "
            f"not judged here: {bench} measures how the cost of each operation grows with the cache, {grows}")


def _isolation_line_says_more(result: AuditResult) -> bool:
    """Whether the card's "Tenant isolation" line adds to the not-exercised list: not when that list
    already says isolation was not exercised (one fact, said once)."""
    if not result.tenant_isolation:
        return False
    said = any(gap.startswith("tenant isolation (") for gap in result.not_exercised)
    return not (said and result.tenant_isolation.startswith("not exercised"))


def report_card(result: AuditResult) -> str:
    """The audit as markdown."""
    findings, waived = result.findings, result.waived
    verdict = (f"conforms{in_part(result)}{with_waived(waived)}{not_checked(result)}" if result.conforms else
               f"**does not conform**: {len(findings)} finding(s) in {len(result.failures)} failing test(s){with_waived(waived)}"
               + (" (a partial run)" if result.partial else ""))
    rows = [[f"`{v.test}`", {"passed": "pass", "failed": "**FAIL**", "skipped": "skip", "waived": "waived"}[v.outcome],
             v.oracle or v.reason, f"{v.seconds:.1f}"] for v in result.verdicts]
    parts = [
        f"# radixcheck audit: `{result.target}`",
        "",
        f"Verdict: {verdict}, in {result.seconds:.0f} s (Hypothesis profile `{result.profile}`"
        + ("" if result.seed is None else f", seed {result.seed}") + "; "
        f"per-operation limit {op_timeout():g} s, shrink budget {_shrink_budget(result)}).",
        "",
        f"Capabilities: `{result.capabilities}`",
        "",
        *([f"Wire server: {result.server}", ""] if result.server else []),
        *([f"Page sizes: {result.page_sizes}", ""] if result.page_sizes else []),
        *([f"Write policies: {result.write_policies}", ""] if result.write_policies else []),
        *([f"Worlds: {result.worlds}", ""] if result.worlds else []),
        *([f"Production-scale worlds: not run ({NO_PRODUCTION_OPTION}): the verdict covers the small worlds only; an audit "
           f"without {NO_PRODUCTION_OPTION} builds them too.", ""] if result.partial else []),
        *([f"Tenant isolation: {result.tenant_isolation}", ""] if _isolation_line_says_more(result) else []),
        *[f"**Warning:** {w}\n" for w in result.warnings + result.unmatched_waivers],
        "Not exercised, by capability (never sent, so never failed):",
        "",
        *([f"- {gap}" for gap in result.not_exercised] or ["- nothing"]),
        "",
        *layers_section(result.layers_driven, failed=bool(result.failures)),
        *([f"Cost at scale: {result.cost}", ""] if result.cost else []),
        tabulate(rows, headers=["property", "verdict", "oracle / skip reason", "seconds"], tablefmt="github"),
    ]
    if findings:
        parts += ["", "## Findings, most fundamental first (one per root cause)"]
        parts += ["", said] if (said := grouping(result)) else []
    for i, f in enumerate(findings, 1):
        parts += ["", f"### {i}. {f.oracle} ({f.heading})", "", f"{f.exception + ': ' if f.exception else ''}{f.reason}"
                  + (f" (raised at `{f.raised_at}`)" if f.raised_at else ""), "",
                  f"Failed {len(f.tests)} test(s): " + ", ".join(f"`{t}`" for t in f.tests), "",
                  *([same_root_cause(f), *[f"- {other}" for other in f.also], ""] if f.also else []),
                  *([f"Repro: `{f.repro}`" if not f.repro.startswith("(") else f"Repro: {f.repro}", ""] if f.repro else []),
                  *([f"Note: {shrink_note(f)}", ""] if f.shrink else []),
                  "```python", f.program or "(no program: the test failed outside a Hypothesis run)", "```"]
    if waived:
        parts += ["", "## Waived findings (--waive)", ""]
        parts += [f"- {w['oracle']} ({w['type']}){known_deviation(w)}: {w['message']} — waived by {w['waiver']}; met in "
                  + ", ".join(f"`{t}`" for t in w["tests"]) + cut_short(w) + not_rejudged(w) + shapes_waived(w) for w in waived]
    return "\n".join(parts) + "\n"


def shrink_note(finding: Finding) -> str:
    """A finding's note that its shrink ran out of time, and what that says of its repro file: nothing bad
    (the file is that program reduced further on its own, and ran failing). Printed alone beside a 5-call
    repro, the note read as if the file were the long one (reports/findings/after_verdict_trial.md)."""
    said = finding.shrink[0].upper() + finding.shrink[1:] + "."
    if _is_file(finding.repro):
        said += (" The repro file is not that program: it was reduced further on its own, exits 1 on this finding as "
                 "radixcheck ran it, and its header says whether its own reduction finished.")
    return said


def known_deviation(waived: dict[str, Any]) -> str:
    """The known order bug a ``known:`` waiver named, which explained the finding (its JSON's ``known_deviation``)."""
    return f", known_deviation {waived['known_deviation']}" if waived.get("known_deviation") else ""


def same_root_cause(finding: Finding) -> str:
    """The line before a finding's merged ones (:func:`by_root_cause`)."""
    return (f"Same root cause ({len(finding.also)} more finding(s): each one's reduced program, replayed, "
            "shows this one and this one's shows it):")


def cut_short(waived: dict[str, Any]) -> str:
    """What a waived finding left unbuilt of a production world (the verdict does not cover it)."""
    return f" — {waived['cut_short']}: the verdict does not cover it" if waived.get("cut_short") else ""


def shapes_waived(waived: dict[str, Any]) -> str:
    """A line that names an oracle alone and waived findings of several shapes: said beside each."""
    return f" — {waived['shapes_waived']}" if waived.get("shapes_waived") else ""


def not_rejudged(waived: dict[str, Any]) -> str:
    """An ``as`` waiver that matched a tier production world's finding by its oracle alone
    (:meth:`~radixcheck.properties.findings.waivers.WaiverLog.at_scale`): the reader must know."""
    return f" — {waived['not_rejudged']}" if waived.get("not_rejudged") else ""


def with_waived(waived: list[dict[str, Any]]) -> str:
    return f", with {len(waived)} waived finding(s)" if waived else ""


def in_part(result: AuditResult) -> str:
    """A passing verdict of a run that left its production-scale worlds out says so, in its own words:
    never a plain "conforms"."""
    return f" in a partial run (production-scale worlds not run: {NO_PRODUCTION_OPTION})" if result.partial else ""


def not_checked(result: AuditResult) -> str:
    """A passing verdict repeats what it did not cover: it is a verdict on the rest only."""
    return f"; not checked: {result.not_checked}" if result.not_checked else ""


def write_outputs(result: AuditResult, report: Path | None, json_path: Path | None) -> None:
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(report_card(result), encoding="utf-8")
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        payload: dict[str, Any] = asdict(result) | {"conforms": result.conforms, "partial": result.partial,
                                                    "layers_driven": result.layers_driven.as_json(),
                                                    "findings": [asdict(f) for f in result.findings], "waived": result.waived}
        json_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def _page_sizes(finding: Finding) -> frozenset[int]:
    """The page sizes of the tests a finding failed (empty if any of them has none: a plain test)."""
    sizes = [param.rpartition("page_size=")[2].rstrip("]") for param in finding.tests]
    return frozenset(int(s) for s in sizes) if all(s.isdigit() for s in sizes) else frozenset()


def _apart(findings: list[Finding]) -> str:
    """The pairs of findings met at different page sizes only, said ("1 and 2 (page size 1 against 2)"), or ""."""
    sizes = [_page_sizes(f) for f in findings]
    pairs = [(i, j) for i in range(len(findings)) for j in range(i + 1, len(findings))
             if sizes[i] and sizes[j] and not sizes[i] & sizes[j]]
    return ", ".join(f"{i + 1} and {j + 1} (page size {'/'.join(map(str, sorted(sizes[i])))} against "
                     f"{'/'.join(map(str, sorted(sizes[j])))})" for i, j in pairs)


def page_sizes_apart(findings: list[Finding]) -> str:
    """What two findings met at different page sizes only do not say: that they are separate causes.
    A program is judged at its own page size only, and replaying it at the other finding's would
    not tell one bug that reads differently at each page size from two bugs of one page size each:
    a load-back that restores no window at page size 1 and one that restores a page's window reversed
    at page size 2 show each other's finding both ways, and fixing one leaves the other
    (``meta_tests/test_root_cause.py``). So the card says they may share a cause, and leaves them apart."""
    said = _apart(findings)
    if not said:
        return ""
    return (f"Findings {said} were met at different page sizes only: a program is judged at its own page size, so "
            "they may share one root cause (a bug can read differently at each page size) or be two; fixing one shows which.")


ONE_THREAD = "on one thread: the threads' calls fail run one after another"
"""How a tenant tree's threaded finding says it needs no second thread (``tenant_tree.machine.ONE_THREAD_NOTE``)."""


def one_thread_apart(findings: list[Finding]) -> str:
    """What a tenant tree's threaded finding that fails on one thread too does not say when it reads
    unlike the machine's: that it may be the machine's bug, met in other calls (the two are grouped
    by shape only, and a round's calls are not the machine's program)."""
    machine = [i + 1 for i, f in enumerate(findings) if "test_tenant_tree_state_machine" in f.tests]
    threaded = [i + 1 for i, f in enumerate(findings) if ONE_THREAD in f.reason and i + 1 not in machine]
    if not machine or not threaded:
        return ""
    mine, theirs = (", ".join(map(str, n)) for n in (threaded, machine))
    return (f"Finding(s) {mine} (the threaded test's) fail on one thread too, so they are bugs of one thread, as the "
            f"machine's finding(s) {theirs} are: they may share one root cause or be two; fixing {theirs} shows which.")


def grouping(result: AuditResult) -> str:
    """The one sentence above several findings the grouping could not tell apart from one cause:
    those met at different page sizes only (:func:`page_sizes_apart`), else a tenant tree's threaded
    finding beside its machine's (:func:`one_thread_apart`). A tier target's findings have none of
    their own: with ``--repro`` its programs are replayed past their failures and grouped by root
    cause as a cache's are (:func:`~radixcheck.properties.tiers.repro.shown_by_tier`); the card said
    they were grouped by shape only after that had stopped being so."""
    return page_sizes_apart(result.findings) or one_thread_apart(result.findings)


def print_summary(result: AuditResult) -> None:
    print()
    findings, waived = result.findings, result.waived
    if said := grouping(result):
        print(f"radixcheck: {said}")
    for i, f in enumerate(findings, 1):
        print(f"--- finding {i} of {len(findings)} ({f.heading}): {f.oracle}\n"
              f"{f.exception + ': ' if f.exception else ''}{f.reason}{f' (raised at {f.raised_at})' if f.raised_at else ''}\n"
              f"failed {len(f.tests)} test(s): {', '.join(f.tests)}\n"
              + "".join(f"{line}\n" for line in ([same_root_cause(f)] + [f"- {other}" for other in f.also] if f.also else []))
              + (f"repro: {f.repro}\n" if f.repro else "")
              + (f"note: {shrink_note(f)}\n" if f.shrink else "")
              + f"{f.program}\n", file=sys.stdout)
    for w in waived:
        print(f"--- waived: {w['oracle']} ({w['type']}){known_deviation(w)}: {w['message']}\n"
              f"waived by {w['waiver']}; met in {', '.join(w['tests'])}{cut_short(w)}{not_rejudged(w)}{shapes_waived(w)}\n",
              file=sys.stdout)
    for warning in result.unmatched_waivers:
        print(f"radixcheck: warning: {warning}", file=sys.stderr, flush=True)
    if gaps := gaps_line(result.layers_driven):
        print(f"radixcheck: {gaps}")
    if result.conforms:
        print(f"radixcheck: {result.target} conforms{in_part(result)}{with_waived(waived)}{not_checked(result)} "
              f"({len(result.verdicts)} checks, {result.seconds:.0f} s)")
    else:
        print(f"radixcheck: {result.target} does NOT conform: {len(findings)} finding(s) in {len(result.failures)} failing "
              f"test(s) ({', '.join(dict.fromkeys(f.oracle for f in findings))}){with_waived(waived)}"
              f"{'; a partial run: ' + LEFT_OUT if result.partial else ''}; {result.seconds:.0f} s")
