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

/* s + the int32 lanes of vpmaddwd(x, the int32 at w broadcast): one instruction group with one
   temporary (as q8_matmul.c's madd_add: left to itself GCC computes a step's products first and
   spills accumulators) */
static inline __m256i madd_bcast_add(__m256i s, __m256i x, const int32_t *w)
{
    __m256i t;
    __asm__("vpbroadcastd %3, %1\n\tvpmaddwd %1, %2, %1\n\tvpaddd %1, %0, %0" : "+x"(s), "=&x"(t) : "x"(x), "m"(*w));
    return s;
}

/* num[i * D + d] += sum_k (2^11 ph[i * ldp + k] + pl[i * ldp + k]) . (key pair k's values at d) for
   rows i < NR and d < D (D a multiple of 8), key pairs k < npairs <= 16 (issue 43, fourth round: p.v
   in int16, as the AVX-512 form does it). The probabilities p < 2^21 are split as p = 2^11 ph + pl
   (ph < 2^10, pl < 2^11), two keys to an int32 (key 2k in the low int16, 2k + 1 in the high one);
   v2[k * D + d] holds key 2k's and 2k + 1's values (|v| < 2^15) alike. vpmaddwd multiplies both
   keys of a pair at once into int32 lanes: |sum pl v| <= 32 x 2047 x 32767 < 2^31, so exact; then
   folded into float64 as 2^11 H + L (exact integers below 2^53, as every partial sum of p.v is). */
static inline __attribute__((always_inline)) void pv_tile_i16(const int NR, const int32_t *ph, const int32_t *pl, int64_t ldp,
                                                              const int32_t *v2, int64_t D, int64_t npairs, double *num)
{
    const __m256d scale = _mm256_set1_pd(2048.0);
    for (int64_t d0 = 0; d0 < D; d0 += 8) {
        __m256i h[TILE_ROWS], l[TILE_ROWS];
        for (int i = 0; i < NR; i++) h[i] = l[i] = _mm256_setzero_si256();
        for (int64_t k = 0; k < npairs; k++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(v2 + k * D + d0));
            for (int i = 0; i < NR; i++) {
                h[i] = madd_bcast_add(h[i], x, ph + i * ldp + k);
                l[i] = madd_bcast_add(l[i], x, pl + i * ldp + k);
            }
        }
        for (int i = 0; i < NR; i++) { /* num += 2^11 H + L: exact integers */
            double *n = num + i * D + d0;
            const __m256d hlo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(h[i])), hhi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(h[i], 1));
            const __m256d llo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(l[i])), lhi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(l[i], 1));
            _mm256_storeu_pd(n, _mm256_add_pd(_mm256_loadu_pd(n), _mm256_fmadd_pd(hlo, scale, llo)));
            _mm256_storeu_pd(n + 4, _mm256_add_pd(_mm256_loadu_pd(n + 4), _mm256_fmadd_pd(hhi, scale, lhi)));
        }
    }
}
#endif
#endif

#ifndef RADIXCHECK_AVX512
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
    m = max_lanes4(vm, m);
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
    double t4[4];
    _mm256_storeu_pd(t4, vden);
    denom = (t4[0] + t4[1]) + (t4[2] + t4[3]);
    amax = max_lanes4(vmax, amax);
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
#endif

enum { ATT_QUERIES = 16, ATT_KEYS = 32 }; /* rows per pass; keys per p.v block (32 x D doubles stay in L1) */

/* How many keys rows r .. r + n - 1 of a block need: as far as the longest row goes (the other
   rows' extra scores are never read, and their probabilities are 0 there). Row i is query tb + i / G. */
static inline int64_t tile_keys(const int64_t *q_pos, int64_t tb, int64_t G, int64_t r, int64_t n)
{
    int64_t le = 0;
    for (int64_t i = r; i < r + n; i++) le = q_pos[tb + i / G] + 1 > le ? q_pos[tb + i / G] + 1 : le;
    return le;
}

#ifndef RADIXCHECK_AVX512 /* the AVX2 and portable forms (the AVX-512 form is below) */
#ifdef __AVX2__
/* Key j's row of KV head kh: a memo row (slots[j]) for the n_cached first keys, else a fresh row */
static inline const float *kv_row(int64_t j, int64_t n_cached, const int64_t *slots, const float *m, const float *f, int64_t Hkv,
                                  int64_t kh, int64_t D)
{
    return j < n_cached ? m + (slots[j] * Hkv + kh) * D : f + ((j - n_cached) * Hkv + kh) * D;
}
#endif

