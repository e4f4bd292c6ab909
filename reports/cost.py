"""``reports/COST.md``: what each operation costs as the cache grows, every engine of the field side by side.

    .audit-venv/bin/python -m radixcheck.reports.cost            # the engines need the audit environment
    .audit-venv/bin/python -m radixcheck.reports.cost --replay-only   # the throughput table alone; the bench is kept
    .audit-venv/bin/python -m radixcheck.reports.cost --report-only   # re-render from artifacts/cost.json

One run, interleaved: ``radixcheck.bench`` builds every target's tree at one size in turn before
the next size, so the machine's load falls on all of them alike, then the same run replays the
four ledger workloads through each cache (``reports/throughput.py``; again workload by workload,
target by target). ``--replay-only`` runs the replays alone (minutes, where the bench takes ten)
and keeps the saved bench; the report then says which run each part comes from. Writes
``reports/COST.md``, ``reports/artifacts/cost.json`` and ``reports/plots/cost.png``. A run in
which a target cannot be loaded (say, outside the audit environment, or without
``RADIXCHECK_MINISGLANG_SRC`` / ``RADIXCHECK_LIGHTLLM_SRC`` naming the engines' checkouts) stops
before measuring rather than replace a committed COST.md, unless ``--force`` is given.

A replay is bounded by CPU time (``--replay-seconds``, with a wall backstop), so a loaded machine
gives complete replays, only later. One cut short all the same (the backstop) never replaces a
complete replay of the same target and workload in the saved ``artifacts/cost.json``: the run
keeps the saved row and the report says which run (commit, machine) each row comes from. Kept
rather than refused: whether a replay completes is only known at the end of the run, and a refusal
then would throw away the bench the user ran it for.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from radixcheck.argtypes import ArgumentParser, positive_seconds, refuse_weaker
from radixcheck.bench import OPERATIONS, BenchPlan, OpCost, TargetCost, bench
from radixcheck.bench_report import CLOCK, plot, seconds_text
from radixcheck.properties.growth import FLAG_EXPONENT
from radixcheck.properties.target import Target, TargetError, check_target, load_target
from radixcheck.provenance import describe_run, describe_run_record, run_stamp
from radixcheck.reports import default_out
from radixcheck.reports.machine import describe, one_line
from radixcheck.reports.rerun import Run, runs_table
from radixcheck.reports.throughput import (
    DEFAULT_CAPACITY,
    DEFAULT_FILL,
    DEFAULT_SCALE,
    WALL_FACTOR,
    cut_short,
    describe_setup,
    instances_for,
    ledger_workloads,
    replay,
)

ADAPTERS = "radixcheck.properties.adapters"


@dataclass(frozen=True)
class Entry:
    key: str
    title: str
    spec: str
    page_size: int
    engine: str  # the engine's version or commit: "pypi:<dist>" is read from what is installed (see _engine)


FIELD = [
    Entry("reference", "radixcheck reference", "radixcheck.reference:RadixCache", 1, "this checkout"),
    Entry("sglang", "SGLang RadixCache", f"{ADAPTERS}.sglang_radix:radix_lru", 1, "pypi:sglang"),
    Entry("sglang_unified_py", "SGLang UnifiedRadixCache, Python core", f"{ADAPTERS}.sglang_radix:unified_python_lru", 1,
          "pypi:sglang"),
    Entry("sglang_unified_rust", "SGLang UnifiedRadixCache, Rust core", f"{ADAPTERS}.sglang_radix:unified_rust_lru", 1,
          "pypi:sglang"),
    Entry("mini_sglang", "mini-sglang", f"{ADAPTERS}.mini_sglang:newest", 1, "mini-sglang 20fcd7f (checkout: RADIXCHECK_MINISGLANG_SRC)"),
    Entry("lightllm", "LightLLM", f"{ADAPTERS}.lightllm_radix:radix_cache", 1, "LightLLM fc72ffa (checkout: RADIXCHECK_LIGHTLLM_SRC)"),
    Entry("vllm", "vLLM v1 prefix cache (block 16)", f"{ADAPTERS}.vllm_prefix:vllm_prefix", 16, "pypi:vllm"),
    Entry("reference_16", "radixcheck reference (page 16, vLLM's yardstick)", "radixcheck.reference:RadixCache", 16, "this checkout"),
]


def _yardstick(entry: Entry) -> str:
    return "reference_16" if entry.page_size == 16 else "reference"


def _engine(entry: Entry) -> Entry:
    """The entry with the version actually installed (a hard-coded one went stale when the wheel moved on)."""
    if not entry.engine.startswith("pypi:"):
        return entry
    dist = entry.engine.removeprefix("pypi:")
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = "not installed"
    return replace(entry, engine=f"{dist} {version} (PyPI)")


def load(entries: list[Entry]) -> tuple[list[tuple[Entry, Target]], dict[str, str]]:
    """The entries whose target loads here (with their installed versions), and why the others do not."""
    loaded, missing = [], {}
    for entry in map(_engine, entries):
        try:
            target = load_target(entry.spec)
            check_target(target)
        except TargetError as exc:
            missing[entry.key] = str(exc)
            print(f"[cost] {entry.key}: cannot load: {exc}", file=sys.stderr)
            continue
        loaded.append((entry, target))
    return loaded, missing


def measure(field: list[tuple[Entry, Target]], missing: dict[str, str], plan: BenchPlan, replay_seconds: float,
            wall_seconds: float | None = None, command: str = "python -m radixcheck.reports.cost") -> dict[str, Any]:
    """One full run: the bench, then the replays."""
    t0, stamp = time.monotonic(), run_stamp()  # before the run: its code and settings
    results = bench([(target, entry.page_size) for entry, target in field], plan,
                    progress=lambda line: print(f"[cost] {line}", file=sys.stderr, flush=True))
    bench_seconds = time.monotonic() - t0
    return {
        "field": [asdict(e) for e, _ in field],
        "missing": missing,
        "results": {e.key: r.to_json() for (e, _), r in zip(field, results, strict=True)},
        **replays(field, replay_seconds, wall_seconds),
        "command": command,
        "plan": asdict(plan),
        **stamp,
        "bench_seconds": round(bench_seconds, 1),
        "machine": describe(),
        "clock": CLOCK,
        "flag_exponent": FLAG_EXPONENT,
    }


def replays(field: list[tuple[Entry, Target]], replay_seconds: float, wall_seconds: float | None = None) -> dict[str, Any]:
    """The throughput part of a run: the four ledger workloads through every target (workload by
    workload, target by target), with the load before and after."""
    throughput: dict[str, list[dict[str, Any]]] = {e.key: [] for e, _ in field}
    load_before, t0 = os.getloadavg()[0], time.monotonic()
    for workload in ledger_workloads(DEFAULT_SCALE):
        for entry, target in field:
            copies = instances_for(workload, DEFAULT_CAPACITY, DEFAULT_FILL)
            r = replay(target, entry.page_size, workload, copies, DEFAULT_CAPACITY, replay_seconds, wall_seconds)
            throughput[entry.key].append(asdict(r) | {"calls_per_second": r.calls_per_second})
            print(f"[cost] {entry.key}: {workload.name}: {r.calls_per_second:,.0f} calls/s {r.stopped}", file=sys.stderr, flush=True)
    return {
        "throughput": throughput,
        "throughput_setup": describe_setup(DEFAULT_SCALE, DEFAULT_CAPACITY, DEFAULT_FILL),
        "throughput_load": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "throughput_seconds": round(time.monotonic() - t0, 1),
    }


def replay_only(saved: dict[str, Any], field: list[tuple[Entry, Target]], replay_seconds: float,
                wall_seconds: float | None, command: str) -> dict[str, Any]:
    """``saved`` with its throughput re-measured by this run (``replay_run`` says which run that is)
    and everything else, the bench included, kept from the run that measured it."""
    run = {**run_stamp(), "machine": describe(), "command": command}  # read first: the code that runs
    return saved | replays(field, replay_seconds, wall_seconds) | {"replay_run": run}


# ---- keeping complete replays -----------------------------------------------------------------


def _row_name(key: str, workload: str) -> str:
    return f"{key}: {workload}"


def _run_of(doc: dict[str, Any]) -> Run:
    """The run ``doc``'s fresh throughput rows were measured in (its ``replay_run`` after ``--replay-only``,
    else the bench's run), with every throughput row of it (a doc saved before runs were kept)."""
    run = doc.get("replay_run", doc)
    at = re.search(r"at commit `([^`]+)`", run.get("generated_by", ""))
    m = run["machine"]
    load = doc.get("throughput_load")
    return {"commit": at.group(1) if at else "(not recorded)", "command": run.get("command", "python -m radixcheck.reports.cost"),
            "seconds": doc.get("throughput_seconds"),
            "machine": f"{m['cpu']}, {m['cores']} cores" + (f", load {load[0]:g}-{load[1]:g}" if load else ""),
            "rows": [_row_name(k, r["workload"]) for k, rows in doc["throughput"].items() for r in rows]}


