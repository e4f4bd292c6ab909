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

Build: ``cc -O2 -march=native -shared`` into ``$RADIXCHECK_CACHE/kernels`` (default
``~/.cache/radixcheck/kernels``), keyed by the source, the compiler and the CPU's flags; about a
second, once. Without a working C compiler, or with ``RADIXCHECK_Q8_KERNEL=numpy``, ``load()``
returns ``None`` and the model uses the NumPy path (same bits, slower). The C source is kept here
as a string so that it ships inside the Python package.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from functools import cache
from pathlib import Path

import numpy as np

ENV = "RADIXCHECK_Q8_KERNEL"  # "numpy": never build or use the C kernel

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#ifdef __AVX2__
#include <immintrin.h>

/* sum of 32 int16 products q[0:32] * x[0:32] per 32-bit lane pair (8 lanes; each |.| < 2^24) */
static inline __m256i block8(const int8_t *q, __m256i x0, __m256i x1)
{
    __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q));
    __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q + 16)));
    return _mm256_add_epi32(_mm256_madd_epi16(w0, x0), _mm256_madd_epi16(w1, x1));
}

/* [sum(p0), sum(p1), sum(p2), sum(p3)] as float64 (each |.| < 2^28: exact) */
static inline __m256d hsum4(__m256i p0, __m256i p1, __m256i p2, __m256i p3)
{
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    return _mm256_cvtepi32_pd(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}
#endif

/* acc = sum_b m[r*nb + b] * (sum_{j<32} q[r*K + 32b + j] * x[i*K + 32b + j]) for i < n and
   r0 <= r < r1. Exact: block sums are int32 (|.| < 2^28) and the float64 partial sums are
   integers below 2^53 (the caller's bound), so nothing ever rounds and the order of the sums does
   not matter. Then out[i*ldo + r] = (acc * rs[r]) * sx[i], two roundings in this order (what
   NumPy's `acc *= rs; acc *= sx` does), stored as float64 or, if out32, rounded to float32. */
static inline void put(void *out, int out32, int64_t ldo, int64_t i, int64_t r, double acc,
                       const double *rs, const double *sx)
{
    volatile double v = acc * rs[r]; /* volatile: two separate IEEE products, never fused */
    double w = v * sx[i];
    if (out32)
        ((float *)out)[i * ldo + r] = (float)w;
    else
        ((double *)out)[i * ldo + r] = w;
}

/* One row's quantisation scale, as exact.quantize_rows: amax / top (1 if not > 0); flags a NaN or
   an infinity in *bad. Shared by q8_quantize and quantize_f64, which differ only in output type. */
static double row_scale(const double *xr, int64_t K, double top, int64_t *bad)
{
    double amax = 0.0;
    for (int64_t j = 0; j < K; j++) {
        double a = fabs(xr[j]);
        *bad |= !isfinite(a);
        amax = a > amax ? a : amax;
    }
    double scale = amax / top;
    return scale > 0 ? scale : 1.0;
}

/* exact.quantize_rows(x, bits) as int16, bit for bit: per row amax = max |x|, scale = amax /
   (2^bits - 1) (1 if not > 0), xi = rint(x / scale) (round half to even: the default mode).
   Returns 1 if x holds a NaN or an infinity (the caller raises), else 0. */
int64_t q8_quantize(int64_t n, int64_t K, const double *x, int64_t bits, int16_t *xi, double *sx)
{
    const double top = (double)((1LL << bits) - 1);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const double *xr = x + i * K;
        double scale = row_scale(xr, K, top, &bad);
        sx[i] = scale;
        for (int64_t j = 0; j < K; j++) xi[i * K + j] = (int16_t)nearbyint(xr[j] / scale);
    }
    return bad;
}

