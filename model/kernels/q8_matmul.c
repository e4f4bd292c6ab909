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
        int64_t j = 0;
#ifdef RADIXCHECK_AVX512
        for (; j + 8 <= K; j += 8) { /* the quotients are integers of at most 15 bits: exact as int32, then int16 */
            const __m512d v = _mm512_roundscale_pd(_mm512_div_pd(_mm512_loadu_pd(xr + j), _mm512_set1_pd(scale)),
                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_storeu_si128((__m128i *)(xi + i * K + j), _mm256_cvtepi32_epi16(_mm512_cvtpd_epi32(v)));
        }
#elif defined(__AVX2__)
        for (; j + 4 <= K; j += 4) {
            const __m256d v = _mm256_round_pd(_mm256_div_pd(_mm256_loadu_pd(xr + j), _mm256_set1_pd(scale)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m128i w = _mm256_cvtpd_epi32(v);
            _mm_storel_epi64((__m128i *)(xi + i * K + j), _mm_packs_epi32(w, w));
        }
#endif
        for (; j < K; j++) xi[i * K + j] = (int16_t)round_even(xr[j] / scale);
    }
    return bad;
}

/* q8_matmul for activation rows i_begin <= i < n: AVX2 tiles of 4 activation rows x 2 weight rows
   and 1 x 4 (block sums by madd, reduced by hadd), or the portable loop without AVX2. */
static void matmul_rows(int64_t i_begin, int64_t n, int64_t K, const int16_t *x, const int8_t *q, const float *m,
                        int64_t r0, int64_t r1, const double *rs, const double *sx, void *out, int64_t ldo, int64_t out32)
{
    const int64_t nb = K / 32;
    const int64_t RCHUNK = 32; /* weight rows kept in cache while every activation tile passes */
    for (int64_t rc = r0; rc < r1; rc += RCHUNK) {
        const int64_t re = rc + RCHUNK < r1 ? rc + RCHUNK : r1;
        int64_t i0 = i_begin;
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
                    if (i0 == i_begin && !(b & 1)) { /* fetch the next chunk from memory while this one computes */
                        _mm_prefetch((const char *)(pa + o), _MM_HINT_T1);
                        _mm_prefetch((const char *)(pb + o), _MM_HINT_T1);
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
                    if (i0 == n - (n - i_begin) % 4 && !(b & 1)) /* the first 1-row pass fetches the next chunk */
                        for (int t = 0; t < 4; t++) _mm_prefetch((const char *)(pa + t * K + o), _MM_HINT_T1);
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

#ifdef __AVX2__
/* The activations of a tile of `lanes` rows (16 or 8) packed pair-major for the lanes forms (AVX-512's
   widening form, AVX2's lanes form): xt[p * lanes + l] = pair p of row i0 + l as one int32 (x[2p] in
   the low half, as vpdpwssd and vpmaddwd read it), zero for rows at or past n. */
static void pack_tile(const int16_t *x, int64_t K, int64_t i0, int64_t lanes, int64_t n, int32_t *xt)
{
    const int64_t P = K / 2;
    for (int64_t l = 0; l < lanes; l++) {
        if (i0 + l >= n) {
            for (int64_t p = 0; p < P; p++) xt[p * lanes + l] = 0;
            continue;
        }
        const int16_t *xr = x + (i0 + l) * K;
        for (int64_t p = 0; p < P; p++) /* the pair as one int32 lane: x[2p] in the low half, as vpdpwssd reads it */
            xt[p * lanes + l] = (int32_t)((uint32_t)(uint16_t)xr[2 * p] | (uint32_t)(uint16_t)xr[2 * p + 1] << 16);
    }
}

#endif

#ifdef RADIXCHECK_AVX512
/* The AVX-512 form (AVX-512BW + VNNI): activation rows in the 16 lanes of a register, so a block sum
   needs no horizontal reduction. A tile is 16 activation rows x 8 weight rows; per block and per
   pair k of its 32 columns, one vpdpwssd per weight row multiplies the 16 rows' int16 pairs (x[2k],
   x[2k + 1]) by the weight row's pair, broadcast, and adds both products to that row's int32 lanes:
   after 16 pairs, lane l holds the exact block sum of activation row l (|.| < 2^28, as in the AVX2
   form). Each block sum is then converted to float64 and accumulated times the block's multiplier
   (an FMA on exact integers whose partial sums stay below 2^53: exact, in any order). So the
   integers are those of the other forms, and the output's two roundings are put()'s.

   Layout: the activations of a 16-row tile are packed pair-major (xt[p * 16 + l] = pair p of row
   l, zero past n). A chunk of VNNI_CHUNK weight rows is widened to int16 once, in groups of 8 rows
   interleaved block by block (wg[(8 b + j) * 16 + k] = pair k of block b of the group's row j, rows
   past r1 zero), with its multipliers as float64 (mg[b * 8 + j]); so every broadcast of a block is
   at a fixed offset from one pointer. The next chunk is prefetched from memory meanwhile. */
enum { VNNI_LANES = 16, VNNI_ROWS = 8, VNNI_CHUNK = 32 };

/* weight rows r0 .. r0 + 7 (those below r1; zero beyond) as one group wg, mg: block by block */
static void widen_group(const int8_t *q, const float *m, int64_t K, int64_t r0, int64_t r1, int32_t *wg, double *mg)
{
    const int64_t nb = K / 32;
    for (int64_t j = 0; j < VNNI_ROWS; j++) /* in memory order: the group's rows are contiguous */
        for (int64_t b = 0; b < nb; b++) {
            const int live = r0 + j < r1;
            const __m512i w = live ? _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(q + (r0 + j) * K + 32 * b)))
                                   : _mm512_setzero_si512();
            _mm512_storeu_si512(wg + (b * VNNI_ROWS + j) * 16, w);
            mg[b * VNNI_ROWS + j] = live ? (double)m[(r0 + j) * nb + b] : 0.0;
        }
}

/* the 8 weight rows' int32 lanes of one block, converted and accumulated times the multipliers */
#define VNNI_FOLD(j)                                                                                                    \
    do {                                                                                                                \
        const __m512d mj = _mm512_set1_pd(mb[j]);                                                                      \
        a##j##0 = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(s##j)), mj, a##j##0);                      \
        a##j##1 = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(s##j, 1)), mj, a##j##1);                \
    } while (0)
#define VNNI_STEP(j) s##j = dpwssd_bcst(s##j, xv, wk + 16 * (j))

/* acc[2j + h] lane l = sum over blocks of block sum (activation row 8h + l, weight row j) x multiplier */
static void vnni_tile(const int32_t *xt, const int32_t *wg, const double *mg, int64_t nb, const int8_t *pf, int64_t K,
                      __m512d acc[2 * VNNI_ROWS])
{
    __m512d a00 = _mm512_setzero_pd(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    __m512d a40 = a00, a41 = a00, a50 = a00, a51 = a00, a60 = a00, a61 = a00, a70 = a00, a71 = a00;
    for (int64_t b = 0; b < nb; b++) {
        if (pf && !(b & 1)) /* the next chunk's weights, from memory, while this one computes */
            for (int j = 0; j < VNNI_ROWS; j++) _mm_prefetch((const char *)(pf + j * K + 32 * b), _MM_HINT_T1);
        __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
        const int32_t *xb = xt + 16 * b * VNNI_LANES, *wb = wg + 16 * b * VNNI_ROWS;
        for (int k = 0; k < 16; k++) {
            const __m512i xv = _mm512_loadu_si512(xb + k * VNNI_LANES);
            const int32_t *wk = wb + k;
            VNNI_STEP(0); VNNI_STEP(1); VNNI_STEP(2); VNNI_STEP(3);
            VNNI_STEP(4); VNNI_STEP(5); VNNI_STEP(6); VNNI_STEP(7);
        }
        const double *mb = mg + b * VNNI_ROWS;
        VNNI_FOLD(0); VNNI_FOLD(1); VNNI_FOLD(2); VNNI_FOLD(3);
        VNNI_FOLD(4); VNNI_FOLD(5); VNNI_FOLD(6); VNNI_FOLD(7);
    }
    acc[0] = a00, acc[1] = a01, acc[2] = a10, acc[3] = a11, acc[4] = a20, acc[5] = a21, acc[6] = a30, acc[7] = a31;
    acc[8] = a40, acc[9] = a41, acc[10] = a50, acc[11] = a51, acc[12] = a60, acc[13] = a61, acc[14] = a70, acc[15] = a71;
}
#undef VNNI_FOLD
#undef VNNI_STEP

/* vnni_tile on 8 activation rows (the lanes of a ymm register; a remainder of at most 8 rows):
   acc[j] lane l = the sum for activation row l and weight row j. */
static inline __m256i dpwssd8_bcst(__m256i s, __m256i xv, const int32_t *w)
{
    __asm__("vpdpwssd %2%{1to8%}, %1, %0" : "+v"(s) : "v"(xv), "m"(*w));
    return s;
}
#define VNNI_FOLD8(j) a##j = _mm512_fmadd_pd(_mm512_cvtepi32_pd(s##j), _mm512_set1_pd(mb[j]), a##j)
#define VNNI_STEP8(j) s##j = dpwssd8_bcst(s##j, xv, wk + 16 * (j))

static void vnni_tile8(const int32_t *xt, const int32_t *wg, const double *mg, int64_t nb, const int8_t *pf, int64_t K,
                       __m512d acc[VNNI_ROWS])
{
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int64_t b = 0; b < nb; b++) {
        if (pf && !(b & 1))
            for (int j = 0; j < VNNI_ROWS; j++) _mm_prefetch((const char *)(pf + j * K + 32 * b), _MM_HINT_T1);
        __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
        const int32_t *xb = xt + 16 * b * 8, *wb = wg + 16 * b * VNNI_ROWS;
        for (int k = 0; k < 16; k++) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xb + k * 8));
            const int32_t *wk = wb + k;
            VNNI_STEP8(0); VNNI_STEP8(1); VNNI_STEP8(2); VNNI_STEP8(3);
            VNNI_STEP8(4); VNNI_STEP8(5); VNNI_STEP8(6); VNNI_STEP8(7);
        }
        const double *mb = mg + b * VNNI_ROWS;
        VNNI_FOLD8(0); VNNI_FOLD8(1); VNNI_FOLD8(2); VNNI_FOLD8(3);
        VNNI_FOLD8(4); VNNI_FOLD8(5); VNNI_FOLD8(6); VNNI_FOLD8(7);
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3, acc[4] = a4, acc[5] = a5, acc[6] = a6, acc[7] = a7;
}
#undef VNNI_FOLD8
#undef VNNI_STEP8

