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
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from radixcheck.provenance import commit, run_stamp
from radixcheck.reports.machine import cpu_line
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


@dataclass(frozen=True)
class SavedCatalogue:
    """What tells one catalogue's saved files and rows apart from another's: where it is saved,
    how its rows are named and ordered, and how it renders. Its ``save`` is every catalogue's
    end of a run, ``--only`` or not."""

    regenerate: str  # the command, "python -m radixcheck.reports.tier_catalogue"
    markdown: str  # "TIER_CATALOGUE.md"
    artifact: str  # "tier_catalogue.json", under artifacts/
    mutant_order: list[str]
    mutant_key: Callable[[Row], str]
    variant_order: list[Any]
    variant_key: Callable[[Row], Any]
    seconds_column: str  # the markdown's time column: "time to kill (s)"
    seconds_field: str  # a mutant row's field for it (left out of the JSON, to keep diffs to verdicts)
    render: Callable[[list[Row], list[Row], dict[str, Any]], str]
    streams_of: Callable[[Row], int] = lambda row: row["streams"] if row.get("kills") is not None else 0

    def artifact_path(self, out: Path) -> Path:
        return out / "artifacts" / self.artifact

    def saved_streams(self, out: Path) -> int:
        """The most streams a saved row's kill rate is over (0 with none saved): a run with fewer is weaker."""
        try:
            saved = json.loads(self.artifact_path(out).read_text(encoding="utf-8"))
            return max((self.streams_of(r) for r in saved["mutants"]), default=0)
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    def merged(self, rows: list[Row], variants: list[Row], out: Path) -> tuple[list[Row], list[Row], list[Run]]:
        """The saved catalogue's rows with the fresh ``rows`` and ``variants`` in place of theirs
        (in the catalogue's order), and the saved runs the rows came from. A kept mutant row's
        time comes from the saved markdown."""
        saved = json.loads(self.artifact_path(out).read_text(encoding="utf-8"))
        text = (out / self.markdown).read_text(encoding="utf-8")
        all_rows = in_order(rows, saved["mutants"], self.mutant_order, self.mutant_key,
                            kept_seconds(text, "Mutants", self.seconds_column), self.seconds_field)
        all_variants = in_order(variants, saved["variants"], self.variant_order, self.variant_key)
        names = [self.mutant_key(r) for r in saved["mutants"]] + list(dict.fromkeys(x["variant"] for x in saved["variants"]))
        return all_rows, all_variants, saved_runs(saved, text, names)

    def save(self, out: Path, args: argparse.Namespace, started: float, rows: list[Row], variants: list[Row],
             stamp: dict[str, Any] | None = None) -> None:
        """Write the markdown and the JSON of a run begun at ``started`` (``time.perf_counter``) and stamped
        ``stamp`` then (:func:`~radixcheck.provenance.run_stamp`; now, if none)
        with ``args`` (``streams``, ``variant_streams``, ``only``); an ``--only`` run keeps the
        other rows from the saved catalogue. Prints the report above its reproductions."""
        only = "".join(f" --only {n}" for n in args.only)
        meta: dict[str, Any] = {
            **(stamp or run_stamp()),
            "command": f"{self.regenerate} --streams {args.streams} --variant-streams {args.variant_streams}{only}",
            "seconds": time.perf_counter() - started,
            "machine": f"{cpu_line()}, {os.cpu_count()} cores, load average "
                       f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end"}
        measured = [self.mutant_key(r) for r in rows] + list(dict.fromkeys(x["variant"] for x in variants))
        this_run = {"commit": commit() or "(no checkout)", **meta, "rows": measured}
        meta["runs"] = [this_run]
        if args.only:
            rows, variants, earlier = self.merged(rows, variants, out)
            meta["runs"] = runs_after(this_run, earlier)
        (out / "artifacts").mkdir(parents=True, exist_ok=True)
        text = self.render(rows, variants, meta)
        (out / self.markdown).write_text(text + "\n", encoding="utf-8")
        stable = {"mutants": [{k: val for k, val in r.items() if k != self.seconds_field} for r in rows],
                  "variants": [{k: x[k] for k in x if k != "seconds"} for x in variants], "runs": meta["runs"]}
        self.artifact_path(out).write_text(json.dumps(stable, indent=2) + "\n", encoding="utf-8")
        print(text.split("## Minimal")[0])