def throughput_runs(doc: dict[str, Any]) -> list[Run]:
    """The runs the throughput rows of ``doc`` come from, newest first."""
    return doc.get("throughput_runs") or [_run_of(doc)]


def keep_complete(fresh: dict[str, Any], saved: dict[str, Any] | None) -> dict[str, Any]:
    """``fresh`` with each replay cut short by a time bound replaced by the ``saved`` one of the same
    target (key, spec, page size) and workload, if that one is complete and ran the same setup
    (scale, pool, fill); ``throughput_runs`` says which run each row comes from. A fresh complete
    replay, or a failure (a result), always takes the saved row's place."""
    earlier = throughput_runs(saved) if saved else []
    same: dict[tuple[str, str], dict[str, Any]] = {}
    if saved and saved.get("throughput_setup") == fresh["throughput_setup"]:
        target = {e["key"]: (e["spec"], e["page_size"]) for e in fresh["field"]}
        same = {(e["key"], r["workload"]): r for e in saved["field"] for r in saved["throughput"].get(e["key"], [])
                if target.get(e["key"]) == (e["spec"], e["page_size"]) and not cut_short(r["stopped"])}
    mine, kept, throughput = [], set(), {}
    for e in fresh["field"]:
        rows = []
        for r in fresh["throughput"][e["key"]]:
            old = same.get((e["key"], r["workload"]))
            if cut_short(r["stopped"]) and old:
                rows.append(old)
                kept.add(_row_name(e["key"], r["workload"]))
            else:
                rows.append(r)
                mine.append(_row_name(e["key"], r["workload"]))
        throughput[e["key"]] = rows
    runs = [{**_run_of(fresh), "rows": mine}] + [{**r, "rows": [n for n in r["rows"] if n in kept]} for r in earlier]
    return fresh | {"throughput": throughput, "throughput_runs": [r for r in runs if r["rows"]]}


