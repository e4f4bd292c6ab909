"""Prefill benchmark (not a test): exact-mode tokens/s and peak memory, next to llama.cpp.

    python -m radixcheck.model.bench                                  # real SmolLM2 (downloads on first use)
    python -m radixcheck.model.bench --model synthetic
    python -m radixcheck.model.bench --llama-python ~/.cache/radixcheck/llama-venv/bin/python --threads 1
    python -m radixcheck.model.bench --llama-python PY --threads 1 --md reports/PREFILL-smollm2.md
    OPENBLAS_CORETYPE=Haswell python -m radixcheck.model.bench --llama-python PY --threads 1 --md reports/PREFILL-smollm2.md

(``PY``: ``python -m radixcheck.model.llamacpp_env`` builds it and ``--print-python`` prints it.)

For each T, our prefill (all logits, and last-token logits only — what llama.cpp computes by
default) and llama.cpp's prefill on the same Q8_0 GGUF run back to back, interleaved, ``--repeats``
times; the best time of each is reported, so both sides see the same machine load. The ratio
columns compare llama.cpp with our last-logit prefill by wall time and by CPU time (the latter is
less sensitive to other processes on a shared machine; with ``--threads 1`` it is the per-core
ratio). llama.cpp runs
in a separate worker process (``model/llamacpp.py``, run as a file) whose Python must have
llama-cpp-python.
Peak memory is this process's high-water mark (VmHWM): our model only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from radixcheck.argtypes import ArgumentParser, positive_int, python_with, refuse_weaker


def peak_rss_mb() -> float:
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class LlamaWorker:
    def __init__(self, python: str, gguf: Path, threads: int) -> None:
        # run as a file, not ``-m radixcheck.model.llamacpp``: the llama venv has llama-cpp-python
        # (and its NumPy) but not radixcheck or its dependencies (model/llamacpp_env.py)
        script = Path(__file__).resolve().with_name("llamacpp.py")
        self.proc = subprocess.Popen(
            [python, str(script), "worker", str(gguf), "--threads", str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("llama.cpp worker failed to start")

    def prefill_seconds(self, T: int) -> tuple[float, float]:
        """(wall, CPU) seconds of one llama.cpp prefill of T tokens."""
        self.proc.stdin.write(f"{T}\n")
        self.proc.stdin.flush()
        wall, cpu = self.proc.stdout.readline().split()
        return float(wall), float(cpu)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def markdown(rows: list[dict], meta: dict, command: str) -> str:
    """The table as a markdown section (for ``--md``)."""
    from tabulate import tabulate

    kernels = meta["OPENBLAS_CORETYPE"] or f"default ({', '.join(str(b[1]) for b in meta['blas'])})"
    head = (
        f"## Prefill: exact model vs llama.cpp, OpenBLAS kernels {kernels} (`{command}`)\n\n"
        f"Same Q8_0 GGUF, {meta['threads']} thread(s) each, best of {meta['repeats']} interleaved runs, random token ids; "
        f"our Q8_0 products: {meta['kernel']} kernel. Load average (1/5/15 min) at start {meta['loadavg_start']}, at end "
        f"{meta['loadavg_end']} ({meta['nproc']} cores, shared with other jobs). "
        f"Peak RSS of our process (VmHWM, model + all runs): {meta['peak_rss_mb']:.0f} MB. "
        "ratio = llama.cpp time / our last-logit time (llama.cpp computes only the last position's logits).\n\n"
    )
    table = tabulate(rows, headers="keys", tablefmt="github", floatfmt=(".0f", ".1f", ".1f", ".1f", ".2f", ".2f"))
    return head + table + "\n"


def weaker_section(md: Path, section: str, repeats: int, with_llama: bool) -> list[str]:
    """How this run's table would be weaker than the section ``section`` of ``md`` it replaces."""
    from radixcheck.model.fidelity import read_section

    before = read_section(md, section)
    weaker = []
    if "llama.cpp tok/s" in before and not with_llama:
        weaker.append("no --llama-python: the llama.cpp column would be lost")
    saved = re.search(r"best of (\d+) interleaved", before)
    if saved and repeats < int(saved.group(1)):
        weaker.append(f"--repeats {repeats}: best of {repeats} where it has best of {saved.group(1)}")
    return weaker


