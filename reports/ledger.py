"""The token ledger: every deterministic table, built by running the reference cache.

``build(scale, seed)`` serves each workload and returns a :class:`Ledger`; ``markdown`` and
``to_json`` render it. Nothing here depends on the machine or the model, so the rendered text is
byte-stable: the committed ``reports/LEDGER.md`` must equal a fresh rendering (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tabulate import tabulate

from radixcheck.provenance import generated_by
from radixcheck.reports.declare_one import DeclareOne, declare_one
from radixcheck.reports.hit_rates import HitRate, hit_rate
from radixcheck.reports.report_rows import ExpectedRows
from radixcheck.reports.scheduling import LEDGER_FACTOR, QUEUE_SIZES, SWEEP_FACTORS, Bounded, bounded, policies, sweep
from radixcheck.reports.workloads import DEFAULT_SEED, OURS_ORIGIN, SEED_ORIGIN, Workload, paper_workloads, seed_workloads

LEDGER_POLICIES = ("FCFS", "cache-aware (offline)")


@dataclass
class Ledger:
    scale: int
    seed: int
    workloads: list[Workload]
    hit_rates: list[HitRate]
    scheduling: list[Bounded]  # one per workload at LEDGER_FACTOR
    declare_one: list[DeclareOne]
    sweeps: dict[str, list[Bounded]]


def workloads(scale: int = 1, seed: int = DEFAULT_SEED) -> list[Workload]:
    """The ledger's workloads: the seed's four, then ours."""
    return seed_workloads(scale, seed) + paper_workloads(scale, seed)


REGENERATE = "python -m radixcheck.reports --no-live"


def report_rows() -> list[ExpectedRows]:
    """The rows LEDGER.md must have: one per workload in each table with a workload column."""
    return [ExpectedRows("workload", tuple(w.name for w in workloads()))]


def build(scale: int = 1, seed: int = DEFAULT_SEED) -> Ledger:
    """Serve every workload (the seed's four, then ours) through the reference cache."""
    ws = workloads(scale, seed)
    hrs = [hit_rate(w) for w in ws]
    sched = [bounded(w, h, LEDGER_FACTOR) for w, h in zip(ws, hrs, strict=True)]
    dec = [declare_one(w, h) for w, h in zip(ws, hrs, strict=True)]
    sweeps = {w.name: sweep(w, h) for w, h in zip(ws, hrs, strict=True)}
    return Ledger(scale, seed, ws, hrs, sched, dec, sweeps)


# ---- formatting ----------------------------------------------------------------------------


def pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f} %"


def times(x: float) -> str:
    return f"{x:.2f}×"


def factor(f: Fraction) -> str:
    return f"{float(f):g}×"


def command(scale: int, seed: int) -> str:
    args = "" if scale == 1 else f" --scale {scale}"
    args += "" if seed == DEFAULT_SEED else f" --seed {seed}"
    return f"`python -m radixcheck.reports{args}`"


def caption(n: int, title: str, ledger: Ledger, how: str) -> str:
    return (
        f"**Table {n}. {title}** Produced by {command(ledger.scale, ledger.seed)} (scale {ledger.scale}, seed {ledger.seed}) "
        f"serving the requests through `reference.RadixCache` (page size 1) with `properties.cache.serving.serve`. {how} "
        "Exact token counts: the same on any model and any machine."
    )


def hit_rate_rows(ledger: Ledger) -> list[list[Any]]:
    rows = []
    for w, h in zip(ledger.workloads, ledger.hit_rates, strict=True):
        params = ", ".join(f"{k}={v}" for k, v in w.params.items())
        rows.append(
            [
                w.name,
                w.origin,
                h.requests,
                h.prompt_tokens,
                h.cached_tokens,
                h.computed_tokens,
                pct(h.hit_rate),
                times(h.token_speedup),
                params,
            ]
        )
    return rows


def scheduling_rows(ledger: Ledger) -> list[list[Any]]:
    rows = []
    for b in ledger.scheduling:
        f, c = "FCFS", "cache-aware (offline)"
        sensitive = "yes" if b.cached[f] != b.cached[c] else "no (FCFS = cache-aware = optimum)"
        rows.append([b.workload, b.budget, pct(b.hit(f)), pct(b.of_optimum(f), 0), pct(b.hit(c)), pct(b.of_optimum(c), 0), sensitive])
    return rows


def declare_rows(ledger: Ledger) -> list[list[Any]]:
    def gain(d: DeclareOne) -> str:
        return times(d.radix_gain) if d.reused_tokens else "— (nothing common to declare)"

    return [
        [d.workload, d.common_prefix, d.reused_tokens, pct(d.hit_rate), d.radix_reused_tokens, pct(d.radix_hit_rate), gain(d)]
        for d in ledger.declare_one
    ]


def sweep_rows(results: list[Bounded]) -> list[list[Any]]:
    rows = []
    for b in results:
        rows.append([factor(b.factor), b.budget] + [f"{pct(b.hit(p))} ({pct(b.of_optimum(p), 0)})" for p in policies(QUEUE_SIZES)])
    return rows


def average_rows(ledger: Ledger) -> list[list[Any]]:
    """Mean % of the unbounded optimum over all workloads, per budget factor and policy."""
    rows = []
    for i, f in enumerate(SWEEP_FACTORS):
        at = [ledger.sweeps[w.name][i] for w in ledger.workloads]
        rows.append([factor(f)] + [pct(sum(b.of_optimum(p) for b in at) / len(at), 1) for p in policies(QUEUE_SIZES)])
    return rows


def order_sensitive(ledger: Ledger) -> list[Workload]:
    return [w for w in ledger.workloads if any(len(set(b.cached.values())) > 1 for b in ledger.sweeps[w.name])]