/* out[i, r] for the tile's valid rows (i0 <= i < i1) and weight rows r0 + j0 <= r < r1 (r1 - r0 <= 8):
   put()'s two products, in its order, on 8 lanes at a time; acc[(lanes / 8) j + h] holds lanes
   8h .. 8h + 7 of weight row r0 + j (lanes: 16 or 8). A whole 8 x 8 block is transposed in registers
   and stored as up to 8 contiguous outputs per activation row (masked stores: rows outside the
   range are not written). */
static void vnni_store(const __m512d *acc, int64_t lanes, int64_t i0, int64_t i1, int64_t r0, int64_t j0, int64_t r1,
                       const double *rs, const double *sx, void *out, int64_t ldo, int64_t out32)
{
    const int halves = (int)(lanes / 8);
    double sxt[VNNI_LANES] = {0};
    for (int64_t i = i0; i < i1; i++) sxt[i - i0] = sx[i];
    for (int h = 0; h < halves; h++) {
        const int64_t ih = i0 + 8 * h, live = i1 - ih < 8 ? i1 - ih : 8;
        if (live <= 0)
            break;
        __m512d v[VNNI_ROWS];
        for (int64_t j = 0; j < VNNI_ROWS; j++) {
            const __m512d w = _mm512_mul_pd(acc[halves * j + h], _mm512_set1_pd(j >= j0 && j < r1 - r0 ? rs[r0 + j] : 0.0));
            v[j] = _mm512_mul_pd(w, _mm512_loadu_pd(sxt + 8 * h));
        }
        transpose8_pd(v); /* v[l] lane j: activation row ih + l, weight row r0 + j */
        const __mmask8 cols = (__mmask8)(((1u << (r1 - r0)) - 1) & ~((1u << j0) - 1));
        for (int64_t l = 0; l < live; l++) {
            if (out32)
                _mm256_mask_storeu_ps((float *)out + (ih + l) * ldo + r0, cols, _mm512_cvtpd_ps(v[l]));
            else
                _mm512_mask_storeu_pd((double *)out + (ih + l) * ldo + r0, cols, v[l]);
        }
    }
}

/* Activation rows 0 <= i < 16 * tiles16 + 8 * tile8: tiles16 tiles of 16 rows, then (tile8) one of
   8; rows past n are zero lanes, never stored. Weight rows r0 <= r < r1. Returns 0, or -1 if out of
   memory (the caller falls back). */
static int64_t matmul_vnni(int64_t n, int64_t tiles16, int64_t tile8, int64_t K, const int16_t *x, const int8_t *q, const float *m,
                           int64_t r0, int64_t r1, const double *rs, const double *sx, void *out, int64_t ldo, int64_t out32)
{
    const int64_t nb = K / 32, P = K / 2, rows = VNNI_LANES * tiles16 + 8 * tile8, tiles = tiles16 + tile8;
    int32_t *xt = aligned_alloc(64, sizeof(int32_t) * (size_t)(rows * P + VNNI_CHUNK * P));
    double *mg = malloc(sizeof(double) * (size_t)(VNNI_CHUNK * nb));
    if (!xt || !mg) {
        free(xt);
        free(mg);
        return -1;
    }
    int32_t *wg = xt + rows * P;
    for (int64_t t = 0; t < tiles; t++) {
        const int64_t i0 = t * VNNI_LANES, lanes = t < tiles16 ? VNNI_LANES : 8;
        pack_tile(x, K, i0, lanes, n, xt + i0 * P);
    }
    __m512d acc[2 * VNNI_ROWS];
    for (int64_t rc = r0; rc < r1; rc += VNNI_CHUNK) {
        const int64_t re = rc + VNNI_CHUNK < r1 ? rc + VNNI_CHUNK : r1;
        for (int64_t g = rc; g < re; g += VNNI_ROWS)
            widen_group(q, m, K, g, re, wg + (g - rc) * P, mg + (g - rc) * nb);
        for (int64_t t = 0; t < tiles; t++) {
            const int64_t i0 = t * VNNI_LANES, lanes = t < tiles16 ? VNNI_LANES : 8;
            const int64_t i1 = i0 + lanes < n ? i0 + lanes : n;
            for (int64_t g = rc; g < re; g += VNNI_ROWS) {
                const int8_t *pf = t == 0 ? q + (g + VNNI_CHUNK) * K : NULL;
                if (lanes == VNNI_LANES)
                    vnni_tile(xt + i0 * P, wg + (g - rc) * P, mg + (g - rc) * nb, nb, pf, K, acc);
                else
                    vnni_tile8(xt + i0 * P, wg + (g - rc) * P, mg + (g - rc) * nb, nb, pf, K, acc);
                vnni_store(acc, lanes, i0, i1, g, 0, g + VNNI_ROWS < re ? g + VNNI_ROWS : re, rs, sx, out, ldo, out32);
            }
        }
    }
    free(xt);
    free(mg);
    return 0;
}

