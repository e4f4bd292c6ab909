/* Exact attention (exact.ExactOps.attention_quantised: the same IEEE operations, in the same order).
   Three forms: portable (scalar), AVX2 and AVX-512. Both vector forms keep a block's query rows in
   the lanes of the registers and read each key's row where it is kept; every element goes through
   the same IEEE operations, and the integer sums (q.k, p.v, the softmax's denominator) are exact in
   any order, so the three forms give the same bits. */
#include "kernels.h"

enum { ATT_QUERIES = 16, ATT_KEYS = 32 }; /* rows per pass; keys per p.v block (32 keys' values stay in L1) */

/* How many keys rows r .. r + n - 1 of a block need: as far as the longest row goes (the other
   rows' extra scores are never read, and their probabilities are 0 there). Row i is query tb + i / G. */
static inline int64_t tile_keys(const int64_t *q_pos, int64_t tb, int64_t G, int64_t r, int64_t n)
{
    int64_t le = 0;
    for (int64_t i = r; i < r + n; i++) le = q_pos[tb + i / G] + 1 > le ? q_pos[tb + i / G] + 1 : le;
    return le;
}

#ifndef __AVX2__ /* the portable form */
/* s[j] = sum_d qi[d] * kt[d * ldk + j] for j0 <= j < j1 (kt: one head's keys transposed, D x ldk):
   integers (|qi|, |k| < 2^20, D < 2^13), every partial sum an integer below 2^53, so exact in any order */
static void qk_cols(const double *qi, const double *kt, int64_t ldk, int64_t D, int64_t j0, int64_t j1, double *s)
{
    for (int64_t j = j0; j < j1; j++) {
        double a = 0.0;
        for (int64_t d = 0; d < D; d++) a += qi[d] * kt[d * ldk + j];
        s[j] = a;
    }
}

/* num[d] += sum_j p[j] * v[j * D + d] for d < D, j < n: integers (|p| < 2^21, |v| < 2^15, all keys
   < 2^16), every partial sum below 2^53, so exact in any order */
static void pv_exact(const double *p, const double *v, int64_t n, int64_t D, double *num)
{
    for (int64_t d = 0; d < D; d++) {
        double a = 0.0;
        for (int64_t j = 0; j < n; j++) a += p[j] * v[j * D + d];
        num[d] += a;
    }
}

/* One query row's softmax: s[j] (the exact integer q.k of key j < le) becomes the row's quantised
   probability times the value scale; returns the factor its p.v sums are multiplied by. sk, sv:
   the KV head's scales, contiguous. Each element goes through exp.ExactOps' IEEE operations in
   NumPy's order; only the max and the (exact integer) sums are taken in another order. */
static double softmax_row(double *s, int64_t le, double a, const double *sk, const double *sv, double ptop, double dscale,
                          double dunscale)
{
    double m = -INFINITY, denom = 0.0, amax = 0.0;
    for (int64_t j = 0; j < le; j++) {
        double x = (s[j] * a) * sk[j];
        s[j] = x;
        m = x > m ? x : m;
    }
    exp_row(s, le, m);
    for (int64_t j = 0; j < le; j++) {
        denom += round_even(s[j] * dscale);
        double e = s[j] * sv[j];
        s[j] = e;
        amax = e > amax ? e : amax;
    }
    double sp = amax / ptop;
    sp = sp > 0 ? sp : 1.0;
    for (int64_t j = 0; j < le; j++) s[j] = round_even(s[j] / sp);
    return sp / (denom * dunscale);
}

