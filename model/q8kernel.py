"""An exact Q8_0 x int16 matrix product in C (AVX2 when the CPU has it), built on first use.

Why: the exact ``linear`` multiplies integer activations (at most 15 bits) by integerised Q8_0
weights. Held in float64 and handed to BLAS that costs one float64 GEMM per call (~55 GFLOP/s per
core with AVX2 kernels) plus streaming 4-byte weights; a float32 GEMM cannot do it exactly (a
Q8_0 row's block scales make its integers ~23 bits wide). This kernel computes the *same exact
integers* straight from the int8 weights and per-block integer multipliers, the way llama.cpp
does: per 32-element block an int16 multiply-add into int32 (|block sum| < 2**28, no overflow),
then ``block sum * multiplier`` accumulated in float64, where every partial sum is an integer
below 2**53 (``exact.integerise`` lowers the activation precision until that holds), so no
rounding ever happens, whatever the order. The result is therefore bit-identical to the NumPy /
BLAS path (``exact.ExactOps(kernel="numpy")``), on any CPU, compiler, thread count or batch
shape; ``tests/test_model_q8kernel.py`` checks this.

The C source is ``model/kernels/*.c`` (package data); ``model.kernel_build`` builds it once per
machine and instruction-set path (``cc -O3`` with that path's explicit flags, e.g. ``-mavx2 -mfma``,
into ``$RADIXCHECK_CACHE/kernels``, keyed by the files, the compiler, the flags and the CPU's flags;
about a second). Without a working C compiler, or
with ``RADIXCHECK_Q8_KERNEL=numpy``, ``load()`` returns ``None`` and the model uses the NumPy path
(same bits, slower). This module holds the ctypes side: argument types and thin wrappers.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from radixcheck.model import fused, kernel_build

ENV = "RADIXCHECK_Q8_KERNEL"  # which path "auto" means: auto (default), avx512, avx2, portable or numpy
PATHS = tuple(p.name for p in kernel_build.PATHS)  # compiled paths, best first
CHOICES = ("auto", *PATHS, "numpy")


@dataclass(frozen=True)
class PathStatus:
    """What became of one compiled path on this machine: ``state`` is ``"passed"`` (its self-test:
    usable), ``"failed"`` (self-test failed: never used), ``"not built"`` (no compiler, or the build
    failed) or ``"not tested"`` (this CPU lacks the path's instructions); ``detail`` says why."""

    path: str
    state: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.state}" + (f" ({self.detail})" if self.detail else "")


def chosen() -> str:
    """The path ``$RADIXCHECK_Q8_KERNEL`` asks for (``auto`` if unset); ``ValueError`` for a name that is none of ``CHOICES``."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{ENV}={value!r}: expected one of {', '.join(CHOICES)}")
    return value


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Argument and result types of every entry point."""
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.q8_matmul.argtypes = [i64, i64, ptr, ptr, ptr, i64, i64, ptr, ptr, ptr, ptr, ptr, i64, i64]
    lib.q8_matmul.restype = None
    lib.q8_quantize.argtypes = [i64, i64, ptr, i64, ptr, ptr]
    lib.q8_quantize.restype = i64
    lib.quantize_f64.argtypes = [i64, i64, ptr, i64, ptr, ptr]
    lib.quantize_f64.restype = i64
    lib.rms_norm.argtypes = [i64, i64, ptr, ptr, ctypes.c_double, ptr, ptr]
    lib.rms_norm.restype = None
    lib.q8_linear.argtypes = [i64, i64, ptr, i64, ptr, ptr, ptr, ptr, i64, ptr, ptr, ptr, ptr, i64]
    lib.q8_linear.restype = i64
    lib.rope.argtypes = [i64, i64, i64, *[ptr] * 5]
    lib.rope.restype = None
    lib.rotate_quantise_kv.argtypes = [i64, i64, i64, *[ptr] * 5, i64, i64, *[ptr] * 5]
    lib.rotate_quantise_kv.restype = i64
    lib.silu_mul.argtypes = [i64, i64, ptr, ptr, ptr]
    lib.silu_mul.restype = None
    lib.exact_attention.argtypes = [i64, i64, i64, ptr, ptr, i64, *[ptr] * 9, ctypes.c_double, i64, i64, i64, i64, i64, ptr]
    lib.exact_attention.restype = i64
    fused.declare(lib)
    return lib