# ---- rendering --------------------------------------------------------------------------------


def _op(doc: dict[str, Any], key: str, name: str) -> OpCost:
    d = dict(doc["results"][key]["ops"][name])
    d.pop("medians", None)
    d["points"] = [tuple(p) for p in d["points"]]
    op = OpCost(**d)
    op.finish()  # judged by this checkout's rule, from the run's points and stops
    return op


def _target_cost(doc: dict[str, Any], key: str) -> TargetCost:
    r = doc["results"][key]
    return TargetCost(r["target"], r["page_size"], r["capabilities"], {n: _op(doc, key, n) for n in r["ops"]}, r["seconds"], r["sizes"])


def _cell(op: OpCost) -> str:
    if op.stopped.startswith("not offered"):
        return "not offered"
    e = "-" if op.exponent is None else f"{op.exponent:+.2f}"
    if op.flagged:  # say why when the exponent alone does not: a limit hit, or the measurement raised
        why = " (limit)" if op.verdict.startswith("flagged:") else " (failed)" if op.failed else ""
        return f"**{e} FLAG**{why}"
    return e


def _top(op: OpCost) -> tuple[int, float] | None:
    meds = op.medians()
    return meds[-1] if meds else None


def _ratio(op: OpCost, ref: OpCost) -> str:
    mine, theirs = dict(op.medians()), dict(ref.medians())
    common = sorted(set(mine) & set(theirs))
    if not common:
        return "-"
    return f"{mine[common[-1]] / theirs[common[-1]]:.2g}"


