"""A transformer layer in two C calls: ``Model._forward_body``'s fast path, the same bits.

Why: a short suffix (the radix arm's typical request: 16-32 tokens) spent ~6 ms per request in
the ~12 Python-level calls per layer around the C kernels (argument checks, temporaries, and ~54
``.ctypes.data`` lookups per layer at ~2 µs each), against ~0.03 ms per token for a full prompt.
Here a layer is two calls into ``model.q8kernel``'s library:

``layer_qkv``
    RMSNorm, the exact QKV product, RoPE on the queries;
``layer_rest``
    exact attention over the memo's rows, the output product plus the residual, RMSNorm, the
    gate/up product, SiLU(gate)·up, the down product plus the residual;

and between them the pool write and the K/V memo: ``store_kv`` in C for a float32 pool (a plain
rounding to float32, as ``KVPool.write``; then ``Model._context_kv``'s read-back, rotation and
quantisation of every row the memo lacks), ``KVPool.write`` and ``Model._context_kv`` in Python
for the other storage dtypes.

Each step is the C function the step-by-step path calls (``rms_norm``, ``q8_linear``, ``rope``,
``exact_attention``, ``silu_mul``, ``quantize_f64``), in the same order, and each residual add is
one IEEE add per element as NumPy does it: so the fused path gives the same bits
(``tests/test_model_q8kernel.py`` compares it with the step-by-step and the NumPy paths, logits
and stored K/V). Weights and scratch are described once, in C structs, so a call passes a
handful of addresses.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

C_SOURCE = r"""
/* ---- one layer in two calls (model.fused) ---- */
typedef struct { const int8_t *q; const float *m; const double *rs; int64_t rows, bits; } q8_weight;

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
    return q8_linear(s->T, K, x, w->bits, s->xi, s->sx, w->q, w->m, w->rows, w->rs, out, 0);
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
"""

_P, _I = ctypes.c_void_p, ctypes.c_int64


class Q8Weight(ctypes.Structure):
    _fields_ = [("q", _P), ("m", _P), ("rs", _P), ("rows", _I), ("bits", _I)]


class LayerWeights(ctypes.Structure):
    _fields_ = [("attn_norm", _P), ("ffn_norm", _P), ("qkv", Q8Weight), ("wo", Q8Weight), ("gate_up", Q8Weight), ("down", Q8Weight)]


_WORK_INTS = ("T", "d", "H", "Hkv", "D", "ffn", "qk_bits", "p_bits", "denom_bits")
_WORK_BUFFERS = ("x", "h", "normbuf", "qkv", "q_rot", "att", "tmp", "gu", "act", "expbuf", "sx", "kvbuf", "xi")


class LayerWork(ctypes.Structure):
    _fields_ = [
        *[(n, _I) for n in _WORK_INTS],
        ("eps", ctypes.c_double),
        ("inv_sqrt_d", ctypes.c_double),
        ("pos", _P),
        ("cos_t", _P),
        ("sin_t", _P),
        *[(n, _P) for n in _WORK_BUFFERS],
    ]


def declare(lib: ctypes.CDLL) -> None:
    """Argument types of the entry points (called by ``q8kernel.load``)."""
    lib.layer_qkv.argtypes = [_P, _P]
    lib.layer_qkv.restype = _I
    lib.layer_rest.argtypes = [_P, _P, _I, *[_P] * 5]
    lib.layer_rest.restype = _I
    lib.store_kv.argtypes = [_P, _I, *[_P] * 8, _I, _I]
    lib.store_kv.restype = _I


def _q8(w: Any) -> Q8Weight:
    q, m, rs = w.addresses
    return Q8Weight(q, m, rs, w.shape[0], w.act_bits)


def layer_weights(layer: dict[str, Any]) -> LayerWeights:
    """One layer's prepared weights (``Model._layers[i]``) as the C struct; the arrays stay owned by ``layer``."""
    return LayerWeights(
        layer["attn_norm"].ctypes.data,
        layer["ffn_norm"].ctypes.data,
        _q8(layer["wqkv"]),
        _q8(layer["wo"]),
        _q8(layer["w_gate_up"]),
        _q8(layer["w_down"]),
    )


