"""PNG plots (matplotlib is optional: without it the plots are skipped with a message)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from radixcheck.reports.ledger import Ledger, order_sensitive
from radixcheck.reports.scheduling import QUEUE_SIZES, policies

# No timestamps or version strings in the files, so a regeneration only changes them when the data does.
PNG_METADATA = {"Software": None}


def _pyplot() -> Any | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping plots (pip install 'radixcheck[plots]')", file=sys.stderr)
        return None
    return plt


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata=PNG_METADATA)
    print(f"wrote {path}", file=sys.stderr)


def token_plots(ledger: Ledger, out: Path) -> None:
    """Hit rate versus budget (order-sensitive workloads) and radix vs declare-one hit rates."""
    plt = _pyplot()
    if plt is None:
        return
    sens = order_sensitive(ledger)
    fig, axes = plt.subplots(1, len(sens), figsize=(6 * len(sens), 4.2), squeeze=False)
    for ax, w in zip(axes[0], sens, strict=True):
        rows = ledger.sweeps[w.name]
        xs = [float(b.factor) for b in rows]
        for p, style in zip(policies(QUEUE_SIZES), ["o-", "s-", "^--", "v--"], strict=True):
            ax.plot(xs, [100 * b.of_optimum(p) for b in rows], style, label=p)
        ax.set_title(f"{w.name} — {w.origin}", fontsize=10)
        ax.set_xlabel("cache budget (× longest request)")
        ax.set_ylabel("% of unbounded optimum")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.set_ylim(0, 105)
        ax.axhline(96, color="grey", lw=0.8, ls=":", label="SGLang paper: online LPM at 96 % (avg.)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Hit rate vs cache budget (reference cache, scale {ledger.scale}, seed {ledger.seed})", fontsize=11)
    fig.tight_layout()
    _save(fig, out / "scheduling-sweep.png")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    names = [d.workload for d in ledger.declare_one]
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [100 * d.hit_rate for d in ledger.declare_one], 0.4, label="declare-one-prefix")
    ax.bar([x + 0.2 for x in xs], [100 * d.radix_hit_rate for d in ledger.declare_one], 0.4, label="radix tree")
    ax.set_xticks(list(xs), names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("hit rate (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    ax.set_title(f"Reuse found: one declared prefix vs the radix tree (scale {ledger.scale})", fontsize=10)
    fig.tight_layout()
    _save(fig, out / "hit-rates.png")
    plt.close(fig)


def live_plot(results: Any, model_desc: str, path: Path) -> None:
    """Token speedup (exact) next to live speedup (noisy), per workload."""
    plt = _pyplot()
    if plt is None:
        return
    ok = [r for r in results if r.bit_identical]
    if not ok:
        return
    fig, ax = plt.subplots(figsize=(7, 3.8))
    xs = range(len(ok))
    ax.bar([x - 0.2 for x in xs], [r.token_speedup for r in ok], 0.4, label="token speedup (exact)")
    ax.bar([x + 0.2 for x in xs], [r.live_speedup for r in ok], 0.4, label="live speedup (best of N, noisy)")
    for x, r in zip(xs, ok, strict=True):
        ax.text(x + 0.2, r.live_speedup, f"{r.ratio:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), [r.workload for r in ok], fontsize=8)
    ax.set_ylabel("speedup over full prefill (×)")
    ax.set_title(f"Live arm: {model_desc}\n(labels: live ÷ token)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