def render(doc: dict[str, Any], out: Path) -> str:
    entries = [Entry(**e) for e in doc["field"]]
    costs = {e.key: _target_cost(doc, e.key) for e in entries}
    m = doc["machine"]
    lines = [
        "# The cost of a cache: how each operation grows with the cache, across the field",
        "",
        _provenance(doc) + " "
        "Regenerate: `python -m radixcheck.reports.audit_env`, then with `RADIXCHECK_MINISGLANG_SRC` and "
        "`RADIXCHECK_LIGHTLLM_SRC` naming checkouts at the commits below, `.audit-venv/bin/python -m radixcheck.reports.cost` "
        "(the bench, then the throughput replays; `--replay-only` re-runs the replays alone and keeps the saved bench), then "
        "`python -m radixcheck.reports.cost --report-only` in the main environment for the plot (the audit environment "
        "has no matplotlib). One target alone: `radixcheck bench module:factory`.",
        "",
        f"The bench was measured on {one_line(m)}; {doc['clock']}. The machine is shared (2 cores, other jobs running): absolute "
        "figures are noisy, so every target's tree was built and measured in turn at each size (interleaved), and the "
        "exponents (fits over every repeat) and the ratios to the reference are the figures to read.",
        "",
        "| target | engine | page size |",
        "|---|---|---|",
    ]
    lines += [f"| {e.title} (`{e.spec}`) | {e.engine} | {e.page_size} |" for e in entries]
    if doc["missing"]:
        lines += ["", "**Not measured** (could not be loaded in this run):", ""]
        lines += [f"- `{k}`: {v}" for k, v in doc["missing"].items()]
    lines += [
        "",
        "## Growth exponents and flags",
        "",
        f"Exponent of the cost per unit of work against cached tokens (Theil-Sen over every repeat at every size but the "
        f"smallest, or at every size where fewer than four were measured; a flag needs three sizes in the fit; the plan: "
        f"wide trees of {', '.join(map(str, doc['plan']['wide_leaves']))} leaves, deep trees of "
        f"{', '.join(map(str, doc['plan']['deep_levels']))} levels, {doc['plan']['repeats']} repeats). "
        f"**FLAG**: exponent >= {doc['flag_exponent']} (cost per unit growing about linearly with the cache), or the "
        "operation exceeded the per-call time limit (5 s) or the memory limit (\"limit\"). About 0: flat; a logarithm fits 0.1-0.25.",
        "",
        "| operation | per | " + " | ".join(e.key for e in entries) + " |",
        "|---|---|" + "---|" * len(entries),
    ]
    for name, spec in OPERATIONS.items():
        lines.append(f"| `{name}` | {spec.unit} | " + " | ".join(_cell(costs[e.key].ops[name]) for e in entries) + " |")
    stops = [(e.key, name, op.stopped) for e in entries for name, op in costs[e.key].ops.items()
             if op.stopped and not op.stopped.startswith("not offered")]
    if stops:
        lines += ["", "Stopped before the largest size (the exponent is fitted over the sizes measured):", ""]
        lines += [f"- {key} `{name}`: {why}" for key, name, why in stops]
    lines += ["", "## Cost at the largest tree, and ratio to the reference", "",
              "Median cost per unit at the largest size each target reached (cached tokens in brackets); below it, the "
              "ratio to the reference (same page size) at the largest size both reached.", "",
              "| operation | " + " | ".join(e.key for e in entries) + " |", "|---|" + "---|" * len(entries)]
    for name in OPERATIONS:
        cells, ratios = [], []
        for e in entries:
            op = costs[e.key].ops[name]
            top = _top(op)
            cells.append(f"{seconds_text(top[1])} ({top[0]:,})" if top else "-")
            ref = costs.get(_yardstick(e))
            ratios.append(_ratio(op, ref.ops[name]) + "x" if ref and top and ref.ops[name].medians() else "-")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
        lines.append("| x ref | " + " | ".join(ratios) + " |")
    lines += ["", "![cost per unit of work against cached tokens, every target](plots/cost.png)", ""]
    lines += _throughput_section(doc, entries)
    lines += ["", "## Limits of this run", "",
              "- Every operation was driven through the contract and the adapters in `properties/adapters/`: what an "
              "adapter does around the engine's call is in the figure (see the notes on vLLM). Capabilities are respected "
              "(no `evict_prefix` where `supports_quarantine=False`; match straight before a lock where "
              "`locks_only_after_match=True`).",
              "- Deep trees stop at 1,024 levels (256 at page size 16): building depth d costs d^2/2 page-steps in any "
              "cache, because every insert that reaches depth i carries its i-page prefix.",
              "- SGLang and vLLM ran from their PyPI wheels in `.audit-venv/`; mini-sglang and LightLLM from checkouts at "
              "the commits in the table, named by `RADIXCHECK_MINISGLANG_SRC` / `RADIXCHECK_LIGHTLLM_SRC`.",
              ""]
    text = "\n".join(lines) + "\n"
    return text


