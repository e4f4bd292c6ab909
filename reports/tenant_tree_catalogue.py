"""The tenant-tree bug catalogue: every obligation of the tenant prefix-tree contract, the rule that
exercises it, the oracle that judges it and the mutant that breaks it; each mutant's kill rate over
many streams of the machine and over seeds of the threaded stress test, its shrunk program, and the
false alarms of the correct trees.

    python -m radixcheck.reports.tenant_tree_catalogue              # TENANT_TREE_CATALOGUE.md, artifacts/tenant_tree_catalogue.json
    python -m radixcheck.reports.tenant_tree_catalogue --streams 200 --variant-streams 50
    python -m radixcheck.reports.tenant_tree_catalogue --only SplitRacesWithoutLock   # re-run this row only

Kill rates as in ``radixcheck.reports.kill_rates``: the gate's budget (the `mutation` profile)
once per stream, each stream derandomized under its own name. The threaded stress test
(``stress_with_threads``) is run once per seed on every tree that declares ``thread_safe``; its
inputs are fixed by the seed, its interleavings are not, so its rates are of a run, not a
derandomized stream.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tabulate import tabulate

from radixcheck import profiles
from radixcheck.argtypes import ArgumentParser, non_negative_int, positive_int, refuse_weaker
from radixcheck.oracles import violations as v
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tenant_tree.machine import stress_with_threads
from radixcheck.properties.tenant_tree.mutants import (
    CORRECT_TENANT_TREE_VARIANTS,
    TENANT_TREE_MUTANTS,
    THREAD_MUTANTS,
    machine_for_tenant_tree_mutant,
)
from radixcheck.provenance import describe_run, run_stamp
from radixcheck.reference.tenant_tree import TenantTree
from radixcheck.reports import default_out
from radixcheck.reports.catalogue import first_kill
from radixcheck.reports.report_rows import ExpectedRows
from radixcheck.reports.rerun import SavedCatalogue, add_only, check_only, runs_section, runs_sentence

ALL_MUTANTS = [*TENANT_TREE_MUTANTS, *THREAD_MUTANTS]
CORRECT = [TenantTree, *CORRECT_TENANT_TREE_VARIANTS]

# (obligation, what exercises it, the oracle's exception, mutants that break it)
OBLIGATIONS: list[tuple[str, str, type[BaseException], list[str]]] = [
    ("rule 4: a match never names a tenant that is not available", "route (stale view), match (some tenants)",
     v.TenantTreeViolation, ["MatchNamesUnavailableTenant"]),
    ("rule 2: a match is never longer than the query", "match (a known key cut mid-edge), check_every_known",
     v.TenantTreeViolation, ["MatchLongerThanQuery"]),
    ("a split keeps every tenant's own last use: LRU eviction trims each tenant's least recently used prefixes",
     "split_then_evict, evict", v.TenantTreeEvictionViolation, ["SplitLosesOtherTenantsTimes"]),
    ("a tenant's eviction takes nothing of another tenant", "evict, split_then_evict", v.TenantTreeEvictionViolation,
     ["EvictionCrossesTenants"]),
    ("after a tenant leaves nothing of it stays: matches (when it comes back), sizes, nodes", "remove_tenant, add_tenant, churn, "
     "invariant memory_bounded", v.TenantTreeMemoryViolation, ["RemovedTenantLeftInNodes"]),
    ("a tree claiming thread safety stays right under concurrent callers", "test_tenant_tree_under_threads (stress_with_threads)",
     v.TenantTreeEvictionViolation, ["SplitRacesWithoutLock"]),
]

REGENERATE = "python -m radixcheck.reports.tenant_tree_catalogue"


def report_rows() -> list[ExpectedRows]:
    """The rows TENANT_TREE_CATALOGUE.md must have: one per mutant and per correct tree."""
    return [ExpectedRows("mutant", tuple(m.__name__ for m in ALL_MUTANTS), "Mutants"),
            ExpectedRows("correct tree", tuple(c.__name__ for c in CORRECT), "Correct trees: no false alarms")]


def _tree(name: str) -> type[TenantTree]:
    return next(t for t in [*ALL_MUTANTS, *CORRECT] if t.__name__ == name)


def _first_kill(name: str) -> dict[str, Any]:
    return first_kill(machine_for_tenant_tree_mutant(_tree(name)))


def _failure(tree: type, run: Any) -> tuple[str, bool] | None:
    """None if ``run()`` passed, else the failure's type and first line, and whether it is one of
    the tree's ``caught_by`` (a correct tree has none)."""
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - any failure; its type says whether for the right reason
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", isinstance(exc, getattr(tree, "caught_by", ()))
    return None


