/* The exact model's compiled kernels (model/q8kernel.py loads them; model/kernel_build.py builds
   them): what the files share.

   Every function here gives the bits of its NumPy original (model/exact.py, model/llama.py):
   integer products are exact (integers held in int32 or float64 with every partial sum below 2^53,
   so any order gives the same result), and every other step is one correctly rounded IEEE
   operation per element in NumPy's order. So the files are compiled with -ffp-contract=off and
   without -ffast-math, and the only FMAs are the explicit ones on exact integers. */
#ifndef RADIXCHECK_KERNELS_H
#define RADIXCHECK_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "fixed_exp.h"
#ifdef __AVX2__
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define RADIXCHECK_AVX512 1 /* the AVX-512 forms (compiled for the avx512 path) */
#endif

/* round to nearest, ties to even (NumPy's rint in the default mode), inlined: libm's nearbyint
   saves and restores the FP environment on every call */
static inline double round_even(double x)
{
#ifdef __AVX2__
    return _mm_cvtsd_f64(_mm_round_sd(_mm_setzero_pd(), _mm_set_sd(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
    return nearbyint(x);
#endif
}

#ifdef __AVX2__
/* max(m, the four lanes of v), scalar comparisons in lane order (a maximum: exact in any order) */
static inline double max_lanes4(__m256d v, double m)
{
    double t[4];
    _mm256_storeu_pd(t, v);
    for (int i = 0; i < 4; i++) m = t[i] > m ? t[i] : m;
    return m;
}
#endif

/* One row's quantisation scale, as exact.quantize_rows: amax / top (1 if not > 0), amax = max |x|
   (a maximum: the same whatever the order); flags a NaN or an infinity in *bad (the caller raises,
   so amax need not be right then). */
static inline double row_scale(const double *xr, int64_t K, double top, int64_t *bad)
{
    double amax = 0.0;
    int64_t j = 0;
#ifdef RADIXCHECK_AVX512
    __m512d vmax = _mm512_setzero_pd();
    __mmask8 finite = 0xff;
    for (; j + 8 <= K; j += 8) {
        const __m512d a = _mm512_abs_pd(_mm512_loadu_pd(xr + j));
        finite &= _mm512_cmp_pd_mask(a, _mm512_set1_pd(1.7976931348623157e308), _CMP_LE_OQ); /* false for NaN and inf */
        vmax = _mm512_max_pd(vmax, a);
    }
    *bad |= finite != 0xff;
    amax = _mm512_reduce_max_pd(vmax);
#elif defined(__AVX2__)
    __m256d vmax = _mm256_setzero_pd(), finite = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
    const __m256d sign = _mm256_set1_pd(-0.0), big = _mm256_set1_pd(1.7976931348623157e308);
    for (; j + 4 <= K; j += 4) {
        const __m256d a = _mm256_andnot_pd(sign, _mm256_loadu_pd(xr + j));
        finite = _mm256_and_pd(finite, _mm256_cmp_pd(a, big, _CMP_LE_OQ));
        vmax = _mm256_max_pd(vmax, a);
    }
    *bad |= _mm256_movemask_pd(finite) != 0xf;
    amax = max_lanes4(vmax, amax);
#endif
    for (; j < K; j++) {
        double a = fabs(xr[j]);
        *bad |= !isfinite(a);
        amax = a > amax ? a : amax;
    }
    double scale = amax / top;
    return scale > 0 ? scale : 1.0;
}

/* out[j] = round_even(x[j] / scale) for j < K: one IEEE division and one rounding per element */
static inline void round_quotients(const double *x, int64_t K, double scale, double *out)
{
    int64_t j = 0;
#ifdef RADIXCHECK_AVX512
    for (; j + 8 <= K; j += 8)
        _mm512_storeu_pd(out + j, _mm512_roundscale_pd(_mm512_div_pd(_mm512_loadu_pd(x + j), _mm512_set1_pd(scale)),
                                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__AVX2__)
    for (; j + 4 <= K; j += 4)
        _mm256_storeu_pd(out + j, _mm256_round_pd(_mm256_div_pd(_mm256_loadu_pd(x + j), _mm256_set1_pd(scale)),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; j < K; j++) out[j] = round_even(x[j] / scale);
}

#ifdef RADIXCHECK_AVX512
/* r[i] lane c = r[c] lane i before: an 8 x 8 transpose of float64 values in registers (moves only) */
static inline void transpose8_pd(__m512d r[8])
{
    __m512d t[8];
    for (int c = 0; c < 8; c += 2) { /* pairs: lanes (2k, 2k + 1) of rows c, c + 1 interleaved */
        t[c] = _mm512_unpacklo_pd(r[c], r[c + 1]);
        t[c + 1] = _mm512_unpackhi_pd(r[c], r[c + 1]);
    }
    for (int c = 0; c < 8; c += 4) { /* quadruples */
        r[c] = _mm512_permutex2var_pd(t[c], _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0), t[c + 2]);
        r[c + 1] = _mm512_permutex2var_pd(t[c + 1], _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0), t[c + 3]);
        r[c + 2] = _mm512_permutex2var_pd(t[c], _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2), t[c + 2]);
        r[c + 3] = _mm512_permutex2var_pd(t[c + 1], _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2), t[c + 3]);
    }
    for (int c = 0; c < 4; c++) { /* halves */
        t[c] = _mm512_permutex2var_pd(r[c], _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0), r[c + 4]);
        t[c + 4] = _mm512_permutex2var_pd(r[c], _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4), r[c + 4]);
    }
    for (int c = 0; c < 8; c++) r[c] = t[c];
}
#endif