def _provenance(doc: dict[str, Any]) -> str:
    """Which run each part comes from: the bench from one run, the throughput rows from those its table lists."""
    bench = describe_run(doc)
    runs = throughput_runs(doc)
    if "replay_run" not in doc and _from_this_run(doc, runs) == [True]:
        return f"{bench} One run: the bench took {doc['bench_seconds']:.0f} s, then the throughput replays."
    last = f"`{runs[0]['command']}` at commit `{runs[0]['commit']}` ({runs[0]['machine']})"
    rows = (f"all from another run, {last}" if len(runs) == 1
            else f"from {len(runs)} runs, listed under their table (the newest: {last})")
    replays = describe_run_record(doc.get("replay_run", {}))  # the replays' own settings, after --replay-only
    return (f"The bench (growth exponents, cost at the largest tree): {bench[0].lower()}{bench[1:]} It took "
            f"{doc['bench_seconds']:.0f} s. The throughput rows are {rows}." + (f" The replays' run: {replays[0].lower()}{replays[1:]}"
                                                                                  if replays else ""))


def _from_this_run(doc: dict[str, Any], runs: list[Run]) -> list[bool]:
    """For each run, whether it is the one that wrote ``doc`` (its replays, or its bench and replays)."""
    this_run = {**_run_of(doc), "rows": []}
    return [{**r, "rows": []} == this_run for r in runs]


def _throughput_section(doc: dict[str, Any], entries: list[Entry]) -> list[str]:
    setup = doc["throughput_setup"]
    lines = ["## Throughput: the ledger workloads at scale", "",
             f"Each of the four ledger workloads (scale {setup['scale']}) replayed as disjoint copies, one after another, "
             f"through a slot pool of {setup['capacity_tokens']:,} tokens: enough copies to bring {setup['fill']}x the pool "
             "in distinct tokens, so the pool is full for the last two thirds and every request there evicts, from a tree "
             "of thousands of leaves. Per request: match, lock, evict when short of room, insert, unlock. Contract calls "
             "per CPU second spent inside the cache (higher is better); hit rate in brackets (the same for every cache: "
             "they all hold the same prefixes).", "",
             "| workload | copies | requests | " + " | ".join(e.key for e in entries) + " |", "|---|---|---|" + "---|" * len(entries)]
    runs = throughput_runs(doc)
    run_of = {name: i for i, run in enumerate(runs, 1) for name in run["rows"]}
    names = [w["workload"] for w in doc["throughput"][entries[0].key]]
    for i, name in enumerate(names):
        cells = []
        for e in entries:
            r = doc["throughput"][e.key][i]
            cell = f"{r['calls_per_second']:,.0f} ({r['hit_rate']:.2f})"
            if r["stopped"]:
                cell += f" [{r['stopped'][:60]}]"
            if len(runs) > 1:
                cell += f" (run {run_of.get(_row_name(e.key, name), '?')})"
            cells.append(cell)
        w = setup["workloads"][name]
        lines.append(f"| {name} | {w['instances']} | {w['requests']:,} | " + " | ".join(cells) + " |")
    is_this_run = _from_this_run(doc, runs)
    if is_this_run == [True]:
        return lines + ["", f"Every row from this run ({runs[0]['machine']})."]
    if not any(is_this_run):
        lines += ["", "None of this run's replays is in the table: each was cut short by its time bound, and every row "
                  "is kept from an earlier complete run."]
    lines += ["", "Where the rows come from, newest run first (a replay cut short by its time bound never replaces a "
              "complete one of the same target and workload: the saved row is kept, with its run). Compare engines "
              "within one run: runs on other machines or at other loads differ by tens of percent.", "",
              runs_table([{**r, "rows": [f"run {i}", *_by_target(r["rows"], names)]} for i, r in enumerate(runs, 1)])]
    return lines


