"""The live arm: do the radix cache's token savings become prefill-time savings, bit for bit?

For each workload and each request, two arms run back to back on the same model:

* **baseline** — prefill the whole prompt into scratch slots (what a server without a cache does);
* **radix** — the request protocol of ``properties.cache.serving.serve`` (unbounded cache): match the
  prompt in ``reference.RadixCache``, lock it, allocate slots for the suffix only, prefill the
  suffix on top of the matched slots, insert, free the duplicates, unlock.

Both arms' KV pools are allocated and touched before anything is timed (``allocate_pool``), as a
server allocates its KV pool at start-up. The arms alternate which goes first request by request
and repetition by repetition (A/B interleaving, so drift on a shared box hits both), and each
arm's time for a workload is the best of ``reps`` repetitions. Every radix-arm request's logits must equal the baseline's logits for the
same positions (``np.array_equal``); if any differs, no speedup is reported for that workload.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from radixcheck.model import KVPool
from radixcheck.model.llama import Model
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.cache.serving import serve
from radixcheck.provenance import describe_run
from radixcheck.reference import RadixCache
from radixcheck.reports.workloads import Workload


class NotBitIdentical(AssertionError):
    """A radix-arm request's logits differ from the full prefill's: the speedup would be meaningless."""


@dataclass
class LiveResult:
    """One workload on one model."""

    workload: str
    requests: int
    prompt_tokens: int
    computed_tokens: int  # by the radix arm (cache hits excluded)
    baseline_s: list[float] = field(default_factory=list)  # per repetition
    radix_s: list[float] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    logits_compared: int = 0  # logit rows compared with np.array_equal
    # CPU seconds of this process per repetition, beside the wall-clock ones: on a shared box another
    # process's burst stretches the wall clock of whichever arm it lands on, not its CPU time
    baseline_cpu_s: list[float] = field(default_factory=list)
    radix_cpu_s: list[float] = field(default_factory=list)

    @property
    def token_speedup(self) -> float:
        return self.prompt_tokens / self.computed_tokens

    @property
    def bit_identical(self) -> bool:
        return not self.mismatches and self.logits_compared > 0

    @property
    def live_speedup(self) -> float:
        if not self.bit_identical:
            raise NotBitIdentical(f"{self.workload}: {self.mismatches[:2]}")
        return min(self.baseline_s) / min(self.radix_s)

    @property
    def ratio(self) -> float:
        return self.live_speedup / self.token_speedup

    @property
    def ratio_cpu(self) -> float | None:
        """live ÷ token by CPU time (best of each arm), or None for a result without CPU times."""
        if not self.bit_identical:
            raise NotBitIdentical(f"{self.workload}: {self.mismatches[:2]}")
        if not self.baseline_cpu_s or not self.radix_cpu_s:
            return None
        return min(self.baseline_cpu_s) / min(self.radix_cpu_s) / self.token_speedup

    @property
    def ratio_per_rep(self) -> list[float]:
        """live ÷ token of each repetition alone (its two arms ran interleaved): the run's spread."""
        if not self.bit_identical:
            raise NotBitIdentical(f"{self.workload}: {self.mismatches[:2]}")
        return [b / r / self.token_speedup for b, r in zip(self.baseline_s, self.radix_s, strict=True)]


def allocate_pool(model: Model, slots: int, dtype: str) -> KVPool:
    """A KV pool whose memory is already touched, as a server allocates its KV pool at start-up.

    Why: NumPy asks Linux for huge pages on large arrays, and the first write to each one costs a
    page fault with compaction: ~0.5 s for the radix arm's 200 MB pool, all of it charged to
    whichever request first touches it (measured: the first 272-token prefill into a fresh
    4352-slot pool took 2.2-2.6 s against 1.8-2.0 s into a fresh 272-slot one). Both arms' pools,
    and the model's K/V memo on them, are written once here, before anything is timed.
    """
    pool = KVPool(model.config, num_slots=slots, dtype=dtype)
    pool.k.fill(0)
    pool.v.fill(0)
    memo = pool.memo(model)
    for layer in range(pool.n_layers):
        for a in memo.arrays(layer):
            a.fill(0)
    return pool


