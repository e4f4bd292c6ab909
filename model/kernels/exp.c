/* The model's exponential (model/fixed_exp.py) and SiLU(gate) * up. */
#include "kernels.h"

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

/* s[j] = fixed_exp_1(s[j] - m) for j < n, each lane the same IEEE operations as fixed_exp_1, with
   several Horner chains in flight (one chain is latency-bound): AVX-512 four chains of 8 lanes,
   AVX2 four of 4, then one of 4 (and the last 0-3 one by one) */
void exp_row(double *s, int64_t n, double m)
{
    int64_t j = 0;
#ifdef RADIXCHECK_AVX512
    const __m512d vm8 = _mm512_set1_pd(m);
    for (; j + 32 <= n; j += 32) {
        __mmask8 ok0, ok1, ok2, ok3, big0, big1, big2, big3;
        __m512d k0, k1, k2, k3;
        __m512d r0 = exp_reduce8(_mm512_sub_pd(_mm512_loadu_pd(s + j), vm8), &ok0, &big0, &k0);
        __m512d r1 = exp_reduce8(_mm512_sub_pd(_mm512_loadu_pd(s + j + 8), vm8), &ok1, &big1, &k1);
        __m512d r2 = exp_reduce8(_mm512_sub_pd(_mm512_loadu_pd(s + j + 16), vm8), &ok2, &big2, &k2);
        __m512d r3 = exp_reduce8(_mm512_sub_pd(_mm512_loadu_pd(s + j + 24), vm8), &ok3, &big3, &k3);
        __m512d c = _mm512_set1_pd(EXP_POLY[EXP_DEGREE]), p0 = c, p1 = c, p2 = c, p3 = c;
        for (int i = EXP_DEGREE - 1; i >= 0; i--) {
            c = _mm512_set1_pd(EXP_POLY[i]);
            p0 = _mm512_add_pd(_mm512_mul_pd(p0, r0), c);
            p1 = _mm512_add_pd(_mm512_mul_pd(p1, r1), c);
            p2 = _mm512_add_pd(_mm512_mul_pd(p2, r2), c);
            p3 = _mm512_add_pd(_mm512_mul_pd(p3, r3), c);
        }
        _mm512_storeu_pd(s + j, exp_scale8(p0, k0, ok0, big0));
        _mm512_storeu_pd(s + j + 8, exp_scale8(p1, k1, ok1, big1));
        _mm512_storeu_pd(s + j + 16, exp_scale8(p2, k2, ok2, big2));
        _mm512_storeu_pd(s + j + 24, exp_scale8(p3, k3, ok3, big3));
    }
#endif
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
    for (; j + 4 <= n; j += 4) { /* one chain for the last 4-15 (the scalar form's ldexp is a libm call) */
        __m256d ok, big, k;
        const __m256d r = exp_reduce(_mm256_sub_pd(_mm256_loadu_pd(s + j), vm), &ok, &big, &k);
        __m256d p = _mm256_set1_pd(EXP_POLY[EXP_DEGREE]);
        for (int i = EXP_DEGREE - 1; i >= 0; i--) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(EXP_POLY[i]));
        _mm256_storeu_pd(s + j, exp_scale(p, k, ok, big));
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
