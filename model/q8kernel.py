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

from radixcheck.model import fixed_exp, fused

ENV = "RADIXCHECK_Q8_KERNEL"  # "numpy": never build or use the C kernel

SOURCE = fixed_exp.c_definitions() + r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef __AVX2__
#include <immintrin.h>

/* round to nearest, ties to even (NumPy's rint in the default mode), inlined: libm's nearbyint
   saves and restores the FP environment on every call */
static inline double round_even(double x)
{
    return _mm_cvtsd_f64(_mm_round_sd(_mm_setzero_pd(), _mm_set_sd(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

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
#else
static inline double round_even(double x) { return nearbyint(x); }
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
        for (int64_t j = 0; j < K; j++) xi[i * K + j] = (int16_t)round_even(xr[j] / scale);
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
                const int8_t *pa = qa + RCHUNK * K, *pb = pa + K; /* the next chunk's rows */
                for (int64_t b = 0; b < nb; b++) {
                    const int64_t o = 32 * b;
                    if (i0 == 0 && !(b & 1)) { /* fetch the next chunk from memory while this one computes */
                        _mm_prefetch((const char *)(pa + o), _MM_HINT_T0);
                        _mm_prefetch((const char *)(pb + o), _MM_HINT_T0);
                    }
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
                const int8_t *pa = qa + RCHUNK * K;
                for (int64_t b = 0; b < nb; b++) {
                    const int64_t o = 32 * b;
                    if (i0 == n - n % 4 && !(b & 1)) /* the first 1-row pass fetches the next chunk */
                        for (int t = 0; t < 4; t++) _mm_prefetch((const char *)(pa + t * K + o), _MM_HINT_T0);
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
        for (int64_t j = 0; j < K; j++) xi[i * K + j] = round_even(xr[j] / scale);
    }
    return bad;
}

/* Model.rope, bit for bit: rows i < n of x (n, heads, D) rotated by position pos[i] with the
   model's tables (cos_t, sin_t: rows of D / 2); out[.., 2j] = x0 * c - x1 * s and
   out[.., 2j + 1] = x0 * s + x1 * c, each product and sum rounded as NumPy rounds them. */
static void rope_rows(int64_t n, int64_t heads, int64_t D, const double *x, int64_t ldx, const int64_t *pos,
                      const double *cos_t, const double *sin_t, double *out) /* row i of x at x + i * ldx */
{
    const int64_t half = D / 2;
    for (int64_t i = 0; i < n; i++) {
        const double *c = cos_t + pos[i] * half, *sn = sin_t + pos[i] * half;
        for (int64_t h = 0; h < heads; h++) {
            const double *xr = x + i * ldx + h * D;
            double *o = out + (i * heads + h) * D;
            for (int64_t j = 0; j < half; j++) {
                const double x0 = xr[2 * j], x1 = xr[2 * j + 1];
                o[2 * j] = x0 * c[j] - x1 * sn[j];
                o[2 * j + 1] = x0 * sn[j] + x1 * c[j];
            }
        }
    }
}

void rope(int64_t n, int64_t heads, int64_t D, const double *x, const int64_t *pos, const double *cos_t,
          const double *sin_t, double *out)
{
    rope_rows(n, heads, D, x, heads * D, pos, cos_t, sin_t, out);
}

/* ExactOps.quantise_kv(Model.rope(k, pos), v) in one call: k, v (n, Hkv, D) as read from the pool;
   ki, vi (n, Hkv, D) and sk, sv (n, Hkv) out; kbuf: room for the rotated k. Returns 1 on a NaN or
   an infinity. */
int64_t rotate_quantise_kv(int64_t n, int64_t Hkv, int64_t D, const double *k, const double *v, const int64_t *pos,
                           const double *cos_t, const double *sin_t, int64_t k_bits, int64_t v_bits, double *kbuf,
                           double *ki, double *sk, double *vi, double *sv)
{
    rope(n, Hkv, D, k, pos, cos_t, sin_t, kbuf);
    return quantize_f64(n * Hkv, D, kbuf, k_bits, ki, sk) | quantize_f64(n * Hkv, D, v, v_bits, vi, sv);
}

/* ---- the model's exponential (model.fixed_exp), SiLU ---- */

/* fixed_exp(x) = e^x as model.fixed_exp defines it: 0 below EXP_MIN (and for -inf or NaN), +inf
   above EXP_MAX; else k = rint(x * log2e), r = (x - k * ln2_hi) - k * ln2_lo, p = Horner sum of
   r^i / i! (i <= 12), times 2^k (exact: the result is a normal number). Every step is one correctly
   rounded IEEE operation, so the AVX2 form below and NumPy give the same bits. */
static double fixed_exp_1(double x)
{
    if (!(x >= EXP_MIN))
        return 0.0;
    if (x > EXP_MAX)
        return INFINITY;
    double k = round_even(x * EXP_LOG2E);
    double r = (x - k * EXP_LN2_HI) - k * EXP_LN2_LO;
    double p = EXP_POLY[EXP_DEGREE];
    for (int i = EXP_DEGREE - 1; i >= 0; i--) p = p * r + EXP_POLY[i];
    return ldexp(p, (int)k);
}

#ifdef __AVX2__
/* fixed_exp_1's range reduction on four lanes; *ok: lanes in range, *big: lanes above EXP_MAX */
static inline __m256d exp_reduce(__m256d x, __m256d *ok, __m256d *big, __m256d *k)
{
    *big = _mm256_cmp_pd(x, _mm256_set1_pd(EXP_MAX), _CMP_GT_OQ);
    *ok = _mm256_and_pd(_mm256_cmp_pd(x, _mm256_set1_pd(EXP_MIN), _CMP_GE_OQ), _mm256_cmp_pd(x, _mm256_set1_pd(EXP_MAX), _CMP_LE_OQ));
    x = _mm256_and_pd(x, *ok); /* out-of-range lanes computed on 0, replaced in exp_scale */
    *k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_sub_pd(_mm256_sub_pd(x, _mm256_mul_pd(*k, _mm256_set1_pd(EXP_LN2_HI))), _mm256_mul_pd(*k, _mm256_set1_pd(EXP_LN2_LO)));
}

static inline __m256d exp_scale(__m256d p, __m256d k, __m256d ok, __m256d big) /* p * 2^k, 2^k from its bits: exact */
{
    __m256i e = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k)), _mm256_set1_epi64x(1023)), 52);
    __m256d in = _mm256_and_pd(_mm256_mul_pd(p, _mm256_castsi256_pd(e)), ok);
    return _mm256_or_pd(in, _mm256_and_pd(big, _mm256_set1_pd(INFINITY)));
}
#endif