/* Queries t0 <= t < t1 of exact attention (exact.ExactOps.attention_quantised: the same IEEE
   operations in the same order). q (T, H, D) rotated, unquantised; query t sees keys 0..q_pos[t].
   Keys j < n_cached are rows slots[j] of the memo arrays mk, mv ((rows, Hkv, D) float32 integers)
   and msk, msv ((rows, Hkv) scales); keys j >= n_cached are rows j - n_cached of fk, fsk, fv, fsv
   (same layout). out (T, H, D). Per KV head: its keys transposed and its values as float64, then
   each query row's q.k, softmax and p.v. Returns 1 if q holds a NaN or an infinity, -1 if out of
   memory, else 0. */
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
    const int64_t ld = le_max; /* keys transposed (D, ld), values (le_max, D); per row: q.k / p row, qi, num */
    double *buf = malloc(sizeof(double) * (ld * D + le_max * D + 2 * le_max + R * (ld + 2 * D) + R + 1));
    if (!buf)
        return -1;
    double *kt = buf, *v = kt + ld * D, *s = v + le_max * D, *qi = s + R * ld, *num = qi + R * D, *f = num + R * D;
    double *skh = f + R, *svh = skh + le_max;
    int64_t bad = 0;
    for (int64_t kh = 0; kh < Hkv; kh++) {
        for (int64_t j = 0; j < le_max; j++) { /* this head's keys and values as float64 */
            const int64_t row = j < n_cached ? slots[j] : j - n_cached;
            const float *kr = (j < n_cached ? mk : fk) + (row * Hkv + kh) * D, *vr = (j < n_cached ? mv : fv) + (row * Hkv + kh) * D;
            for (int64_t d = 0; d < D; d++) {
                kt[d * ld + j] = (double)kr[d];
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
                const int64_t le = q_pos[tb + r / G] + 1;
                qk_cols(qi + r * D, kt, ld, D, 0, le, s + r * ld);
                f[r] = softmax_row(s + r * ld, le, sq * inv_sqrt_d, skh, svh, ptop, dscale, dunscale);
                for (int64_t d = 0; d < D; d++) num[r * D + d] = 0.0;
                for (int64_t jb = 0; jb < le; jb += ATT_KEYS) /* p.v */
                    pv_exact(s + r * ld + jb, v + jb * D, le - jb < ATT_KEYS ? le - jb : ATT_KEYS, D, num + r * D);
                double *o = out + ((tb + r / G) * H + kh * G + r % G) * D;
                for (int64_t d = 0; d < D; d++) o[d] = num[r * D + d] * f[r];
            }
        }
    }
    free(buf);
    return bad;
}
#endif

#if defined(__AVX2__) && !defined(RADIXCHECK_AVX512)
/* The AVX2 form (issue 43, ninth round: the AVX-512 form's layout on four lanes). One block of
   ATT_QUERIES queries of one KV head at a time, its R = G x (queries) rows in the lanes (4 rows a
   vector, rows past R zero): q.k broadcasts each key's value, so the keys are converted to float64
   once per call as rows (no transpose); the softmax works on 4 rows at a time, key by key, each
   element through softmax_row's IEEE operations (exp.c: exp_row's) in its order; p.v in int16
   (value dimensions in the lanes, each row's probabilities broadcast). */
enum { QK_VECS = 3, PV_ROWS = 6 }; /* row vectors per q.k tile (x 4 keys: 12 accumulators); rows per p.v tile */

/* S[c * RP + 4 v + l] = sum_d qt[d * RP + 4 v + l] * k[c * D + d] for keys c < 4 and row vectors
   v < NV (k: 4 keys' float64 rows): integers (|q|, |k| < 2^20, D < 2^13), every partial sum below
   2^53: exact in any order */
static inline __attribute__((always_inline)) void qk_tile4(const int NV, const double *qt, int64_t RP, const double *k, int64_t D,
                                                           double *S)
{
    __m256d a[QK_VECS][4];
    for (int v = 0; v < NV; v++) a[v][0] = a[v][1] = a[v][2] = a[v][3] = _mm256_setzero_pd();
    const double *k0 = k, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
    for (int64_t d = 0; d < D; d++) {
        __m256d x[QK_VECS];
        for (int v = 0; v < NV; v++) x[v] = _mm256_loadu_pd(qt + d * RP + 4 * v);
        __m256d b = _mm256_broadcast_sd(k0 + d);
        for (int v = 0; v < NV; v++) a[v][0] = _mm256_fmadd_pd(x[v], b, a[v][0]);
        b = _mm256_broadcast_sd(k1 + d);
        for (int v = 0; v < NV; v++) a[v][1] = _mm256_fmadd_pd(x[v], b, a[v][1]);
        b = _mm256_broadcast_sd(k2 + d);
        for (int v = 0; v < NV; v++) a[v][2] = _mm256_fmadd_pd(x[v], b, a[v][2]);
        b = _mm256_broadcast_sd(k3 + d);
        for (int v = 0; v < NV; v++) a[v][3] = _mm256_fmadd_pd(x[v], b, a[v][3]);
    }
    for (int v = 0; v < NV; v++)
        for (int c = 0; c < 4; c++) _mm256_storeu_pd(S + c * RP + 4 * v, a[v][c]);
}

