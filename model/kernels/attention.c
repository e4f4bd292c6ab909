/* Exact attention (exact.ExactOps.attention_quantised: the same IEEE operations, in the same order). */
#include "kernels.h"

#ifndef RADIXCHECK_AVX512 /* the AVX2 and portable forms (the AVX-512 form's tiles are further down) */
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
#endif

#ifdef RADIXCHECK_AVX512
enum { WIDE_ROWS = 8, WIDE_COLS = 16 };

/* The AVX-512 tiles: C[0:8, 0:16] = A[0:8, 0:kd] . B[0:kd, 0:16] (plus C if acc), 16 accumulators;
   columns c with mask bit c clear are neither read nor written (the last, partial tile of a row
   of keys or of value dimensions). Same products as tile_6x8, exact in any order. */
static void tile_8x16(const double *A, int64_t lda, const double *B, int64_t ldb, int64_t kd, double *C, int64_t ldc, int acc,
                      __mmask16 cols)
{
    const __mmask8 m0 = (__mmask8)cols, m1 = (__mmask8)(cols >> 8);
    const __m512d z = _mm512_setzero_pd();
#define WIDE_LOAD(r) c##r##0 = acc ? _mm512_maskz_loadu_pd(m0, C + (r) * ldc) : z, c##r##1 = acc ? _mm512_maskz_loadu_pd(m1, C + (r) * ldc + 8) : z
#define WIDE_FMA(r)                                                                                                     \
    a = _mm512_set1_pd(A[(r) * lda + p]), c##r##0 = _mm512_fmadd_pd(a, b0, c##r##0), c##r##1 = _mm512_fmadd_pd(a, b1, c##r##1)
#define WIDE_STORE(r) _mm512_mask_storeu_pd(C + (r) * ldc, m0, c##r##0), _mm512_mask_storeu_pd(C + (r) * ldc + 8, m1, c##r##1)
    __m512d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
    WIDE_LOAD(0); WIDE_LOAD(1); WIDE_LOAD(2); WIDE_LOAD(3); WIDE_LOAD(4); WIDE_LOAD(5); WIDE_LOAD(6); WIDE_LOAD(7);
    for (int64_t p = 0; p < kd; p++) {
        const __m512d b0 = _mm512_maskz_loadu_pd(m0, B + p * ldb), b1 = _mm512_maskz_loadu_pd(m1, B + p * ldb + 8);
        __m512d a;
        WIDE_FMA(0); WIDE_FMA(1); WIDE_FMA(2); WIDE_FMA(3); WIDE_FMA(4); WIDE_FMA(5); WIDE_FMA(6); WIDE_FMA(7);
    }
    WIDE_STORE(0); WIDE_STORE(1); WIDE_STORE(2); WIDE_STORE(3); WIDE_STORE(4); WIDE_STORE(5); WIDE_STORE(6); WIDE_STORE(7);
#undef WIDE_LOAD
#undef WIDE_FMA
#undef WIDE_STORE
}

/* tile_8x16 for one row */
static void tile_1x16(const double *A, const double *B, int64_t ldb, int64_t kd, double *C, int acc, __mmask16 cols)
{
    const __mmask8 m0 = (__mmask8)cols, m1 = (__mmask8)(cols >> 8);
    __m512d c0 = acc ? _mm512_maskz_loadu_pd(m0, C) : _mm512_setzero_pd(), c1 = acc ? _mm512_maskz_loadu_pd(m1, C + 8) : _mm512_setzero_pd();
    for (int64_t p = 0; p < kd; p++) {
        const __m512d a = _mm512_set1_pd(A[p]);
        c0 = _mm512_fmadd_pd(a, _mm512_maskz_loadu_pd(m0, B + p * ldb), c0);
        c1 = _mm512_fmadd_pd(a, _mm512_maskz_loadu_pd(m1, B + p * ldb + 8), c1);
    }
    _mm512_mask_storeu_pd(C, m0, c0), _mm512_mask_storeu_pd(C + 8, m1, c1);
}

/* out[i * ld + c] = (double)rows[c][d + i] for i, c < 8: eight keys' values d .. d + 7, transposed
   (float32 to float64 is exact) */
static inline void transpose_8x8(const float *const rows[8], int64_t d, double *out, int64_t ld)
{
    __m512d r[8];
    for (int c = 0; c < 8; c++) r[c] = _mm512_cvtps_pd(_mm256_loadu_ps(rows[c] + d));
    transpose8_pd(r);
    for (int i = 0; i < 8; i++) _mm512_storeu_pd(out + i * ld, r[i]);
}