class RadixArm:
    """A radix cache over a KV pool: serves a request from its matched slots plus a suffix prefill."""

    def __init__(self, model: Model, pool_slots: int, dtype: str = "float32") -> None:
        self.model = model
        self.pool = allocate_pool(model, pool_slots, dtype)
        self.allocator = SlotAllocator(pool_slots)
        self.cache = RadixCache(self.allocator, page_size=1)

    def serve(self, tokens: np.ndarray, last_only: bool = False) -> tuple[int, np.ndarray]:
        """``properties.cache.serving.serve`` (no budget) with the model's suffix prefill as its compute step."""
        out: dict[str, np.ndarray] = {}

        def prefill(tokens, slots: np.ndarray, cached: int) -> None:
            out["logits"] = self.model.prefill(self.pool, tokens, slots, cached, last_only=last_only)

        cached = serve(self.cache, self.allocator, tokens, compute=prefill)
        return cached, out["logits"]


class BaselineArm:
    """No cache: every prompt is prefilled in full into the same scratch slots."""

    def __init__(self, model: Model, max_len: int, dtype: str = "float32") -> None:
        self.model = model
        self.pool = allocate_pool(model, max_len, dtype)
        self.slots = np.arange(max_len, dtype=np.int64)

    def serve(self, tokens: np.ndarray, last_only: bool = False) -> np.ndarray:
        return self.model.prefill(self.pool, tokens, self.slots[: len(tokens)], 0, last_only=last_only)


def run_workload(
    model: Model,
    w: Workload,
    reps: int,
    last_only: bool = False,
    tick: Callable[[], None] | None = None,
) -> LiveResult:
    """Time both arms on ``w`` (best of ``reps``), checking bit-identity on every request of every rep."""
    reqs = [np.asarray(r, dtype=np.int64) for r in w.requests]
    res = LiveResult(w.name, len(reqs), w.total_tokens, 0)
    for rep in range(reps):
        base, radix = BaselineArm(model, w.max_len), RadixArm(model, w.total_tokens)
        t_base = t_radix = c_base = c_radix = 0.0
        computed = 0
        for i, toks in enumerate(reqs):
            base_first = (i + rep) % 2 == 0  # alternate the arm that runs first
            for arm in ("base", "radix") if base_first else ("radix", "base"):
                t0, c0 = time.perf_counter(), time.process_time()
                if arm == "base":
                    full = base.serve(toks, last_only)
                    t_base += time.perf_counter() - t0
                    c_base += time.process_time() - c0
                else:
                    cached, part = radix.serve(toks, last_only)
                    t_radix += time.perf_counter() - t0
                    c_radix += time.process_time() - c0
            computed += len(toks) - cached
            want = full if last_only else full[cached:]
            if not np.array_equal(part, want):
                diff = float(np.max(np.abs(part - want))) if part.shape == want.shape else float("nan")
                res.mismatches.append(f"rep {rep} request {i}: cached {cached}, shapes {part.shape}/{want.shape}, max|Δ| {diff:g}")
            res.logits_compared += len(want)
            if tick:
                tick()
        res.computed_tokens = computed
        res.baseline_s.append(t_base)
        res.radix_s.append(t_radix)
        res.baseline_cpu_s.append(c_base)
        res.radix_cpu_s.append(c_radix)
    return res


def warm_up(model: Model) -> None:
    """One untimed prefill, so first-call costs (allocation, BLAS thread start) hit no arm."""
    BaselineArm(model, 16).serve(np.arange(16, dtype=np.int64) % model.config.vocab_size)


def run(
    model: Model,
    workloads: Sequence[Workload],
    reps: int,
    last_only: bool = False,
    progress: Any | None = None,
) -> list[LiveResult]:
    """Every workload, both arms. ``progress`` is a tqdm-like object with ``update`` (optional)."""
    warm_up(model)
    tick = (lambda: progress.update(1)) if progress is not None else None
    return [run_workload(model, w, reps, last_only, tick) for w in workloads]


# ---- rendering -------------------------------------------------------------------------------


def blas_threads(n: int | None) -> Any:
    """A context limiting BLAS threads (threadpoolctl, optional); a no-op context without it.

    Why: on a shared 2-core box multi-threaded OpenBLAS spends its time spinning, and one thread
    was several times faster (measured). The model itself limits BLAS inside each call
    (``Model.blas_threads``, default 1) and uses ``Model.threads`` of its own (default 1); this
    context only covers BLAS calls outside the model.
    """
    import contextlib

    if n is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        import sys

        print("threadpoolctl is not installed: BLAS threads left at their default", file=sys.stderr)
        return contextlib.nullcontext()
    return threadpool_limits(limits=n)