/* Queries t0 <= t < t1 of exact attention (exact.ExactOps.attention_quantised: the same IEEE
   operations in the same order). q (T, H, D) rotated, unquantised; query t sees keys 0..q_pos[t].
   Keys j < n_cached are rows slots[j] of the memo arrays mk, mv ((rows, Hkv, D) float32 integers)
   and msk, msv ((rows, Hkv) scales); keys j >= n_cached are rows j - n_cached of fk, fsk, fv, fsv
   (same layout): read in place, no gathered copy. out (T, H, D). Per KV head and block of
   ATT_QUERIES queries, its G * ATT_QUERIES rows are done like a small GEMM: q.k and p.v in tiles
   of 6 rows x 8 columns (keys, or value dimensions), p.v blocked over ATT_KEYS keys, so a block of
   keys is read from memory once for all rows; with AVX2 and D a multiple of 8, p.v in int16
   (pv_tile_i16: the head's values paired once per call, straight from their float32 rows, each row's
   probabilities after its softmax). Returns 1 if q holds a NaN or an infinity, -1 if
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
    /* one KV head's keys, transposed (D, le_max), and values (le_max, D) as float64; per row: q.k / p row, qi, num.
       The transposed keys' and the rows' stride ld is le_max padded off a power of two: at 512 keys a
       stride of 4 KB put every d of a q.k tile in one L1 set */
    const int64_t ld = (le_max + 3) / 4 * 4 + 4;
    /* with AVX2 and D a multiple of 8, p.v in int16 (pv_tile_i16): the values as key pairs v2
       ((le_max + 1) / 2 x D), the probabilities as ph, pl (R x ld / 2 key pairs each) */
    const int64_t ldp = ld / 2, np_max = (le_max + 1) / 2;
    double *buf = malloc(sizeof(double) * (ld * D + le_max * D + 2 * le_max + R * (ld + 2 * D) + R) +
                         sizeof(int32_t) * (np_max * D + 2 * R * ldp));
    if (!buf)
        return -1;
    double *kt = buf, *v = kt + ld * D, *s = v + le_max * D, *qi = s + R * ld, *num = qi + R * D, *f = num + R * D;
    double *skh = f + R, *svh = skh + le_max;
#ifdef __AVX2__
    int32_t *v2 = (int32_t *)(svh + le_max), *ph = v2 + np_max * D, *pl = ph + R * ldp;
    const int pv_i16 = D % 8 == 0;