def _library(so) -> ctypes.CDLL:  # noqa: ANN001 - a pathlib.Path
    """The built library ``so``, loaded and declared (the one place a library is loaded: the
    kernel-selection tests stand in for it on the CPUs they simulate)."""
    return _declare(ctypes.CDLL(str(so)))


def _selftest(so) -> str | None:  # noqa: ANN001 - a pathlib.Path
    from radixcheck.model import kernel_selftest

    return kernel_selftest.run(_library(so))


@cache
def _selftest_id() -> str:
    """The self-test's version (its source's digest): a kept verdict from another version is not trusted."""
    from radixcheck.model import kernel_selftest

    return hashlib.sha256(Path(kernel_selftest.__file__).read_bytes()).hexdigest()[:16]


@cache
def _open(path: str) -> tuple[ctypes.CDLL | None, PathStatus]:
    """``path``'s library (built and self-tested on first use) if it passed its self-test, and its status."""
    kp = kernel_build.BY_NAME[path]
    missing = kernel_build.missing_flags(kp)
    if missing:
        return None, PathStatus(path, "not tested", f"this CPU lacks {' '.join(missing)}")
    cc = kernel_build.compiler()
    if cc is None:
        return None, PathStatus(path, "not built", "no C compiler")
    try:
        so, failure = kernel_build.ensure(kp, cc, _selftest, _selftest_id())
        if failure is not None:
            return None, PathStatus(path, "failed", f"self-test against the NumPy path: {failure}")
        lib = _library(so)
    except subprocess.CalledProcessError as e:
        return None, PathStatus(path, "not built", (e.stderr or str(e)).strip()[-2000:])
    except OSError as e:
        return None, PathStatus(path, "not built", str(e))
    lib.kernel_path = path
    return lib, PathStatus(path, "passed", kernel_build.library_file(kp, cc).name)


def status(path: str) -> PathStatus:
    """``path``'s status (builds and self-tests it if that has not happened on this machine)."""
    return _open(path)[1]


def available() -> list[str]:
    """The compiled paths usable here (the CPU runs them, they built and passed their self-tests), best first."""
    return [p for p in PATHS if _open(p)[0] is not None]


@cache
def load(path: str | None = None) -> ctypes.CDLL | None:
    """A compiled kernel library, or ``None`` for the NumPy path. ``path``: one of ``PATHS``, or
    ``None`` for ``$RADIXCHECK_Q8_KERNEL`` (default ``auto``: the best path that passes its
    self-test). A path that cannot be used gives ``None`` (the model then takes the NumPy path,
    same bits) with one ``RuntimeWarning`` saying why; under ``auto`` a path that failed its
    self-test or its build is passed over with a warning naming it, and the next one tried. The
    library's ``kernel_path`` attribute names its path."""
    want = path or chosen()
    if want == "numpy":
        return None
    if want != "auto" and want not in PATHS:
        raise ValueError(f"unknown kernel path {want!r} (expected one of {', '.join(PATHS)})")
    skipped = []
    for name in PATHS if want == "auto" else (want,):
        lib, st = _open(name)
        if lib is not None:
            for s in skipped:
                warnings.warn(f"Q8_0 kernel path {s}: not used", RuntimeWarning, stacklevel=2)
            return lib
        if st.state in ("failed", "not built") or want != "auto":
            skipped.append(st)
    why = "no C compiler" if kernel_build.compiler() is None else "; ".join(map(str, skipped)) or "none runs on this CPU"
    warnings.warn(f"no usable compiled Q8_0 kernel ({why}): the exact model uses its slower NumPy path (same bits)",
                  RuntimeWarning, stacklevel=2)
    return None