#ifdef __AVX2__
/* fixed_exp's range reduction on four lanes (exp.c: fixed_exp_1); *ok: lanes in range, *big: lanes above EXP_MAX */
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

#ifdef RADIXCHECK_AVX512
/* s += each int32 lane's int16 pair of xv times the int16 pair at w (vpdpwssd with an embedded
   broadcast; int32 lanes, wrapping: exact where the sum fits). Written as one instruction because
   GCC 12 copies the accumulator around _mm512_dpwssd_epi32 (two register moves per product in the
   product's loop, measured 1.3x slower). */
static inline __m512i dpwssd_bcst(__m512i s, __m512i xv, const int32_t *w)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(xv), "m"(*w));
    return s;
}

/* fixed_exp's range reduction on eight lanes (exp.c: fixed_exp_1, exp_reduce), the lane masks in
   mask registers: ok, lanes in range; big, lanes above EXP_MAX */
static inline __m512d exp_reduce8(__m512d x, __mmask8 *ok, __mmask8 *big, __m512d *k)
{
    *big = _mm512_cmp_pd_mask(x, _mm512_set1_pd(EXP_MAX), _CMP_GT_OQ);
    *ok = _mm512_cmp_pd_mask(x, _mm512_set1_pd(EXP_MIN), _CMP_GE_OQ) & _mm512_cmp_pd_mask(x, _mm512_set1_pd(EXP_MAX), _CMP_LE_OQ);
    x = _mm512_maskz_mov_pd(*ok, x); /* out-of-range lanes computed on 0, replaced in exp_scale8 */
    *k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_sub_pd(_mm512_sub_pd(x, _mm512_mul_pd(*k, _mm512_set1_pd(EXP_LN2_HI))), _mm512_mul_pd(*k, _mm512_set1_pd(EXP_LN2_LO)));
}

static inline __m512d exp_scale8(__m512d p, __m512d k, __mmask8 ok, __mmask8 big) /* p * 2^k, 2^k from its bits: exact */
{
    const __m512i e = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_cvtpd_epi32(k)), _mm512_set1_epi64(1023)), 52);
    const __m512d in = _mm512_maskz_mov_pd(ok, _mm512_mul_pd(p, _mm512_castsi512_pd(e)));
    return _mm512_mask_mov_pd(in, big, _mm512_set1_pd(INFINITY));
}
#endif

/* q8_matmul.c: the exact Q8_0 x int16 product and the activation quantisation */
int64_t q8_quantize(int64_t n, int64_t K, const double *x, int64_t bits, int16_t *xi, double *sx);
void q8_matmul(int64_t n, int64_t K, const int16_t *x, const int8_t *q, const float *m, int64_t r0, int64_t r1,
               const double *rs, const double *ws, const int32_t *mg, const double *sx, void *out, int64_t ldo, int64_t out32);
int64_t q8_linear(int64_t n, int64_t K, const double *x, int64_t bits, int16_t *xi, double *sx, const int8_t *q,
                  const float *m, int64_t rows, const double *rs, const double *ws, const int32_t *mg, void *out, int64_t out32);

/* rows.c: RMSNorm, float64 quantisation, RoPE */
void rms_norm(int64_t n, int64_t d, const double *x, const double *w, double eps, double *out, double *buf);
int64_t quantize_f64(int64_t n, int64_t K, const double *x, int64_t bits, double *xi, double *sx);
void rope_rows(int64_t n, int64_t heads, int64_t D, const double *x, int64_t ldx, const int64_t *pos,
               const double *cos_t, const double *sin_t, double *out);
void rope(int64_t n, int64_t heads, int64_t D, const double *x, const int64_t *pos, const double *cos_t,
          const double *sin_t, double *out);
int64_t rotate_quantise_kv(int64_t n, int64_t Hkv, int64_t D, const double *k, const double *v, const int64_t *pos,
                           const double *cos_t, const double *sin_t, int64_t k_bits, int64_t v_bits, double *kbuf,
                           double *ki, double *sk, double *vi, double *sv);

/* exp.c: the model's exponential (model/fixed_exp.py) and SiLU */
void exp_row(double *s, int64_t n, double m);
void silu_mul(int64_t n, int64_t f, const double *gu, double *out, double *buf);

/* attention.c: exact attention */
int64_t exact_attention(int64_t H, int64_t Hkv, int64_t D, const double *q, const int64_t *q_pos, int64_t n_cached,
                        const int64_t *slots, const float *mk, const double *msk, const float *mv, const double *msv,
                        const float *fk, const double *fsk, const float *fv, const double *fsv, double inv_sqrt_d,
                        int64_t qk_bits, int64_t p_bits, int64_t denom_bits, int64_t t0, int64_t t1, double *out);

#endif