/* fixed_exp(x) on 4 x 4 lanes at once (four Horner chains in flight), exp_row's operations */
static inline void exp4x4(__m256d x[4])
{
    __m256d ok[4], big[4], k[4], r[4], p[4];
    for (int i = 0; i < 4; i++) r[i] = exp_reduce(x[i], &ok[i], &big[i], &k[i]), p[i] = _mm256_set1_pd(EXP_POLY[EXP_DEGREE]);
    for (int d = EXP_DEGREE - 1; d >= 0; d--) {
        const __m256d c = _mm256_set1_pd(EXP_POLY[d]);
        for (int i = 0; i < 4; i++) p[i] = _mm256_add_pd(_mm256_mul_pd(p[i], r[i]), c);
    }
    for (int i = 0; i < 4; i++) x[i] = exp_scale(p[i], k[i], ok[i], big[i]);
}

/* softmax_row on 4 rows at once (the lanes; column S[j * RP], keys j < le, lane l sees keys j <=
   pos lane l, every lane keys j < js): each element through softmax_row's IEEE operations in its order (the max and the
   exact integer sums in another order). The quantised probabilities times the value scales (0 for
   keys a row does not see; integers p < 2^21) go to ph, pl split as p = 2^11 ph + pl, keys paired
   as p.v reads them: ph[(j / 2) RP + l] = ph_j | ph_(j+1) << 16 (int16 halves), pl alike, for keys
   up to lb >= le (0 past le: the block's other rows may read that far). Returns each row's factor
   for its p.v sums. */