void q8_matmul(int64_t n, int64_t K, const int16_t *x, const int8_t *q, const float *m,
               int64_t r0, int64_t r1, const double *rs, const double *sx, void *out, int64_t ldo, int64_t out32)
{
    const int64_t nb = K / 32;
    const int64_t RCHUNK = 32; /* weight rows kept in cache while every activation tile passes */
    for (int64_t rc = r0; rc < r1; rc += RCHUNK) {
        const int64_t re = rc + RCHUNK < r1 ? rc + RCHUNK : r1;
        int64_t i0 = 0;
#ifdef __AVX2__
        for (; i0 + 4 <= n; i0 += 4) { /* 4 activation rows x 2 weight rows */
            const int16_t *x0 = x + i0 * K, *x1 = x0 + K, *x2 = x1 + K, *x3 = x2 + K;
            int64_t r = rc;
            for (; r + 2 <= re; r += 2) {
                const int8_t *qa = q + r * K, *qb = qa + K;
                const float *ma = m + r * nb, *mb = ma + nb;
                __m256d acca = _mm256_setzero_pd(), accb = _mm256_setzero_pd();
                for (int64_t b = 0; b < nb; b++) {
                    const int64_t o = 32 * b;
                    __m256i xa0 = _mm256_loadu_si256((const __m256i *)(x0 + o));
                    __m256i xb0 = _mm256_loadu_si256((const __m256i *)(x0 + o + 16));
                    __m256i xa1 = _mm256_loadu_si256((const __m256i *)(x1 + o));
                    __m256i xb1 = _mm256_loadu_si256((const __m256i *)(x1 + o + 16));
                    __m256i xa2 = _mm256_loadu_si256((const __m256i *)(x2 + o));
                    __m256i xb2 = _mm256_loadu_si256((const __m256i *)(x2 + o + 16));
                    __m256i xa3 = _mm256_loadu_si256((const __m256i *)(x3 + o));
                    __m256i xb3 = _mm256_loadu_si256((const __m256i *)(x3 + o + 16));
                    __m256d s = hsum4(block8(qa + o, xa0, xb0), block8(qa + o, xa1, xb1),
                                      block8(qa + o, xa2, xb2), block8(qa + o, xa3, xb3));
                    acca = _mm256_fmadd_pd(s, _mm256_set1_pd((double)ma[b]), acca);
                    s = hsum4(block8(qb + o, xa0, xb0), block8(qb + o, xa1, xb1),
                              block8(qb + o, xa2, xb2), block8(qb + o, xa3, xb3));
                    accb = _mm256_fmadd_pd(s, _mm256_set1_pd((double)mb[b]), accb);
                }
                double va[4], vb[4];
                _mm256_storeu_pd(va, acca);
                _mm256_storeu_pd(vb, accb);
                for (int t = 0; t < 4; t++) {
                    put(out, out32, ldo, i0 + t, r, va[t], rs, sx);
                    put(out, out32, ldo, i0 + t, r + 1, vb[t], rs, sx);
                }
            }
            for (; r < re; r++) { /* the odd last weight row */
                const int8_t *qa = q + r * K;
                __m256d acc = _mm256_setzero_pd();
                for (int64_t b = 0; b < nb; b++) {
                    const int64_t o = 32 * b;
                    __m256d s = hsum4(
                        block8(qa + o, _mm256_loadu_si256((const __m256i *)(x0 + o)), _mm256_loadu_si256((const __m256i *)(x0 + o + 16))),
                        block8(qa + o, _mm256_loadu_si256((const __m256i *)(x1 + o)), _mm256_loadu_si256((const __m256i *)(x1 + o + 16))),
                        block8(qa + o, _mm256_loadu_si256((const __m256i *)(x2 + o)), _mm256_loadu_si256((const __m256i *)(x2 + o + 16))),
                        block8(qa + o, _mm256_loadu_si256((const __m256i *)(x3 + o)), _mm256_loadu_si256((const __m256i *)(x3 + o + 16))));
                    acc = _mm256_fmadd_pd(s, _mm256_set1_pd((double)m[r * nb + b]), acc);
                }
                double v[4];
                _mm256_storeu_pd(v, acc);
                for (int t = 0; t < 4; t++) put(out, out32, ldo, i0 + t, r, v[t], rs, sx);
            }
        }
        for (; i0 < n; i0++) { /* the last n % 4 activation rows: 1 activation row x 4 weight rows */
            const int16_t *x0 = x + i0 * K;
            int64_t r = rc;
            for (; r + 4 <= re; r += 4) {
                const int8_t *qa = q + r * K;
                const float *ma = m + r * nb;
                __m256d acc = _mm256_setzero_pd();
                for (int64_t b = 0; b < nb; b++) {
                    const int64_t o = 32 * b;
                    __m256i xa = _mm256_loadu_si256((const __m256i *)(x0 + o));
                    __m256i xb = _mm256_loadu_si256((const __m256i *)(x0 + o + 16));
                    __m256d s = hsum4(block8(qa + o, xa, xb), block8(qa + K + o, xa, xb),
                                      block8(qa + 2 * K + o, xa, xb), block8(qa + 3 * K + o, xa, xb));
                    __m256d mv = _mm256_cvtps_pd(_mm_set_ps(ma[3 * nb + b], ma[2 * nb + b], ma[nb + b], ma[b]));
                    acc = _mm256_fmadd_pd(s, mv, acc);
                }
                double v[4];
                _mm256_storeu_pd(v, acc);
                for (int t = 0; t < 4; t++) put(out, out32, ldo, i0, r + t, v[t], rs, sx);
            }
            for (; r < re; r++) {
                const int8_t *qa = q + r * K;
                double acc = 0.0;
                for (int64_t b = 0; b < nb; b++) {
                    int32_t s = 0;
                    for (int j = 0; j < 32; j++) s += (int32_t)qa[32 * b + j] * (int32_t)x0[32 * b + j];
                    acc += (double)s * (double)m[r * nb + b];
                }
                put(out, out32, ldo, i0, r, acc, rs, sx);
            }
        }
#endif
        for (; i0 < n; i0++) { /* portable path (no AVX2) */
            for (int64_t r = rc; r < re; r++) {
                const int8_t *qa = q + r * K;
                double acc = 0.0;
                for (int64_t b = 0; b < nb; b++) {
                    int32_t s = 0;
                    for (int j = 0; j < 32; j++) s += (int32_t)qa[32 * b + j] * (int32_t)x[i0 * K + 32 * b + j];
                    acc += (double)s * (double)m[r * nb + b];
                }
                put(out, out32, ldo, i0, r, acc, rs, sx);
            }
        }
    }
}

