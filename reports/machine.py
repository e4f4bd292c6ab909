"""Where a timing was measured: CPU, cores, Python, NumPy and its BLAS. Timing tables only."""

from __future__ import annotations

import os
import platform
from typing import Any

import numpy as np


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_line() -> str:
    """The CPU as a timing must name it: model, family and model number, and whether it has AVX-512."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
                if not line.strip():
                    break
    except OSError:
        return cpu_model()
    avx512 = "with AVX-512" if "avx512f" in fields.get("flags", "").split() else "no AVX-512"
    return f"{cpu_model()} (family {fields.get('cpu family', '?')} model {fields.get('model', '?')}, {avx512})"


def blas_info() -> str:
    """NumPy's BLAS as NumPy reports it (name, version, threading), or what threadpoolctl sees."""
    try:
        cfg = np.show_config(mode="dicts")  # type: ignore[call-arg]
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        text = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older NumPy: no dict mode
        text = "unknown BLAS"
    try:
        from threadpoolctl import threadpool_info

        pools = [f"{p.get('internal_api')} {p.get('threading_layer', '')} x{p.get('num_threads')}" for p in threadpool_info()]
        if pools:
            text += " [" + "; ".join(pools) + "]"
    except ImportError:
        pass
    return text


def describe() -> dict[str, Any]:
    """The machine description every timing table and artifact carries."""
    env = {k: v for k, v in sorted(os.environ.items()) if k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": blas_info(),
        "thread_env": env,
    }


def one_line(m: dict[str, Any]) -> str:
    threads = ", ".join(f"{k}={v}" for k, v in m["thread_env"].items()) or "thread env unset"
    return f"{m['cpu']}, {m['cores']} cores, Python {m['python']}, NumPy {m['numpy']} ({m['blas']}; {threads}), {m['platform']}"