/* s[j] = fixed_exp_1(s[j] - m) for j < n; AVX2: 16 at a time, four Horner chains in flight
   (one chain is latency-bound), each lane the same IEEE operations as fixed_exp_1 */
static void exp_row(double *s, int64_t n, double m)
{
    int64_t j = 0;
#ifdef __AVX2__
    const __m256d vm = _mm256_set1_pd(m);
    for (; j + 16 <= n; j += 16) {
        __m256d ok0, ok1, ok2, ok3, big0, big1, big2, big3, k0, k1, k2, k3;
        __m256d r0 = exp_reduce(_mm256_sub_pd(_mm256_loadu_pd(s + j), vm), &ok0, &big0, &k0);
        __m256d r1 = exp_reduce(_mm256_sub_pd(_mm256_loadu_pd(s + j + 4), vm), &ok1, &big1, &k1);
        __m256d r2 = exp_reduce(_mm256_sub_pd(_mm256_loadu_pd(s + j + 8), vm), &ok2, &big2, &k2);
        __m256d r3 = exp_reduce(_mm256_sub_pd(_mm256_loadu_pd(s + j + 12), vm), &ok3, &big3, &k3);
        __m256d c = _mm256_set1_pd(EXP_POLY[EXP_DEGREE]), p0 = c, p1 = c, p2 = c, p3 = c;
        for (int i = EXP_DEGREE - 1; i >= 0; i--) { /* four independent chains, kept in registers */
            c = _mm256_set1_pd(EXP_POLY[i]);
            p0 = _mm256_add_pd(_mm256_mul_pd(p0, r0), c);
            p1 = _mm256_add_pd(_mm256_mul_pd(p1, r1), c);
            p2 = _mm256_add_pd(_mm256_mul_pd(p2, r2), c);
            p3 = _mm256_add_pd(_mm256_mul_pd(p3, r3), c);
        }
        _mm256_storeu_pd(s + j, exp_scale(p0, k0, ok0, big0));
        _mm256_storeu_pd(s + j + 4, exp_scale(p1, k1, ok1, big1));
        _mm256_storeu_pd(s + j + 8, exp_scale(p2, k2, ok2, big2));
        _mm256_storeu_pd(s + j + 12, exp_scale(p3, k3, ok3, big3));
    }
#endif
    for (; j < n; j++) s[j] = fixed_exp_1(s[j] - m);
}