/* q8_quantize then q8_matmul over all rows: one call per product on one thread */
int64_t q8_linear(int64_t n, int64_t K, const double *x, int64_t bits, int16_t *xi, double *sx, const int8_t *q,
                  const float *m, int64_t rows, const double *rs, void *out, int64_t out32)
{
    if (q8_quantize(n, K, x, bits, xi, sx))
        return 1;
    q8_matmul(n, K, xi, q, m, 0, rows, rs, sx, out, rows, out32);
    return 0;
}

/* Model.rmsnorm with exact.rowsum, bit for bit: ms = rowsum(x * x) / d, where rowsum zero-pads the
   row to a power of two and adds halves (a fixed pairwise tree); out = (x * (1 / sqrt(ms + eps))) * w.
   buf: room for the padded row. */
void rms_norm(int64_t n, int64_t d, const double *x, const double *w, double eps, double *out, double *buf)
{
    int64_t width = 1;
    while (width < d) width *= 2;
    for (int64_t i = 0; i < n; i++) {
        const double *xr = x + i * d;
        for (int64_t j = 0; j < d; j++) buf[j] = xr[j] * xr[j];
        for (int64_t j = d; j < width; j++) buf[j] = 0.0;
        for (int64_t h = width / 2; h >= 1; h /= 2)
            for (int64_t j = 0; j < h; j++) buf[j] = buf[j] + buf[j + h];
        double inv = 1.0 / sqrt(buf[0] / (double)d + eps);
        for (int64_t j = 0; j < d; j++) out[i * d + j] = (xr[j] * inv) * w[j];
    }
}