static __m256d softmax_rows4(double *S, int64_t RP, int64_t js, int64_t le, int64_t lb, __m256i pos, __m256d a, const double *sk,
                             const double *sv, double ptop, double dscale, double dunscale, int32_t *ph, int32_t *pl)
{
    const int round = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m256d ninf = _mm256_set1_pd(-INFINITY);
    __m256d m = ninf, m1 = ninf; /* two chains of maxima (a maximum: exact in any order) */
    int64_t j = 0;
    for (; j + 2 <= js; j += 2) { /* keys every row sees */
        const __m256d x0 = _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(S + j * RP), a), _mm256_set1_pd(sk[j]));
        const __m256d x1 = _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(S + (j + 1) * RP), a), _mm256_set1_pd(sk[j + 1]));
        _mm256_storeu_pd(S + j * RP, x0), _mm256_storeu_pd(S + (j + 1) * RP, x1);
        m = _mm256_max_pd(m, x0), m1 = _mm256_max_pd(m1, x1);
    }
    for (; j < le; j++) { /* the rest: a row's maximum over the keys it sees */
        const __m256d unseen = _mm256_castsi256_pd(_mm256_cmpgt_epi64(_mm256_set1_epi64x(j), pos));
        const __m256d x = _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(S + j * RP), a), _mm256_set1_pd(sk[j]));
        _mm256_storeu_pd(S + j * RP, x);
        m1 = _mm256_max_pd(m1, _mm256_blendv_pd(x, ninf, unseen));
    }
    m = _mm256_max_pd(m, m1);
    __m256d denom = _mm256_setzero_pd(), amax = _mm256_setzero_pd();
    const __m256d ds = _mm256_set1_pd(dscale);
    for (int64_t j0 = 0; j0 < le; j0 += 4) {
        __m256d x[4];
        for (int i = 0; i < 4; i++) x[i] = _mm256_sub_pd(_mm256_loadu_pd(S + (j0 + i) * RP), m); /* S is padded to 4 keys */
        exp4x4(x);
        for (int i = 0; i < 4 && j0 + i < le; i++) {
            const int64_t j = j0 + i;
            const __m256d unseen = _mm256_castsi256_pd(_mm256_cmpgt_epi64(_mm256_set1_epi64x(j), pos));
            const __m256d e = _mm256_andnot_pd(unseen, x[i]);
            denom = _mm256_add_pd(denom, _mm256_round_pd(_mm256_mul_pd(e, ds), round)); /* integers < 2^53: exact */
            const __m256d ev = _mm256_mul_pd(e, _mm256_set1_pd(sv[j]));
            _mm256_storeu_pd(S + j * RP, ev);
            amax = _mm256_max_pd(amax, ev); /* ev >= 0 */
        }
    }
    __m256d sp = _mm256_div_pd(amax, _mm256_set1_pd(ptop));
    sp = _mm256_blendv_pd(_mm256_set1_pd(1.0), sp, _mm256_cmp_pd(sp, _mm256_setzero_pd(), _CMP_GT_OQ));
    const __m128i lo11 = _mm_set1_epi32(2047);
    for (int64_t j = 0; j < lb; j += 2) { /* p = rint(e / sp) for keys j, j + 1 (0 past le), as p.v's int16 halves */
        __m128i i0 = _mm_setzero_si128(), i1 = i0;
        if (j < le) /* exact conversions: integers below 2^21 */
            i0 = _mm256_cvtpd_epi32(_mm256_round_pd(_mm256_div_pd(_mm256_loadu_pd(S + j * RP), sp), round));
        if (j + 1 < le)
            i1 = _mm256_cvtpd_epi32(_mm256_round_pd(_mm256_div_pd(_mm256_loadu_pd(S + (j + 1) * RP), sp), round));
        _mm_storeu_si128((__m128i *)(ph + (j / 2) * RP), _mm_or_si128(_mm_srli_epi32(i0, 11), _mm_slli_epi32(_mm_srli_epi32(i1, 11), 16)));
        _mm_storeu_si128((__m128i *)(pl + (j / 2) * RP), _mm_or_si128(_mm_and_si128(i0, lo11), _mm_slli_epi32(_mm_and_si128(i1, lo11), 16)));
    }
    return _mm256_div_pd(sp, _mm256_mul_pd(denom, _mm256_set1_pd(dunscale)));
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

/* num[i * DP + d] += sum_k (2^11 ph[k * RP + i] + pl[k * RP + i]) . (key pair k's values at d) for
   rows i < NR, d < DP (a multiple of 8) and key pairs k < npairs <= 16: softmax_rows4's
   probabilities p < 2^21 split as p = 2^11 ph + pl (ph < 2^10, pl < 2^11), two keys to an int32 (key
   2k in the low int16, 2k + 1 in the high one); v2[k * DP + d] holds key 2k's and 2k + 1's values
   (|v| < 2^15) alike. vpmaddwd multiplies both keys of a pair at once into int32 lanes: |sum pl v|
   <= 32 x 2047 x 32767 < 2^31, so exact; then folded into float64 as 2^11 H + L (exact integers
   below 2^53, as every partial sum of p.v is). */
static inline __attribute__((always_inline)) void pv_tile_i16(const int NR, const int32_t *ph, const int32_t *pl, int64_t RP,
                                                              const int32_t *v2, int64_t DP, int64_t npairs, double *num)
{
    const __m256d scale = _mm256_set1_pd(2048.0);
    for (int64_t d0 = 0; d0 < DP; d0 += 8) {
        __m256i h[PV_ROWS], l[PV_ROWS];
        for (int i = 0; i < NR; i++) h[i] = l[i] = _mm256_setzero_si256();
        for (int64_t k = 0; k < npairs; k++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(v2 + k * DP + d0));
            for (int i = 0; i < NR; i++) {
                h[i] = madd_bcast_add(h[i], x, ph + k * RP + i);
                l[i] = madd_bcast_add(l[i], x, pl + k * RP + i);
            }
        }
        for (int i = 0; i < NR; i++) { /* num += 2^11 H + L: exact integers */
            double *n = num + i * DP + d0;
            const __m256d hlo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(h[i])), hhi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(h[i], 1));
            const __m256d llo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(l[i])), lhi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(l[i], 1));
            _mm256_storeu_pd(n, _mm256_add_pd(_mm256_loadu_pd(n), _mm256_fmadd_pd(hlo, scale, llo)));
            _mm256_storeu_pd(n + 4, _mm256_add_pd(_mm256_loadu_pd(n + 4), _mm256_fmadd_pd(hhi, scale, lhi)));
        }
    }
}