def path_of(lib: ctypes.CDLL | None) -> str:
    """The path a library was built for (``"numpy"`` for ``None``)."""
    return "numpy" if lib is None else getattr(lib, "kernel_path", "c")


def _nonfinite() -> None:
    from radixcheck.model.exact import ExactnessError

    raise ExactnessError("non-finite activation (NaN or infinity) entering an exact product")


def quantize_rows(lib: ctypes.CDLL, x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``exact.quantize_rows`` (float64 integers, any shape) in one call, same bits."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    K = x.shape[-1]
    n = x.size // K if K else 0
    xi = np.empty(x.shape)
    sx = np.empty(x.shape[:-1])
    if n and lib.quantize_f64(n, K, x.ctypes.data, bits, xi.ctypes.data, sx.ctypes.data):
        _nonfinite()
    return xi, sx


def rmsnorm(lib: ctypes.CDLL, x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """``Model.rmsnorm`` with ``exact.rowsum`` (same bits) in one call; ``w``: float64 (d,), contiguous."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n, d = x.shape
    out = np.empty((n, d))
    buf = np.empty(1 << max(0, (d - 1).bit_length()))
    lib.rms_norm(n, d, x.ctypes.data, w.ctypes.data, eps, out.ctypes.data, buf.ctypes.data)
    return out


def _positions(positions: np.ndarray, table_rows: int) -> np.ndarray:
    """``positions`` as contiguous int64, each a row of the RoPE tables (the C code reads them unchecked)."""
    pos = np.ascontiguousarray(positions, dtype=np.int64)
    if pos.size and (pos.min() < 0 or pos.max() >= table_rows):
        raise IndexError(f"RoPE position outside [0, {table_rows})")
    return pos


def rope(lib: ctypes.CDLL, x: np.ndarray, positions: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """``Model.rope(x, positions)`` (same bits) in one call; ``cos``, ``sin``: the model's tables."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    pos = _positions(positions, len(cos))
    out = np.empty(x.shape)
    n, heads, D = x.shape
    lib.rope(n, heads, D, x.ctypes.data, pos.ctypes.data, cos.ctypes.data, sin.ctypes.data, out.ctypes.data)
    return out


def rotate_quantise_kv(
    lib: ctypes.CDLL, k: np.ndarray, v: np.ndarray, positions: np.ndarray, cos: np.ndarray, sin: np.ndarray, bits: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``ExactOps.quantise_kv(Model.rope(k, positions), v)`` (same bits) in one call: ``(ki, sk, vi, sv)``."""
    k, v = np.ascontiguousarray(k, dtype=np.float64), np.ascontiguousarray(v, dtype=np.float64)
    pos = _positions(positions, len(cos))
    n, Hkv, D = k.shape
    kbuf, ki, vi, sk, sv = np.empty(k.shape), np.empty(k.shape), np.empty(k.shape), np.empty((n, Hkv)), np.empty((n, Hkv))
    if n and lib.rotate_quantise_kv(
        n, Hkv, D, k.ctypes.data, v.ctypes.data, pos.ctypes.data, cos.ctypes.data, sin.ctypes.data, *bits, kbuf.ctypes.data,
        ki.ctypes.data, sk.ctypes.data, vi.ctypes.data, sv.ctypes.data,
    ):
        _nonfinite()
    return ki, sk, vi, sv


def silu_mul(lib: ctypes.CDLL, gu: np.ndarray) -> np.ndarray:
    """``Model.silu(g) * u`` for ``gu = [g | u]`` (n, 2f), same bits, in one call."""
    gu = np.ascontiguousarray(gu, dtype=np.float64)
    n, f = gu.shape[0], gu.shape[1] // 2
    out, buf = np.empty((n, f)), np.empty(f)
    lib.silu_mul(n, f, gu.ctypes.data, out.ctypes.data, buf.ctypes.data)
    return out


def linear(lib: ctypes.CDLL, x: np.ndarray, bits: int, w: tuple[int, int, int, int | None, int | None], rows: int, out: np.ndarray) -> None:
    """``quantize`` then ``matmul`` over all ``rows`` in one call (one thread). ``w``: the
    addresses of the weight's ``q``, ``mult``, ``row_scale``, ``wsum`` and ``mult_groups`` arrays
    (``IntMatrix.addresses``; kept alive by the caller)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n, K = x.shape
    xi = np.empty((n, K), dtype=np.int16)
    sx = np.empty(n)
    if lib.q8_linear(n, K, x.ctypes.data, bits, xi.ctypes.data, sx.ctypes.data, w[0], w[1], rows, w[2], w[3], w[4], out.ctypes.data,
                     int(out.dtype == np.float32)):
        _nonfinite()


def quantize(lib: ctypes.CDLL, x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``exact.quantize_rows(x, bits)`` (``bits`` <= 15) as ``(int16 xi, float64 scale)``, same bits."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n, K = x.shape
    xi = np.empty((n, K), dtype=np.int16)
    sx = np.empty(n)
    if lib.q8_quantize(n, K, x.ctypes.data, bits, xi.ctypes.data, sx.ctypes.data):
        _nonfinite()
    return xi, sx


def matmul(lib: ctypes.CDLL, xi: np.ndarray, w: Any, sx: np.ndarray, out: np.ndarray, r0: int, r1: int) -> None:
    """``out[:, r0:r1] = ((xi @ W.T) * rs) * sx[:, None]`` for ``W`` = ``w`` (an ``exact.IntMatrix``:
    ``q * mult`` per block, ``row_scale``), the product exact.

    ``xi``: int16 (n, K); ``sx``: float64 (n,); ``out``: float64 or float32 (n, rows); all
    C-contiguous (checked by the caller). Releases the GIL (ctypes): disjoint row ranges may run on
    several threads.
    """
    n, K = xi.shape
    out32 = int(out.dtype == np.float32)
    q, m, rs, ws, mg = w.addresses
    lib.q8_matmul(n, K, xi.ctypes.data, q, m, r0, r1, rs, ws, mg, sx.ctypes.data, out.ctypes.data, out.shape[1], out32)


def attention(
    lib: ctypes.CDLL,
    q: np.ndarray,
    q_pos: np.ndarray,
    cached: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    fresh: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    bits: tuple[int, int, int],
    out: np.ndarray,
    t0: int,
    t1: int,
) -> None:
    """Queries ``t0 <= t < t1`` of ``exact.ExactOps.attention_quantised`` into ``out`` (T, H, D), same bits.

    ``q`` (T, H, D) float64, ``q_pos`` (T,) int64. The first keys are ``cached = (slots, ki, sk,
    vi, sv)``: key ``j`` is row ``slots[j]`` of ``ki``, ``vi`` ((rows, Hkv, D) float32 integers) and
    ``sk``, ``sv`` ((rows, Hkv) float64) — the ``KVMemo``'s arrays, read in place; the rest are the
    rows of ``fresh = (ki, sk, vi, sv)``, in order. All C-contiguous (the caller makes them so).
    ``bits``: q/k, probability and denominator bits. Releases the GIL (ctypes).
    """
    T, H, D = q.shape
    slots, mk, msk, mv, msv = cached
    fk, fsk, fv, fsv = fresh
    bad = lib.exact_attention(
        H, fk.shape[1], D, q.ctypes.data, q_pos.ctypes.data, slots.size, slots.ctypes.data, mk.ctypes.data, msk.ctypes.data,
        mv.ctypes.data, msv.ctypes.data, fk.ctypes.data, fsk.ctypes.data, fv.ctypes.data, fsv.ctypes.data,
        1.0 / np.sqrt(float(D)), *bits, t0, t1, out.ctypes.data,
    )
    if bad < 0:
        raise MemoryError("exact attention: out of memory for its scratch")
    if bad:
        _nonfinite()
