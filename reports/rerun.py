"""Re-running some rows of a catalogue (``--only NAME``): the fresh rows take the place of the
saved ones, in the catalogue's order, and the report lists the runs its rows come from, each row
credited to the newest run that measured it. One mechanism for the tier, tenant-tree and index
catalogues.

A run's record: ``{"commit", "command", "seconds", "machine", "rows"}``; the saved JSON keeps the
list under ``"runs"``, newest first. A catalogue saved before it kept one is read as one run, from
its markdown's header line.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tabulate import tabulate

from radixcheck.reports.report_rows import _tables

Row = dict[str, Any]
Run = dict[str, Any]


def add_only(parser: argparse.ArgumentParser, what: str) -> None:
    """The ``--only NAME`` option (repeatable); ``what`` names a row: "mutant or correct tree"."""
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help=f"re-run only this {what} (repeatable); the other rows are kept from the saved catalogue")


def check_only(parser: argparse.ArgumentParser, only: list[str], known: list[str], what: str, saved: Path) -> None:
    """Exit 2 with one line if a name in ``only`` is no row of the catalogue, or if there is no
    saved catalogue (``saved``: its JSON) for the other rows to come from."""
    unknown = [n for n in only if n not in known]
    if unknown:
        parser.error(f"--only {unknown[0]}: no such {what} (one of {', '.join(known)})")
    if only and not saved.is_file():
        parser.error(f"--only keeps the other rows from the saved catalogue, but there is none ({saved} is missing); "
                     "run without --only first")


def in_order(fresh: Iterable[Row], saved: Iterable[Row], order: list[Any], key: Callable[[Row], Any],
             seconds: dict[Any, float] | None = None, seconds_field: str = "seconds") -> list[Row]:
    """The rows in ``order`` (by ``key``), a fresh row in place of a saved one; a kept row's time
    comes from ``seconds`` (the saved markdown's, since the JSON leaves times out to keep diffs to
    verdicts), NaN if it has none there."""
    new = {key(r): r for r in fresh}
    old = {key(r): r for r in saved}
    if seconds is not None:
        old = {k: {**r, seconds_field: seconds.get(k, math.nan)} for k, r in old.items()}
    return [new.get(k) or old[k] for k in order if k in new or k in old]


def kept_seconds(markdown: str, section: str, column: str) -> dict[str, float]:
    """The time column ``column`` of the ``mutant`` table under ``## section``, by mutant name."""
    seconds: dict[str, float] = {}
    for at_section, header, cells in _tables(markdown):
        if at_section == section and "mutant" in header and column in header:
            name, when = header.index("mutant"), header.index(column)
            for row in cells:
                try:
                    seconds[row[name].strip("`")] = float(row[when])
                except (IndexError, ValueError):
                    continue
    return seconds


def legacy_run(markdown: str, rows: list[str]) -> Run:
    """The one run a catalogue saved without a runs list came from, read from its header line."""
    command = re.search(r"`(python -m [^`]+)`", markdown)
    timing = re.search(r" in (\d+) s \(([^()]*(?:\([^()]*\)[^()]*)*)\)", markdown)
    at = re.search(r"at commit `([^`]+)`", markdown.split("\n## ")[0])
    return {"commit": at.group(1) if at else "(not recorded)", "command": command.group(1) if command else "(not recorded)",
            "seconds": float(timing.group(1)) if timing else None, "machine": timing.group(2) if timing else "",
            "rows": rows}


def saved_runs(saved: dict[str, Any], markdown: str, rows: list[str]) -> list[Run]:
    """The runs a saved catalogue's ``rows`` come from: its JSON's list, else its header's one run."""
    return saved.get("runs") or [legacy_run(markdown, rows)]


def runs_after(this_run: Run, earlier: list[Run]) -> list[Run]:
    """This run first, then each earlier run with the rows this one re-ran taken out; a run with
    no row left is dropped (nothing in the catalogue comes from it any more)."""
    again = set(this_run["rows"])
    kept = [{**r, "rows": [n for n in r["rows"] if n not in again]} for r in earlier]
    return [this_run] + [r for r in kept if r["rows"]]


def runs_sentence(runs: list[Run]) -> str:
    """For the header: how many rows the command re-ran and where the others come from."""
    if len(runs) < 2:
        return ""
    return (f"That command re-ran {len(runs[0]['rows'])} row(s); the others are kept from {len(runs) - 1} earlier "
            "run(s), listed under \"Runs\" at the end. ")


def runs_table(runs: list[Run]) -> str:
    return tabulate([[f"`{r['commit']}`", f"`{r['command']}`",
                      f"{r['seconds']:.0f} s ({r['machine']})" if r.get("seconds") is not None else r.get("machine") or "(not recorded)",
                      ", ".join(f"`{n}`" for n in r["rows"])] for r in runs],
                    headers=["commit", "command", "time (machine)", "rows from this run"], tablefmt="github")


def runs_section(runs: list[Run]) -> list[str]:
    """The "## Runs" section's lines (none after a single full run)."""
    if len(runs) < 2:
        return []
    return ["## Runs", "", "The runs the rows above come from, newest first: each row is from the newest run that "
            "measured it (`--only` re-runs some rows and keeps the others).", "", runs_table(runs), ""]