def _by_target(rows: list[str], workloads: list[str]) -> list[str]:
    """A run's rows, shortly: ``key`` for a target with every workload from it, else ``key (w, ...)``."""
    of: dict[str, list[str]] = {}
    for row in rows:
        key, workload = row.split(": ", 1)
        of.setdefault(key, []).append(workload)
    return [key if sorted(ws) == sorted(workloads) else f"{key} ({', '.join(ws)})" for key, ws in of.items()]


def write(doc: dict[str, Any], out: Path) -> None:
    (out / "artifacts").mkdir(parents=True, exist_ok=True)
    (out / "artifacts" / "cost.json").write_text(json.dumps(doc, indent=1) + "\n")
    entries = [Entry(**e) for e in doc["field"]]
    plot([_target_cost(doc, e.key) for e in entries], out / "plots" / "cost.png", "cost per unit of work, every engine (one run)")
    text = render(doc, out)
    notes = out / "cost_notes.md"  # hand-written reading of the flags, kept across regenerations
    if notes.exists():
        text += "\n" + notes.read_text()
    (out / "COST.md").write_text(text)
    print(f"wrote {out / 'COST.md'}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=default_out())
    ap.add_argument("--only", action="append", help="measure only these field keys (the reference is always kept)")
    ap.add_argument("--max-seconds", type=positive_seconds, default="1500", help="bound on the bench part of the run")
    ap.add_argument("--replay-seconds", type=positive_seconds, default="60",
                    help="bound on each workload replay, in CPU seconds of this process (a loaded machine: the same replay, later)")
    ap.add_argument("--replay-wall-seconds", type=positive_seconds, default=None,
                    help=f"wall-time backstop of each replay (default {WALL_FACTOR} x --replay-seconds); a replay it cuts short "
                         "keeps the saved complete one in the report")
    ap.add_argument("--report-only", action="store_true", help="re-render from artifacts/cost.json")
    ap.add_argument("--replay-only", action="store_true",
                    help="re-measure the throughput table only, for every target of artifacts/cost.json; the bench is kept")
    ap.add_argument("--force", action="store_true", help="replace COST.md even with a run that lacks some of its engines")
    args = ap.parse_args(argv)
    artifact = args.out / "artifacts" / "cost.json"
    if args.report_only:
        write(json.loads(artifact.read_text()), args.out)
        return 0
    command = "python -m radixcheck.reports.cost" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    wall = None if args.replay_wall_seconds is None else float(args.replay_wall_seconds)
    saved = json.loads(artifact.read_text()) if artifact.is_file() else None
    if args.replay_only:
        if saved is None or args.only:
            ap.error("--replay-only re-measures the saved artifact's whole field: it needs artifacts/cost.json and no --only")
        keys = [e["key"] for e in saved["field"]]
        field, missing = load([e for e in FIELD if e.key in keys])
        if missing or len(field) != len(keys):  # a row the run cannot measure would be left out of the table
            ap.error(f"--replay-only: cannot load {sorted(set(keys) - {e.key for e, _ in field})}")
        write(keep_complete(replay_only(saved, field, float(args.replay_seconds), wall, command), saved), args.out)
        return 0
    entries = [e for e in FIELD if not args.only or e.key in args.only or e.key.startswith("reference")]
    field, missing = load(entries)
    if (args.out / "COST.md").exists():
        weaker = [f"{key} cannot be loaded" for key in missing] + (["only " + ", ".join(args.only)] if args.only else [])
        refuse_weaker(ap, args.out / "COST.md", weaker, args.force)
    doc = measure(field, missing, BenchPlan(max_seconds=float(args.max_seconds)), float(args.replay_seconds), wall, command)
    write(keep_complete(doc, saved), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