#endif
    int64_t bad = 0;
    for (int64_t kh = 0; kh < Hkv; kh++) {
        int64_t j0 = 0;
#ifdef __AVX2__
        for (; j0 + 4 <= le_max && D % 4 == 0; j0 += 4) { /* four keys at a time: values as rows, keys through a 4 x 4 transpose */
            const float *kr[4], *vr[4];
            for (int i = 0; i < 4; i++) {
                const int64_t j = j0 + i, row = j < n_cached ? slots[j] : j - n_cached;
                kr[i] = (j < n_cached ? mk : fk) + (row * Hkv + kh) * D, vr[i] = (j < n_cached ? mv : fv) + (row * Hkv + kh) * D;
                skh[j] = (j < n_cached ? msk : fsk)[row * Hkv + kh];
                svh[j] = (j < n_cached ? msv : fsv)[row * Hkv + kh];
            }
            for (int64_t d = 0; d < D; d += 4) {
                __m256d a[4];
                for (int i = 0; i < 4; i++) {
                    a[i] = _mm256_cvtps_pd(_mm_loadu_ps(kr[i] + d));
                    if (!pv_i16) /* the int16 p.v reads the values from the rows themselves (below) */
                        _mm256_storeu_pd(v + (j0 + i) * D + d, _mm256_cvtps_pd(_mm_loadu_ps(vr[i] + d)));
                }
                const __m256d t0 = _mm256_unpacklo_pd(a[0], a[1]), t1 = _mm256_unpackhi_pd(a[0], a[1]);
                const __m256d t2 = _mm256_unpacklo_pd(a[2], a[3]), t3 = _mm256_unpackhi_pd(a[2], a[3]);
                _mm256_storeu_pd(kt + d * ld + j0, _mm256_permute2f128_pd(t0, t2, 0x20));
                _mm256_storeu_pd(kt + (d + 1) * ld + j0, _mm256_permute2f128_pd(t1, t3, 0x20));
                _mm256_storeu_pd(kt + (d + 2) * ld + j0, _mm256_permute2f128_pd(t0, t2, 0x31));
                _mm256_storeu_pd(kt + (d + 3) * ld + j0, _mm256_permute2f128_pd(t1, t3, 0x31));
            }
        }
#endif
        for (int64_t j = j0; j < le_max; j++) { /* this head's keys and values as float64 (the rest, one by one) */
            const int64_t row = j < n_cached ? slots[j] : j - n_cached;
            const float *kr = (j < n_cached ? mk : fk) + (row * Hkv + kh) * D, *vr = (j < n_cached ? mv : fv) + (row * Hkv + kh) * D;
            for (int64_t d = 0; d < D; d++) {
                kt[d * ld + j] = (double)kr[d];
                v[j * D + d] = (double)vr[d];
            }
            skh[j] = (j < n_cached ? msk : fsk)[row * Hkv + kh];
            svh[j] = (j < n_cached ? msv : fsv)[row * Hkv + kh];
        }
#ifdef __AVX2__
        /* values as int16 key pairs, straight from their float32 rows (|v| < 2^15 integers: exact; a key past le_max: 0) */
        for (int64_t k = 0; pv_i16 && k < np_max; k++) {
            const float *v0 = kv_row(2 * k, n_cached, slots, mv, fv, Hkv, kh, D);
            const float *v1 = 2 * k + 1 < le_max ? kv_row(2 * k + 1, n_cached, slots, mv, fv, Hkv, kh, D) : NULL;
            for (int64_t d = 0; d < D; d += 8) {
                const __m256i lo = _mm256_cvttps_epi32(_mm256_loadu_ps(v0 + d));
                const __m256i hi = v1 ? _mm256_cvttps_epi32(_mm256_loadu_ps(v1 + d)) : _mm256_setzero_si256();
                _mm256_storeu_si256((__m256i *)(v2 + k * D + d),
                                    _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(hi, 16)));
            }
        }