class Workspace:
    """Scratch for one forward call (its C struct included); ``x`` holds the residual stream."""

    def __init__(self, config: Any, slots: np.ndarray, n: int, cos: np.ndarray, sin: np.ndarray, bits: tuple[int, int, int]) -> None:
        """Tokens ``n:`` of a context held in ``slots`` (token ``i`` at position ``i``)."""
        c, T = config, slots.size - n
        qd, kvd = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        self.slots = np.ascontiguousarray(slots, dtype=np.int64)
        self._slots_at = self.slots.ctypes.data
        from radixcheck.model import q8kernel  # here, not at the top: q8kernel imports this module for its C source

        self.pos = q8kernel._positions(np.arange(n, slots.size), len(cos))  # bounds-checked: C reads the tables unchecked
        self.buffers = {
            "x": np.empty((T, c.d_model)),
            "h": np.empty((T, c.d_model)),
            "normbuf": np.empty(1 << max(0, (c.d_model - 1).bit_length())),
            "qkv": np.empty((T, qd + 2 * kvd)),
            "q_rot": np.empty((T, c.n_heads, c.head_dim)),
            "att": np.empty((T, qd)),
            "tmp": np.empty((T, c.d_model)),
            "gu": np.empty((T, 2 * c.ffn_dim)),
            "act": np.empty((T, c.ffn_dim)),
            "expbuf": np.empty(c.ffn_dim),
            "sx": np.empty(T),
            "kvbuf": np.empty(5 * kvd),
            "xi": np.empty((T, max(c.d_model, qd, c.ffn_dim)), np.int16),
        }
        self.x = self.buffers["x"]
        qkv = self.buffers["qkv"]
        self.k_new = qkv[:, qd : qd + kvd].reshape(T, c.n_kv_heads, c.head_dim)
        self.v_new = qkv[:, qd + kvd :].reshape(T, c.n_kv_heads, c.head_dim)
        ints = (T, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_dim, *bits)
        self._cos, self._sin = cos, sin  # kept alive: the struct points at them
        self.struct = LayerWork(
            *ints,
            c.norm_eps,
            1.0 / np.sqrt(float(c.head_dim)),
            self.pos.ctypes.data,
            cos.ctypes.data,
            sin.ctypes.data,
            *[self.buffers[n].ctypes.data for n in _WORK_BUFFERS],
        )


def _raise(bad: int) -> None:
    from radixcheck.model import q8kernel

    if bad < 0:
        raise MemoryError("exact attention: out of memory for its scratch")
    q8kernel._nonfinite()


def layer_qkv(lib: ctypes.CDLL, w: LayerWeights, ws: Workspace) -> None:
    if lib.layer_qkv(ctypes.addressof(w), ctypes.addressof(ws.struct)):
        _raise(1)


def store_kv(lib: ctypes.CDLL, ws: Workspace, pool_rows: tuple[int, int], memo: tuple[int, ...], bits: tuple[int, int]) -> None:
    """The pool write and the memo of one layer in C (float32 pools only): ``pool_rows``, the
    addresses of the layer's K and V rows in the pool; ``memo``, ``KVMemo.addresses`` of the layer
    (the fresh slots' entries already dropped, ``KVPool.mark_written``)."""
    if lib.store_kv(ctypes.addressof(ws.struct), ws.slots.size, ws._slots_at, *pool_rows, *memo, *bits):
        _raise(1)


def layer_rest(lib: ctypes.CDLL, w: LayerWeights, ws: Workspace, memo: tuple[int, ...]) -> None:
    """``memo``: the addresses of the layer's ``KVMemo`` arrays (``KVMemo.addresses``), in which
    every one of ``ws.slots`` has its entry for its position."""
    bad = lib.layer_rest(ctypes.addressof(w), ctypes.addressof(ws.struct), ws.slots.size, ws._slots_at, *memo[:4])
    if bad:
        _raise(bad)
