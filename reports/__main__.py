"""``python -m reports``: regenerate every table, artifact and plot under ``reports/``.

    python -m reports                 # token ledger + plots + live arm on the synthetic model
    python -m reports --real          # ... plus the live arm on the real SmolLM2-135M Q8_0
    python -m reports --no-live       # token ledger and plots only (seconds)
    python -m reports --scale 2       # every length doubled; written to reports/runs/scale2-seed0/

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

from reports import ledger as ledger_mod
from reports.workloads import DEFAULT_SEED

HERE = Path(__file__).resolve().parent


def default_out(scale: int, seed: int) -> Path:
    """The committed tables live in reports/ itself; other scales/seeds go to reports/runs/."""
    if scale == 1 and seed == DEFAULT_SEED:
        return HERE
    return HERE / "runs" / f"scale{scale}-seed{seed}"


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")  # exactly one final newline
    print(f"wrote {path}", file=sys.stderr)


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m reports", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=1, help="multiply every workload length by N (hit rates do not change)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="token-id seed (hit rates do not change)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: reports/ at scale 1 seed 0, else reports/runs/...)")
    p.add_argument("--real", action="store_true", help="also run the live arm on the real SmolLM2-135M Q8_0 (downloads it on first use)")
    p.add_argument("--no-live", action="store_true", help="skip the live (timed) arm")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--reps", type=int, default=None, help="live arm: best of N interleaved A/B repetitions (default 3 synthetic, 2 real)")
    p.add_argument("--quick", action="store_true", help="live arm: one repetition (a smoke run; ratios are noisier)")
    args = p.parse_args(argv)
    if args.scale < 1:
        p.error("--scale must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out or default_out(args.scale, args.seed)
    t0 = time.perf_counter()
    led = ledger_mod.build(args.scale, args.seed)
    write_text(out / "LEDGER.md", ledger_mod.markdown(led))
    write_json(out / "artifacts" / "ledger.json", ledger_mod.to_json(led))
    print(f"token ledger: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if not args.no_plots:
        from reports import plots

        plots.token_plots(led, out / "plots")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