/* Model.silu(gate) * up, bit for bit: rows i < n of gu (n, 2 * f) hold gate | up; out[i, j] =
   (g / (1 + fixed_exp(-g))) * u, each operation rounded as NumPy rounds it. buf: f doubles. */
void silu_mul(int64_t n, int64_t f, const double *gu, double *out, double *buf)
{
    for (int64_t i = 0; i < n; i++) {
        const double *g = gu + i * 2 * f, *u = g + f;
        for (int64_t j = 0; j < f; j++) buf[j] = -g[j];
        exp_row(buf, f, 0.0); /* x - 0 == x for every x */
        double *o = out + i * f;
        for (int64_t j = 0; j < f; j++) o[j] = (g[j] / (1.0 + buf[j])) * u[j];
    }
}

/* ---- exact attention (exact.ExactOps.attention_quantised, same IEEE operations, same order) ---- */

/* s[j] = sum_d qi[d] * kt[d * ldk + j] for j0 <= j < j1 (kt: one head's keys transposed, D x ldk):
   integers (|qi|, |k| < 2^20, D < 2^13), every partial sum an integer below 2^53, so exact in any
   order. The portable form; with AVX2 the 6 x 8 tile below does the work. */
static void qk_cols(const double *qi, const double *kt, int64_t ldk, int64_t D, int64_t j0, int64_t j1, double *s)
{
    for (int64_t j = j0; j < j1; j++) {
        double a = 0.0;
        for (int64_t d = 0; d < D; d++) a += qi[d] * kt[d * ldk + j];
        s[j] = a;
    }
}

/* num[d] += sum_j p[j] * v[j * D + d] for d < D, j < n: integers (|p| < 2^21, |v| < 2^15, all keys
   < 2^16), every partial sum below 2^53, so exact in any order. The portable form. */
static void pv_exact(const double *p, const double *v, int64_t n, int64_t D, double *num)
{
    for (int64_t d = 0; d < D; d++) {
        double a = 0.0;
        for (int64_t j = 0; j < n; j++) a += p[j] * v[j * D + d];
        num[d] += a;
    }
}

enum { TILE_ROWS = 6, TILE_COLS = 8 };

#ifdef __AVX2__
/* C[0:6, 0:8] = A[0:6, 0:kd] . B[0:kd, 0:8] (plus C if acc): a register tile (12 accumulators, as
   in BLAS micro-kernels), row r of A at A + r * lda, row p of B at B + p * ldb. Used for q.k and
   p.v, whose operands are integers with every partial sum below 2^53: exact, in any order. */
static void tile_6x8(const double *A, int64_t lda, const double *B, int64_t ldb, int64_t kd, double *C, int64_t ldc, int acc)
{
    double *C1 = C + ldc, *C2 = C1 + ldc, *C3 = C2 + ldc, *C4 = C3 + ldc, *C5 = C4 + ldc;
    const __m256d z = _mm256_setzero_pd();
    __m256d c00 = acc ? _mm256_loadu_pd(C) : z, c01 = acc ? _mm256_loadu_pd(C + 4) : z;
    __m256d c10 = acc ? _mm256_loadu_pd(C1) : z, c11 = acc ? _mm256_loadu_pd(C1 + 4) : z;
    __m256d c20 = acc ? _mm256_loadu_pd(C2) : z, c21 = acc ? _mm256_loadu_pd(C2 + 4) : z;
    __m256d c30 = acc ? _mm256_loadu_pd(C3) : z, c31 = acc ? _mm256_loadu_pd(C3 + 4) : z;
    __m256d c40 = acc ? _mm256_loadu_pd(C4) : z, c41 = acc ? _mm256_loadu_pd(C4 + 4) : z;
    __m256d c50 = acc ? _mm256_loadu_pd(C5) : z, c51 = acc ? _mm256_loadu_pd(C5 + 4) : z;
    const double *a0 = A, *a1 = A + lda, *a2 = a1 + lda, *a3 = a2 + lda, *a4 = a3 + lda, *a5 = a4 + lda;
    for (int64_t p = 0; p < kd; p++) {
        const __m256d b0 = _mm256_loadu_pd(B + p * ldb), b1 = _mm256_loadu_pd(B + p * ldb + 4);
        __m256d a = _mm256_broadcast_sd(a0 + p);
        c00 = _mm256_fmadd_pd(a, b0, c00), c01 = _mm256_fmadd_pd(a, b1, c01);
        a = _mm256_broadcast_sd(a1 + p);
        c10 = _mm256_fmadd_pd(a, b0, c10), c11 = _mm256_fmadd_pd(a, b1, c11);
        a = _mm256_broadcast_sd(a2 + p);
        c20 = _mm256_fmadd_pd(a, b0, c20), c21 = _mm256_fmadd_pd(a, b1, c21);
        a = _mm256_broadcast_sd(a3 + p);
        c30 = _mm256_fmadd_pd(a, b0, c30), c31 = _mm256_fmadd_pd(a, b1, c31);
        a = _mm256_broadcast_sd(a4 + p);
        c40 = _mm256_fmadd_pd(a, b0, c40), c41 = _mm256_fmadd_pd(a, b1, c41);
        a = _mm256_broadcast_sd(a5 + p);
        c50 = _mm256_fmadd_pd(a, b0, c50), c51 = _mm256_fmadd_pd(a, b1, c51);
    }
    _mm256_storeu_pd(C, c00), _mm256_storeu_pd(C + 4, c01), _mm256_storeu_pd(C1, c10), _mm256_storeu_pd(C1 + 4, c11);
    _mm256_storeu_pd(C2, c20), _mm256_storeu_pd(C2 + 4, c21), _mm256_storeu_pd(C3, c30), _mm256_storeu_pd(C3 + 4, c31);
    _mm256_storeu_pd(C4, c40), _mm256_storeu_pd(C4 + 4, c41), _mm256_storeu_pd(C5, c50), _mm256_storeu_pd(C5 + 4, c51);
}

