"""The bug catalogue, Wycheproof style: each public radix-cache bug class, the property that
catches it, the mutant of the reference that reproduces it, and how fast the `ci` profile kills it.

    python -m reports.catalogue            # writes reports/BUG_CATALOGUE.md and artifacts/catalogue.json

Time-to-kill is the wall time of the `ci` profile (derandomized) until the first failing example,
without shrinking; the minimal program shown is what Hypothesis prints after shrinking. Times are
noisy (shared machine); the verdicts and programs are deterministic.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from tabulate import tabulate

import conftest  # noqa: F401 - registers the suite's Hypothesis profiles
from meta_tests.mutants import MUTANTS, machine_for_mutant

HERE = Path(__file__).resolve().parent

# Which oracle a failure message comes from (the phrases are the oracles' own wording).
ORACLE_OF = [
    ("removed locked", "2 refcount safety"),
    ("protected_size", "2 refcount safety"),
    ("unmatched unlock", "2 refcount safety (unmatched unlock)"),
    ("stale", "2 refcount safety (stale handle)"),
    ("survived", "4 LRU order"),
    ("kept going", "4 LRU order (over-eviction)"),
    ("bad input", "bad input unchanged"),
    ("double free", "3 slot conservation"),
    ("should free", "3 slot conservation"),
    ("slots leaked", "3 slot conservation"),
    ("freed while still", "3 slot conservation"),
    ("never saw", "5 evict-equals-never-saw"),
    ("evict_prefix", "5 evict-equals-never-saw"),
    ("prefix_len", "1 prefix-set model (insert)"),
    ("match_prefix", "1 prefix-set model"),
]


def oracle_of(message: str) -> str:
    return next((name for phrase, name in ORACLE_OF if phrase in message), "other")


def _profile(shrink: bool) -> settings:
    ci = settings.get_profile("ci")
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(ci, phases=phases, report_multiple_bugs=False)


def _run(mutant: type, shrink: bool) -> tuple[float, BaseException | None]:
    machine = machine_for_mutant(mutant)
    start = time.perf_counter()
    try:
        run_state_machine_as_test(machine, settings=_profile(shrink))
    except Exception as exc:  # noqa: BLE001 - a kill is any failure; we report which oracle
        return time.perf_counter() - start, exc
    return time.perf_counter() - start, None


NOISE = ("state.sizes_add_up()", "state.slots_conserved()", "You can reproduce")


def _program(exc: BaseException) -> str:
    """Hypothesis's shrunk program, without the invariant checks it prints between steps."""
    lines = "\n".join(getattr(exc, "__notes__", [])).splitlines()
    return "\n".join(ln for ln in lines if ln.strip() and not ln.strip().startswith(NOISE))


def build() -> list[dict[str, Any]]:
    rows = []
    for mutant in MUTANTS:
        seconds, first = _run(mutant, shrink=False)
        _, shrunk = _run(mutant, shrink=True) if first else (0.0, None)
        message = str(shrunk or first or "").splitlines()[0] if (shrunk or first) else ""
        rows.append({
            "bug_class": mutant.bug_class,
            "sources": list(mutant.sources),
            "mutant": f"meta_tests.mutants:{mutant.__name__}",
            "what": " ".join((mutant.__doc__ or "").split()),
            "caught": first is not None,
            "oracle": oracle_of(message),
            "reason": message,
            "seconds_to_kill": round(seconds, 2),
            "minimal_program": _program(shrunk) if shrunk else "",
        })
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    killed = [r["seconds_to_kill"] for r in rows if r["caught"]]
    table = tabulate(
        [[r["bug_class"], "<br>".join(r["sources"]), f"`{r['mutant'].split(':')[1]}`", r["oracle"],
          "yes" if r["caught"] else "**NO**", f"{r['seconds_to_kill']:.2f}"] for r in rows],
        headers=["bug class", "source thread(s)", "mutant", "caught by oracle", "caught", "time to kill (s)"],
        tablefmt="github",
    )
    parts = [
        "# Bug catalogue",
        "",
        "Regenerate with `python -m reports.catalogue`. Each row is a class of bug seen in a real radix cache, "
        "reproduced as a one-idea mutant of the reference (`meta_tests/mutants.py`) and run through the "
        "conformance state machine under the `ci` Hypothesis profile (derandomized). *Time to kill* is the wall "
        "time to the first failing example, before shrinking — a noisy figure on a shared 2-core machine.",
        "",
        f"**{sum(r['caught'] for r in rows)} of {len(rows)} caught; median time to kill "
        f"{statistics.median(killed) if killed else float('nan'):.2f} s, max {max(killed) if killed else float('nan'):.2f} s.**",
        "",
        table,
        "",
        "## Minimal reproductions",
        "",
    ]
    for r in rows:
        parts += [f"### {r['bug_class']} — `{r['mutant']}`", "", r["what"], "", f"Reason: {r['reason']}", "",
                  "```python", r["minimal_program"] or "(not caught)", "```", ""]
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    rows = build()
    (args.out / "BUG_CATALOGUE.md").write_text(render(rows) + "\n", encoding="utf-8")
    (args.out / "artifacts").mkdir(exist_ok=True)
    stable = [{k: v for k, v in r.items() if k != "seconds_to_kill"} for r in rows]
    (args.out / "artifacts" / "catalogue.json").write_text(json.dumps(stable, indent=2) + "\n", encoding="utf-8")
    print(render(rows).split("## Minimal")[0])


if __name__ == "__main__":
    main()
