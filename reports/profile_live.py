"""Where the live arm's time goes: per-request fixed cost versus per-token cost of a prefill.

    python -m radixcheck.reports.profile_live            # real SmolLM2-135M (default)
    python -m radixcheck.reports.profile_live --synthetic

The live ÷ token speedup ratio falls below 1 exactly when a request costs more than its computed
tokens: ``t(s) ≈ a + b·s`` for a suffix of ``s`` tokens. The radix arm pays ``a`` on every request
however short its suffix, so the ratio is ``Σ(a + b·len) / Σ(a + b·suffix)`` ÷ token speedup. This
module measures ``a`` and ``b`` by timing suffix prefills of several lengths at a fixed context,
splits one short-suffix prefill by function (cProfile), and measures what every request pays for
the weights: streaming the int8 Q8_0 values once and the exact products at few rows. It then
predicts each workload's ratio from ``a`` and ``b``. It reads the model's prepared weight
matrices (private attributes) read-only; it changes nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from radixcheck.argtypes import ArgumentParser, positive_int, refuse_weaker
from radixcheck.model import KVPool
from radixcheck.provenance import describe_run, run_stamp
from radixcheck.reports import default_out, machine
from radixcheck.reports.live import blas_threads
from radixcheck.reports.workloads import seed_workloads

SUFFIXES = (1, 4, 16, 32, 64, 128, 272)
CONTEXT = 272


def best_of(fn: Any, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def suffix_times(m: Any, reps: int) -> dict[int, float]:
    """Best time of a prefill of ``s`` tokens on top of ``CONTEXT - s`` cached ones."""
    toks = (np.arange(CONTEXT, dtype=np.int64) * 7919) % 384
    pool = KVPool(m.config, num_slots=CONTEXT)
    slots = np.arange(CONTEXT, dtype=np.int64)
    m.prefill(pool, toks, slots, 0)  # fills every slot once: any cached prefix below is real
    return {s: best_of(lambda s=s: m.prefill(pool, toks, slots, CONTEXT - s), reps) for s in SUFFIXES}


def full_times(m: Any, reps: int, lengths: tuple[int, ...] = (16, 64, 128, 176, 272)) -> dict[int, float]:
    """Best time of a full prefill (nothing cached) of ``L`` tokens: is the per-token cost constant?"""
    toks = (np.arange(max(lengths), dtype=np.int64) * 7919) % 384
    pool = KVPool(m.config, num_slots=max(lengths))
    slots = np.arange(max(lengths), dtype=np.int64)
    return {n: best_of(lambda n=n: m.prefill(pool, toks[:n], slots[:n], 0), reps) for n in lengths}


def fit(times: dict[int, float]) -> tuple[float, float]:
    """Least squares ``t = a + b·s`` in relative terms (each point weighted by ``1 / t``): the short
    suffixes, which are what ``a`` is about, count as much as the long ones, whose absolute noise
    (tens of ms on a shared box) would otherwise decide ``a``, even its sign."""
    s = np.array(list(times), dtype=float)
    t = np.array(list(times.values()))
    b, a = np.polyfit(s, t, 1, w=1.0 / t)
    return float(a), float(b)


FUNCTION_LABELS = {  # the C calls of the fused path (model.fused), one line each
    "linear": "linear: exact Q8_0 product (C; the output head)",
    "layers_forward": "layers_forward (C): every layer (layer 0's QKV part aside)",
    "layer_qkv": "layer_qkv (C): norm, QKV product, RoPE (layer 0)",
    "store_kv": "store_kv (C): pool write, memo of new rows",
    "layer_rest": "layer_rest (C): attention, 3 products, norm, SwiGLU",
}


def by_function(m: Any, s: int) -> dict[str, float]:
    """cProfile tottime of one ``s``-token suffix prefill, grouped by function."""
    toks = (np.arange(CONTEXT, dtype=np.int64) * 7919) % 384
    pool = KVPool(m.config, num_slots=CONTEXT)
    slots = np.arange(CONTEXT, dtype=np.int64)
    m.prefill(pool, toks, slots, 0)
    prof = cProfile.Profile()
    prof.enable()
    m.prefill(pool, toks, slots, CONTEXT - s)
    prof.disable()
    st = pstats.Stats(prof)
    out: dict[str, float] = {}
    for (_, _, name), (_, _, tottime, _, _) in st.stats.items():  # type: ignore[attr-defined]
        key = FUNCTION_LABELS.get(name, name)
        out[key] = out.get(key, 0.0) + tottime
    top = dict(sorted(out.items(), key=lambda kv: -kv[1])[:8])
    top["(everything else)"] = sum(out.values()) - sum(top.values())
    return top


def weight_costs(m: Any, reps: int) -> dict[str, float]:
    """Per-request costs of the weights alone: the bytes every request streams, and the exact Q8_0
    products (``ops.linear``) of 1/16/272 rows over every matrix of the model, body and head."""
    mats = [v for layer in m._layers for v in layer.values() if hasattr(v, "q")] + [m._head]
    out = {
        "weights (M elements)": sum(x.q.size for x in mats) / 1e6,
        "weight bytes per request (MB: int8 values + float32 block multipliers)": sum(x.q.nbytes + x.mult.nbytes for x in mats) / 1e6,
    }
    rng = np.random.default_rng(0)
    for rows in (1, 16, 272):
        xs = [rng.standard_normal((rows, x.shape[1])) for x in mats]
        out[f"all products, {rows} rows (s)"] = best_of(lambda xs=xs: [m.ops.linear(x, w) for x, w in zip(xs, mats, strict=True)], reps)
    return out


def predict(a: float, b: float) -> dict[str, dict[str, float]]:
    """Each seed workload's live speedup and ratio predicted by ``t = a + b·s`` (scale 1)."""
    from radixcheck.reports.hit_rates import cached_per_request

    out = {}
    for w in seed_workloads():
        cached = cached_per_request(w.requests)
        base = sum(a + b * len(r) for r in w.requests)
        radix = sum(a + b * (len(r) - c) for r, c in zip(w.requests, cached, strict=True))
        token = w.total_tokens / (w.total_tokens - sum(cached))
        out[w.name] = {"token_speedup": token, "predicted_live": base / radix, "predicted_ratio": base / radix / token}
    return out


