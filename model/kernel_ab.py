"""A/B of the C kernels between two trees, in one process, interleaved.

    python -m radixcheck.model.kernel_ab attention --old main   # exact_attention calls alone
    python -m radixcheck.model.kernel_ab model --old main       # the real model, old and new library swapped in
    python -m radixcheck.model.kernel_ab workloads --old main   # the seed workloads' live / token ratio, by CPU time

Why: a kernel change is kept only if it is faster *and* gives the same bits, and on a shared box
only an interleaved comparison in one process says which is faster. This builds the kernel library
of git revision ``REF`` (``git show REF:model/kernels/...``) and of the working tree with one path's
flags (``--path``, default ``avx2``) and loads both (neither is self-tested here: run the kernel
self-test and ``kernel_check`` on the new tree). Timings are CPU time, best of ``--reps``, the two
libraries alternating; ``--builds N`` builds each side N times and takes the best over its builds
(two builds of the same source, loaded in one process, measured up to 15 % apart on a 272-token
prefill on an Intel Xeon: model/NOTES.md, issue 43, eighth round). Every output must be ``np.array_equal`` between the two; a difference is
reported and fails the run. Prints old and new milliseconds and old / new (above 1: new is faster).

``attention``: on SmolLM2's shapes (9 query heads over 3 KV heads of 64), one model's worth of calls
(``--layers``, 30, distinct inputs) per (queries, cached context) pair, the cached keys read from
memo rows scattered over a 4352-row pool. ``model``: SmolLM2-135M (``load_smollm2``), suffixes of
16, 32 and 64 tokens and 1 over a 272-token context (all-position logits, as the live arm computes)
and last-logit prefills at T = 64, 256 and 512. ``workloads``: the live arm's ratio (live speedup ÷
token speedup) of each seed workload predicted from CPU times of SmolLM2 prefills of its requests'
shapes (each distinct (suffix, cached) shape and each full prompt timed once per repetition, best
of ``--reps``, all-position logits as the live arm computes): baseline = sum of full prefills,
radix = sum of suffix prefills over the cached prefix; the cache's own bookkeeping (~1 ms a
workload) is left out. It also fits ``a + m·t + p·pairs`` to the shapes (``live_bound``) and prints the
bound: the ratio with ``a = 0`` and one ``p`` for both arms, and the ``p`` that would reach 0.97.
CPU time is what a loaded shared box measures well, unlike the live arm's wall clock. In ``model``
and ``workloads`` the cached prefix sits in the slots the live arm's radix
arm gets (``--slots live``: ``SlotAllocator``'s default, scattered one by one over a pool of the live
arm's size), or in ascending ones (``--slots ascending``, what this tool did before issue 43's
thirteenth round: 1.5-2 % cheaper a suffix request on Zen 4, model/NOTES.md).
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from radixcheck.argtypes import ArgumentParser, positive_int
from radixcheck.model import exact, kernel_build, live_bound, q8kernel

H, HKV, D, POOL = 9, 3, 64, 4352
QUERIES = (1, 4, 16, 32, 64, 272, 512)
CONTEXTS = (256, 512)


def build_at(rev: str | None, flags: tuple[str, ...], out: Path) -> ctypes.CDLL:
    """The kernel library of git revision ``rev`` (``None``: this tree), built into ``out`` and loaded."""
    if rev is None:
        srcs = kernel_build.sources()
    else:

        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout

        root = Path(__file__).resolve().parent
        top = git("rev-parse", "--show-toplevel").strip()
        rel, root = root.relative_to(top) / "kernels", Path(top)  # ls-tree lists what is under git's -C directory
        names = git("ls-tree", "--name-only", f"{rev}:{rel}").split()
        srcs = {n: git("show", f"{rev}:{rel}/{n}") for n in names if n.endswith((".c", ".h"))}
    src = out.with_suffix("")
    src.mkdir(parents=True, exist_ok=True)
    for name, text in srcs.items():
        (src / name).write_text(text, encoding="utf-8")
    unit = src / "all_kernels.c"
    unit.write_text("".join(f'#include "{n}"\n' for n in sorted(srcs) if n.endswith(".c")))
    cc = kernel_build.compiler()
    if cc is None:
        raise SystemExit("no C compiler")
    subprocess.run([cc, *flags, "-I", str(src), "-o", str(out), str(unit), "-lm"], check=True)
    return q8kernel._library(out)


def case(n: int, ctx: int, rng: np.random.Generator) -> tuple:
    """Arguments of one layer's call: ``n`` queries after ``ctx`` cached keys (memo rows scattered)."""
    ops = exact.ExactOps(kernel="numpy")
    k, v = rng.normal(0, 1.5, (POOL + n, HKV, D)), rng.normal(0, 1, (POOL + n, HKV, D))
    ki, sk, vi, sv = ops.quantise_kv(k, v)
    mk, mv = np.ascontiguousarray(ki[:POOL], np.float32), np.ascontiguousarray(vi[:POOL], np.float32)
    msk, msv = np.ascontiguousarray(sk[:POOL]), np.ascontiguousarray(sv[:POOL])
    fk, fv = np.ascontiguousarray(ki[POOL:], np.float32), np.ascontiguousarray(vi[POOL:], np.float32)
    fsk, fsv = np.ascontiguousarray(sk[POOL:]), np.ascontiguousarray(sv[POOL:])
    slots = np.ascontiguousarray(rng.permutation(POOL)[:ctx], np.int64)
    q = rng.normal(0, 1.5, (n, H, D))
    pos = np.arange(ctx, ctx + n, dtype=np.int64)
    return q, pos, (slots, mk, msk, mv, msv), (fk, fsk, fv, fsv)