/* The AVX-512 byte form (a product of at least 5 activation rows with a matrix that has its weight
   sums and integer multipliers, exact.IntMatrix.wsum and .mult_groups), which never widens the
   weights: vpdpbusd multiplies unsigned bytes by the weights' own int8 values, four at a time,
   broadcast straight from the Q8_0 rows. Each activation x (|x| < 2^15) is offset to u = x + 32768
   (0 <= u < 2^16) and split into bytes, u = 256 uh + ul; per block, lane l of a weight row's
   accumulator gets sum uh * w (8 vpdpbusd), times 256 (a shift), plus sum ul * w (8 more): the exact
   block sum of u * w (|.| < 2^29, int32). The block sums are folded in int64: vpmuldq multiplies each
   lane's block sum by the block's multiplier, an integer below 2^31 (mg, the caller passes it only
   where every multiplier is), exactly, on the even int32 lanes and on the odd ones shifted down, and
   int64 adds accumulate the products. A row's sum is then sum_b mult_b * (sum u * w) = (the exact
   product) + 32768 ws[r], ws being the row's integer weight sum sum_b mult_b * sum w; every partial
   sum is an integer below 65535 * max_r sum |w| * mult < 2^53 (the caller passes ws only for
   matrices where that holds), so the int64 sums never overflow, their conversion to float64 is
   exact, and subtracting 32768 ws[r] gives the exact product, the integer of the other forms;
   put()'s two roundings follow. mg holds the multipliers of each group of 8 weight rows block-major,
   mg[(r / 8) 8 nb + 8 b + r % 8] (a partial last group padded), so a block's 8 multipliers are
   broadcast from one pointer, and groups start at multiples of 8 (a thread's range r0 .. r1 that does
   not is computed from the group's first row and stored from r0).

   Why this form: widening the weights to int16 cost a single tile about a quarter of its time, and
   converting each block sum to float64 and folding it by FMA (two conversions, a lane extraction and
   two FMAs per weight row and block, against 16 vpdpbusd) competes with vpdpbusd for the same two
   256-bit units on Zen 4, where the int64 fold's multiplies and adds largely do not (measured in a
   C harness on SmolLM2's shapes, side by side: 16 rows 23.4 -> 19.7 ms over all 30 layers' products,
   24 rows 34.2 -> 30.1, 272 rows 358 -> 338). */
static void pack_tile_bytes(const int16_t *x, int64_t K, int64_t i0, int64_t lanes, int64_t n, uint32_t *lo, uint32_t *hi)
{
    for (int64_t l = 0; l < lanes; l++) {
        if (i0 + l >= n) { /* a lane past the last row: zero, never stored */
            for (int64_t p = 0; p < K / 4; p++) lo[p * lanes + l] = hi[p * lanes + l] = 0;
            continue;
        }
        const int16_t *xr = x + (i0 + l) * K;
        for (int64_t c = 0; c < K; c += 32) { /* 32 activations: u = x + 2^15 as uint16 (the sign bit flipped), in bytes */
            const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(xr + c), _mm512_set1_epi16((short)0x8000));
            uint32_t ql[8], qh[8];
            _mm256_storeu_si256((__m256i *)ql, _mm512_cvtepi16_epi8(u));
            _mm256_storeu_si256((__m256i *)qh, _mm512_cvtepi16_epi8(_mm512_srli_epi16(u, 8)));
            for (int k = 0; k < 8; k++) lo[(c / 4 + k) * lanes + l] = ql[k], hi[(c / 4 + k) * lanes + l] = qh[k];
        }
    }
}

typedef struct { int8_t b[4]; } quad;     /* four weights, as vpdpbusd's broadcast operand reads them */
typedef struct { int32_t v[2]; } pair32; /* vpmuldq's broadcast operand: 8 bytes, of which it uses the low 4 */

static inline __m512i dpbusd_bcst(__m512i s, __m512i a, const int8_t *w)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(a), "m"(*(const quad *)w));
    return s;
}

static inline __m256i dpbusd8_bcst(__m256i s, __m256i a, const int8_t *w)
{
    __asm__("vpdpbusd %2%{1to8%}, %1, %0" : "+v"(s) : "v"(a), "m"(*(const quad *)w));
    return s;
}

/* each int64 lane's low int32 (signed) times the int32 at m (one vpmuldq with a broadcast) */
static inline __m512i muldq_bcst(__m512i x, const int32_t *m)
{
    __m512i r;
    __asm__("vpmuldq %2%{1to8%}, %1, %0" : "=v"(r) : "v"(x), "m"(*(const pair32 *)m));
    return r;
}

#define BYTES_STEP(j) s##j = dpbusd_bcst(s##j, xv, w##j + o)
#define BYTES_STEP8(j) s##j = dpbusd8_bcst(s##j, xv, w##j + o)
#define BYTES_ROWS                                                                                                      \
    const int8_t *w0 = q, *w1 = q + K * (rows > 1), *w2 = q + 2 * K * (rows > 2), *w3 = q + 3 * K * (rows > 3);       \
    const int8_t *w4 = q + 4 * K * (rows > 4), *w5 = q + 5 * K * (rows > 5), *w6 = q + 6 * K * (rows > 6);            \
    const int8_t *w7 = q + 7 * K * (rows > 7)
/* one block's high-byte pass, the shift, its low-byte pass (xs: the tile's packed activations, L lanes) */
#define BYTES_BLOCK(STEP, LOAD, SHIFT, L)                                                                               \
    do {                                                                                                                \
        for (int g = 0; g < 8; g++) {                                                                                   \
            const TILE_VEC xv = LOAD(hi + (8 * b + g) * (L));                                                           \
            const int64_t o = 32 * b + 4 * g;                                                                           \
            STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5); STEP(6); STEP(7);                                     \
        }                                                                                                               \
        s0 = SHIFT(s0, 8), s1 = SHIFT(s1, 8), s2 = SHIFT(s2, 8), s3 = SHIFT(s3, 8);                                     \
        s4 = SHIFT(s4, 8), s5 = SHIFT(s5, 8), s6 = SHIFT(s6, 8), s7 = SHIFT(s7, 8);                                     \
        for (int g = 0; g < 8; g++) {                                                                                   \
            const TILE_VEC xv = LOAD(lo + (8 * b + g) * (L));                                                           \
            const int64_t o = 32 * b + 4 * g;                                                                           \
            STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5); STEP(6); STEP(7);                                     \
        }                                                                                                               \
    } while (0)
