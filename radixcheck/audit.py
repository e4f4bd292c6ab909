"""``radixcheck audit module:factory``: the conformance tests against one cache, with a verdict.

It checks the target first (one clear error if it cannot be tested at all), then runs the
conformance tests (``radixcheck.properties.conformance``) through pytest and pytest-xdist,
printing each verdict as it arrives, and writes a report card: the target and its capabilities,
what was not exercised and why, a verdict per property and page size, and for each failure the
oracle, its reason and the shrunk program.

Exit codes: 0 the cache conforms, 1 it does not, 2 usage or load error.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tabulate import tabulate

from radixcheck.cache_dir import hypothesis_storage_in_cache
from radixcheck.properties.target import Target, op_timeout
from radixcheck.properties.verdict import shrink_seconds

CONFORMANCE = "radixcheck.properties.conformance"
EXIT_CONFORMS, EXIT_NONCONFORMING, EXIT_USAGE = 0, 1, 2


@dataclass
class Verdict:
    """One conformance test at one page size."""

    test: str  # e.g. test_cache_state_machine[page_size=16]
    outcome: str  # passed | failed | skipped
    seconds: float
    oracle: str = ""
    reason: str = ""
    program: str = ""


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

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.outcome == "failed"]

    @property
    def conforms(self) -> bool:
        return self.pytest_exit in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) and not self.failures


class _Collector:
    """A pytest plugin object: gathers one :class:`Verdict` per test and prints it as it lands."""

    def __init__(self, started: float) -> None:
        self.verdicts: list[Verdict] = []
        self.started = started

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._add(Verdict(report.nodeid or "collection", "failed", 0.0, "collection error", str(report.longrepr)[-2000:]))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            props = {k.removeprefix("radixcheck_"): v for k, v in report.user_properties if k.startswith("radixcheck_")}
            reason = props.get("reason", "")
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = report.longrepr[2].removeprefix("Skipped: ")
            if report.failed and not props:  # a failure outside the test body: an error in setup
                props = {"oracle": "error", "reason": str(report.longrepr).strip().splitlines()[-1][:300]}
            self._add(Verdict(report.nodeid.rpartition("::")[2], report.outcome, round(report.duration, 2),
                              props.get("oracle", ""), reason or props.get("reason", ""), props.get("program", "")))

    def _add(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)
        mark = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}[verdict.outcome]
        detail = f"  {verdict.oracle}: {verdict.reason}" if verdict.outcome == "failed" else (
            f"  {verdict.reason}" if verdict.outcome == "skipped" else "")
        print(f"[{time.monotonic() - self.started:6.1f} s] {mark} {verdict.test} ({verdict.seconds:.1f} s){detail}", flush=True)


def run_audit(target: Target, page_sizes: str | None, profile: str, workers: str) -> AuditResult:
    """Run the conformance tests against ``target`` (already loaded and checked)."""
    started = time.monotonic()
    collector = _Collector(started)
    args = ["--pyargs", CONFORMANCE, "--radix-target", target.spec, f"--hypothesis-profile={profile}",
            "-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:randomly", "-o", "addopts="]
    if page_sizes:
        args += ["--radix-page-sizes", page_sizes]
    if workers not in ("0", "1"):
        args += ["-n", workers]
    with hypothesis_storage_in_cache():  # Hypothesis's .hypothesis/ goes to the user's cache, not their project
        exit_code = pytest.main(args, plugins=[collector])
    return AuditResult(target.spec, repr(target.capabilities), target.capabilities.not_exercised(), profile,
                       sorted(collector.verdicts, key=lambda v: v.test), round(time.monotonic() - started, 1), int(exit_code),
                       [w for w in [target.defaults_warning()] if w])


def report_card(result: AuditResult) -> str:
    """The audit as markdown."""
    verdict = "conforms" if result.conforms else f"**does not conform** ({len(result.failures)} failing)"
    rows = [[f"`{v.test}`", {"passed": "pass", "failed": "**FAIL**", "skipped": "skip"}[v.outcome], v.oracle or v.reason,
             f"{v.seconds:.1f}"] for v in result.verdicts]
    parts = [
        f"# radixcheck audit: `{result.target}`",
        "",
        f"Verdict: {verdict}, in {result.seconds:.0f} s (Hypothesis profile `{result.profile}`; "
        f"per-operation limit {op_timeout():g} s, shrink budget {shrink_seconds():g} s).",
        "",
        f"Capabilities: `{result.capabilities}`",
        "",
        *[f"**Warning:** {w}\n" for w in result.warnings],
        "Not exercised, by capability (never sent, so never failed):",
        "",
        *([f"- {gap}" for gap in result.not_exercised] or ["- nothing"]),
        "",
        tabulate(rows, headers=["property", "verdict", "oracle / skip reason", "seconds"], tablefmt="github"),
    ]
    for v in result.failures:
        program = v.program or "(no program: see the pytest output)"
        parts += ["", f"## `{v.test}` — {v.oracle}", "", v.reason, "", "```python", program, "```"]
    return "\n".join(parts) + "\n"


def write_outputs(result: AuditResult, report: Path | None, json_path: Path | None) -> None:
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(report_card(result), encoding="utf-8")
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        payload: dict[str, Any] = asdict(result) | {"conforms": result.conforms}
        json_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def print_summary(result: AuditResult) -> None:
    print()
    for v in result.failures:
        print(f"--- {v.test}: {v.oracle}\n{v.reason}\n{v.program}\n", file=sys.stdout)
    if result.conforms:
        print(f"radixcheck: {result.target} conforms ({len(result.verdicts)} checks, {result.seconds:.0f} s)")
    else:
        print(f"radixcheck: {result.target} does NOT conform: {len(result.failures)} failing "
              f"({', '.join(sorted({v.oracle for v in result.failures}))}); {result.seconds:.0f} s")