def table_rows(results: Sequence[LiveResult]) -> list[list[Any]]:
    rows = []
    for r in results:
        base, radix = min(r.baseline_s), min(r.radix_s)
        if r.bit_identical:
            cpu = r.ratio_cpu
            speed, ratio, ratio_cpu, per_rep, ident = (
                f"{r.live_speedup:.2f}×",
                f"{r.ratio:.2f}",
                "—" if cpu is None else f"{cpu:.2f}",
                " / ".join(f"{x:.2f}" for x in r.ratio_per_rep),
                f"yes ({r.logits_compared} logit rows over {len(r.radix_s)} reps)",
            )
        else:
            speed, ratio, ratio_cpu, per_rep, ident = "REFUSED", "—", "—", "—", f"NO: {len(r.mismatches)} mismatching requests"
        rows.append(
            [
                r.workload,
                r.requests,
                r.prompt_tokens,
                r.computed_tokens,
                f"{r.token_speedup:.2f}×",
                f"{base:.2f}",
                f"{radix:.2f}",
                speed,
                ratio,
                ratio_cpu,
                per_rep,
                ident,
            ]
        )
    return rows


HEADERS = [
    "workload",
    "requests",
    "prompt tokens",
    "computed (radix)",
    "token speedup",
    "baseline s (best)",
    "radix s (best)",
    "live speedup",
    "live ÷ token",
    "live ÷ token (CPU time)",
    "live ÷ token per repetition",
    "bit-identical logits",
]


def markdown(results: Sequence[LiveResult], meta: dict[str, Any], machine_line: str) -> str:
    from tabulate import tabulate

    cap = (
        f"**Live arm, {meta['model']} — NOISY wall-clock figures.** Produced by `{meta['command']}` (scale {meta['scale']}, seed "
        f"{meta['seed']}, best of {meta['reps']} interleaved A/B repetitions, BLAS threads {meta['threads']}, KV {meta['kv_dtype']}, "
        f"{'last-position' if meta['last_only'] else 'all computed positions'} logits) on {machine_line}. Box load average at start: "
        f"{meta['load_at_start']}. Both arms' KV pools are allocated and touched before anything is timed, as a server does at "
        "start-up. Only the within-run ratio is meaningful; absolute seconds depend on the machine and its load; the per-repetition "
        "ratios show how much this machine's speed moved during the run. The CPU-time ratio (this process's `time.process_time`, "
        "best of each arm) is the same ratio without the time this process waited for the CPU: on a shared box, read it beside "
        "the wall-clock one. "
        "Token speedup is exact (Table 1 of LEDGER.md); every radix-arm request's logits were compared with the baseline's by "
        "`np.array_equal` and a speedup is printed only if all were equal. Where the time goes: `PROFILE-<model>.md` "
        "(`python -m radixcheck.reports.profile_live`)."
    )
    return "\n".join(
        [
            f"# radixcheck ledger — live arm ({meta['model']})",
            "",
            describe_run(meta),
            "",
            cap,
            "",
            tabulate(table_rows(results), HEADERS, tablefmt="github", disable_numparse=True),
            "",
        ]
    )


def to_json(results: Sequence[LiveResult], meta: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any]:
    return {
        **meta,
        "machine": machine,
        "noisy": True,
        "workloads": [
            {
                "name": r.workload,
                "requests": r.requests,
                "prompt_tokens": r.prompt_tokens,
                "computed_tokens": r.computed_tokens,
                "token_speedup": round(r.token_speedup, 6),
                "baseline_s": [round(x, 4) for x in r.baseline_s],
                "radix_s": [round(x, 4) for x in r.radix_s],
                "bit_identical": r.bit_identical,
                "logit_rows_compared": r.logits_compared,
                "mismatches": r.mismatches[:20],
                "live_speedup": round(r.live_speedup, 4) if r.bit_identical else None,
                "live_over_token": round(r.ratio, 4) if r.bit_identical else None,
                "live_over_token_per_rep": [round(x, 4) for x in r.ratio_per_rep] if r.bit_identical else None,
                "baseline_cpu_s": [round(x, 4) for x in r.baseline_cpu_s],
                "radix_cpu_s": [round(x, 4) for x in r.radix_cpu_s],
                "live_over_token_cpu": round(r.ratio_cpu, 4) if r.bit_identical and r.ratio_cpu is not None else None,
            }
            for r in results
        ],
    }