#define LOAD16(p) _mm512_loadu_si512(p)
#define LOAD8(p) _mm256_loadu_si256((const __m256i *)(p))

/* One 16-row tile against weight rows q + j K, j < rows (<= 8; missing rows read row 0 and are
   never stored), mb: the group's multipliers (mg's layout). acc[2 j + h] lane l = the sum of
   activation row 8 h + l and weight row j, as float64. */
static void bytes_tile(const uint32_t *lo, const uint32_t *hi, const int8_t *q, const int32_t *mg, int64_t rows, int64_t K,
                       const int8_t *pf, __m512d acc[2 * VNNI_ROWS])
{
    const int64_t nb = K / 32;
    BYTES_ROWS;
    __m512i e0 = _mm512_setzero_si512(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0, e6 = e0, e7 = e0; /* even lanes */
    __m512i o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0, o6 = e0, o7 = e0;                    /* odd lanes */
    for (int64_t b = 0; b < nb; b++) {
        if (pf && !(b & 1)) /* the next weights, from memory, while this group computes */
            for (int j = 0; j < VNNI_ROWS; j++) _mm_prefetch((const char *)(pf + j * K + 32 * b), _MM_HINT_T1);
        __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
#define TILE_VEC __m512i
        BYTES_BLOCK(BYTES_STEP, LOAD16, _mm512_slli_epi32, VNNI_LANES);
#undef TILE_VEC
        const int32_t *mb = mg + 8 * b;
#define BYTES_FOLD(j)                                                                                                   \
    e##j = _mm512_add_epi64(e##j, muldq_bcst(s##j, mb + (j))),                                                          \
    o##j = _mm512_add_epi64(o##j, muldq_bcst(_mm512_srli_epi64(s##j, 32), mb + (j)))
        BYTES_FOLD(0); BYTES_FOLD(1); BYTES_FOLD(2); BYTES_FOLD(3); BYTES_FOLD(4); BYTES_FOLD(5); BYTES_FOLD(6); BYTES_FOLD(7);
#undef BYTES_FOLD
    }
    /* the lanes back in row order: rows 0..7 from the even and odd sums' low halves, 8..15 from the high */
    const __m512i first = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), second = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
#define BYTES_OUT(j)                                                                                                    \
    acc[2 * (j)] = _mm512_cvtepi64_pd(_mm512_permutex2var_epi64(e##j, first, o##j)),                                    \
    acc[2 * (j) + 1] = _mm512_cvtepi64_pd(_mm512_permutex2var_epi64(e##j, second, o##j))
    BYTES_OUT(0); BYTES_OUT(1); BYTES_OUT(2); BYTES_OUT(3); BYTES_OUT(4); BYTES_OUT(5); BYTES_OUT(6); BYTES_OUT(7);
#undef BYTES_OUT
}

/* bytes_tile on 8 activation rows (ymm lanes; each block sum widened to int64 for the fold):
   acc[j] lane l = the sum of activation row l and weight row j */
static void bytes_tile8(const uint32_t *lo, const uint32_t *hi, const int8_t *q, const int32_t *mg, int64_t rows, int64_t K,
                        const int8_t *pf, __m512d acc[VNNI_ROWS])
{
    const int64_t nb = K / 32;
    BYTES_ROWS;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int64_t b = 0; b < nb; b++) {
        if (pf && !(b & 1))
            for (int j = 0; j < VNNI_ROWS; j++) _mm_prefetch((const char *)(pf + j * K + 32 * b), _MM_HINT_T1);
        __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
#define TILE_VEC __m256i
        BYTES_BLOCK(BYTES_STEP8, LOAD8, _mm256_slli_epi32, 8);
#undef TILE_VEC
        const int32_t *mb = mg + 8 * b;
#define BYTES_FOLD8(j) a##j = _mm512_add_epi64(a##j, muldq_bcst(_mm512_cvtepi32_epi64(s##j), mb + (j)))
        BYTES_FOLD8(0); BYTES_FOLD8(1); BYTES_FOLD8(2); BYTES_FOLD8(3); BYTES_FOLD8(4); BYTES_FOLD8(5); BYTES_FOLD8(6); BYTES_FOLD8(7);
#undef BYTES_FOLD8
    }
    acc[0] = _mm512_cvtepi64_pd(a0), acc[1] = _mm512_cvtepi64_pd(a1), acc[2] = _mm512_cvtepi64_pd(a2), acc[3] = _mm512_cvtepi64_pd(a3);
    acc[4] = _mm512_cvtepi64_pd(a4), acc[5] = _mm512_cvtepi64_pd(a5), acc[6] = _mm512_cvtepi64_pd(a6), acc[7] = _mm512_cvtepi64_pd(a7);
}
#undef BYTES_STEP
#undef BYTES_STEP8
#undef BYTES_ROWS
#undef BYTES_BLOCK
#undef LOAD16
#undef LOAD8

/* matmul_vnni's tiles (tiles16 of 16 rows, then tile8 of 8) in the byte form, weight rows r0 <= r < r1
   in groups of 8 from the multiple of 8 at or below r0; ws: the rows' integer weight sums, mg: their
   multipliers (see above). Returns 0, or -1 if out of memory. */
static int64_t matmul_bytes(int64_t n, int64_t tiles16, int64_t tile8, int64_t K, const int16_t *x, const int8_t *q, const float *m,
                            int64_t r0, int64_t r1, const double *rs, const double *ws, const int32_t *mg, const double *sx,
                            void *out, int64_t ldo, int64_t out32)
{
    (void)m;
    const int64_t nb = K / 32, rows = VNNI_LANES * tiles16 + 8 * tile8, tiles = tiles16 + tile8;
    uint32_t *lo = aligned_alloc(64, sizeof(uint32_t) * (size_t)(2 * rows * (K / 4)));
    if (!lo)
        return -1;
    uint32_t *hi = lo + rows * (K / 4);
    for (int64_t t = 0; t < tiles; t++) {
        const int64_t i0 = t * VNNI_LANES, lanes = t < tiles16 ? VNNI_LANES : 8;
        pack_tile_bytes(x, K, i0, lanes, n, lo + i0 * (K / 4), hi + i0 * (K / 4));
    }
    __m512d acc[2 * VNNI_ROWS];
    for (int64_t g = r0 / VNNI_ROWS * VNNI_ROWS; g < r1; g += VNNI_ROWS) {
        const int64_t ge = g + VNNI_ROWS < r1 ? g + VNNI_ROWS : r1, j0 = g < r0 ? r0 - g : 0; /* stored: rows g + j0 .. ge - 1 */
        double wsum[VNNI_ROWS];
        for (int64_t j = 0; j < VNNI_ROWS; j++) /* exact: a power of two times an integer < 2^38 */
            wsum[j] = j >= j0 && g + j < ge ? 32768.0 * ws[g + j] : 0.0;
        for (int64_t t = 0; t < tiles; t++) {
            const int64_t i0 = t * VNNI_LANES, lanes = t < tiles16 ? VNNI_LANES : 8;
            const int64_t i1 = i0 + lanes < n ? i0 + lanes : n;
            const int8_t *pf = t == 0 ? q + (g + VNNI_CHUNK) * K : NULL;
            if (lanes == VNNI_LANES)
                bytes_tile(lo + i0 * (K / 4), hi + i0 * (K / 4), q + g * K, mg + g * nb, ge - g, K, pf, acc);
            else
                bytes_tile8(lo + i0 * (K / 4), hi + i0 * (K / 4), q + g * K, mg + g * nb, ge - g, K, pf, acc);
            const int halves = (int)(lanes / 8);
            for (int64_t j = 0; j < VNNI_ROWS; j++) /* the offset out: exact integers, one exact subtraction */
                for (int h = 0; h < halves; h++) acc[halves * j + h] = _mm512_sub_pd(acc[halves * j + h], _mm512_set1_pd(wsum[j]));
            vnni_store(acc, lanes, i0, i1, g, j0, ge, rs, sx, out, ldo, out32);
        }
    }
    free(lo);
    return 0;
}
#endif

#if defined(__AVX2__) && !defined(RADIXCHECK_AVX512)
/* The AVX2 lanes form: AVX-512's widening form on 8-lane registers, without VNNI. Activation rows
   are in the lanes (8 int32 lanes per register; a tile is 16 rows in two registers, or 8 in one), so
   a block sum needs no horizontal reduction (the 4 x 2 tiles' hadd tree was a third of their
   instructions). Per block and pair k of its 32 columns, one vpmaddwd per weight row and register
   multiplies the rows' int16 pairs (x[2k], x[2k + 1]) by the weight row's pair, broadcast, and one
   vpaddd adds the two products' sum (|.| < 2^23) to that row's int32 lanes: after 16 pairs, lane l
   holds the exact block sum of activation row l (|.| < 2^28). Each block sum is converted to float64
   and accumulated times the block's multiplier by an FMA on exact integers whose partial sums stay
   below 2^53 (the caller's bound: exact, in any order), into accumulators in memory (L1: 16 AVX2
   registers hold only the block's int32 sums). So the integers are those of the other forms, and
   the output's two roundings are put()'s, in its order, four lanes at a time.

   Layout as AVX-512's widening form: activations packed by pack_tile; a chunk of LANES_CHUNK weight
   rows widened to int16 once per block of tiles, in groups of LANES_ROWS rows interleaved block by
   block (wg[(LANES_ROWS b + j) 16 + k] = pair k of block b of the group's row j, rows past r1 zero)
   with their multipliers as float64 (mg[LANES_ROWS b + j]) or int32 for the int64 fold (mi); the
   first tile prefetches the next chunk from memory. A block of one tile (a request of at most 16
   rows) has no pass: that tile widens as it reaches each block (issue 43, seventh round).
   LANES_ROWS = 4 (was 6): 8 int32 sums in registers instead of 12 leaves
   GCC room for the products' temporaries and the block epilogue; 8-11% faster products on Zen 5's
   avx2 path (C harness, T = 512, a layer's four products: 24.5 -> 22.0 ms), same integers.
   The int64 fold (issue 43, fifth round): where every multiplier is below 2^31 (the caller passes
   IntMatrix.mult_groups), a block's int32 sums are multiplied by its multiplier as int64 (vpmuldq on
   the even lanes, then on the odd ones shifted down) and added with vpaddq: 5 vector uops a register
   instead of the float64 fold's 7, the same integers (|block sum x multiplier| < 2^59, every partial
   sum < 2^53), converted to float64 once per tile; 1.02-1.04x on a prefill (Intel, avx2 forced). */
enum { LANES_ROWS = 4, LANES_CHUNK = 24, LANES_MIN_ROWS = 8, LANES_BLOCK_BYTES = 192 * 1024 };

/* s + the int32 lanes of vpmaddwd(x, w): one instruction pair, so that GCC keeps one temporary
   (left to itself it computed a whole step's products first and spilled an accumulator to the stack,
   a store-to-load dependency in the inner loop: 1.4x slower) */
static inline __m256i madd_add(__m256i s, __m256i x, __m256i w)
{
    __m256i t;
    __asm__("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0" : "+x"(s), "=&x"(t) : "x"(x), "x"(w));
    return s;
}

/* weight rows r0 .. r0 + LANES_ROWS - 1 (those below r1; zero beyond) as one group wg, and their
   multipliers as float64 (mg) or, if mi, as int32 (mi[LANES_ROWS b + j]; the caller knows they are
   below 2^31), or neither (both NULL: the tiles read IntMatrix.mult_groups in place): the pass before
   the tiles of a block of many */
static void lanes_widen_group(const int8_t *q, const float *m, int64_t K, int64_t r0, int64_t r1, int32_t *wg, double *mg,
                              int32_t *mi)
{
    const int64_t nb = K / 32;
    for (int64_t j = 0; j < LANES_ROWS; j++)
        for (int64_t b = 0; b < nb; b++) {
            const int live = r0 + j < r1;
            int32_t *w = wg + (b * LANES_ROWS + j) * 16;
            if (live) {
                const int8_t *qb = q + (r0 + j) * K + 32 * b;
                _mm256_storeu_si256((__m256i *)w, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)qb)));
                _mm256_storeu_si256((__m256i *)(w + 8), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qb + 16))));
            } else {
                _mm256_storeu_si256((__m256i *)w, _mm256_setzero_si256());
                _mm256_storeu_si256((__m256i *)(w + 8), _mm256_setzero_si256());
            }
            if (mi)
                mi[b * LANES_ROWS + j] = live ? (int32_t)m[(r0 + j) * nb + b] : 0;
            else if (mg)
                mg[b * LANES_ROWS + j] = live ? (double)m[(r0 + j) * nb + b] : 0.0;
        }
}