/* tile_6x8 for one row (the rows of a block left over after its 6-row tiles) */
static void tile_1x8(const double *A, const double *B, int64_t ldb, int64_t kd, double *C, int acc)
{
    __m256d c0 = acc ? _mm256_loadu_pd(C) : _mm256_setzero_pd(), c1 = acc ? _mm256_loadu_pd(C + 4) : _mm256_setzero_pd();
    for (int64_t p = 0; p < kd; p++) {
        const __m256d a = _mm256_broadcast_sd(A + p);
        c0 = _mm256_fmadd_pd(a, _mm256_loadu_pd(B + p * ldb), c0), c1 = _mm256_fmadd_pd(a, _mm256_loadu_pd(B + p * ldb + 4), c1);
    }
    _mm256_storeu_pd(C, c0), _mm256_storeu_pd(C + 4, c1);
}
#endif

/* One query row's softmax: s[j] (the exact integer q.k of key j < le) becomes the row's quantised
   probability times the value scale; returns the factor its p.v sums are multiplied by. sk, sv:
   the KV head's scales, contiguous. Each element goes through exp.ExactOps' IEEE operations in
   NumPy's order; only the max and the (exact integer) sums are taken in another order. */
static double softmax_row(double *s, int64_t le, double a, const double *sk, const double *sv, double ptop, double dscale,
                          double dunscale)
{
    double m = -INFINITY, denom = 0.0, amax = 0.0;
    int64_t j = 0;
#ifdef __AVX2__
    const int round = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m256d va = _mm256_set1_pd(a), vm = _mm256_set1_pd(-INFINITY);
    for (; j + 4 <= le; j += 4) {
        __m256d x = _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(s + j), va), _mm256_loadu_pd(sk + j));
        _mm256_storeu_pd(s + j, x);
        vm = _mm256_max_pd(vm, x);
    }
    double t4[4];
    _mm256_storeu_pd(t4, vm);
    for (int i = 0; i < 4; i++) m = t4[i] > m ? t4[i] : m;
#endif
    for (; j < le; j++) {
        double x = (s[j] * a) * sk[j];
        s[j] = x;
        m = x > m ? x : m;
    }
    exp_row(s, le, m);
    j = 0;
#ifdef __AVX2__
    __m256d vden = _mm256_setzero_pd(), vmax = _mm256_setzero_pd(), vds = _mm256_set1_pd(dscale);
    for (; j + 4 <= le; j += 4) {
        __m256d e = _mm256_loadu_pd(s + j);
        vden = _mm256_add_pd(vden, _mm256_round_pd(_mm256_mul_pd(e, vds), round)); /* integers < 2^53: exact */
        e = _mm256_mul_pd(e, _mm256_loadu_pd(sv + j));
        _mm256_storeu_pd(s + j, e);
        vmax = _mm256_max_pd(vmax, e); /* e >= 0: |e| = e */
    }
    _mm256_storeu_pd(t4, vden);
    denom = (t4[0] + t4[1]) + (t4[2] + t4[3]);
    _mm256_storeu_pd(t4, vmax);
    for (int i = 0; i < 4; i++) amax = t4[i] > amax ? t4[i] : amax;