/* exact.quantize_rows(x, bits) with float64 integers out (any bits <= 52), bit for bit. */
int64_t quantize_f64(int64_t n, int64_t K, const double *x, int64_t bits, double *xi, double *sx)
{
    const double top = (double)((1LL << bits) - 1);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const double *xr = x + i * K;
        double scale = row_scale(xr, K, top, &bad);
        sx[i] = scale;
        for (int64_t j = 0; j < K; j++) xi[i * K + j] = nearbyint(xr[j] / scale);
    }
    return bad;
}
"""


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return line
    except OSError:
        pass
    import platform

    return platform.processor() + platform.machine()


def _build(cc: str, so: Path) -> None:
    so.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=so.parent) as tmp:
        src = Path(tmp) / "q8kernel.c"
        src.write_text(SOURCE)
        out = Path(tmp) / so.name
        # IEEE arithmetic exactly as written: no -ffast-math, no contraction of a*b+c into an FMA
        # (rms_norm must round like NumPy; the kernel's own FMAs are explicit and exact)
        flags = ["-O2", "-march=native", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared"]
        subprocess.run([cc, *flags, "-o", str(out), str(src), "-lm"], check=True, capture_output=True)
        os.replace(out, so)  # atomic: parallel test workers may build at the same time


@cache
def load() -> ctypes.CDLL | None:
    """The compiled kernel (built on first use), or ``None`` (no compiler, or ``RADIXCHECK_Q8_KERNEL=numpy``)."""
    if os.environ.get(ENV, "").lower() == "numpy":
        return None
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        warnings.warn("no C compiler: the exact model uses its slower NumPy path (same bits)", RuntimeWarning, stacklevel=2)
        return None
    key = hashlib.sha256("\0".join([SOURCE, cc, _cpu_flags(), sys.platform]).encode()).hexdigest()[:16]
    base = Path(os.environ.get("RADIXCHECK_CACHE") or Path.home() / ".cache" / "radixcheck")
    so = base / "kernels" / f"q8kernel-{key}.so"
    try:
        if not so.is_file():
            _build(cc, so)
        lib = ctypes.CDLL(str(so))
    except (OSError, subprocess.CalledProcessError) as e:
        warnings.warn(f"could not build the Q8_0 kernel ({e}): using the NumPy path (same bits)", RuntimeWarning, stacklevel=2)
        return None
    f = lib.q8_matmul
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    f.argtypes = [i64, i64, ptr, ptr, ptr, i64, i64, ptr, ptr, ptr, i64, i64]
    f.restype = None
    g = lib.q8_quantize
    g.argtypes = [i64, i64, ptr, i64, ptr, ptr]
    g.restype = i64
    f = lib.quantize_f64
    f.argtypes = [i64, i64, ptr, i64, ptr, ptr]
    f.restype = i64
    r = lib.rms_norm
    r.argtypes = [i64, i64, ptr, ptr, ctypes.c_double, ptr, ptr]
    r.restype = None
    h = lib.q8_linear
    h.argtypes = [i64, i64, ptr, i64, ptr, ptr, ptr, ptr, i64, ptr, ptr, i64]
    h.restype = i64
    return lib


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


def linear(lib: ctypes.CDLL, x: np.ndarray, bits: int, w: tuple[int, int, int], rows: int, out: np.ndarray) -> None:
    """``quantize`` then ``matmul`` over all ``rows`` in one call (one thread). ``w``: the
    addresses of the weight's ``q``, ``mult`` and ``row_scale`` arrays (kept alive by the caller)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n, K = x.shape
    xi = np.empty((n, K), dtype=np.int16)
    sx = np.empty(n)
    if lib.q8_linear(n, K, x.ctypes.data, bits, xi.ctypes.data, sx.ctypes.data, w[0], w[1], rows, w[2], out.ctypes.data,
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


def matmul(
    lib: ctypes.CDLL, xi: np.ndarray, q: np.ndarray, m: np.ndarray, rs: np.ndarray, sx: np.ndarray, out: np.ndarray, r0: int, r1: int
) -> None:
    """``out[:, r0:r1] = ((xi @ W.T) * rs) * sx[:, None]`` for ``W = (q * m per block)``, the product exact.

    ``xi``: int16 (n, K); ``q``: int8 (rows, K); ``m``: float32 (rows, K // 32); ``rs``: float64
    (rows,); ``sx``: float64 (n,); ``out``: float64 or float32 (n, rows); all C-contiguous
    (checked by the caller). Releases the GIL (ctypes): disjoint row ranges may run on several threads.
    """
    n, K = xi.shape
    out32 = int(out.dtype == np.float32)
    lib.q8_matmul(n, K, xi.ctypes.data, q.ctypes.data, m.ctypes.data, r0, r1, rs.ctypes.data, sx.ctypes.data, out.ctypes.data,
                  out.shape[1], out32)
