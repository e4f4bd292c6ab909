/* A transformer layer in two calls, and all layers in one (model/fused.py): the C functions of the
   step-by-step path, in its order, so the same bits. */
#include "kernels.h"

typedef struct { const int8_t *q; const float *m; const double *rs, *ws; const int32_t *mg; int64_t rows, bits; } q8_weight;

typedef struct {
    const double *attn_norm, *ffn_norm;
    q8_weight qkv, wo, gate_up, down;
} layer_weights;

typedef struct {
    int64_t T, d, H, Hkv, D, ffn, qk_bits, p_bits, denom_bits;
    double eps, inv_sqrt_d;
    const int64_t *pos;
    const double *cos_t, *sin_t;
    double *x, *h, *normbuf, *qkv, *q_rot, *att, *tmp, *gu, *act, *expbuf, *sx, *kvbuf;
    int16_t *xi;
} layer_work;

static int64_t linear_w(const q8_weight *w, const layer_work *s, int64_t K, const double *x, double *out)
{
    return q8_linear(s->T, K, x, w->bits, s->xi, s->sx, w->q, w->m, w->rows, w->rs, w->ws, w->mg, out, 0);
}

static void add_rows(const layer_work *s) /* x = x + tmp */
{
    for (int64_t i = 0; i < s->T * s->d; i++) s->x[i] = s->x[i] + s->tmp[i];
}

/* h = rmsnorm(x); qkv = h @ Wqkv (exact); q_rot = rope(q part of qkv). Returns 1 on a NaN or an infinity. */
int64_t layer_qkv(const layer_weights *w, const layer_work *s)
{
    rms_norm(s->T, s->d, s->x, w->attn_norm, s->eps, s->h, s->normbuf);
    if (linear_w(&w->qkv, s, s->d, s->h, s->qkv))
        return 1;
    rope_rows(s->T, s->H, s->D, s->qkv, w->qkv.rows, s->pos, s->cos_t, s->sin_t, s->q_rot);
    return 0;
}

/* The pool write and the memo of one layer, for a float32 pool (pk, pv: the layer's (slots, Hkv, D)
   rows), as KVPool.write and Model._context_kv do them: the T fresh rows' K and V (qkv's k and v
   parts) rounded to float32 at slots[n_keys - T + i]; then every key j < n_keys whose memo entry is
   not for position j (the fresh rows: the caller dropped their entries) read back, rotated to
   position j and quantised into memo row slots[j], its position recorded last (a row holding a NaN
   or an infinity gets no entry, and the call returns 1). */
int64_t store_kv(const layer_work *s, int64_t n_keys, const int64_t *slots, float *pk, float *pv, float *mk, double *msk,
                 float *mv, double *msv, int64_t *mpos, int64_t k_bits, int64_t v_bits)
{
    const int64_t E = s->Hkv * s->D, q_dim = s->H * s->D, ldq = q_dim + 2 * E, n0 = n_keys - s->T;
    double *k = s->kvbuf, *v = k + E, *kbuf = v + E, *ki = kbuf + E, *vi = ki + E;
    int64_t bad = 0;
    for (int64_t i = 0; i < s->T; i++)
        for (int64_t e = 0; e < E; e++) {
            pk[slots[n0 + i] * E + e] = (float)s->qkv[i * ldq + q_dim + e];
            pv[slots[n0 + i] * E + e] = (float)s->qkv[i * ldq + q_dim + E + e];
        }
    for (int64_t j = 0; j < n_keys; j++) {
        const int64_t row = slots[j];
        if (mpos[row] == j)
            continue;
        for (int64_t e = 0; e < E; e++) k[e] = (double)pk[row * E + e], v[e] = (double)pv[row * E + e];
        const int64_t b = rotate_quantise_kv(1, s->Hkv, s->D, k, v, &j, s->cos_t, s->sin_t, k_bits, v_bits, kbuf, ki,
                                             msk + row * s->Hkv, vi, msv + row * s->Hkv);
        for (int64_t e = 0; e < E; e++) mk[row * E + e] = (float)ki[e], mv[row * E + e] = (float)vi[e]; /* integers < 2^24: exact */
        mpos[row] = b ? -1 : j;
        bad |= b;
    }
    return bad;
}

/* The rest of the layer, keys j = rows slots[j] of the memo arrays (exact_attention's cached
   keys; every key a query sees is one of them). Returns exact_attention's or q8_linear's error. */
int64_t layer_rest(const layer_weights *w, const layer_work *s, int64_t n_keys, const int64_t *slots, const float *mk,
                   const double *msk, const float *mv, const double *msv)
{
    int64_t bad = exact_attention(s->H, s->Hkv, s->D, s->q_rot, s->pos, n_keys, slots, mk, msk, mv, msv, NULL, NULL,
                                  NULL, NULL, s->inv_sqrt_d, s->qk_bits, s->p_bits, s->denom_bits, 0, s->T, s->att);
    if (bad)
        return bad;
    if (linear_w(&w->wo, s, s->H * s->D, s->att, s->tmp))
        return 1;
    add_rows(s);
    rms_norm(s->T, s->d, s->x, w->ffn_norm, s->eps, s->h, s->normbuf);
    if (linear_w(&w->gate_up, s, s->d, s->h, s->gu))
        return 1;
    silu_mul(s->T, s->ffn, s->gu, s->act, s->expbuf);
    if (linear_w(&w->down, s, s->ffn, s->act, s->tmp))
        return 1;
    add_rows(s);
    return 0;
}

/* One layer's K/V memo arrays (exact_attention's cached keys, model.kv_pool.KVMemo.addresses) */
typedef struct { float *k; double *sk; float *v; double *sv; int64_t *pos; } memo_layer;

/* All n_layers layers of a prefill into a float32 pool, each as layer_qkv, store_kv and layer_rest
   (layer 0's layer_qkv done by the caller, which marks the pool's rows written only after it, as the
   step-by-step path does): layer li's pool rows at pk + li * pool_stride, pv likewise, its memo at
   memo[li]. Returns the first error (store_kv's, layer_rest's or layer_qkv's) and computes no later layer. */
int64_t layers_forward(const layer_weights *w, int64_t n_layers, const layer_work *s, int64_t n_keys, const int64_t *slots,
                       float *pk, float *pv, int64_t pool_stride, const memo_layer *memo, int64_t k_bits, int64_t v_bits)
{
    for (int64_t li = 0; li < n_layers; li++) {
        const memo_layer *m = memo + li;
        int64_t bad = li ? layer_qkv(w + li, s) : 0;
        bad = bad ? bad : store_kv(s, n_keys, slots, pk + li * pool_stride, pv + li * pool_stride, m->k, m->sk, m->v, m->sv, m->pos, k_bits, v_bits);
        bad = bad ? bad : layer_rest(w + li, s, n_keys, slots, m->k, m->sk, m->v, m->sv);
        if (bad)
            return bad;
    }
    return 0;
}