#endif
        for (int64_t tb = t0; tb < t1; tb += ATT_QUERIES) {
            /* row r: query tb + r / G, head kh * G + r % G */
            const int64_t nr = G * ((tb + ATT_QUERIES < t1 ? tb + ATT_QUERIES : t1) - tb);
            for (int64_t r = 0; r < nr; r++) {
                const double *qr = q + ((tb + r / G) * H + kh * G + r % G) * D;
                const double sq = row_scale(qr, D, qtop, &bad);
                round_quotients(qr, D, sq, qi + r * D);
                f[r] = sq * inv_sqrt_d;
            }
            for (int64_t r = 0; r < nr; r += TILE_ROWS) { /* q.k */
                const int64_t rows = nr - r < TILE_ROWS ? nr - r : TILE_ROWS, le = tile_keys(q_pos, tb, G, r, rows);
                int64_t j = 0;
#ifdef __AVX2__
                for (; j < le && j + TILE_COLS <= le_max; j += TILE_COLS) {
                    if (rows == TILE_ROWS) {
                        tile_6x8(qi + r * D, D, kt + j, ld, D, s + r * ld + j, ld, 0);
                        continue;
                    }
                    for (int64_t i = r; i < r + rows; i++) tile_1x8(qi + i * D, kt + j, ld, D, s + i * ld + j, 0);
                }
#endif
                for (int64_t i = r; i < r + rows; i++) qk_cols(qi + i * D, kt, ld, D, j, le, s + i * ld);
            }
            for (int64_t r = 0; r < nr; r++) {
                const int64_t le = q_pos[tb + r / G] + 1;
                f[r] = softmax_row(s + r * ld, le, f[r], skh, svh, ptop, dscale, dunscale);
                for (int64_t j = le; j < ld; j++) s[r * ld + j] = 0.0; /* masked keys: p = 0 */
                for (int64_t d = 0; d < D; d++) num[r * D + d] = 0.0;
#ifdef __AVX2__
                for (int64_t k = 0; pv_i16 && k < np_max; k++) { /* p = 2^11 ph + pl, as key pairs (integers < 2^21: exact) */
                    const int32_t p0 = (int32_t)s[r * ld + 2 * k], p1 = (int32_t)s[r * ld + 2 * k + 1];
                    ph[r * ldp + k] = (p0 >> 11) | (p1 >> 11) << 16;
                    pl[r * ldp + k] = (p0 & 2047) | (p1 & 2047) << 16;
                }
#endif
            }
            for (int64_t jb = 0; jb < le_max; jb += ATT_KEYS) /* p.v */
                for (int64_t r = 0; r < nr; r += TILE_ROWS) {
                    const int64_t rows = nr - r < TILE_ROWS ? nr - r : TILE_ROWS, le = tile_keys(q_pos, tb, G, r, rows);
                    const int64_t n = le - jb < ATT_KEYS ? le - jb : ATT_KEYS;
                    if (n <= 0)
                        continue;
#ifdef __AVX2__
                    if (pv_i16) {
                        const int32_t *h = ph + r * ldp + jb / 2, *l = pl + r * ldp + jb / 2;
                        const int64_t npairs = (n + 1) / 2;
                        double *nm = num + r * D;
                        switch (rows) {
                        case 1: pv_tile_i16(1, h, l, ldp, v2 + jb / 2 * D, D, npairs, nm); break;
                        case 2: pv_tile_i16(2, h, l, ldp, v2 + jb / 2 * D, D, npairs, nm); break;
                        case 3: pv_tile_i16(3, h, l, ldp, v2 + jb / 2 * D, D, npairs, nm); break;
                        case 4: pv_tile_i16(4, h, l, ldp, v2 + jb / 2 * D, D, npairs, nm); break;
                        case 5: pv_tile_i16(5, h, l, ldp, v2 + jb / 2 * D, D, npairs, nm); break;
                        default: pv_tile_i16(6, h, l, ldp, v2 + jb / 2 * D, D, npairs, nm); break;
                        }
                        continue;
                    }
                    if (D % TILE_COLS == 0) {
                        for (int64_t d = 0; d < D; d += TILE_COLS) {
                            if (rows == TILE_ROWS) {
                                tile_6x8(s + r * ld + jb, ld, v + jb * D + d, D, n, num + r * D + d, D, 1);
                                continue;
                            }
                            for (int64_t i = r; i < r + rows; i++)
                                tile_1x8(s + i * ld + jb, v + jb * D + d, D, n, num + i * D + d, 1);
                        }
                        continue;
                    }
#endif
                    for (int64_t i = r; i < r + rows; i++) pv_exact(s + i * ld + jb, v + jb * D, n, D, num + i * D);
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
#endif

#ifdef RADIXCHECK_AVX512
/* The AVX-512 form: one block of ATT_QUERIES queries of one KV head at a time, its R = G x (queries)
   rows IN THE LANES of the registers (8 rows a vector, NV vectors, rows past R zero). q.k and p.v
   read each key's K and V row straight from where it is kept (the KV memo's float32 integers),
   converting as they load (float32 to float64 is exact): no per-call copy or transpose of the
   context, which a short request, whose few queries see the whole context, paid for every key and
   head (about a tenth of its attention, measured). The softmax works on 8 rows at a time, key by
   key, each element through the same IEEE operations as softmax_row. */
enum { ATT_VECS = 6 }; /* row vectors per q.k tile (x 4 keys: 24 accumulators) */

/* k's value at p as float64, in all 8 lanes (one vcvtps2pd with a broadcast) */
static inline __m512d cvt_bcast(const float *p)
{
    __m512d r;
    __asm__("vcvtps2pd %1%{1to8%}, %0" : "=v"(r) : "m"(*p));
    return r;
}

/* S[c * RP + 8 v + l] = sum_d qt[d * RP + 8 v + l] * kr[c][d] for keys c < 4 and row vectors v < NV:
   integers (|q|, |k| < 2^20, D < 2^13), every partial sum below 2^53: exact in any order */
static inline __attribute__((always_inline)) void qk_tile(const int NV, const double *qt, int64_t RP, const float *const *kr,
                                                          int64_t D, double *S)
{
    __m512d a[ATT_VECS][4];
    _Pragma("GCC unroll 6") for (int v = 0; v < NV; v++) a[v][0] = a[v][1] = a[v][2] = a[v][3] = _mm512_setzero_pd();
    const float *k0 = kr[0], *k1 = kr[1], *k2 = kr[2], *k3 = kr[3];
    for (int64_t d = 0; d < D; d++) {
        const __m512d b0 = cvt_bcast(k0 + d), b1 = cvt_bcast(k1 + d), b2 = cvt_bcast(k2 + d), b3 = cvt_bcast(k3 + d);
        _Pragma("GCC unroll 6") for (int v = 0; v < NV; v++) {
            const __m512d x = _mm512_load_pd(qt + d * RP + 8 * v);
            a[v][0] = _mm512_fmadd_pd(x, b0, a[v][0]), a[v][1] = _mm512_fmadd_pd(x, b1, a[v][1]);
            a[v][2] = _mm512_fmadd_pd(x, b2, a[v][2]), a[v][3] = _mm512_fmadd_pd(x, b3, a[v][3]);
        }
    }
    _Pragma("GCC unroll 6") for (int v = 0; v < NV; v++) {
        _mm512_store_pd(S + 8 * v, a[v][0]), _mm512_store_pd(S + RP + 8 * v, a[v][1]);
        _mm512_store_pd(S + 2 * RP + 8 * v, a[v][2]), _mm512_store_pd(S + 3 * RP + 8 * v, a[v][3]);
    }
}

/* q.k of row vectors v0 .. v0 + nv - 1 against keys 0 .. le - 1 (kr padded to a multiple of 4 with a zero row) */
static void qk_rows(int64_t nv, const double *qt, int64_t RP, const float *const *kr, int64_t le, int64_t D, double *S)
{
    for (int64_t j = 0; j < le; j += 4) {
        switch (nv) {
        case 1: qk_tile(1, qt, RP, kr + j, D, S + j * RP); break;
        case 2: qk_tile(2, qt, RP, kr + j, D, S + j * RP); break;
        case 3: qk_tile(3, qt, RP, kr + j, D, S + j * RP); break;
        case 4: qk_tile(4, qt, RP, kr + j, D, S + j * RP); break;
        case 5: qk_tile(5, qt, RP, kr + j, D, S + j * RP); break;
        default: qk_tile(6, qt, RP, kr + j, D, S + j * RP); break;
        }
    }
}

/* fixed_exp(x) on 4 x 8 lanes at once (four Horner chains in flight), exp_row's operations */
static inline void exp8x4(__m512d x[4])
{
    __mmask8 ok[4], big[4];
    __m512d k[4], r[4], p[4];
    for (int i = 0; i < 4; i++) r[i] = exp_reduce8(x[i], &ok[i], &big[i], &k[i]), p[i] = _mm512_set1_pd(EXP_POLY[EXP_DEGREE]);
    for (int d = EXP_DEGREE - 1; d >= 0; d--) {
        const __m512d c = _mm512_set1_pd(EXP_POLY[d]);
        for (int i = 0; i < 4; i++) p[i] = _mm512_add_pd(_mm512_mul_pd(p[i], r[i]), c);
    }
    for (int i = 0; i < 4; i++) x[i] = exp_scale8(p[i], k[i], ok[i], big[i]);
}

/* softmax_row on 8 rows at once (the lanes; column S[j * RP], keys j < le, row l sees keys j <= pos
   lane l): each element through softmax_row's IEEE operations in its order (max and the exact
   integer sums in another order). The quantised probabilities times the value scales (0 for keys a
   row does not see; integers p < 2^21) go to ph, pl split as p = 2^11 ph + pl, keys paired as p.v
   reads them: ph[(j / 2) RP + l] = ph_j | ph_(j+1) << 16 (int16 halves), pl alike. Returns each
   row's factor for its p.v sums. */
static __m512d softmax_rows(double *S, int64_t RP, int64_t le, __m512i pos, __m512d a, const double *sk, const double *sv,
                            double ptop, double dscale, double dunscale, int32_t *ph, int32_t *pl)
{
    const int round = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m512d m = _mm512_set1_pd(-INFINITY);
    for (int64_t j = 0; j < le; j++) {
        const __mmask8 seen = _mm512_cmp_epi64_mask(_mm512_set1_epi64(j), pos, _MM_CMPINT_LE);
        const __m512d x = _mm512_mul_pd(_mm512_mul_pd(_mm512_load_pd(S + j * RP), a), _mm512_set1_pd(sk[j]));
        _mm512_store_pd(S + j * RP, x);
        m = _mm512_mask_max_pd(m, seen, m, x);
    }
    __m512d denom = _mm512_setzero_pd(), amax = _mm512_setzero_pd();
    const __m512d ds = _mm512_set1_pd(dscale);
    for (int64_t j0 = 0; j0 < le; j0 += 4) {
        __m512d x[4];
        for (int i = 0; i < 4; i++) x[i] = _mm512_sub_pd(_mm512_load_pd(S + (j0 + i) * RP), m); /* S is padded to 4 keys */
        exp8x4(x);
        for (int i = 0; i < 4 && j0 + i < le; i++) {
            const int64_t j = j0 + i;
            const __mmask8 seen = _mm512_cmp_epi64_mask(_mm512_set1_epi64(j), pos, _MM_CMPINT_LE);
            const __m512d e = _mm512_maskz_mov_pd(seen, x[i]);
            denom = _mm512_add_pd(denom, _mm512_roundscale_pd(_mm512_mul_pd(e, ds), round)); /* integers < 2^53: exact */
            const __m512d ev = _mm512_mul_pd(e, _mm512_set1_pd(sv[j]));
            _mm512_store_pd(S + j * RP, ev);
            amax = _mm512_max_pd(amax, ev); /* ev >= 0 */
        }
    }
    __m512d sp = _mm512_div_pd(amax, _mm512_set1_pd(ptop));
    sp = _mm512_mask_mov_pd(_mm512_set1_pd(1.0), _mm512_cmp_pd_mask(sp, _mm512_setzero_pd(), _CMP_GT_OQ), sp);
    for (int64_t j = 0; j < le; j += 2) { /* p = rint(e / sp) for keys j, j + 1 (0 past le), as p.v's int16 halves */
        const __m512d p0 = _mm512_roundscale_pd(_mm512_div_pd(_mm512_load_pd(S + j * RP), sp), round);
        const __m512d p1 = j + 1 < le ? _mm512_roundscale_pd(_mm512_div_pd(_mm512_load_pd(S + (j + 1) * RP), sp), round) : _mm512_setzero_pd();
        const __m256i i0 = _mm512_cvtpd_epi32(p0), i1 = _mm512_cvtpd_epi32(p1); /* exact: integers below 2^21 */
        const __m256i lo11 = _mm256_set1_epi32(2047);
        _mm256_storeu_si256((__m256i *)(ph + (j / 2) * RP), _mm256_or_si256(_mm256_srli_epi32(i0, 11), _mm256_slli_epi32(_mm256_srli_epi32(i1, 11), 16)));
        _mm256_storeu_si256((__m256i *)(pl + (j / 2) * RP), _mm256_or_si256(_mm256_and_si256(i0, lo11), _mm256_slli_epi32(_mm256_and_si256(i1, lo11), 16)));
    }
    return _mm512_div_pd(sp, _mm512_mul_pd(denom, _mm512_set1_pd(dunscale)));
}

enum { PV_PAIRS = 16 }; /* key pairs per int32 accumulation: |sum pl v| <= 32 x 2047 x 32767 < 2^31 */

/* out rows: o[i][d] = (sum_j p_ij v_jd) * f[i] for the 8 rows i of one vector (the live ones: `rows`,
   each at its own place in out), keys j < 2 npairs, value dimensions in 16 lanes. p = 2^11 ph + pl
   (ph, pl: softmax_rows' int16 pairs of keys, each < 2^11) and v (|v| < 2^15) as int16, v2[k * DP + d]
   = v_(2k),d | v_(2k+1),d << 16: vpdpwssd multiplies two keys' pairs at once into int32 lanes, exact
   for PV_PAIRS pairs (|.| < 2^31), then folded into float64 as 2^11 H + L (exact integers below 2^53,
   as p.v's partial sums are: exact in any order). */
static void pv_rows(const int32_t *ph, const int32_t *pl, int64_t RP, const int32_t *v2, int64_t DP, int64_t npairs, int64_t D,
                    const double *f, int64_t rows, double *const *o)
{
    for (int64_t c0 = 0; c0 < D; c0 += 16) {
        __m512d n[8][2];
        for (int i = 0; i < 8; i++) n[i][0] = n[i][1] = _mm512_setzero_pd();
        for (int64_t k0 = 0; k0 < npairs; k0 += PV_PAIRS) {
            const int64_t k1 = k0 + PV_PAIRS < npairs ? k0 + PV_PAIRS : npairs;
            __m512i h0 = _mm512_setzero_si512(), h1 = h0, h2 = h0, h3 = h0, h4 = h0, h5 = h0, h6 = h0, h7 = h0;
            __m512i l0 = h0, l1 = h0, l2 = h0, l3 = h0, l4 = h0, l5 = h0, l6 = h0, l7 = h0;
            for (int64_t k = k0; k < k1; k++) {
                const __m512i x = _mm512_load_si512(v2 + k * DP + c0);
                const int32_t *hk = ph + k * RP, *lk = pl + k * RP;
#define PV_STEP(i) h##i = dpwssd_bcst(h##i, x, hk + (i)), l##i = dpwssd_bcst(l##i, x, lk + (i))
                PV_STEP(0); PV_STEP(1); PV_STEP(2); PV_STEP(3); PV_STEP(4); PV_STEP(5); PV_STEP(6); PV_STEP(7);
#undef PV_STEP
            }
            const __m512i hs[8] = {h0, h1, h2, h3, h4, h5, h6, h7}, ls[8] = {l0, l1, l2, l3, l4, l5, l6, l7};
            const __m512d scale = _mm512_set1_pd(2048.0);
            for (int i = 0; i < 8; i++) { /* n += 2^11 H + L: exact integers */
                const __m512d hlo = _mm512_cvtepi32_pd(_mm512_castsi512_si256(hs[i])), hhi = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(hs[i], 1));
                const __m512d llo = _mm512_cvtepi32_pd(_mm512_castsi512_si256(ls[i])), lhi = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(ls[i], 1));
                n[i][0] = _mm512_add_pd(n[i][0], _mm512_fmadd_pd(hlo, scale, llo));
                n[i][1] = _mm512_add_pd(n[i][1], _mm512_fmadd_pd(hhi, scale, lhi));
            }
        }
        const __mmask16 cols = D - c0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (D - c0)) - 1);
        const __mmask8 m0 = (__mmask8)cols, m1 = (__mmask8)(cols >> 8);
        for (int64_t i = 0; i < rows; i++) {
            const __m512d fi = _mm512_set1_pd(f[i]);
            _mm512_mask_storeu_pd(o[i] + c0, m0, _mm512_mul_pd(n[i][0], fi));
            _mm512_mask_storeu_pd(o[i] + c0 + 8, m1, _mm512_mul_pd(n[i][1], fi));
        }
    }
}