/* Key j's row of KV head kh: a memo row (slots[j]) for the n_cached first keys, else a fresh row */
static inline const float *kv_row(int64_t j, int64_t n_cached, const int64_t *slots, const float *m, const float *f, int64_t Hkv,
                                  int64_t kh, int64_t D)
{
    return j < n_cached ? m + (slots[j] * Hkv + kh) * D : f + ((j - n_cached) * Hkv + kh) * D;
}

/* 8 floats of a row as int32 (its dimensions d .. d + 7; 0 past D): |v| < 2^15 integers, exact */
static inline __m256i row8_i32(const float *r, int64_t d, int64_t D)
{
    if (D - d >= 8)
        return _mm256_cvttps_epi32(_mm256_loadu_ps(r + d));
    float t[8] = {0};
    for (int64_t i = 0; i < D - d; i++) t[i] = r[d + i];
    return _mm256_cvttps_epi32(_mm256_loadu_ps(t));
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
    const int64_t G = H / Hkv, RP = 4 * ((G * ATT_QUERIES + 3) / 4); /* rows of a block, padded to whole vectors */
    const double qtop = (double)((1LL << qk_bits) - 1), ptop = (double)((1LL << p_bits) - 1);
    const double dscale = ldexp(1.0, (int)denom_bits), dunscale = ldexp(1.0, -(int)denom_bits);
    int64_t le_max = 0;
    for (int64_t t = t0; t < t1; t++) le_max = q_pos[t] + 1 > le_max ? q_pos[t] + 1 : le_max;
    const int64_t LP = (le_max + 3) / 4 * 4; /* keys padded to whole q.k tiles */
    const int64_t DP = (D + 7) / 8 * 8, NP = (le_max + 1) / 2; /* value dimensions padded to 8 lanes; key pairs */
    double *buf = malloc(sizeof(double) * (size_t)(RP * (D + LP + 1 + DP) + LP * D + D + 2 * le_max) +
                         sizeof(int32_t) * (size_t)(2 * RP * NP + NP * DP));
    if (!buf)
        return -1;
    double *qt = buf, *S = qt + RP * D, *f = S + RP * LP, *num = f + RP, *k64 = num + RP * DP, *qrow = k64 + LP * D;
    double *skh = qrow + D, *svh = skh + le_max;
    int32_t *v2 = (int32_t *)(svh + le_max), *ph = v2 + NP * DP, *pl = ph + RP * NP;
    int64_t bad = 0;
    for (int64_t kh = 0; kh < Hkv; kh++) {
        for (int64_t j = 0; j < LP; j++) { /* this head's keys as float64 rows (exact), a zero row past le_max */
            double *kd = k64 + j * D;
            int64_t d = 0;
            if (j >= le_max) {
                for (; d < D; d++) kd[d] = 0.0;
                continue;
            }
            const float *kr = kv_row(j, n_cached, slots, mk, fk, Hkv, kh, D);
            for (; d + 4 <= D; d += 4) _mm256_storeu_pd(kd + d, _mm256_cvtps_pd(_mm_loadu_ps(kr + d)));
            for (; d < D; d++) kd[d] = (double)kr[d];
            const int64_t row = j < n_cached ? slots[j] : j - n_cached;
            skh[j] = (j < n_cached ? msk : fsk)[row * Hkv + kh];
            svh[j] = (j < n_cached ? msv : fsv)[row * Hkv + kh];
        }
        /* values as int16 key pairs, straight from their float32 rows (a key past le_max: 0) */
        for (int64_t k = 0; k < NP; k++) {
            const float *v0 = kv_row(2 * k, n_cached, slots, mv, fv, Hkv, kh, D);
            const float *v1 = 2 * k + 1 < le_max ? kv_row(2 * k + 1, n_cached, slots, mv, fv, Hkv, kh, D) : NULL;
            for (int64_t d = 0; d < DP; d += 8) {
                const __m256i lo = row8_i32(v0, d, D), hi = v1 ? row8_i32(v1, d, D) : _mm256_setzero_si256();
                _mm256_storeu_si256((__m256i *)(v2 + k * DP + d),
                                    _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(hi, 16)));
            }
        }
        for (int64_t tb = t0; tb < t1; tb += ATT_QUERIES) {
            /* row r: query tb + r / G, head kh * G + r % G */
            const int64_t nr = G * ((tb + ATT_QUERIES < t1 ? tb + ATT_QUERIES : t1) - tb), nv = (nr + 3) / 4;
            for (int64_t r = 0; r < 4 * nv; r++) { /* the rows' quantised queries, transposed (rows past nr: 0) */
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
            for (int64_t v0 = 0; v0 < nv; v0 += QK_VECS) /* q.k */
                for (int64_t j = 0; j < le; j += 4) {
                    const double *qv = qt + 4 * v0, *kj = k64 + j * D;
                    double *Sj = S + j * RP + 4 * v0;
                    switch (nv - v0) {
                    case 1: qk_tile4(1, qv, RP, kj, D, Sj); break;
                    case 2: qk_tile4(2, qv, RP, kj, D, Sj); break;
                    default: qk_tile4(3, qv, RP, kj, D, Sj); break;
                    }
                }
            for (int64_t v = 0; v < nv; v++) { /* softmax, 4 rows at a time */
                int64_t pos[4];
                const int64_t rows = nr - 4 * v < 4 ? nr - 4 * v : 4;
                for (int64_t l = 0; l < 4; l++) pos[l] = q_pos[tb + (4 * v + (l < rows ? l : 0)) / G]; /* lanes past the rows: row 0's */
                int64_t js = pos[0] + 1; /* keys every lane sees */
                for (int64_t l = 1; l < 4; l++) js = pos[l] + 1 < js ? pos[l] + 1 : js;
                const __m256d fv4 = softmax_rows4(S + 4 * v, RP, js, tile_keys(q_pos, tb, G, 4 * v, rows), le,
                                                  _mm256_loadu_si256((const __m256i *)pos), _mm256_loadu_pd(f + 4 * v), skh, svh, ptop,
                                                  dscale, dunscale, ph + 4 * v, pl + 4 * v);
                _mm256_storeu_pd(f + 4 * v, fv4);
            }
            for (int64_t i = 0; i < nr * DP; i++) num[i] = 0.0;
            for (int64_t jb = 0; jb < le; jb += ATT_KEYS) /* p.v, a block of keys for every row tile */
                for (int64_t r = 0; r < nr; r += PV_ROWS) {
                    const int64_t rows = nr - r < PV_ROWS ? nr - r : PV_ROWS, n0 = tile_keys(q_pos, tb, G, r, rows) - jb;
                    const int64_t n = n0 < ATT_KEYS ? n0 : ATT_KEYS;
                    if (n <= 0)
                        continue;
                    const int32_t *h = ph + jb / 2 * RP + r, *l = pl + jb / 2 * RP + r, *vb = v2 + jb / 2 * DP;
                    const int64_t npairs = (n + 1) / 2;
                    double *nm = num + r * DP;
                    switch (rows) {
                    case 1: pv_tile_i16(1, h, l, RP, vb, DP, npairs, nm); break;
                    case 2: pv_tile_i16(2, h, l, RP, vb, DP, npairs, nm); break;
                    case 3: pv_tile_i16(3, h, l, RP, vb, DP, npairs, nm); break;
                    case 4: pv_tile_i16(4, h, l, RP, vb, DP, npairs, nm); break;
                    case 5: pv_tile_i16(5, h, l, RP, vb, DP, npairs, nm); break;
                    default: pv_tile_i16(6, h, l, RP, vb, DP, npairs, nm); break;
                    }
                }
            for (int64_t r = 0; r < nr; r++) {
                double *o = out + ((tb + r / G) * H + kh * G + r % G) * D;
                for (int64_t d = 0; d < D; d++) o[d] = num[r * DP + d] * f[r];
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
