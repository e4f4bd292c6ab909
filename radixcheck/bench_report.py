"""What ``radixcheck bench`` prints and writes: the terminal table, the JSON, the markdown report
and the log-log plot of cost against cache size (the target beside the reference)."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from radixcheck.bench import BenchPlan, OpCost, TargetCost
from radixcheck.properties.growth import FLAG_EXPONENT

CLOCK = "CPU time (time.process_time), garbage collector off inside a timed batch"


def seconds_text(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _exp(e: float | None) -> str:
    return "-" if e is None else f"{e:+.2f}"


def _largest(op: OpCost) -> tuple[int, float] | None:
    meds = op.medians()
    return meds[-1] if meds else None


def _ratio_at_common_top(op: OpCost, ref: OpCost | None) -> str:
    """Target / reference median cost at the largest size both measured."""
    if ref is None:
        return "-"
    mine, theirs = dict(op.medians()), dict(ref.medians())
    common = sorted(set(mine) & set(theirs))
    if not common or theirs[common[-1]] <= 0:
        return "-"
    return f"{mine[common[-1]] / theirs[common[-1]]:.2g}x"


def rows(result: TargetCost, reference: TargetCost | None) -> list[list[str]]:
    out = []
    for name, op in result.ops.items():
        meds = op.medians()
        ref = reference.ops.get(name) if reference else None
        first = f"{seconds_text(meds[0][1])} @ {meds[0][0]:,}" if meds else "-"
        last = f"{seconds_text(meds[-1][1])} @ {meds[-1][0]:,}" if meds else "-"
        out.append([name, f"per {op.unit}", first, last, _exp(op.exponent), _exp(ref.exponent if ref else None),
                    _ratio_at_common_top(op, ref), ("FLAG " if op.flagged else "") + op.verdict.removeprefix("flagged").lstrip(": ")])
    return out


HEADERS = ["operation", "cost", "smallest tree (tokens)", "largest tree (tokens)", "exponent", "reference", "x reference", "verdict"]


def headers(result: TargetCost) -> list[str]:
    """:data:`HEADERS`, the sizes in the target's own unit (held blocks for an index, ...)."""
    if result.size_unit == "tokens":
        return HEADERS
    return [h.replace("tree (tokens)", f"world ({result.size_unit})") for h in HEADERS]


def table(result: TargetCost, reference: TargetCost | None, fmt: str = "simple") -> str:
    return tabulate(rows(result, reference), headers=headers(result), tablefmt=fmt, disable_numparse=True)


def to_json(result: TargetCost, reference: TargetCost | None, plan: BenchPlan, machine: dict[str, Any]) -> dict[str, Any]:
    router = "world" in result.sizes  # a KV-event index or a tenant tree: no page size, no deep tree (radixcheck.bench_router)
    doc = _without_page_size(result.to_json()) if router else result.to_json()
    doc["reference"] = None if reference is None else _without_page_size(reference.to_json()) if router else reference.to_json()
    doc["flag_exponent"] = FLAG_EXPONENT
    doc["clock"] = CLOCK
    sizes = {"prompts": list(plan.wide_leaves)} if router else {"wide_leaves": list(plan.wide_leaves),
                                                                 "deep_levels": list(plan.deep_levels)}
    doc["plan"] = {**sizes, "repeats": plan.repeats, "max_seconds": plan.max_seconds, "memory_mib": plan.memory_mib}
    doc["machine"] = machine
    return doc


def _without_page_size(doc: dict[str, Any]) -> dict[str, Any]:
    """A router structure's JSON: it has no page size (the cache bench's field, 1 there, read as one)."""
    doc.pop("page_size", None)
    return doc


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def markdown(result: TargetCost, reference: TargetCost | None, plan: BenchPlan, machine_line: str, plot: Path | None) -> str:
    lines = [f"# radixcheck bench: `{result.spec}`", ""]
    flags = result.flagged()
    lines += [f"**{len(flags)} operation(s) flagged**: {', '.join(f'`{f}`' for f in flags)}." if flags
              else "**No operation flagged.**", ""]
    if "world" in result.sizes:  # a KV-event index or a tenant tree (radixcheck.bench_router)
        sizes = f"A router's world of {', '.join(f'{n:,}' for n in plan.wide_leaves)} prompts: {result.size_unit} " \
                f"{', '.join(f'{s:,}' for s in result.sizes['world'])}."
    else:
        sizes = (f"Page size {result.page_size}. Wide tree sizes (cached tokens): {', '.join(f'{s:,}' for s in result.sizes['wide'])}; "
                 f"deep tree: {', '.join(f'{s:,}' for s in result.sizes['deep'])}.")
    lines += [f"Capabilities `{result.capabilities}`.",
              f"{sizes} {plan.repeats} repeats a size; {CLOCK}; run took {result.seconds:.0f} s.",
              f"Measured on: {machine_line}. Timings on a shared machine are noisy: read the exponents and the "
              f"ratios to the reference (measured side by side, interleaved), not the absolute figures.", ""]
    lines += [table(result, reference, "github"), ""]
    lines += [f"A flag: the cost per unit of work grows with exponent >= {FLAG_EXPONENT} (Theil-Sen slope of log cost "
              f"on log size over every repeat at every size but the smallest, or at every size where fewer than four were "
              f"measured; a flag needs three sizes in the fit), or the operation exceeded the time or memory limit at some "
              f"size. Linear growth fits about 1, a logarithm 0.1-0.25.", ""]
    lines += ["| operation | what is measured |", "|---|---|"]
    lines += [f"| `{op.name}` | {op.what} (cost per {op.unit}) |" for op in result.ops.values()]
    if plot:
        lines += ["", f"![cost against cache size]({plot.name})"]
    return "\n".join(lines) + "\n"


def plot(results: Sequence[TargetCost], path: Path, title: str = "") -> bool:
    """One log-log panel per operation: median cost per unit against cached tokens, every target
    as a line (repeats as dots). False (and a message) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("radixcheck: matplotlib is not installed: no plot (pip install 'radixcheck[plots]')", file=sys.stderr)
        return False
    names = list(results[0].ops)
    cols = 4
    fig, axes = plt.subplots((len(names) + cols - 1) // cols, cols, figsize=(4.2 * cols, 3.2 * ((len(names) + cols - 1) // cols)),
                             squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        for i, result in enumerate(results):
            op = result.ops[name]
            meds = op.medians()
            if not meds:
                continue
            color = f"C{i}"
            page = f" page {result.page_size}" if result.page_size != 1 else ""
            label = f"{_short(result.spec)}{page} ({_exp(op.exponent)}{', FLAG' if op.flagged else ''})"
            ax.plot([s for s, _ in meds], [c for _, c in meds], "-o", color=color, label=label, ms=3, lw=2 if op.flagged else 1)
            ax.plot([s for s, _ in op.points], [c for _, c in op.points], ".", color=color, ms=1.5)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{name} (per {results[0].ops[name].unit})", fontsize=9)
        ax.set_xlabel("cached tokens" if results[0].size_unit == "tokens" else results[0].size_unit, fontsize=8)
        ax.set_ylabel("CPU seconds", fontsize=8)
        ax.tick_params(labelsize=7)
        if ax.lines:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=80)
    plt.close(fig)
    from PIL import Image  # matplotlib's own dependency

    # 128 colours: the same figure in a third of the bytes (eleven panels of thin lines).
    Image.open(buffer).convert("RGB").quantize(colors=128, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)
    return True


def _short(spec: str) -> str:
    module, _, attr = spec.partition(":")
    return f"{module.rsplit('.', 1)[-1]}:{attr}"
