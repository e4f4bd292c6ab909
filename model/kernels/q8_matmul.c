/* The exact Q8_0 x int16 matrix product (model/q8kernel.py's matmul and linear) and the activation
   quantisation it needs. Why it is exact, and the same integers as the float64-BLAS path: see
   q8_matmul's comment. */
#include "kernels.h"

#ifdef __AVX2__
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