def markdown(ledger: Ledger) -> str:
    """The whole token ledger as one markdown document (byte-stable)."""
    fmt = "github"
    out = [
        "# radixcheck ledger — token tables",
        "",
        f"{generated_by(with_commit=False)} "
        f"Regenerate with {command(ledger.scale, ledger.seed)}. Every number below comes from serving the workloads through the "
        "reference radix cache; none is a constant. The first four workloads are the seed benchmark's exact shapes "
        f"(origin *{SEED_ORIGIN}*) with our own seeded token ids; those marked *{OURS_ORIGIN}* are our renderings of shapes from the "
        "SGLang paper (arXiv 2312.07104 §6) that the seed's four do not cover. "
        "Timing tables (noisy, machine-dependent) are in `LIVE-*.md`.",
        "",
        caption(
            1,
            "Hit rate and token speedup, unbounded cache.",
            ledger,
            "Each request is matched before it is inserted; hit rate = cached ÷ prompt tokens; token speedup = prompt ÷ computed tokens.",
        ),
        "",
        tabulate(
            hit_rate_rows(ledger),
            ["workload", "origin", "requests", "prompt tokens", "cached", "computed", "hit rate", "token speedup", "shape"],
            tablefmt=fmt,
            disable_numparse=True,
        ),
        "",
        caption(
            2,
            f"Scheduling under a bounded cache (budget = {factor(LEDGER_FACTOR)} the longest request).",
            ledger,
            "Budget counted in cached tokens, enforced after each insert by LRU-leaf eviction with the new request's path locked; "
            "cache-aware = lexicographic order (≡ DFS); % of optimum = cached ÷ cached with an unbounded cache.",
        ),
        "",
        tabulate(
            scheduling_rows(ledger),
            [
                "workload",
                "budget (tokens)",
                "FCFS hit rate",
                "FCFS % of optimum",
                "cache-aware hit rate",
                "cache-aware % of optimum",
                "order-sensitive?",
            ],
            tablefmt=fmt,
            disable_numparse=True,
        ),
        "",
        caption(
            3,
            "Declare-one-prefix baseline versus the radix tree.",
            ledger,
            "Declare-one reuses the one prefix common to every request, in all but the first; "
            "radix gain = radix reused ÷ declare-one reused.",
        ),
        "",
        tabulate(
            declare_rows(ledger),
            ["workload", "common prefix", "declare-one reused", "declare-one hit rate", "radix reused", "radix hit rate", "radix gain"],
            tablefmt=fmt,
            disable_numparse=True,
        ),
        "",
        "## Beyond the seed: hit rate versus budget",
        "",
        "Online LPM is SGLang's longest-prefix-match priority over a waiting queue of the given size (requests admitted in arrival "
        "order; a request waits until the earlier requests that are its prefixes were served). Budgets below 1× the longest request "
        "still let each running request finish (its path is locked), so the tree may briefly exceed them. Cells: hit rate "
        "(% of the unbounded optimum). Workloads where every policy gives the same hit rate at every budget are left out: "
        + ", ".join(w.name for w in ledger.workloads if w not in order_sensitive(ledger))
        + ".",
        "",
    ]
    n = 4
    for w in order_sensitive(ledger):
        out += [
            caption(n, f"Hit rate versus budget, {w.name} ({w.origin}).", ledger, "Budget = factor × the longest request, floored."),
            "",
        ]
        out += [
            tabulate(
                sweep_rows(ledger.sweeps[w.name]),
                ["budget factor", "budget (tokens)"] + policies(QUEUE_SIZES),
                tablefmt=fmt,
                disable_numparse=True,
            ),
            "",
        ]
        n += 1
    out += [
        caption(
            n,
            "Mean % of the unbounded optimum over all six workloads.",
            ledger,
            "The SGLang paper reports its online cache-aware scheduler at 96 % of optimal on average (its own workloads and budgets).",
        ),
        "",
        tabulate(average_rows(ledger), ["budget factor"] + policies(QUEUE_SIZES), tablefmt=fmt, disable_numparse=True),
        "",
    ]
    return "\n".join(out)


def to_json(ledger: Ledger) -> dict[str, Any]:
    """The ledger as plain data (exact counts; ratios derived from them). No timestamps."""

    def bounded_json(b: Bounded) -> dict[str, Any]:
        return {"factor": str(b.factor), "budget": b.budget, "cached": b.cached, "optimum": b.optimum, "prompt_tokens": b.prompt_tokens}

    return {
        "command": command(ledger.scale, ledger.seed).strip("`"),
        "scale": ledger.scale,
        "seed": ledger.seed,
        "cache": "reference.RadixCache(page_size=1) via properties.cache.serving.serve",
        "workloads": [
            {
                "name": w.name,
                "origin": w.origin,
                "description": w.description,
                "params": w.params,
                "requests": h.requests,
                "prompt_tokens": h.prompt_tokens,
                "cached_tokens": h.cached_tokens,
                "computed_tokens": h.computed_tokens,
                "hit_rate": round(h.hit_rate, 6),
                "token_speedup": round(h.token_speedup, 6),
                "declare_one": {"common_prefix": d.common_prefix, "reused_tokens": d.reused_tokens, "radix_gain": round(d.radix_gain, 6)},
                "scheduling_at_ledger_budget": bounded_json(b),
                "sweep": [bounded_json(x) for x in ledger.sweeps[w.name]],
            }
            for w, h, d, b in zip(ledger.workloads, ledger.hit_rates, ledger.declare_one, ledger.scheduling, strict=True)
        ],
    }