/* Where a block's one tile finds a group's weights, to widen them as it reaches each block (the int8 rows and float multipliers of the group's first row; rows live: below the chunk's
   end, the others zero). */
typedef struct {
    const int8_t *q;
    const float *m;
    int64_t live;
} lanes_src;

/* block b of the group src (LANES_ROWS rows from src.q, K apart) widened to int16 pairs at wb (wb[16 j
   + k] = pair k of row j) with its multipliers: as int32 at mib[j] if I64 and mib (the caller knows
   they are below 2^31; no mib: the tiles read them from IntMatrix.mult_groups), else as float64 at mgb[j] */
static inline __attribute__((always_inline)) void lanes_widen_block(lanes_src src, int64_t K, int64_t nb, int64_t b, int32_t *wb,
                                                                    double *mgb, int32_t *mib, const int I64)
{
    for (int j = 0; j < LANES_ROWS; j++) {
        int32_t *w = wb + 16 * j;
        float mf = 0.0f;
        if (j < src.live) {
            const int8_t *qb = src.q + j * K + 32 * b;
            _mm256_storeu_si256((__m256i *)w, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)qb)));
            _mm256_storeu_si256((__m256i *)(w + 8), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qb + 16))));
            if (!I64 || mib)
                mf = src.m[j * nb + b];
        } else {
            _mm256_storeu_si256((__m256i *)w, _mm256_setzero_si256());
            _mm256_storeu_si256((__m256i *)(w + 8), _mm256_setzero_si256());
        }
        if (!I64)
            mgb[j] = (double)mf;
        else if (mib)
            mib[j] = (int32_t)mf;
    }
}