/* C[0:rows, 0:ncols] (+)= A . B in 16-column tiles, the last one masked: rows of 8, then one by one */
static void wide_product(const double *A, int64_t lda, int64_t rows, const double *B, int64_t ldb, int64_t kd, double *C,
                         int64_t ldc, int64_t ncols, int acc)
{
    for (int64_t c0 = 0; c0 < ncols; c0 += WIDE_COLS) {
        const __mmask16 cols = ncols - c0 >= WIDE_COLS ? (__mmask16)0xffff : (__mmask16)((1u << (ncols - c0)) - 1);
        int64_t r = 0;
        for (; r + WIDE_ROWS <= rows; r += WIDE_ROWS)
            tile_8x16(A + r * lda, lda, B + c0, ldb, kd, C + r * ldc + c0, ldc, acc, cols);
        for (; r < rows; r++) tile_1x16(A + r * lda, B + c0, ldb, kd, C + r * ldc + c0, acc, cols);
    }
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
        int64_t j0 = 0;
#ifdef RADIXCHECK_AVX512
        if (D % 8 == 0) /* 8 keys at a time: rows converted 8 values per instruction, the keys transposed in registers */
            for (; j0 + 8 <= le_max; j0 += 8) {
                const float *kr[8];
                for (int i = 0; i < 8; i++) {
                    const int64_t j = j0 + i, row = j < n_cached ? slots[j] : j - n_cached;
                    const float *vr = (j < n_cached ? mv : fv) + (row * Hkv + kh) * D;
                    kr[i] = (j < n_cached ? mk : fk) + (row * Hkv + kh) * D;
                    for (int64_t d = 0; d < D; d += 8) _mm512_storeu_pd(v + j * D + d, _mm512_cvtps_pd(_mm256_loadu_ps(vr + d)));
                    skh[j] = (j < n_cached ? msk : fsk)[row * Hkv + kh];
                    svh[j] = (j < n_cached ? msv : fsv)[row * Hkv + kh];
                }
                for (int64_t d = 0; d < D; d += 8)
                    transpose_8x8(kr, d, kt + d * le_max + j0, le_max);
            }
#endif
        for (int64_t j = j0; j < le_max; j++) { /* this head's keys and values as float64 */
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
                round_quotients(qr, D, sq, qi + r * D);
                f[r] = sq * inv_sqrt_d;
            }
#ifdef RADIXCHECK_AVX512
            for (int64_t r = 0; r < nr; r += WIDE_ROWS) { /* q.k: keys up to the rows' longest, in 16-key tiles */
                const int64_t rows = nr - r < WIDE_ROWS ? nr - r : WIDE_ROWS, le = tile_keys(q_pos, tb, G, r, rows);
                wide_product(qi + r * D, D, rows, kt, le_max, D, s + r * le_max, le_max, le, 0);
            }
#else
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
#endif
            for (int64_t r = 0; r < nr; r++) {
                const int64_t le = q_pos[tb + r / G] + 1;
                f[r] = softmax_row(s + r * le_max, le, f[r], skh, svh, ptop, dscale, dunscale);
                for (int64_t j = le; j < le_max; j++) s[r * le_max + j] = 0.0; /* masked keys: p = 0 */
                for (int64_t d = 0; d < D; d++) num[r * D + d] = 0.0;
            }
#ifdef RADIXCHECK_AVX512
            for (int64_t jb = 0; jb < le_max; jb += ATT_KEYS) /* p.v: 16 value dimensions per tile */
                for (int64_t r = 0; r < nr; r += WIDE_ROWS) {
                    const int64_t rows = nr - r < WIDE_ROWS ? nr - r : WIDE_ROWS, le = tile_keys(q_pos, tb, G, r, rows);
                    const int64_t n = le - jb < ATT_KEYS ? le - jb : ATT_KEYS;
                    if (n > 0)
                        wide_product(s + r * le_max + jb, le_max, rows, v + jb * D, D, n, num + r * D, D, D, 1);
                }
#else
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
#endif
            for (int64_t r = 0; r < nr; r++) {
                double *o = out + ((tb + r / G) * H + kh * G + r % G) * D;
                for (int64_t d = 0; d < D; d++) o[d] = num[r * D + d] * f[r];
            }
        }
    }
    free(buf);
    return bad;
}
