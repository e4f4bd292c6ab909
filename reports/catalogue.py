"""The bug catalogue, Wycheproof style: each public radix-cache bug class, the property that
catches it, the mutant of the reference that reproduces it, and how fast the `ci` profile kills it.

    python -m radixcheck.reports.catalogue              # writes reports/BUG_CATALOGUE.md and artifacts/catalogue.json
    python -m radixcheck.reports.catalogue --seeds 100  # kill rate over 100 random seeds (default 50)

Time-to-kill is the wall time of the `ci` profile (derandomized) until the first failing example,
without shrinking; the minimal program shown is what Hypothesis prints after shrinking. Times are
noisy (shared machine); the verdicts and programs are deterministic.

The derandomized `ci` run is one fixed stream of examples, so "caught" alone could be luck. The
*kill rate* reruns the same budget (100 examples x 50 steps, no shrinking) with N random seeds and
counts the runs that catch the mutant: it says how robust the catch is to the stream.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import conftest  # noqa: F401 - registers the suite's Hypothesis profiles
from hypothesis import seed, settings
from hypothesis.stateful import run_state_machine_as_test
from radixcheck.properties.mutants import MUTANTS, machine_for_mutant
from tabulate import tabulate

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
    """`audit` (ci's search, first bug, shrunk) or `mutation` (the same, unshrunk): conftest.py."""
    return settings.get_profile("audit" if shrink else "mutation")


def _run(mutant: type, shrink: bool) -> tuple[float, BaseException | None]:
    machine = machine_for_mutant(mutant)
    start = time.perf_counter()
    try:
        run_state_machine_as_test(machine, settings=_profile(shrink))
    except Exception as exc:  # noqa: BLE001 - a kill is any failure; we report which oracle
        return time.perf_counter() - start, exc
    return time.perf_counter() - start, None


def _killed_with_seed(job: tuple[str, int]) -> bool:
    """One ci-sized run of mutant ``name`` with a random-seeded (not derandomized) stream."""
    name, run_seed = job
    mutant = next(m for m in MUTANTS if m.__name__ == name)
    search = settings(_profile(shrink=False), derandomize=False, database=None)
    try:
        seed(run_seed)(lambda: run_state_machine_as_test(machine_for_mutant(mutant), settings=search))()
    except Exception:  # noqa: BLE001 - any failure is a kill here; the ci run checks the reason
        return True
    return False


def kill_rates(seeds: int, jobs: int) -> dict[str, int]:
    """Mutant name -> how many of ``seeds`` random-seeded ci runs caught it."""
    work = [(m.__name__, s) for m in MUTANTS for s in range(seeds)]
    with ProcessPoolExecutor(jobs) as pool:
        killed = list(pool.map(_killed_with_seed, work, chunksize=4))
    rates: dict[str, int] = {}
    for (name, _), k in zip(work, killed, strict=True):
        rates[name] = rates.get(name, 0) + k
    return rates


NOISE = ("state.sizes_add_up()", "state.slots_conserved()", "You can reproduce")


def _program(exc: BaseException) -> str:
    """Hypothesis's shrunk program, without the invariant checks it prints between steps."""
    lines = "\n".join(getattr(exc, "__notes__", [])).splitlines()
    return "\n".join(ln for ln in lines if ln.strip() and not ln.strip().startswith(NOISE))


def build(seeds: int = 50, jobs: int = 2) -> list[dict[str, Any]]:
    rates = kill_rates(seeds, jobs) if seeds else {}
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
            "kills": rates.get(mutant.__name__),
            "seeds": seeds,
            "minimal_program": _program(shrunk) if shrunk else "",
        })
    return rows


def _kill_rate(row: dict[str, Any]) -> str:
    return f"{row['kills']}/{row['seeds']}" if row["kills"] is not None else ""


def _lowest_rate(rows: list[dict[str, Any]]) -> str:
    measured = [r for r in rows if r["kills"] is not None]
    if not measured:
        return ""
    worst = min(measured, key=lambda r: r["kills"] / r["seeds"])
    return f"; lowest kill rate {_kill_rate(worst)} ({worst['bug_class']})"


def render(rows: list[dict[str, Any]]) -> str:
    killed = [r["seconds_to_kill"] for r in rows if r["caught"]]
    table = tabulate(
        [[r["bug_class"], "<br>".join(r["sources"]), f"`{r['mutant'].split(':')[1]}`", r["oracle"],
          "yes" if r["caught"] else "**NO**", f"{r['seconds_to_kill']:.2f}", _kill_rate(r)] for r in rows],
        headers=["bug class", "source thread(s)", "mutant", "caught by oracle", "caught", "time to kill (s)",
                 "kill rate (random seeds)"],
        tablefmt="github",
    )
    parts = [
        "# Bug catalogue",
        "",
        "Regenerate with `python -m radixcheck.reports.catalogue`. Each row is a class of bug seen in a real radix cache, "
        "reproduced as a one-idea mutant of the reference (`meta_tests/mutants.py`) and run through the "
        "conformance state machine under the `ci` Hypothesis profile (derandomized). *Time to kill* is the wall "
        "time to the first failing example, before shrinking — a noisy figure on a shared 2-core machine. "
        "*Kill rate* reruns the same budget with random seeds instead of the derandomized stream and counts "
        "the runs that catch the mutant (how much the catch depends on one lucky stream).",
        "",
        f"**{sum(r['caught'] for r in rows)} of {len(rows)} caught; median time to kill "
        f"{statistics.median(killed) if killed else float('nan'):.2f} s, max {max(killed) if killed else float('nan'):.2f} s"
        f"{_lowest_rate(rows)}.**",
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
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: reports/ in a checkout, "
                        "./radixcheck-reports when installed)")
    parser.add_argument("--seeds", type=int, default=50, help="random-seeded runs per mutant for the kill rate (0: skip)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    rows = build(args.seeds, args.jobs)
    (args.out / "BUG_CATALOGUE.md").write_text(render(rows) + "\n", encoding="utf-8")
    (args.out / "artifacts").mkdir(exist_ok=True)
    stable = [{k: v for k, v in r.items() if k != "seconds_to_kill"} for r in rows]
    (args.out / "artifacts" / "catalogue.json").write_text(json.dumps(stable, indent=2) + "\n", encoding="utf-8")
    print(render(rows).split("## Minimal")[0])


if __name__ == "__main__":
    main()