def call(lib: ctypes.CDLL, args: tuple, out: np.ndarray) -> None:
    q, pos, cached, fresh = args
    bits = (exact.QK_BITS, exact.P_BITS, exact.DENOM_BITS)
    q8kernel.attention(lib, q, pos, cached, fresh, bits, out, 0, q.shape[0])


def timed(lib: ctypes.CDLL, args: list[tuple], outs: list[np.ndarray]) -> float:
    t = time.process_time()
    for a, o in zip(args, outs, strict=True):
        call(lib, a, o)
    return time.process_time() - t


def attention_ab(olds: list[ctypes.CDLL], news: list[ctypes.CDLL], a: argparse.Namespace) -> bool:
    rng = np.random.default_rng(43)
    ok = True
    print(f"{'queries':>7} {'context':>7} {'old ms':>8} {'new ms':>8} {'old/new':>7}")
    for ctx in a.contexts:
        for n in a.queries:
            layers = max(1, a.layers if n * (n + ctx) < 200_000 else a.layers // 5)
            args = [case(n, ctx, rng) for _ in range(layers)]
            o_old = [np.empty((n, H, D)) for _ in args]
            o_new = [np.empty((n, H, D)) for _ in args]
            best_old = best_new = float("inf")
            for _ in range(a.reps):
                for old, new in zip(olds, news, strict=True):
                    best_old = min(best_old, timed(old, args, o_old))
                    o_ref = [x.copy() for x in o_old]
                    best_new = min(best_new, timed(new, args, o_new))
                    ok &= all(np.array_equal(x, y) for x, y in zip(o_ref, o_new, strict=True))
            same = all(np.array_equal(x, y) for x, y in zip(o_old, o_new, strict=True))
            ok &= same
            print(f"{n:>7} {ctx:>7} {1e3 * best_old:8.2f} {1e3 * best_new:8.2f} {best_old / best_new:7.3f}"
                  f"{'' if same else '  OUTPUTS DIFFER'}  ({layers} calls)", flush=True)  # fmt: skip
    return ok


def _alternating(olds: list[ctypes.CDLL], news: list[ctypes.CDLL]) -> list[tuple[str, ctypes.CDLL]]:
    """("old", build 1), ("new", build 1), ("old", build 2), ...: each side's builds, interleaved."""
    return [pair for old, new in zip(olds, news, strict=True) for pair in (("old", old), ("new", new))]


def prefix_slots(longest: int, pool_slots: int, how: str) -> tuple[int, np.ndarray]:
    """``(pool size, slots)`` for a ``longest``-token prefix: ``live``, the slots the live arm's radix arm
    gets for its first prompt (``reports.live.RadixArm``: ``SlotAllocator(pool_slots)``, churned, so
    scattered one by one); ``ascending``, ``arange(longest)`` in a pool of ``longest``."""
    if how == "ascending":
        return longest, np.arange(longest, dtype=np.int64)
    from radixcheck.properties.cache.contract import SlotAllocator

    return pool_slots, SlotAllocator(pool_slots).alloc(longest)


def _model_with_a_kernel() -> Any:
    """The real SmolLM2, on a compiled kernel library (the A/B swaps it)."""
    from radixcheck.model.smollm2 import load_smollm2

    m = load_smollm2()
    if getattr(m.ops, "_lib", None) is None:
        raise SystemExit("the model has no compiled kernel to swap (RADIXCHECK_Q8_KERNEL=numpy?)")
    return m


def model_ab(olds: list[ctypes.CDLL], news: list[ctypes.CDLL], a: argparse.Namespace) -> bool:
    from radixcheck.model import KVPool

    m = _model_with_a_kernel()
    ctx, longest = 272, 512
    toks = (np.arange(longest, dtype=np.int64) * 7919) % 384
    size, slots = prefix_slots(longest, POOL, a.slots)
    pool = KVPool(m.config, num_slots=size)
    m.prefill(pool, toks[:ctx], slots[:ctx], 0)  # the cached prefix below is real
    runs: list[tuple[str, Callable[[], np.ndarray]]] = [
        (f"{s} over {ctx - s}", lambda s=s: m.prefill(pool, toks[:ctx], slots[:ctx], ctx - s)) for s in (16, 32, 64, 1)
    ]
    runs += [(f"last-logit T={t}", lambda t=t: m.prefill(pool, toks[:t], slots[:t], 0, last_only=True)) for t in (64, 256, 512)]
    ok = True
    print(f"{'request':>18} {'old ms':>8} {'new ms':>8} {'old/new':>7}")
    for name, run in runs:
        best = {"old": float("inf"), "new": float("inf")}
        outs: dict[str, list[np.ndarray]] = {"old": [], "new": []}
        for _ in range(a.reps):
            for which, lib in _alternating(olds, news):
                m.ops._lib = lib
                t = time.process_time()
                outs[which].append(run())
                best[which] = min(best[which], time.process_time() - t)
        same = all(np.array_equal(x, outs["old"][0]) for x in outs["old"] + outs["new"])
        ok &= same
        print(f"{name:>18} {1e3 * best['old']:8.1f} {1e3 * best['new']:8.1f} {best['old'] / best['new']:7.3f}"
              f"{'' if same else '  OUTPUTS DIFFER'}", flush=True)  # fmt: skip
    return ok


def workloads_ab(olds: list[ctypes.CDLL], news: list[ctypes.CDLL], a: argparse.Namespace) -> bool:
    from radixcheck.model import KVPool
    from radixcheck.reports.hit_rates import cached_per_request
    from radixcheck.reports.workloads import seed_workloads

    m = _model_with_a_kernel()
    loads = [(w, cached_per_request(w.requests)) for w in seed_workloads()]
    shapes = sorted(
        {(len(r) - c, c) for w, cs in loads for r, c in zip(w.requests, cs, strict=True)}
        | {(len(r), 0) for w, _ in loads for r in w.requests}
    )
    longest = max(s + c for s, c in shapes)
    toks = (np.arange(longest, dtype=np.int64) * 7919) % 384
    size, slots = prefix_slots(longest, max(w.total_tokens for w, _ in loads), a.slots)
    pool = KVPool(m.config, num_slots=size)
    m.prefill(pool, toks, slots, 0)  # every cached prefix below is real
    best = {lib: dict.fromkeys(shapes, float("inf")) for lib in ("old", "new")}
    ok = True
    for _ in range(a.reps):
        for s, c in shapes:
            outs = []
            for which, lib in _alternating(olds, news):
                m.ops._lib = lib
                t = time.process_time()
                outs.append(m.prefill(pool, toks[: s + c], slots[: s + c], c))
                best[which][(s, c)] = min(best[which][(s, c)], time.process_time() - t)
            ok &= all(np.array_equal(outs[0], o) for o in outs[1:])
    print(f"{'workload':>16} {'token':>6} {'old live':>8} {'old ratio':>9} {'new live':>8} {'new ratio':>9}")
    for w, cs in loads:
        token = w.total_tokens / (w.total_tokens - sum(cs))
        row = []
        for which in ("old", "new"):
            base = sum(best[which][(len(r), 0)] for r in w.requests)
            radix = sum(best[which][(len(r) - c, c)] for r, c in zip(w.requests, cs, strict=True))
            row += [base / radix, base / radix / token]
        print(f"{w.name:>16} {token:6.2f} {row[0]:8.2f} {row[1]:9.3f} {row[2]:8.2f} {row[3]:9.3f}")
    # the cost model a + m·t + p·pairs fitted to each side's shapes, and the bound it implies (model/live_bound.py)
    hl = m.config.n_heads * m.config.n_layers
    fits = {which: live_bound.fit(best[which], hl) for which in ("old", "new")}
    print("fit a + m·t + p·pairs, old / new: "
          + "; ".join(f"{k} {getattr(fits['old'], k) * u:.3g} / {getattr(fits['new'], k) * u:.3g} {unit}"
                      for k, u, unit in (("a", 1e3, "ms"), ("m", 1e3, "ms a token"), ("p", 1e9, "ns a pair"))))
    print(f"{'workload':>16} {'bound':>6} {'fitted':>7} {'p for 0.97 (ns, a = 0)':>23}   (new library's fit; bound: a = 0)")
    for w, cs in loads:
        reqs = [(len(r), c) for r, c in zip(w.requests, cs, strict=True)]
        f = fits["new"]
        perfect = live_bound.Cost(0.0, f.m, f.p)
        print(f"{w.name:>16} {live_bound.ratio(reqs, perfect, hl):6.3f} {live_bound.ratio(reqs, f, hl):7.3f} "
              f"{1e9 * live_bound.p_for(reqs, perfect, 0.97, hl):23.2f}")
    print(
        "per shape (suffix over cached), old / new ms:",
        ", ".join(f"{s}/{c} {1e3 * best['old'][(s, c)]:.0f}/{1e3 * best['new'][(s, c)]:.0f}" for s, c in shapes),
    )
    print("outputs np.array_equal old vs new:", ok)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m radixcheck.model.kernel_ab", description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("attention", "model", "workloads"))
    ap.add_argument("--old", required=True, help="git revision of the old kernels (e.g. main)")
    ap.add_argument("--path", default="avx2", choices=[p.name for p in kernel_build.PATHS])
    ap.add_argument("--reps", type=positive_int, default=7)
    ap.add_argument("--builds", type=positive_int, default=1, help="builds of each side (best over them: a build's placement matters)")
    ap.add_argument("--layers", type=positive_int, default=30, help="attention: calls per timing (distinct inputs, as a model's layers)")
    ap.add_argument("--queries", type=positive_int, nargs="*", default=list(QUERIES))
    ap.add_argument("--contexts", type=positive_int, nargs="*", default=list(CONTEXTS))
    ap.add_argument("--slots", choices=("live", "ascending"), default="live",
                    help="model, workloads: the cached prefix's slots, scattered as the live arm's (default) or ascending")
    a = ap.parse_args(argv)
    try:
        subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--verify", "--quiet", f"{a.old}^{{commit}}"],
                       capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        ap.error(f"--old {a.old!r}: not a git revision of this checkout (the A/B reads the old kernels from git)")
    flags = kernel_build.BY_NAME[a.path].flags
    with tempfile.TemporaryDirectory() as tmp:
        olds = [build_at(a.old, flags, Path(tmp) / f"old{i}.so") for i in range(a.builds)]
        news = [build_at(None, flags, Path(tmp) / f"new{i}.so") for i in range(a.builds)]
        ok = {"attention": attention_ab, "model": model_ab, "workloads": workloads_ab}[a.what](olds, news, a)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