def _stream(job: tuple[str, int]) -> tuple[str, bool] | None:
    """Stream ``k`` of tree ``name`` on the machine."""
    name, k = job
    tree = _tree(name)
    return _failure(tree, lambda: run_machine(machine_for_tenant_tree_mutant(tree, f"stream{k}_{name}"), profiles.SETTINGS["mutation"]))


def _stress(job: tuple[str, int]) -> tuple[str, bool] | None:
    """Seed ``k`` of the threaded stress test on tree ``name``."""
    name, k = job
    tree = _tree(name)
    return _failure(tree, lambda: stress_with_threads(tree, tree.capabilities, seed=k))


def build(streams: int, jobs: int, only: list[str] | None = None) -> list[dict[str, Any]]:
    """Every mutant's row (``only``: just those named)."""
    mutants = [m for m in ALL_MUTANTS if only is None or m.__name__ in only]
    names = [m.__name__ for m in mutants]
    rows = []
    with ProcessPoolExecutor(jobs) as pool:
        first = dict(zip(names, pool.map(_first_kill, names), strict=True))
        for mutant in mutants:
            name = mutant.__name__
            # a race is invisible to the single-threaded machine by design: its streams are not run (each would pass whole)
            machine = [] if mutant in THREAD_MUTANTS else list(pool.map(_stream, [(name, k) for k in range(streams)]))
            stress = list(pool.map(_stress, [(name, k) for k in range(streams)])) if mutant.capabilities.thread_safe else []
            rows.append({"bug_class": mutant.bug_class, "mutant": f"radixcheck.properties.tenant_tree.mutants:{name}",
                         "what": " ".join((mutant.__doc__ or "").split()), "streams": len(machine),
                         "kills": sum(f is not None and f[1] for f in machine),
                         "wrong_reason": sum(f is not None and not f[1] for f in machine),
                         "stress_kills": sum(f is not None and f[1] for f in stress),
                         "stress_wrong_reason": sum(f is not None and not f[1] for f in stress),
                         "stress_seeds": len(stress), **first[name]})
    return rows


def false_alarms(streams: int, jobs: int, only: list[str] | None = None) -> list[dict[str, Any]]:
    """Every correct tree's false-alarm rows (``only``: just those named)."""
    out = []
    with ProcessPoolExecutor(jobs) as pool:
        for tree in [t for t in CORRECT if only is None or t.__name__ in only]:
            for kind, run in (("machine", _stream), ("threads", _stress)):
                if kind == "threads" and not tree.capabilities.thread_safe:
                    continue
                start = time.perf_counter()
                failures = [f[0] for f in pool.map(run, [(tree.__name__, k) for k in range(streams)]) if f]
                out.append({"variant": tree.__name__, "machine": kind, "streams": streams, "failed": len(failures),
                            "first_failure": failures[0] if failures else "", "seconds": round(time.perf_counter() - start, 1)})
    return out


def _rate(kills: int, n: int) -> str:
    return f"{kills}/{n} ({100 * kills / n:.1f} %)" if n else "—"


