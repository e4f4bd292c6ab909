"""The index bug catalogue: every obligation of the KV-event index contract, the rule that
exercises it, the oracle that judges it and the mutant that breaks it; each mutant's kill rate
over many streams, its shrunk program, and the false-alarm streams of the correct indexes.

    python -m radixcheck.reports.index_catalogue                  # INDEX_CATALOGUE.md, artifacts/index_catalogue.json
    python -m radixcheck.reports.index_catalogue --streams 200 --variant-streams 50
    python -m radixcheck.reports.index_catalogue --only LeaksRemovedNodes --only KvIndex   # re-run these rows only

Kill rates as in ``radixcheck.reports.kill_rates``: the gate's budget (the `mutation` profile)
once per stream, each stream derandomized under its own name. The shrunk program comes from a
bounded shrink under the `audit` profile.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tabulate import tabulate

from radixcheck.argtypes import ArgumentParser, non_negative_int, positive_int, refuse_weaker
from radixcheck.oracles import violations as v
from radixcheck.properties.index.mutants import INDEX_MUTANTS, machine_for_index_mutant
from radixcheck.provenance import describe_run, run_stamp
from radixcheck.reports import default_out
from radixcheck.reports.catalogue import first_kill
from radixcheck.reports.kill_rates import false_alarms, measure, variant_names
from radixcheck.reports.report_rows import ExpectedRows
from radixcheck.reports.rerun import SavedCatalogue, add_only, check_only, runs_section, runs_sentence

# (obligation, rule of the index machine that exercises it, the oracle's exception, mutants that break it)
INDEX_OBLIGATIONS: list[tuple[str, str, type[BaseException], list[str]]] = [
    ("a store whose parent is one of its own blocks is refused, the index unchanged and still answering",
     "bad_events (self_parent)", v.BadInputViolation, ["SelfParentPanics"]),
    ("a rank's remove of a block under a parent nobody holds any more scrubs its entry",
     "evict_parent_then_child (everywhere), churn", v.IndexViolation, ["RemoveLeavesPhantomEntry"]),
    ("a store never brings back blocks other ranks removed", "evict_and_restore, redeliver", v.IndexViolation,
     ["RestoreRevivesRemovedEntries"]),
    ("removing a block leaves the blocks stored under it held; their own removes are legal; they match again "
     "when the parent returns", "evict_parent, evict_parent_then_child", v.IndexViolation, ["PrunesSuffixWithAncestor"]),
    ("nothing held: nothing kept; under churn, memory bounded by what is held", "churn, churn_world, invariant memory_bounded",
     v.IndexMemoryViolation, ["LeaksRemovedNodes"]),
    ("sizes count the distinct blocks each rank holds, through partial removes and restores",
     "evict_and_restore, serve_everywhere, invariant sizes_agree", v.IndexViolation, ["SizeCountsNewBlocksOnly"]),
    ("AllBlocksCleared clears the rank that published it, not its worker's other ranks", "clear, redeliver", v.IndexViolation,
     ["ClearedClearsEveryRank"]),
    ("a malformed store refused at its second block changes nothing: its first block is not stored",
     "bad_events (good_block_then_bad_hash, repeated_block)", v.BadInputViolation, ["BadStoreHalfApplied"]),
]


REGENERATE = "python -m radixcheck.reports.index_catalogue"


def report_rows() -> list[ExpectedRows]:
    """The rows INDEX_CATALOGUE.md must have: one per index mutant and per correct index."""
    return [ExpectedRows("mutant", tuple(m.__name__ for m in INDEX_MUTANTS), "Mutants"),
            ExpectedRows("correct index", tuple(variant_names(index=True)), "Correct indexes: no false alarms")]


def _first_kill(name: str) -> dict[str, Any]:
    return first_kill(machine_for_index_mutant(next(m for m in INDEX_MUTANTS if m.__name__ == name)))


def build(streams: int, jobs: int, only: list[str] | None = None) -> list[dict[str, Any]]:
    """Every mutant's row (``only``: just those named)."""
    mutants = [m for m in INDEX_MUTANTS if only is None or m.__name__ in only]
    names = [m.__name__ for m in mutants]
    with ProcessPoolExecutor(jobs) as pool:
        first = dict(zip(names, pool.map(_first_kill, names), strict=True))
    rates = {r.mutant: r for r in measure(names, streams, jobs)} if streams else {}
    rows = []
    for mutant in mutants:
        rate = rates.get(mutant.__name__)
        rows.append({"bug_class": mutant.bug_class, "sources": list(mutant.sources),
                     "mutant": f"radixcheck.properties.index.mutants:{mutant.__name__}",
                     "what": " ".join((mutant.__doc__ or "").split()),
                     "kills": rate.kills if rate else None, "wrong_reason": rate.wrong_reason if rate else None,
                     "streams": streams, **first[mutant.__name__]})
    return rows


