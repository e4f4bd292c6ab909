"""Prefill benchmark (not a test): exact-mode tokens/s and peak memory, next to llama.cpp.

    python -m radixcheck.model.bench                                  # real SmolLM2 (downloads on first use)
    python -m radixcheck.model.bench --model synthetic
    python -m radixcheck.model.bench --llama-python ~/.cache/radixcheck/llama-venv/bin/python --threads 1
    python -m radixcheck.model.bench --llama-python PY --threads 1 --md reports/PREFILL-smollm2.md
    python -m radixcheck.model.bench --llama-python PY --threads 1 2 --md reports/PREFILL-smollm2.md
    python -m radixcheck.model.bench --llama-python PY --threads 1 --kernel avx2 --md reports/PREFILL-smollm2.md
    OPENBLAS_CORETYPE=Haswell python -m radixcheck.model.bench --llama-python PY --threads 1 --md reports/PREFILL-smollm2.md

(``PY``: ``python -m radixcheck.model.llamacpp_env`` builds it and ``--print-python`` prints it.)

For each T and each ``--threads`` value, our prefill (all logits, and last-token logits only —
what llama.cpp computes by default) and llama.cpp's prefill on the same Q8_0 GGUF run back to
back, interleaved, ``--repeats`` times; the best time of each is reported, so both sides see the
same machine load. The ratio columns compare llama.cpp with our last-logit prefill by wall time
and by CPU time (the latter is less sensitive to other processes on a shared machine; with one
thread it is the per-core ratio), and as the median of each repetition's own wall-time ratio (on a
noisy machine the best times of the two engines can come from different moments; a repetition's
two runs are back to back). llama.cpp runs in a separate worker process per thread count
(``model/llamacpp.py``, run as a file) whose Python must have llama-cpp-python.
Every table says which machine it was measured on: the CPU's name and SIMD flags, which of our
compiled kernel paths ran (``--kernel``; ``auto`` picks it from the CPU's flags) and which
instructions llama.cpp's build uses (its system info), with the load average before and after.
Peak memory is this process's high-water mark (VmHWM): our model only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from radixcheck.argtypes import ArgumentParser, positive_int, python_with, refuse_weaker
from radixcheck.model import kernel_build, q8kernel
from radixcheck.model.exact import KERNELS
from radixcheck.provenance import generated_by


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
        first = self.proc.stdout.readline().strip()
        if first.split(" ", 1)[0] != "ready":
            raise RuntimeError("llama.cpp worker failed to start")
        self.system_info = first[len("ready") :].strip()  # e.g. "CPU : ... AVX512 = 1 | AVX512_VNNI = 1 | ..."

    def prefill_seconds(self, T: int) -> tuple[float, float]:
        """(wall, CPU) seconds of one llama.cpp prefill of T tokens."""
        try:
            self.proc.stdin.write(f"{T}\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:  # the worker died: say how, not "not enough values to unpack"
            code = self.proc.wait(timeout=30)
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            raise RuntimeError(f"the llama.cpp worker died ({how}) during a prefill of {T} tokens")
        wall, cpu = line.split()
        return float(wall), float(cpu)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


SIMD_PREFIXES = ("avx", "fma", "f16c", "amx")  # the CPU flags a report names (the ones the kernels could use)


def simd_flags() -> str:
    from radixcheck.model import kernel_build

    return " ".join(sorted(f for f in kernel_build.cpu_flags() if f.startswith(SIMD_PREFIXES))) or "(none reported)"


def llama_instructions(system_info: str) -> str:
    """The instruction sets llama.cpp's system info reports as used (``AVX512 = 1`` ...)."""
    used = [k.strip() for k, v in re.findall(r"([A-Z0-9_ ]+?) = (\w+)", system_info) if v == "1"]
    return ", ".join(used) or system_info or "?"


def markdown(rows: list[dict], meta: dict, command: str) -> str:
    """The table as a markdown section (for ``--md``)."""
    from tabulate import tabulate

    kernels = meta["OPENBLAS_CORETYPE"] or f"default ({', '.join(str(b[1]) for b in meta['blas'])})"
    threads = " and ".join(map(str, meta["threads"]))
    llama = "; ".join(f"{t} thread(s): {llama_instructions(i)}" for t, i in meta.get("llama_system_info", {}).items())
    head = (
        f"## Prefill: exact model vs llama.cpp, OpenBLAS kernels {kernels} (`{command}`)\n\n"
        f"{generated_by()} "
        f"Measured on **{meta['cpu']}**, CPU SIMD flags: {meta['cpu_flags']}. "
        f"Our Q8_0 kernel path: **{meta['kernel']}** (`--kernel {meta['kernel_asked']}`; `auto` takes the best path the CPU "
        f"runs that passed its self-test)" + (f"; llama.cpp's build uses {llama}" if llama else "") + ". "
        f"Same Q8_0 GGUF, {threads} thread(s) each, best of {meta['repeats']} interleaved runs, random token ids. "
        f"Load average (1/5/15 min) at start {meta['loadavg_start']}, at end "
        f"{meta['loadavg_end']} ({meta['nproc']} cores, shared with other jobs). "
        f"Peak RSS of our process (VmHWM, model + all runs): {meta['peak_rss_mb']:.0f} MB. "
        "ratio = llama.cpp time / our last-logit time (llama.cpp computes only the last position's logits): of the best "
        "times, and the median of the repetitions' own ratios (each repetition runs both engines back to back).\n\n"
    )
    table = tabulate(rows, headers="keys", tablefmt="github", floatfmt=(".0f", ".0f", "", ".1f", ".1f", ".1f", ".2f", ".2f", ".2f"))
    return head + table + "\n"