def render(rows: list[dict[str, Any]], variants: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    obligations = tabulate([[o, f"`{r}`", c.oracle, ", ".join(f"`{m}`" for m in ms)] for o, r, c, ms in OBLIGATIONS],
                           headers=["obligation", "exercised by", "oracle", "mutant(s) that break it"], tablefmt="github")
    mutants = tabulate([[r["bug_class"], f"`{r['mutant'].split(':')[1]}`", r.get("oracle", ""), "yes" if r["caught"] else "no",
                         f"{r['seconds_to_kill']:.2f}", _rate(r["kills"], r["streams"]) if r["streams"] else "— (threads only)",
                         r["wrong_reason"] if r["streams"] else "—",
                         _rate(r["stress_kills"], r["stress_seeds"]), r["stress_wrong_reason"] if r["stress_seeds"] else "—"]
                        for r in rows],
                       headers=["bug class", "mutant", "caught by oracle", "caught (stream 0)", "time to kill (s)",
                                "machine kill rate", "wrong reason", "threaded stress kill rate", "wrong reason (stress)"],
                       tablefmt="github")
    false = tabulate([[f"`{x['variant']}`", x["machine"], f"{x['failed']}/{x['streams']}", x["first_failure"]] for x in variants],
                     headers=["correct tree", "test", "streams failed", "first failure"], tablefmt="github")
    parts = ["# Tenant-tree bug catalogue", "",
             f"{describe_run(meta)} Command: `{meta['command']}`, in {meta['seconds']:.0f} s ({meta['machine']}). "
             f"{runs_sentence(meta.get('runs', []))}Each row is a class "
             "of bug a router's multi-tenant prefix tree can have, planted as a one-idea mutant of the reference tree "
             "(`properties/tenant_tree/mutants.py`). The machine kill rate counts the streams of the tenant-tree state machine "
             "at the gate's budget (100 examples x 50 steps, no shrinking), each derandomized under its own name, that caught "
             "the mutant by the oracle its class predicts; the threaded stress kill rate counts seeds of "
             "`stress_with_threads` (12 rounds of 4 threads x 30 calls; the interleavings are the machine's own). A race is "
             "invisible to the single-threaded machine by design: its machine streams are not run (stream 0 shows it passes).", "",
             "## Obligations", "", obligations, "", "## Mutants", "", mutants, "",
             "## Correct trees: no false alarms", "",
             "The reference tree and every correct variant (`CORRECT_TENANT_TREE_VARIANTS`: token keys, chunked matches "
             "declared lossy, no lock declared, a tree offering only add/insert/match), each stream of the machine "
             "derandomized under its own name, and the threaded stress where declared; every one must pass.", "",
             false or "(not measured)", "", "## Minimal reproductions (the machine's stream 0, shrunk)", ""]
    for r in rows:
        parts += [f"### {r['bug_class']} — `{r['mutant']}`", "", r["what"], "", f"Reason: {r.get('reason', '')}", "",
                  "```python", r.get("program") or "(not caught by the machine)", "```", ""]
    parts += runs_section(meta.get("runs", []))
    return "\n".join(parts)


def _name(row: dict[str, Any]) -> str:
    return row["mutant"].split(":")[1]


CATALOGUE = SavedCatalogue(
    REGENERATE, "TENANT_TREE_CATALOGUE.md", "tenant_tree_catalogue.json",
    [m.__name__ for m in ALL_MUTANTS], _name,
    [(t.__name__, kind) for t in CORRECT for kind in ("machine", "threads")], lambda x: (x["variant"], x["machine"]),
    "time to kill (s)", "seconds_to_kill", render,
    streams_of=lambda row: max(row["streams"], row["stress_seeds"]))


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="python -m radixcheck.reports.tenant_tree_catalogue", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: reports/ in a checkout)")
    parser.add_argument("--streams", type=positive_int, default=200, help="streams (and stress seeds) per mutant")
    parser.add_argument("--variant-streams", type=non_negative_int, default=50, help="streams per correct tree and test")
    parser.add_argument("--jobs", type=positive_int, default=2, help="worker processes (default 2)")
    parser.add_argument("--force", action="store_true", help="replace the saved catalogue even with fewer streams")
    add_only(parser, "mutant or correct tree")
    args = parser.parse_args(argv)
    out = args.out or default_out()
    check_only(parser, args.only, [t.__name__ for t in [*ALL_MUTANTS, *CORRECT]], "tenant-tree mutant or correct tree",
               CATALOGUE.artifact_path(out))
    if args.out is None and args.streams < CATALOGUE.saved_streams(out):
        refuse_weaker(parser, out / "TENANT_TREE_CATALOGUE.md",
                      [f"--streams {args.streams} where it has kill rates over {CATALOGUE.saved_streams(out)}"], args.force)
    started, stamp = time.perf_counter(), run_stamp()  # before the run: its code and settings
    rows = build(args.streams, args.jobs, args.only or None)
    variants = false_alarms(args.variant_streams, args.jobs, args.only or None) if args.variant_streams else []
    CATALOGUE.save(out, args, started, rows, variants, stamp)


if __name__ == "__main__":
    main()