def _rate(row: dict[str, Any]) -> str:
    return "" if row["kills"] is None else f"{row['kills']}/{row['streams']} ({100 * row['kills'] / row['streams']:.1f} %)"


def render(rows: list[dict[str, Any]], variants: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    obligations = tabulate([[o, f"`{r}`", c.oracle, ", ".join(f"`{m}`" for m in ms)] for o, r, c, ms in INDEX_OBLIGATIONS],
                           headers=["obligation", "exercised by", "oracle", "mutant(s) that break it"], tablefmt="github")
    mutants = tabulate([[r["bug_class"], "<br>".join(r["sources"]) or "a new user's trial", f"`{r['mutant'].split(':')[1]}`",
                         r.get("oracle", ""), "yes" if r["caught"] else "**NO**", f"{r['seconds_to_kill']:.2f}", _rate(r),
                         r["wrong_reason"]]
                        for r in rows],
                       headers=["bug class", "source", "mutant", "caught by oracle", "caught (stream 0)", "time to kill (s)",
                                "kill rate", "wrong reason"], tablefmt="github")
    false = tabulate([[f"`{x['variant']}`", x["machine"], f"{x['failed']}/{x['streams']}", x["first_failure"]] for x in variants],
                     headers=["correct index", "machine", "streams failed", "first failure"], tablefmt="github")
    parts = ["# Index bug catalogue", "",
             f"{describe_run(meta)} Command: `{meta['command']}`, in {meta['seconds']:.0f} s ({meta['machine']}). "
             f"{runs_sentence(meta.get('runs', []))}Each row is a class of bug "
             "Dynamo's KV router index met in production (or, without a source, one a new user's trial planted), reproduced "
             "as a one-idea mutant of the reference index (`properties/index/mutants.py`) and run through the index state "
             "machine at the gate's budget (100 examples x 50 steps, no shrinking). The kill rate counts the streams, each "
             "derandomized under its own name, in which the mutant was caught by the oracle its bug class predicts.", "",
             "## Obligations", "", obligations, "", "## Mutants", "", mutants, "",
             "## Correct indexes: no false alarms", "",
             "The reference index and every correct variant (`CORRECT_INDEX_VARIANTS`), on the ordinary index machine and "
             "on the churn machine, each stream derandomized under its own name; every stream must pass.", "",
             false or "(not measured)", "", "## Minimal reproductions", ""]
    for r in rows:
        parts += [f"### {r['bug_class']} — `{r['mutant']}`", "", r["what"], "", f"Reason: {r.get('reason', '')}", "",
                  "```python", r.get("program") or "(not caught)", "```", ""]
    parts += runs_section(meta.get("runs", []))
    return "\n".join(parts)


def _name(row: dict[str, Any]) -> str:
    return row["mutant"].split(":")[1]


CATALOGUE = SavedCatalogue(
    REGENERATE, "INDEX_CATALOGUE.md", "index_catalogue.json",
    [m.__name__ for m in INDEX_MUTANTS], _name,
    [(n, kind) for n in variant_names(index=True) for kind in ("ordinary", "churn")], lambda x: (x["variant"], x["machine"]),
    "time to kill (s)", "seconds_to_kill", render)


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="python -m radixcheck.reports.index_catalogue", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: reports/ in a checkout)")
    parser.add_argument("--streams", type=non_negative_int, default=200, help="streams per mutant for the kill rate (0: skip)")
    parser.add_argument("--variant-streams", type=non_negative_int, default=50, help="streams per correct index and machine")
    parser.add_argument("--jobs", type=positive_int, default=2, help="worker processes (default 2)")
    parser.add_argument("--force", action="store_true", help="replace the saved catalogue even with fewer streams")
    add_only(parser, "mutant or correct index")
    args = parser.parse_args(argv)
    out = args.out or default_out()
    check_only(parser, args.only, [m.__name__ for m in INDEX_MUTANTS] + variant_names(index=True), "index mutant or correct index",
               CATALOGUE.artifact_path(out))
    if args.out is None and args.streams < CATALOGUE.saved_streams(out):
        refuse_weaker(parser, out / "INDEX_CATALOGUE.md",
                      [f"--streams {args.streams} where it has kill rates over {CATALOGUE.saved_streams(out)}"], args.force)
    started, stamp = time.perf_counter(), run_stamp()  # before the run: its code and settings
    rows = build(args.streams, args.jobs, args.only or None)
    variants = false_alarms(args.variant_streams, args.jobs, index=True, only=args.only or None) if args.variant_streams else []
    CATALOGUE.save(out, args, started, rows, variants, stamp)


if __name__ == "__main__":
    main()