/* acc[16 j + l] (l < 8 H) = the tile's sums for weight row j of the group and activation row l, over
   all blocks; H: the tile's registers (2: 16 rows, 1: 8 rows). Inlined with constant H, I64 and W, so
   the loops over j, h and k unroll and s[][] lives in registers. The first pair of a block starts its
   int32 sums and the first block its float64 ones (a product of exact integers below 2^53: what the
   FMA onto zero gives). W: this tile is the only one of its block of tiles, and widens the group from
   src into wg and into mg or mi block by block as it reaches them (issue 43, seventh round: the pass
   over the chunk before the tiles cost a short request ~13 ms of CPU, this ~4 ms less); it then reads
   the pairs back from there. R (with W, I64 and M8 only: nothing but pairs is written): block b's
   pairs go to ring b mod 4 of four 256-byte rings at wg (they stay in L1; a group's 4 P int32 at wg
   hold them: P = 16 nb), widened two blocks ahead. M8 (with I64): mi is IntMatrix.mult_groups (block b's multiplier of row j at mi[8 b + j]),
   read in place, whether this tile widens or a pass did (issue 43, eighth round: the pass's int32
   copies cost a request of two tiles ~2 ms); else block b's are at mi[LANES_ROWS b + j], written by
   the pass or by this tile. Constants, not runtime strides: those measured 2-3 % slower on products
   of many tiles. */
static inline __attribute__((always_inline)) void lanes_tile(const int32_t *xt, int32_t *wg, double *mg, int64_t nb,
                                                             const int8_t *pf, int64_t K, double *acc, const int H,
                                                             const int I64, int32_t *mi, int64_t *acc64, const int W, const int R,
                                                             const int M8, lanes_src src)
{
    const int L = 8 * H; /* lanes */
    for (int64_t b = 0; b < nb; b++) {
        if (pf && !(b & 1)) /* the next chunk's weights, from memory, while this one computes */
            for (int j = 0; j < LANES_ROWS; j++) _mm_prefetch((const char *)(pf + j * K + 32 * b), _MM_HINT_T1);
        __m256i s[LANES_ROWS][2];
        int32_t *wbw = W && R ? wg + 64 * (b & 3) : wg + 16 * b * LANES_ROWS;
        const int32_t *xb = xt + 16 * b * L, *wb = wbw;
        if (W && R) { /* block b + 2 widened before block b's tile, into four 256-byte rings: the tile's
                         broadcasts read pairs stored two blocks ago instead of waiting on this block's
                         stores (issue 43, eleventh round: 6 % off a 16-row product on Zen 4) */
            if (b == 0)
                for (int64_t b0 = 0; b0 < 2 && b0 < nb; b0++) lanes_widen_block(src, K, nb, b0, wg + 64 * b0, mg, NULL, I64);
            if (b + 2 < nb)
                lanes_widen_block(src, K, nb, b + 2, wg + 64 * ((b + 2) & 3), mg, NULL, I64);
            __asm__("" : "+r"(wb));
        } else if (W) {
            lanes_widen_block(src, K, nb, b, wbw, mg + b * LANES_ROWS, M8 ? NULL : mi + b * LANES_ROWS, I64);
            /* GCC must not see that wb holds what was just stored: it would broadcast the pairs from the
               registers by shuffles (port 5, the madds' port) instead of by loads */
            __asm__("" : "+r"(wb));
        }
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) {
            __m256i xv[2];
            for (int h = 0; h < H; h++) xv[h] = _mm256_loadu_si256((const __m256i *)(xb + k * L + 8 * h));
            for (int j = 0; j < LANES_ROWS; j++) {
                const __m256i w = _mm256_set1_epi32(wb[16 * j + k]);
                for (int h = 0; h < H; h++) s[j][h] = k ? madd_add(s[j][h], xv[h], w) : _mm256_madd_epi16(xv[h], w);
            }
        }
        if (I64) { /* the int64 fold: (even lanes, odd lanes) x the int32 multiplier, exact (|.| < 2^59, sums < 2^53) */
            for (int j = 0; j < LANES_ROWS; j++) {
                const __m256i mj = _mm256_set1_epi32(mi[b * (M8 ? 8 : LANES_ROWS) + j]);
                for (int h = 0; h < H; h++) {
                    int64_t *a = acc64 + 16 * j + 8 * h;
                    const __m256i ev = _mm256_mul_epi32(s[j][h], mj), od = _mm256_mul_epi32(_mm256_srli_epi64(s[j][h], 32), mj);
                    _mm256_storeu_si256((__m256i *)a, b ? _mm256_add_epi64(ev, _mm256_loadu_si256((const __m256i *)a)) : ev);
                    _mm256_storeu_si256((__m256i *)(a + 4), b ? _mm256_add_epi64(od, _mm256_loadu_si256((const __m256i *)(a + 4))) : od);
                }
            }
            continue;
        }
        for (int j = 0; j < LANES_ROWS; j++) {
            const __m256d mj = _mm256_set1_pd(mg[b * LANES_ROWS + j]);
            for (int h = 0; h < H; h++) {
                double *a = acc + 16 * j + 8 * h;
                const __m256d lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(s[j][h]));
                const __m256d hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(s[j][h], 1));
                _mm256_storeu_pd(a, b ? _mm256_fmadd_pd(lo, mj, _mm256_loadu_pd(a)) : _mm256_mul_pd(lo, mj));
                _mm256_storeu_pd(a + 4, b ? _mm256_fmadd_pd(hi, mj, _mm256_loadu_pd(a + 4)) : _mm256_mul_pd(hi, mj));
            }
        }
    }
    if (I64) /* the int64 sums (even lanes, then odd) back into lane order as float64: integers below 2^53, exact */
        for (int j = 0; j < LANES_ROWS; j++)
            for (int h = 0; h < H; h++)
                for (int l = 0; l < 8; l++)
                    acc[16 * j + 8 * h + l] = (double)acc64[16 * j + 8 * h + (l & 1) * 4 + l / 2];
}

/* lanes_tile on 16 rows (H = 2) or 8, with the float64 fold or the int64 one (the matrix's multipliers
   all below 2^31: mi), widening the group from src itself if widen (a constant in each call of lanes_tile) */
static void lanes_tile16(const int32_t *xt, int32_t *wg, double *mg, int64_t nb, const int8_t *pf, int64_t K, double *acc,
                         int widen, lanes_src src)
{
    if (widen)
        lanes_tile(xt, wg, mg, nb, pf, K, acc, 2, 0, NULL, NULL, 1, 0, 0, src);
    else
        lanes_tile(xt, wg, mg, nb, pf, K, acc, 2, 0, NULL, NULL, 0, 0, 0, src);
}

