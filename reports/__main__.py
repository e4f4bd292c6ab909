"""``python -m radixcheck.reports``: regenerate every table, artifact and plot under ``reports/``.

    python -m radixcheck.reports                 # token ledger + plots + live arm on the synthetic model
    python -m radixcheck.reports --real          # ... plus the live arm on the real SmolLM2-135M Q8_0
    python -m radixcheck.reports --no-live       # token ledger and plots only (seconds)
    python -m radixcheck.reports --scale 2       # every length doubled; written to reports/runs/scale2-seed0/

Token tables (``LEDGER.md``, ``artifacts/ledger.json``) are deterministic and byte-stable; timing
tables (``LIVE-<model>.md``, ``artifacts/live-<model>.json``) are noisy and carry the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from radixcheck.argtypes import ArgumentParser, non_negative_int, positive_int, refuse_weaker
from radixcheck.provenance import run_stamp
from radixcheck.reports import default_out as reports_dir
from radixcheck.reports import ledger as ledger_mod
from radixcheck.reports.workloads import DEFAULT_SEED


def default_out(scale: int, seed: int) -> Path:
    """The committed tables live in reports/ itself; other scales/seeds go to reports/runs/."""
    if scale == 1 and seed == DEFAULT_SEED:
        return reports_dir()
    return reports_dir() / "runs" / f"scale{scale}-seed{seed}"


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")  # exactly one final newline
    print(f"wrote {path}", file=sys.stderr)


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = ArgumentParser(prog="radixcheck reports", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=positive_int, default=1, help="multiply every workload length by N (hit rates do not change)")
    p.add_argument("--seed", type=non_negative_int, default=DEFAULT_SEED, help="token-id seed (hit rates do not change)")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default: reports/ in a checkout, ./radixcheck-reports when installed; "
                   "other scales and seeds go to runs/ below it)")
    p.add_argument("--real", action="store_true", help="also run the live arm on the real SmolLM2-135M Q8_0 (downloads it on first use)")
    p.add_argument("--no-live", action="store_true", help="skip the live (timed) arm")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--reps", type=positive_int, default=None,
                   help="live arm: best of N interleaved A/B repetitions "
                   "(default 3 synthetic, 2 real; at least as many as the report replaced)")
    p.add_argument("--quick", action="store_true", help="live arm: one repetition (a smoke run; ratios are noisier)")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="live arm: BLAS threads (default 1: fastest on a shared 2-core box, measured)")
    p.add_argument("--last-only", action="store_true", help="live arm: compute (and compare) only each request's last-position logits")
    p.add_argument("--force", action="store_true", help="replace a report even with a weaker one (fewer repetitions, last logits only)")
    args = p.parse_args(argv)
    if args.out is None and not args.no_live:  # --out DIR chooses the place: nothing there is protected
        out = default_out(args.scale, args.seed)
        for which in ["synthetic"] + (["smollm2"] if args.real else []):
            refuse_weaker(p, out / f"LIVE-{which}.md", weaker_live(args, out / "artifacts" / f"live-{which}.json"), args.force)
    return args


def committed_live(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def weaker_live(args: argparse.Namespace, saved: Path) -> list[str]:
    """How this run's live arm would be weaker than the one saved at ``saved`` (if any)."""
    before = committed_live(saved)
    reps = 1 if args.quick else args.reps
    weaker = []
    if reps is not None and reps < before.get("reps", 0):
        given = "--quick" if args.quick else f"--reps {reps}"
        weaker.append(f"{given}: best of {reps} repetition(s) where it has best of {before['reps']}")
    if args.last_only and before.get("last_only") is False:
        weaker.append("--last-only: compares only last-position logits where it compares all")
    return weaker


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out or default_out(args.scale, args.seed)
    t0 = time.perf_counter()
    led = ledger_mod.build(args.scale, args.seed)
    write_text(out / "LEDGER.md", ledger_mod.markdown(led))
    write_json(out / "artifacts" / "ledger.json", ledger_mod.to_json(led))
    print(f"token ledger: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if not args.no_plots:
        from radixcheck.reports import plots

        plots.token_plots(led, out / "plots")
    if not args.no_live:
        run_live(args, out, "synthetic")
        if args.real:
            run_live(args, out, "smollm2")
    return 0


def load_model(which: str) -> tuple[Any, str]:
    if which == "synthetic":
        from radixcheck.model import load_default

        m = load_default()
        return m, f"synthetic wiring model ({m.config.n_layers} layers, d_model {m.config.d_model}, vocab {m.config.vocab_size}, Q8_0)"
    from radixcheck.model.smollm2 import load_smollm2

    return load_smollm2(), "SmolLM2-135M-Instruct Q8_0 (30 layers, d_model 576, vocab 49152)"


def progress_bar(total: int, desc: str) -> Any | None:
    try:
        from tqdm import tqdm
    except ImportError:
        print("tqdm is not installed: no progress bar (pip install 'radixcheck[real]')", file=sys.stderr)
        return None
    return tqdm(total=total, desc=desc, unit="req", file=sys.stderr)


def run_live(args: argparse.Namespace, out: Path, which: str) -> None:
    """Both arms on the seed's four workloads; writes LIVE-<which>.md and artifacts/live-<which>.json."""
    import os

    from radixcheck.reports import live, machine
    from radixcheck.reports.workloads import seed_workloads

    saved_reps = 0 if args.force else committed_live(out / "artifacts" / f"live-{which}.json").get("reps", 0)
    reps = 1 if args.quick else (args.reps or max(3 if which == "synthetic" else 2, saved_reps))  # never fewer than it replaces
    t0, stamp = time.perf_counter(), run_stamp()  # before the run: its code and settings, not a later edit's
    m, desc = load_model(which)
    ws = seed_workloads(args.scale, args.seed)
    if max(w.max_len for w in ws) > m.config.max_seq_len:
        print(f"live arm skipped on {which}: scale {args.scale} exceeds max_seq_len {m.config.max_seq_len}", file=sys.stderr)
        return
    cmd = (
        "python -m radixcheck.reports"
        + ("" if args.scale == 1 else f" --scale {args.scale}")
        + ("" if args.seed == DEFAULT_SEED else f" --seed {args.seed}")
    )
    cmd += " --real" if which != "synthetic" else ""
    cmd += " --quick" if args.quick else (f" --reps {reps}" if reps != (3 if which == "synthetic" else 2) else "")
    meta = {
        **stamp,
        "model": desc,
        "command": cmd,
        "scale": args.scale,
        "seed": args.seed,
        "reps": reps,
        "threads": args.threads,
        "kv_dtype": "float32",
        "last_only": args.last_only,
        "load_at_start": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    bar = progress_bar(reps * sum(len(w.requests) for w in ws), f"live {which}") if which != "synthetic" else None
    with live.blas_threads(args.threads):
        results = live.run(m, ws, reps, last_only=args.last_only, progress=bar)
    if bar is not None:
        bar.close()
    mach = machine.describe()
    meta["wall_s"] = round(time.perf_counter() - t0, 1)
    write_text(out / f"LIVE-{which}.md", live.markdown(results, meta, machine.one_line(mach)))
    write_json(out / "artifacts" / f"live-{which}.json", live.to_json(results, meta, mach))
    for r in results:
        if r.bit_identical:
            cpu = "" if r.ratio_cpu is None else f"  (CPU time {r.ratio_cpu:.2f})"
            line = f"  {r.workload:16s} token {r.token_speedup:5.2f}x  live {r.live_speedup:5.2f}x  ratio {r.ratio:.2f}{cpu}"
            print(line, file=sys.stderr)
        else:
            print(f"  {r.workload:16s} NOT BIT-IDENTICAL: speedup refused ({r.mismatches[:2]})", file=sys.stderr)
    if not args.no_plots:
        from radixcheck.reports import plots

        plots.live_plot(results, desc, out / "plots" / f"live-{which}.png")
    print(f"live arm ({which}): {meta['wall_s']} s", file=sys.stderr)
    if not all(r.bit_identical for r in results):
        raise SystemExit(f"live arm on {which}: radix-arm logits differ from the full prefill; no speedup reported")


if __name__ == "__main__":
    raise SystemExit(main())