#endif
    for (; j < le; j++) {
        denom += round_even(s[j] * dscale);
        double e = s[j] * sv[j];
        s[j] = e;
        amax = e > amax ? e : amax;
    }
    double sp = amax / ptop;
    sp = sp > 0 ? sp : 1.0;
    j = 0;
#ifdef __AVX2__
    __m256d vsp = _mm256_set1_pd(sp);
    for (; j + 4 <= le; j += 4) _mm256_storeu_pd(s + j, _mm256_round_pd(_mm256_div_pd(_mm256_loadu_pd(s + j), vsp), round));
#endif
    for (; j < le; j++) s[j] = round_even(s[j] / sp);
    return sp / (denom * dunscale);
}

enum { ATT_QUERIES = 16, ATT_KEYS = 32 }; /* rows per pass; keys per p.v block (32 x D doubles stay in L1) */

/* How many keys rows r .. r + n - 1 of a block need: as far as the longest row goes (the other
   rows' extra scores are never read, and their probabilities are 0 there). Row i is query tb + i / G. */
static inline int64_t tile_keys(const int64_t *q_pos, int64_t tb, int64_t G, int64_t r, int64_t n)
{
    int64_t le = 0;
    for (int64_t i = r; i < r + n; i++) le = q_pos[tb + i / G] + 1 > le ? q_pos[tb + i / G] + 1 : le;
    return le;
}

/* Queries t0 <= t < t1 of exact attention (exact.ExactOps.attention_quantised: the same IEEE
   operations in the same order). q (T, H, D) rotated, unquantised; query t sees keys 0..q_pos[t].
   Keys j < n_cached are rows slots[j] of the memo arrays mk, mv ((rows, Hkv, D) float32 integers)
   and msk, msv ((rows, Hkv) scales); keys j >= n_cached are rows j - n_cached of fk, fsk, fv, fsv
   (same layout): read in place, no gathered copy. out (T, H, D). Per KV head and block of
   ATT_QUERIES queries, its G * ATT_QUERIES rows are done like a small GEMM: q.k and p.v in tiles
   of 6 rows x 8 columns (keys, or value dimensions), p.v blocked over ATT_KEYS keys, so a block of
   keys is read from memory once for all rows. Returns 1 if q holds a NaN or an infinity, -1 if
   out of memory, else 0. */