static void lanes_tile8(const int32_t *xt, int32_t *wg, double *mg, int64_t nb, const int8_t *pf, int64_t K, double *acc,
                        int widen, lanes_src src)
{
    if (widen)
        lanes_tile(xt, wg, mg, nb, pf, K, acc, 1, 0, NULL, NULL, 1, 0, 0, src);
    else
        lanes_tile(xt, wg, mg, nb, pf, K, acc, 1, 0, NULL, NULL, 0, 0, 0, src);
}

/* how a tile of the int64 fold finds its group: widen (it widens the group itself as it reaches each
   block; else a pass or the block's first tile did), ring (the pairs all go to the same 256 bytes: the
   block's one tile, nobody reads them after it) and inplace (mi is IntMatrix.mult_groups, read in
   place, 8 apart; else the int32 copies at mi, which a widening tile or the pass writes); constants in
   each call of lanes_tile */
#define LANES_I64_MODES(H)                                                                                              \
    if (widen && ring)                                                                                                  \
        lanes_tile(xt, wg, NULL, nb, pf, K, acc, H, 1, mi, acc64, 1, 1, 1, src);                                        \
    else if (widen)                                                                                                     \
        lanes_tile(xt, wg, NULL, nb, pf, K, acc, H, 1, mi, acc64, 1, 0, 0, src);                                        \
    else if (inplace)                                                                                                   \
        lanes_tile(xt, wg, NULL, nb, pf, K, acc, H, 1, mi, acc64, 0, 0, 1, src);                                        \
    else                                                                                                                \
        lanes_tile(xt, wg, NULL, nb, pf, K, acc, H, 1, mi, acc64, 0, 0, 0, src);

static void lanes_tile16_i64(const int32_t *xt, int32_t *wg, int32_t *mi, int64_t nb, const int8_t *pf, int64_t K, double *acc,
                             int64_t *acc64, int widen, int ring, int inplace, lanes_src src)
{
    LANES_I64_MODES(2)
}

static void lanes_tile8_i64(const int32_t *xt, int32_t *wg, int32_t *mi, int64_t nb, const int8_t *pf, int64_t K, double *acc,
                            int64_t *acc64, int widen, int ring, int inplace, lanes_src src)
{
    LANES_I64_MODES(1)
}
#undef LANES_I64_MODES

/* Activation rows 0 <= i < 16 * tiles16 + 8 * tile8 (tiles of 16 rows, then one of 8 if tile8; rows
   past n are zero lanes, never stored), weight rows r0 <= r < r1. Returns 0, or -1 if out of memory
   or K < 32 (the caller falls back to matmul_rows). */
/* put() for a whole group of LANES_ROWS (4) weight rows g .. g + 3 and the tile's valid rows i0 <= i < i1:
   (acc * rs[r]) * sx[i], the two products in this order, 4 lanes at a time, then a 4 x 4 transpose in
   registers so that each activation row's 4 outputs go out as one store (a float64 row's 32 bytes, or
   4 floats), not 4 scalar ones. Issue 43, twelfth round: the scalar stores' cost depended on where the
   output buffer sat in a cache line (the gate/up product 7 % slower into a 64-byte-aligned buffer than
   into one 16 bytes past, Zen 4). */
static inline void lanes_store4(const double *acc, int64_t lanes, int64_t i0, int64_t i1, int64_t g, const double *rs,
                                const double *sxt, void *out, int64_t ldo, int64_t out32)
{
    for (int64_t l = 0; l < lanes && i0 + l < i1; l += 4) {
        const __m256d s = _mm256_loadu_pd(sxt + l);
        const __m256d c0 = _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(acc + l), _mm256_set1_pd(rs[g])), s);
        const __m256d c1 = _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(acc + 16 + l), _mm256_set1_pd(rs[g + 1])), s);
        const __m256d c2 = _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(acc + 32 + l), _mm256_set1_pd(rs[g + 2])), s);
        const __m256d c3 = _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(acc + 48 + l), _mm256_set1_pd(rs[g + 3])), s);
        /* cj lane k: activation row i0 + l + k, weight row g + j; t[k] lane j: the same */
        const __m256d u0 = _mm256_unpacklo_pd(c0, c1), u1 = _mm256_unpackhi_pd(c0, c1);
        const __m256d u2 = _mm256_unpacklo_pd(c2, c3), u3 = _mm256_unpackhi_pd(c2, c3);
        __m256d t[4];
        t[0] = _mm256_permute2f128_pd(u0, u2, 0x20), t[1] = _mm256_permute2f128_pd(u1, u3, 0x20);
        t[2] = _mm256_permute2f128_pd(u0, u2, 0x31), t[3] = _mm256_permute2f128_pd(u1, u3, 0x31);
        const int64_t live = i1 - (i0 + l) < 4 ? i1 - (i0 + l) : 4;
        for (int64_t k = 0; k < live; k++) {
            const int64_t at = (i0 + l + k) * ldo + g;
            if (out32)
                _mm_storeu_ps((float *)out + at, _mm256_cvtpd_ps(t[k]));
            else
                _mm256_storeu_pd((double *)out + at, t[k]);
        }
    }
}