def section_name(coretype: str | None, kernel: str, threads: list[int]) -> str:
    """The ``--md`` section a run replaces: one per kernel set, ``--kernel`` and thread counts."""
    return f"prefill {coretype or 'default'} {kernel}" + ("" if threads == [1] else " threads " + " ".join(map(str, threads)))


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
    ap.add_argument("--threads", type=positive_int, nargs="+", default=[1],
                    help="the model's threads (Model.threads) and llama.cpp's n_threads; several: measured side by side (default 1)")
    ap.add_argument("--kernel", choices=list(KERNELS), default="auto",
                    help="the exact model's kernel path (same bits): auto (the CPU's best), c, avx512, avx2, portable or numpy")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--md", type=Path, help="also write the table as a section of this markdown file (one section per kernel set)")
    ap.add_argument("--force", action="store_true", help="replace the --md section even with a weaker table")
    args = ap.parse_args(argv)
    if args.llama_python and args.model != "smollm2":
        ap.error("argument --llama-python: llama.cpp runs only on --model smollm2 (the synthetic model has no GGUF)")
    if args.kernel in q8kernel.PATHS and q8kernel.status(args.kernel).state != "passed":
        ap.error(f"argument --kernel: {q8kernel.status(args.kernel)}")
    if args.md:
        section = section_name(os.environ.get("OPENBLAS_CORETYPE"), args.kernel, args.threads)
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

        try:
            model.ops = ExactOps(args.kernel)
        except RuntimeError as e:
            ap.error(f"argument --kernel: {e}")
    load_s = time.perf_counter() - t0
    llamas = {t: LlamaWorker(args.llama_python, gguf, t) for t in args.threads} if args.llama_python and gguf else {}

    rng = np.random.default_rng(0)
    rows = []
    for T in args.tokens:
        toks = rng.integers(0, model.config.vocab_size, T)
        pool = KVPool(model.config, T)
        model.prefill(pool, toks[: min(T, 8)], np.arange(min(T, 8)))  # warm up
        wall = {t: {"all": np.inf, "last": np.inf, "llama": np.inf} for t in args.threads}
        cpu = {t: {"last": np.inf, "llama": np.inf} for t in args.threads}
        ratios = {t: [] for t in args.threads}  # llama.cpp time / ours, wall, per repetition (their median is reported too)
        for _ in range(args.repeats):
            for threads in args.threads:  # side by side: every thread count in every repetition
                model.threads = threads  # the model owns its threads (BLAS is limited inside each call)
                w, c = wall[threads], cpu[threads]
                t = time.perf_counter()
                model.prefill(pool, toks, np.arange(T))
                w["all"] = min(w["all"], time.perf_counter() - t)
                t, c0 = time.perf_counter(), time.process_time()
                model.prefill(pool, toks, np.arange(T), last_only=True)
                ours = time.perf_counter() - t
                w["last"] = min(w["last"], ours)
                c["last"] = min(c["last"], time.process_time() - c0)
                if threads in llamas:
                    lw, lc = llamas[threads].prefill_seconds(T)
                    w["llama"], c["llama"] = min(w["llama"], lw), min(c["llama"], lc)
                    ratios[threads].append(lw / ours)
        for threads in args.threads:
            w, c = wall[threads], cpu[threads]
            row = {"T": T, "threads": threads, "path": model.ops.kernel if hasattr(model.ops, "kernel") else "-",
                   "exact all-logits tok/s": T / w["all"], "exact last-logit tok/s": T / w["last"]}
            if llamas:
                row["llama.cpp tok/s"] = T / w["llama"]
                row["ratio (wall)"] = w["llama"] / w["last"]
                row["ratio (CPU time)"] = c["llama"] / c["last"]
                row["ratio (median of reps)"] = float(np.median(ratios[threads]))
            rows.append(row)
    for llama in llamas.values():
        llama.close()

    blas = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads")) for i in threadpool_info()]
    meta = {
        "model": model.config.name,
        "load_seconds": round(load_s, 2),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "blas": blas,
        "threads": args.threads,
        "kernel": model.ops.kernel if hasattr(model.ops, "kernel") else "-",
        "kernel_asked": args.kernel,
        "repeats": args.repeats,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "cpu": kernel_build.cpu_name(),
        "cpu_flags": simd_flags(),
        "llama_system_info": {t: w.system_info for t, w in llamas.items()},
        "nproc": os.cpu_count(),
        "loadavg_start": load_start,
        "loadavg_end": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        "numpy": np.__version__,
    }
    try:
        from tabulate import tabulate

        print(tabulate(rows, headers="keys", floatfmt=(".0f", ".0f", "", ".1f", ".1f", ".1f", ".2f", ".2f", ".2f")))
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
        cmd += (" --llama-python PY" if args.llama_python else "") + f" --threads {' '.join(map(str, args.threads))}"
        cmd += (f" --kernel {args.kernel}" if args.kernel != "auto" else "") + (f" --repeats {args.repeats}" if args.repeats != 3 else "")
        replace_section(args.md, section_name(coretype, args.kernel, args.threads), markdown(rows, meta, cmd))


if __name__ == "__main__":
    sys.exit(main())