def fixed_cost_for(b: float, target: float = 0.9) -> dict[str, float]:
    """Per workload, the largest fixed cost ``a`` (s) at which the predicted ratio still reaches ``target``."""
    out = {}
    for name in predict(0.0, b):
        lo, hi = 0.0, 10.0
        for _ in range(60):  # the predicted ratio decreases as a grows: bisect
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if predict(mid, b)[name]["predicted_ratio"] >= target else (lo, mid)
        out[name] = lo
    return out


def markdown(d: dict[str, Any], measured: dict[str, float]) -> str:
    from tabulate import tabulate

    a, b = d["fixed_cost_a_s"], d["per_token_b_s"]
    lines = [
        f"# Where the live arm's time goes ({d['model']}) — NOISY wall-clock figures",
        "",
        f"{describe_run(d)} "
        f"Produced by `python -m radixcheck.reports.profile_live{' --synthetic' if d['model'] == 'synthetic' else ''}` (BLAS threads "
        f"{d['threads']}, best of {d['reps']}) on {machine.one_line(d['machine'])}; load average at start {d['load_at_start']}. "
        "Read with `LIVE-*.md`: the live ÷ token ratio is below 1 exactly when a request costs more than its computed tokens.",
        "",
        f"**1. Prefill time versus suffix length** at a fixed {CONTEXT}-token context, and full prefills (nothing cached). "
        "Least-squares fit over the suffix runs (relative errors, so the short suffixes weigh as much as the long): "
        f"t(s) ≈ a + b·s with **a = {a * 1000:.0f} ms per request** and **b = {b * 1000:.2f} ms per token**: "
        f"every request pays about {a / b:.0f} tokens' worth of work however short its suffix.",
        "",
        tabulate(
            [[s, f"{t * 1000:.0f}", f"{(a + b * int(s)) * 1000:.0f}", f"{t / int(s) * 1000:.1f}"] for s, t in d["suffix_times_s"].items()],
            ["suffix tokens", "measured ms", "fit ms", "ms per computed token"],
            tablefmt="github",
            disable_numparse=True,
        ),
        "",
        tabulate(
            [[n, f"{t * 1000:.0f}", f"{t / int(n) * 1000:.1f}"] for n, t in d["full_prefill_times_s"].items()],
            ["full prefill tokens", "measured ms", "ms per token"],
            tablefmt="github",
            disable_numparse=True,
        ),
        "",
        "**2. One prefill split by function** (cProfile tottime, seconds). With a float32 pool all layers are one C call "
        "(`model/fused.py`: `layers_forward`, each layer's norm, QKV product, RoPE, pool write and memo, attention, three "
        "products, norm and SwiGLU; layer 0's first part, `layer_qkv`, comes before the pool's bookkeeping); the exact Q8_0 "
        "products (int8 weights times int16 activations) run inside it, `linear` is the output head's. Everything in Python "
        "is the rest.",
        "",
        tabulate(
            [
                [k, f"{d['by_function_s']['16'].get(k, 0):.3f}", f"{d['by_function_s'][str(CONTEXT)].get(k, 0):.3f}"]
                for k in d["by_function_s"]["16"]
            ],
            ["function", f"16-token suffix on {CONTEXT - 16} cached", f"{CONTEXT}-token full prefill"],
            tablefmt="github",
            disable_numparse=True,
        ),
        "",
        "**3. The weights alone, per request.** A prefill reads every weight at least once whatever its length: the bytes, and "
        "the exact products over all matrices (activation quantisation included) at 1, 16 and 272 rows.",
        "",
        tabulate([[k, f"{v:.4f}"] for k, v in d["weight_costs"].items()], ["cost", "value"], tablefmt="github", disable_numparse=True),
        "",
        "**4. Predicted versus measured ratio.** Predicted from t = a + b·s over each workload's requests (scale 1); 'a for 0.9' is the "
        "largest per-request fixed cost at which the prediction still reaches 0.9.",
        "",
        tabulate(
            [
                [
                    k,
                    f"{v['token_speedup']:.2f}×",
                    f"{v['predicted_ratio']:.2f}",
                    f"{measured[k]:.2f}" if k in measured else "—",
                    f"{d['fixed_cost_for_0.9_s'][k] * 1000:.0f} ms",
                ]
                for k, v in d["predicted"].items()
            ],
            ["workload", "token speedup", "predicted ratio", "measured ratio (LIVE)", "a for 0.9"],
            tablefmt="github",
            disable_numparse=True,
        ),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(
        prog="python -m radixcheck.reports.profile_live", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--synthetic", action="store_true", help="profile the synthetic model instead of SmolLM2-135M")
    p.add_argument("--threads", type=positive_int, default=1, help="the model's threads (default 1)")
    p.add_argument("--reps", type=positive_int, default=3, help="repetitions, best of (default 3)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: reports/ in a checkout, "
                   "./radixcheck-reports when installed)")
    p.add_argument("--force", action="store_true", help="replace the saved profile even with fewer repetitions")
    args = p.parse_args(argv)
    if args.out is None:  # --out DIR chooses the place: nothing there is protected
        which = "synthetic" if args.synthetic else "smollm2"
        saved = default_out() / "artifacts" / f"profile-{which}.json"
        saved_reps = json.loads(saved.read_text()).get("reps", 0) if saved.is_file() else 0
        if args.reps < saved_reps:
            refuse_weaker(p, default_out() / f"PROFILE-{which}.md",
                          [f"--reps {args.reps}: best of {args.reps} where it has best of {saved_reps}"], args.force)
    stamp = run_stamp()  # before the run: its code and settings
    if args.synthetic:
        from radixcheck.model import load_default

        m, which = load_default(), "synthetic"
    else:
        from radixcheck.model.smollm2 import load_smollm2

        m, which = load_smollm2(), "smollm2"
    import os

    mach = machine.describe()
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    m.threads = args.threads  # the model owns its threads (and limits BLAS inside each call)
    with blas_threads(args.threads):
        times = suffix_times(m, args.reps)
        fulls = full_times(m, args.reps)
        a, b = fit(times)
        funcs = {s: by_function(m, s) for s in (16, CONTEXT)}
        weights = weight_costs(m, args.reps)
    data = {
        **stamp,
        "model": which,
        "threads": args.threads,
        "reps": args.reps,
        "load_at_start": load,
        "machine": mach,
        "noisy": True,
        "suffix_times_s": {str(k): round(v, 4) for k, v in times.items()},
        "full_prefill_times_s": {str(k): round(v, 4) for k, v in fulls.items()},
        "fixed_cost_a_s": round(a, 4),
        "per_token_b_s": round(b, 5),
        "by_function_s": {str(s): {k: round(v, 4) for k, v in f.items()} for s, f in funcs.items()},
        "weight_costs": {k: round(v, 4) for k, v in weights.items()},
        "predicted": {k: {kk: round(vv, 3) for kk, vv in v.items()} for k, v in predict(a, b).items()},
        "fixed_cost_for_0.9_s": {k: round(v, 4) for k, v in fixed_cost_for(b).items()},
    }
    measured: dict[str, float] = {}
    args.out = args.out or default_out()
    live_json = args.out / "artifacts" / f"live-{which}.json"
    if live_json.is_file():
        measured = {w["name"]: w["live_over_token"] for w in json.loads(live_json.read_text())["workloads"] if w["live_over_token"]}
    path = args.out / "artifacts" / f"profile-{which}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    md = args.out / f"PROFILE-{which}.md"
    md.write_text(markdown(data, measured) + "\n", encoding="utf-8")
    print(markdown(data, measured))
    print(f"wrote {path} and {md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