static int64_t matmul_lanes(int64_t n, int64_t tiles16, int64_t tile8, int64_t K, const int16_t *x, const int8_t *q, const float *m,
                            int64_t r0, int64_t r1, const double *rs, const int32_t *mgrp, const double *sx, void *out, int64_t ldo,
                            int64_t out32)
{
    const int64_t nb = K / 32, P = K / 2, rows = 16 * tiles16 + 8 * tile8, tiles = tiles16 + tile8;
    if (nb == 0) /* no blocks: lanes_tile would set no sums (matmul_rows stores zeros) */
        return -1;
    int32_t *xt = aligned_alloc(64, sizeof(int32_t) * (size_t)(rows * P + LANES_CHUNK * P));
    const int64_t int_mult = mgrp != NULL;
    double *mg = int_mult ? NULL : malloc(sizeof(double) * (size_t)(LANES_CHUNK * nb));
    int32_t *mi = int_mult ? malloc(sizeof(int32_t) * (size_t)(LANES_CHUNK * nb)) : NULL;
    if (!xt || (!int_mult && !mg) || (int_mult && !mi)) {
        free(xt);
        free(mg);
        free(mi);
        return -1;
    }
    int32_t *wg = xt + rows * P;
    for (int64_t t = 0; t < tiles; t++) {
        const int64_t i0 = 16 * t, lanes = t < tiles16 ? 16 : 8;
        pack_tile(x, K, i0, lanes, n, xt + i0 * P);
    }
    double acc[16 * LANES_ROWS];
    int64_t acc64[16 * LANES_ROWS];
    /* the activation tiles in blocks of about LANES_BLOCK_BYTES, each block kept in L2 while every weight
       chunk passes (all of a long prompt's tiles did not fit: every chunk streamed them from memory) */
    const int64_t block = (int64_t)LANES_BLOCK_BYTES / (32 * K) > 1 ? (int64_t)LANES_BLOCK_BYTES / (32 * K) : 1;
    for (int64_t tb = 0; tb < tiles; tb += block)
    for (int64_t rc = r0; rc < r1; rc += LANES_CHUNK) {
        const int64_t re = rc + LANES_CHUNK < r1 ? rc + LANES_CHUNK : r1, te = tb + block < tiles ? tb + block : tiles;
        /* one tile in the block (a request of at most 16 rows): it widens the weights itself as it reaches
           them, and nothing reads its pairs after it, so they go to the same 256 bytes. Many tiles: a
           widening pass over the chunk first; widening in the first tile measured no faster there, even
           for two tiles (eighth round). The int64 fold of a block of one or two tiles reads the multipliers
           in place from mgrp (IntMatrix.mult_groups: groups of 8 rows, so a group of 4 from a multiple of 4
           is 4 of them per block, 8 apart) where the range starts at a multiple of 4 (a thread's may not),
           and the pass then writes the weights only: 2 % off a request of two tiles (eighth round); longer
           blocks keep the pass's int32 copies (in place there measured 1 % slower on prompts of 150-270
           tokens, within this box's spread but not a gain) */
        const int64_t single = te - tb == 1, inplace = int_mult && r0 % LANES_ROWS == 0 && te - tb <= 2;
        if (!single)
            for (int64_t g = rc; g < re; g += LANES_ROWS)
                lanes_widen_group(q, m, K, g, re, wg + (g - rc) * P, mg ? mg + (g - rc) * nb : NULL,
                                  mi && !inplace ? mi + (g - rc) * nb : NULL);
        for (int64_t t = tb; t < te; t++) {
            const int64_t i0 = 16 * t, lanes = t < tiles16 ? 16 : 8, i1 = i0 + lanes < n ? i0 + lanes : n;
            double sxt[16] = {0}; /* the tile's row scales, zero past n */
            for (int64_t i = i0; i < i1; i++) sxt[i - i0] = sx[i];
            for (int64_t g = rc; g < re; g += LANES_ROWS) {
                const int widen = (int)single, ring = single && inplace;
                const int8_t *pf = t == tb ? q + (g + LANES_CHUNK) * K : NULL;
                const lanes_src src = {q + g * K, m + g * nb, re - g < LANES_ROWS ? re - g : LANES_ROWS};
                int32_t *wgg = wg + (g - rc) * P;
                /* mult_groups is read only (the int32 copies are written only when not in place) */
                int32_t *mig = inplace ? (int32_t *)(mgrp + g / 8 * 8 * nb + g % 8) : mi ? mi + (g - rc) * nb : NULL;
                if (int_mult && lanes == 16)
                    lanes_tile16_i64(xt + i0 * P, wgg, mig, nb, pf, K, acc, acc64, widen, ring, (int)inplace, src);
                else if (int_mult)
                    lanes_tile8_i64(xt + i0 * P, wgg, mig, nb, pf, K, acc, acc64, widen, ring, (int)inplace, src);
                else if (lanes == 16)
                    lanes_tile16(xt + i0 * P, wgg, mg + (g - rc) * nb, nb, pf, K, acc, widen, src);
                else
                    lanes_tile8(xt + i0 * P, wgg, mg + (g - rc) * nb, nb, pf, K, acc, widen, src);
                const int64_t ge = g + LANES_ROWS < re ? g + LANES_ROWS : re;
                if (ge - g == LANES_ROWS) {
                    lanes_store4(acc, lanes, i0, i1, g, rs, sxt, out, ldo, out32);
                    continue;
                }
                for (int64_t r = g; r < ge; r++) { /* put(): (acc * rs[r]) * sx[i], two products in this order */
                    double v[16] = {0}; /* all set below for the lanes read; GCC cannot see it (-Wmaybe-uninitialized) */
                    const double *a = acc + 16 * (r - g);
                    for (int64_t l = 0; l < lanes; l += 4)
                        _mm256_storeu_pd(v + l, _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(a + l), _mm256_set1_pd(rs[r])),
                                                              _mm256_loadu_pd(sxt + l)));
                    for (int64_t i = i0; i < i1; i++) {
                        if (out32)
                            ((float *)out)[i * ldo + r] = (float)v[i - i0];
                        else
                            ((double *)out)[i * ldo + r] = v[i - i0];
                    }
                }
            }
        }
    }
    free(xt);
    free(mg);
    free(mi);
    return 0;
}
#endif

/* acc = sum_b m[r*nb + b] * (sum_{j<32} q[r*K + 32b + j] * x[i*K + 32b + j]) for i < n and
   r0 <= r < r1, out[i*ldo + r] = (acc * rs[r]) * sx[i] (put). With AVX-512: 16-row tiles, and the
   last 9-15 rows as one more (zero lanes), 1-8 rows as an 8-row tile, in the byte form where the
   matrix has its weight sums and integer multipliers (ws, mg: exact.IntMatrix.wsum, .mult_groups;
   NULL where the byte form would not be exact), else the widening form; only fewer than 5 rows in
   all (a 1-token request, the last-logit head: they stream the weights once, memory-bound) take
   matmul_rows, the other forms' path. */
void q8_matmul(int64_t n, int64_t K, const int16_t *x, const int8_t *q, const float *m, int64_t r0, int64_t r1,
               const double *rs, const double *ws, const int32_t *mg, const double *sx, void *out, int64_t ldo, int64_t out32)
{
    int64_t i_begin = 0;
#ifdef RADIXCHECK_AVX512
    const int64_t whole = n / VNNI_LANES, rest = n % VNNI_LANES;
    const int64_t tiles16 = whole + (rest > 8), tile8 = rest > 0 && rest <= 8 && n >= 5;
    if (tiles16 + tile8) {
        if ((ws != NULL && mg != NULL ? matmul_bytes(n, tiles16, tile8, K, x, q, m, r0, r1, rs, ws, mg, sx, out, ldo, out32)
                                      : matmul_vnni(n, tiles16, tile8, K, x, q, m, r0, r1, rs, sx, out, ldo, out32)) == 0)
            i_begin = tiles16 * VNNI_LANES + tile8 * 8 < n ? tiles16 * VNNI_LANES + tile8 * 8 : n;
    }
#else
    (void)ws;
#ifndef __AVX2__
    (void)mg;
#endif
#ifdef __AVX2__
    if (n >= LANES_MIN_ROWS) {
        const int64_t tiles16 = n / 16 + (n % 16 > 8), tile8 = n % 16 > 0 && n % 16 <= 8;
        if (matmul_lanes(n, tiles16, tile8, K, x, q, m, r0, r1, rs, mg, sx, out, ldo, out32) == 0)
            i_begin = n;
    }
#endif
#endif
    matmul_rows(i_begin, n, K, x, q, m, r0, r1, rs, sx, out, ldo, out32);
}

/* q8_quantize then q8_matmul over all rows: one call per product on one thread */
int64_t q8_linear(int64_t n, int64_t K, const double *x, int64_t bits, int16_t *xi, double *sx, const int8_t *q,
                  const float *m, int64_t rows, const double *rs, const double *ws, const int32_t *mg, void *out, int64_t out32)
{
    if (q8_quantize(n, K, x, bits, xi, sx))
        return 1;
    q8_matmul(n, K, xi, q, m, 0, rows, rs, ws, mg, sx, out, rows, out32);
    return 0;
}