int64_t exact_attention(int64_t H, int64_t Hkv, int64_t D, const double *q, const int64_t *q_pos, int64_t n_cached,
                        const int64_t *slots, const float *mk, const double *msk, const float *mv, const double *msv,
                        const float *fk, const double *fsk, const float *fv, const double *fsv, double inv_sqrt_d,
                        int64_t qk_bits, int64_t p_bits, int64_t denom_bits, int64_t t0, int64_t t1, double *out)
{
    const int64_t G = H / Hkv, R = G * ATT_QUERIES;
    const double qtop = (double)((1LL << qk_bits) - 1), ptop = (double)((1LL << p_bits) - 1);
    const double dscale = ldexp(1.0, (int)denom_bits), dunscale = ldexp(1.0, -(int)denom_bits);
    int64_t le_max = 0;
    for (int64_t t = t0; t < t1; t++) le_max = q_pos[t] + 1 > le_max ? q_pos[t] + 1 : le_max;
    /* one KV head's keys, transposed (D, le_max), and values (le_max, D) as float64; per row: q.k / p row, qi, num */
    double *buf = malloc(sizeof(double) * (2 * le_max * (D + 1) + R * (le_max + 2 * D) + R));
    if (!buf)
        return -1;
    double *kt = buf, *v = kt + le_max * D, *s = v + le_max * D, *qi = s + R * le_max, *num = qi + R * D, *f = num + R * D;
    double *skh = f + R, *svh = skh + le_max;
    int64_t bad = 0;
    for (int64_t kh = 0; kh < Hkv; kh++) {
        for (int64_t j = 0; j < le_max; j++) { /* this head's keys and values as float64 */
            const int64_t row = j < n_cached ? slots[j] : j - n_cached;
            const float *kr = (j < n_cached ? mk : fk) + (row * Hkv + kh) * D, *vr = (j < n_cached ? mv : fv) + (row * Hkv + kh) * D;
            for (int64_t d = 0; d < D; d++) {
                kt[d * le_max + j] = (double)kr[d];
                v[j * D + d] = (double)vr[d];
            }
            skh[j] = (j < n_cached ? msk : fsk)[row * Hkv + kh];
            svh[j] = (j < n_cached ? msv : fsv)[row * Hkv + kh];
        }
        for (int64_t tb = t0; tb < t1; tb += ATT_QUERIES) {
            /* row r: query tb + r / G, head kh * G + r % G */
            const int64_t nr = G * ((tb + ATT_QUERIES < t1 ? tb + ATT_QUERIES : t1) - tb);
            for (int64_t r = 0; r < nr; r++) {
                const double *qr = q + ((tb + r / G) * H + kh * G + r % G) * D;
                const double sq = row_scale(qr, D, qtop, &bad);
                for (int64_t d = 0; d < D; d++) qi[r * D + d] = round_even(qr[d] / sq);
                f[r] = sq * inv_sqrt_d;
            }
            for (int64_t r = 0; r < nr; r += TILE_ROWS) { /* q.k */
                const int64_t rows = nr - r < TILE_ROWS ? nr - r : TILE_ROWS, le = tile_keys(q_pos, tb, G, r, rows);
                int64_t j = 0;
#ifdef __AVX2__
                for (; j < le && j + TILE_COLS <= le_max; j += TILE_COLS) {
                    if (rows == TILE_ROWS) {
                        tile_6x8(qi + r * D, D, kt + j, le_max, D, s + r * le_max + j, le_max, 0);
                        continue;
                    }
                    for (int64_t i = r; i < r + rows; i++) tile_1x8(qi + i * D, kt + j, le_max, D, s + i * le_max + j, 0);
                }
#endif
                for (int64_t i = r; i < r + rows; i++) qk_cols(qi + i * D, kt, le_max, D, j, le, s + i * le_max);
            }
            for (int64_t r = 0; r < nr; r++) {
                const int64_t le = q_pos[tb + r / G] + 1;
                f[r] = softmax_row(s + r * le_max, le, f[r], skh, svh, ptop, dscale, dunscale);
                for (int64_t j = le; j < le_max; j++) s[r * le_max + j] = 0.0; /* masked keys: p = 0 */
                for (int64_t d = 0; d < D; d++) num[r * D + d] = 0.0;
            }
            for (int64_t jb = 0; jb < le_max; jb += ATT_KEYS) /* p.v */
                for (int64_t r = 0; r < nr; r += TILE_ROWS) {
                    const int64_t rows = nr - r < TILE_ROWS ? nr - r : TILE_ROWS, le = tile_keys(q_pos, tb, G, r, rows);
                    const int64_t n = le - jb < ATT_KEYS ? le - jb : ATT_KEYS;
                    if (n <= 0)
                        continue;
#ifdef __AVX2__
                    if (D % TILE_COLS == 0) {
                        for (int64_t d = 0; d < D; d += TILE_COLS) {
                            if (rows == TILE_ROWS) {
                                tile_6x8(s + r * le_max + jb, le_max, v + jb * D + d, D, n, num + r * D + d, D, 1);
                                continue;
                            }
                            for (int64_t i = r; i < r + rows; i++)
                                tile_1x8(s + i * le_max + jb, v + jb * D + d, D, n, num + i * D + d, 1);
                        }
                        continue;
                    }
#endif
                    for (int64_t i = r; i < r + rows; i++) pv_exact(s + i * le_max + jb, v + jb * D, n, D, num + i * D);
                }
            for (int64_t r = 0; r < nr; r++) {
                double *o = out + ((tb + r / G) * H + kh * G + r % G) * D;
                for (int64_t d = 0; d < D; d++) o[d] = num[r * D + d] * f[r];
            }
        }
    }
    free(buf);
    return bad;
}
""" + fused.C_SOURCE


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
    lib.rope.argtypes = [i64, i64, i64, *[ptr] * 5]
    lib.rope.restype = None
    lib.rotate_quantise_kv.argtypes = [i64, i64, i64, *[ptr] * 5, i64, i64, *[ptr] * 5]
    lib.rotate_quantise_kv.restype = i64
    lib.silu_mul.argtypes = [i64, i64, ptr, ptr, ptr]
    lib.silu_mul.restype = None
    a = lib.exact_attention
    a.argtypes = [i64, i64, i64, ptr, ptr, i64, *[ptr] * 9, ctypes.c_double, i64, i64, i64, i64, i64, ptr]
    a.restype = i64
    fused.declare(lib)
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