def main(argv: list[str] | None = None) -> None:
    ap = ArgumentParser(prog="python -m radixcheck.model.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["smollm2", "synthetic"], default="smollm2")
    ap.add_argument("--tokens", type=positive_int, nargs="+", default=[64, 256, 512], help="prompt lengths (default 64 256 512)")
    ap.add_argument("--repeats", type=positive_int, default=3, help="interleaved runs, best of (default 3)")
    ap.add_argument("--llama-python", type=python_with("llama_cpp"), help="a Python with llama-cpp-python, for the side-by-side column")
    ap.add_argument("--threads", type=positive_int, default=1, help="the model's threads (Model.threads) and llama.cpp's n_threads")
    ap.add_argument("--kernel", choices=["auto", "c", "numpy"], default="auto", help="the exact model's Q8_0 product (same bits)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--md", type=Path, help="also write the table as a section of this markdown file (one section per kernel set)")
    ap.add_argument("--force", action="store_true", help="replace the --md section even with a weaker table")
    args = ap.parse_args(argv)
    if args.llama_python and args.model != "smollm2":
        ap.error("argument --llama-python: llama.cpp runs only on --model smollm2 (the synthetic model has no GGUF)")
    if args.md:
        section = f"prefill {os.environ.get('OPENBLAS_CORETYPE') or 'default'} {args.kernel}"
        refuse_weaker(ap, args.md, weaker_section(args.md, section, args.repeats, bool(args.llama_python)), args.force,
                      elsewhere="another --md file")

    from threadpoolctl import threadpool_info

    from radixcheck.model import KVPool

    load_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    if args.model == "smollm2":
        from radixcheck.model import smollm2

        gguf = smollm2.prepare()
        model = smollm2.load_smollm2()
    else:
        from radixcheck.model import load_default

        gguf, model = None, load_default()
    if args.kernel != "auto":
        from radixcheck.model.exact import ExactOps

        model.ops = ExactOps(args.kernel)
    model.threads = args.threads  # the model owns its threads (BLAS is limited inside each call)
    load_s = time.perf_counter() - t0
    llama = LlamaWorker(args.llama_python, gguf, args.threads) if args.llama_python and gguf else None

    rng = np.random.default_rng(0)
    rows = []
    for T in args.tokens:
        toks = rng.integers(0, model.config.vocab_size, T)
        pool = KVPool(model.config, T)
        model.prefill(pool, toks[: min(T, 8)], np.arange(min(T, 8)))  # warm up
        wall = {"all": np.inf, "last": np.inf, "llama": np.inf}
        cpu = {"last": np.inf, "llama": np.inf}
        for _ in range(args.repeats):
            t = time.perf_counter()
            model.prefill(pool, toks, np.arange(T))
            wall["all"] = min(wall["all"], time.perf_counter() - t)
            t, c = time.perf_counter(), time.process_time()
            model.prefill(pool, toks, np.arange(T), last_only=True)
            wall["last"] = min(wall["last"], time.perf_counter() - t)
            cpu["last"] = min(cpu["last"], time.process_time() - c)
            if llama:
                w, c = llama.prefill_seconds(T)
                wall["llama"], cpu["llama"] = min(wall["llama"], w), min(cpu["llama"], c)
        row = {
            "T": T,
            "exact all-logits tok/s": T / wall["all"],
            "exact last-logit tok/s": T / wall["last"],
        }
        if llama:
            row["llama.cpp tok/s"] = T / wall["llama"]
            row["ratio (wall)"] = wall["llama"] / wall["last"]
            row["ratio (CPU time)"] = cpu["llama"] / cpu["last"]
        rows.append(row)
    if llama:
        llama.close()

    blas = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads")) for i in threadpool_info()]
    meta = {
        "model": model.config.name,
        "load_seconds": round(load_s, 2),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "blas": blas,
        "threads": args.threads,
        "kernel": model.ops.kernel if hasattr(model.ops, "kernel") else "-",
        "repeats": args.repeats,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "cpu": platform.processor() or platform.machine(),
        "nproc": os.cpu_count(),
        "loadavg_start": load_start,
        "loadavg_end": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        "numpy": np.__version__,
    }
    try:
        from tabulate import tabulate

        print(tabulate(rows, headers="keys", floatfmt=(".0f", ".1f", ".1f", ".1f", ".2f", ".2f")))
    except ImportError:
        for r in rows:
            print(r)
    print(json.dumps(meta))
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    if args.md:
        from radixcheck.model.fidelity import replace_section

        coretype = os.environ.get("OPENBLAS_CORETYPE")
        cmd = ("OPENBLAS_CORETYPE=" + coretype + " " if coretype else "") + "python -m radixcheck.model.bench"
        cmd += (" --llama-python PY" if args.llama_python else "") + f" --threads {args.threads}"
        cmd += (f" --kernel {args.kernel}" if args.kernel != "auto" else "") + (f" --repeats {args.repeats}" if args.repeats != 3 else "")
        replace_section(args.md, f"prefill {coretype or 'default'} {args.kernel}", markdown(rows, meta, cmd))


if __name__ == "__main__":
    sys.exit(main())