/* Queries t0 <= t < t1 of exact attention (exact.ExactOps.attention_quantised: the same IEEE
   operations in the same order). q (T, H, D) rotated, unquantised; query t sees keys 0..q_pos[t].
   Keys j < n_cached are rows slots[j] of the memo arrays mk, mv ((rows, Hkv, D) float32 integers)
   and msk, msv ((rows, Hkv) scales); keys j >= n_cached are rows j - n_cached of fk, fsk, fv, fsv
   (same layout): read in place. out (T, H, D). Returns 1 if q holds a NaN or an infinity, -1 if out
   of memory, else 0. */
int64_t exact_attention(int64_t H, int64_t Hkv, int64_t D, const double *q, const int64_t *q_pos, int64_t n_cached,
                        const int64_t *slots, const float *mk, const double *msk, const float *mv, const double *msv,
                        const float *fk, const double *fsk, const float *fv, const double *fsv, double inv_sqrt_d,
                        int64_t qk_bits, int64_t p_bits, int64_t denom_bits, int64_t t0, int64_t t1, double *out)
{
    const int64_t G = H / Hkv, RP = 8 * ((G * ATT_QUERIES + 7) / 8); /* rows of a block, padded to whole vectors */
    const double qtop = (double)((1LL << qk_bits) - 1), ptop = (double)((1LL << p_bits) - 1);
    const double dscale = ldexp(1.0, (int)denom_bits), dunscale = ldexp(1.0, -(int)denom_bits);
    int64_t le_max = 0;
    for (int64_t t = t0; t < t1; t++) le_max = q_pos[t] + 1 > le_max ? q_pos[t] + 1 : le_max;
    const int64_t LP = (le_max + 3) / 4 * 4; /* keys padded to whole q.k tiles */
    const int64_t DP = (D + 15) / 16 * 16, NP = (le_max + 1) / 2; /* value dimensions padded to 16 lanes; key pairs */
    const size_t bytes = sizeof(double) * (size_t)(RP * (D + LP) + RP + D + 2 * le_max + 8) + sizeof(void *) * (size_t)LP +
                         sizeof(int32_t) * (size_t)(2 * RP * NP + NP * DP + 16) + sizeof(float) * (size_t)(D + 16);
    double *buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!buf)
        return -1;
    double *qt = buf, *S = qt + RP * D, *f = S + RP * LP; /* each at a 64-byte boundary (RP, DP: multiples of 8 and 16) */
    int32_t *v2 = (int32_t *)(f + RP), *ph = v2 + NP * DP, *pl = ph + RP * NP;
    double *qrow = (double *)(pl + RP * NP + 16), *skh = qrow + D, *svh = skh + le_max;
    const float **kr = (const float **)(svh + le_max + 8);
    float *zero = (float *)(kr + LP);
    for (int64_t d = 0; d < D; d++) zero[d] = 0.0f;
    int64_t bad = 0;
    for (int64_t kh = 0; kh < Hkv; kh++) {
        const float *vr[2] = {zero, zero};
        for (int64_t j = 0; j < LP; j++) { /* this head's K rows where they are kept, its V rows as key pairs of int16 */
            if (j >= le_max) {
                kr[j] = zero;
            } else {
                const int64_t row = j < n_cached ? slots[j] : j - n_cached;
                kr[j] = (j < n_cached ? mk : fk) + (row * Hkv + kh) * D, vr[j % 2] = (j < n_cached ? mv : fv) + (row * Hkv + kh) * D;
                skh[j] = (j < n_cached ? msk : fsk)[row * Hkv + kh];
                svh[j] = (j < n_cached ? msv : fsv)[row * Hkv + kh];
            }
            if (j % 2 == 1 && j / 2 < NP) {
                if (j >= le_max)
                    vr[1] = zero;
                for (int64_t d = 0; d < DP; d += 16) { /* |v| < 2^15: exact as int16 */
                    const __mmask16 m = D - d >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (D - d)) - 1);
                    const __m512i a = _mm512_cvttps_epi32(_mm512_maskz_loadu_ps(m, vr[0] + d));
                    const __m512i b = _mm512_cvttps_epi32(_mm512_maskz_loadu_ps(m, vr[1] + d));
                    _mm512_store_si512(v2 + (j / 2) * DP + d, _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(b, 16)));
                }
            }
        }
        for (int64_t tb = t0; tb < t1; tb += ATT_QUERIES) {
            /* row r: query tb + r / G, head kh * G + r % G */
            const int64_t nr = G * ((tb + ATT_QUERIES < t1 ? tb + ATT_QUERIES : t1) - tb), nv = (nr + 7) / 8;
            for (int64_t r = 0; r < 8 * nv; r++) { /* the rows' quantised queries, transposed (rows past nr: 0) */
                if (r >= nr) {
                    for (int64_t d = 0; d < D; d++) qt[d * RP + r] = 0.0;
                    f[r] = 0.0;
                    continue;
                }
                const double *qr = q + ((tb + r / G) * H + kh * G + r % G) * D;
                const double sq = row_scale(qr, D, qtop, &bad);
                round_quotients(qr, D, sq, qrow);
                for (int64_t d = 0; d < D; d++) qt[d * RP + r] = qrow[d];
                f[r] = sq * inv_sqrt_d;
            }
            const int64_t le = tile_keys(q_pos, tb, G, 0, nr); /* keys up to the block's longest row */
            for (int64_t v0 = 0; v0 < nv; v0 += ATT_VECS) /* q.k */
                qk_rows(nv - v0 < ATT_VECS ? nv - v0 : ATT_VECS, qt + 8 * v0, RP, kr, le, D, S + 8 * v0);
            for (int64_t v = 0; v < nv; v++) {
                int64_t pos[8];
                double *o[8];
                const int64_t rows = nr - 8 * v < 8 ? nr - 8 * v : 8;
                for (int64_t l = 0; l < 8; l++) { /* lanes past the rows: row 0's position, never stored */
                    const int64_t r = 8 * v + (l < rows ? l : 0);
                    pos[l] = q_pos[tb + r / G];
                    o[l] = out + ((tb + r / G) * H + kh * G + r % G) * D;
                }
                const __m512d fv8 = softmax_rows(S + 8 * v, RP, le, _mm512_loadu_si512(pos), _mm512_load_pd(f + 8 * v), skh, svh, ptop,
                                                 dscale, dunscale, ph + 8 * v, pl + 8 * v);
                _mm512_store_pd(f + 8 * v, fv8);
                pv_rows(ph + 8 * v, pl + 8 * v, RP, v2, DP, (tile_keys(q_pos, tb, G, 8 * v, rows) + 1) / 2, D, f + 8 * v, rows, o); /* p.v */
            }
        }
    }
    free(buf);
    return bad;
}
#endif
