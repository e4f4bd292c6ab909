"""A transformer layer in two C calls, and all layers in one: ``Model._forward_body``'s fast path, the same bits.

Why: a short suffix (the radix arm's typical request: 16-32 tokens) spent ~6 ms per request in
the ~12 Python-level calls per layer around the C kernels (argument checks, temporaries, and ~54
``.ctypes.data`` lookups per layer at ~2 µs each), against ~0.03 ms per token for a full prompt.
Here a layer is two calls into the kernel library (``model/kernels/layer.c``):

``layer_qkv``
    RMSNorm, the exact QKV product, RoPE on the queries;
``layer_rest``
    exact attention over the memo's rows, the output product plus the residual, RMSNorm, the
    gate/up product, SiLU(gate)·up, the down product plus the residual;

and between them the pool write and the K/V memo: ``store_kv`` in C for a float32 pool (a plain
rounding to float32, as ``KVPool.write``; then ``Model._context_kv``'s read-back, rotation and
quantisation of every row the memo lacks), ``KVPool.write`` and ``Model._context_kv`` in Python
for the other storage dtypes. With a float32 pool the three run for every layer in one call,
``layers_forward`` (after layer 0's ``layer_qkv``, which comes before the pool's bookkeeping).

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

_P, _I = ctypes.c_void_p, ctypes.c_int64


class Q8Weight(ctypes.Structure):
    _fields_ = [("q", _P), ("m", _P), ("rs", _P), ("ws", _P), ("mg", _P), ("rows", _I), ("bits", _I)]


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
    lib.layers_forward.argtypes = [_P, _I, _P, _I, _P, _P, _P, _I, _P, _I, _I]
    lib.layers_forward.restype = _I


def _q8(w: Any) -> Q8Weight:
    q, m, rs, ws, mg = w.addresses
    return Q8Weight(q, m, rs, ws, mg, w.shape[0], w.act_bits)


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


ALIGN = 64  # bytes: a cache line, and an AVX-512 register


def aligned_empty(shape: int | tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    """``np.empty(shape, dtype)`` starting at a multiple of ``ALIGN`` bytes.

    Why: NumPy's buffers start at any multiple of 16 bytes, and the AVX-512 product stores each
    activation row's 8 outputs of a weight group as one 64-byte store, which straddles two cache
    lines unless the row starts on one (every row stride here is a multiple of 64 bytes); on Zen 4
    the gate/up product into such a buffer was up to 10 % slower (issue 43, twelfth round).
    """
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(n + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip : skip + n].view(dtype).reshape(shape)


class Workspace:
    """Scratch for one forward call (its C struct included); ``x`` holds the residual stream."""

    def __init__(self, config: Any, slots: np.ndarray, n: int, cos: np.ndarray, sin: np.ndarray, bits: tuple[int, int, int]) -> None:
        """Tokens ``n:`` of a context held in ``slots`` (token ``i`` at position ``i``)."""
        c, T = config, slots.size - n
        qd, kvd = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        self.slots = np.ascontiguousarray(slots, dtype=np.int64)
        self._slots_at = self.slots.ctypes.data
        from radixcheck.model import q8kernel  # here, not at the top: q8kernel imports this module (declare)

        self.pos = q8kernel._positions(np.arange(n, slots.size), len(cos))  # bounds-checked: C reads the tables unchecked
        self.buffers = {
            "x": aligned_empty((T, c.d_model)),
            "h": aligned_empty((T, c.d_model)),
            "normbuf": aligned_empty(1 << max(0, (c.d_model - 1).bit_length())),
            "qkv": aligned_empty((T, qd + 2 * kvd)),
            "q_rot": aligned_empty((T, c.n_heads, c.head_dim)),
            "att": aligned_empty((T, qd)),
            "tmp": aligned_empty((T, c.d_model)),
            "gu": aligned_empty((T, 2 * c.ffn_dim)),
            "act": aligned_empty((T, c.ffn_dim)),
            "expbuf": aligned_empty(c.ffn_dim),
            "sx": aligned_empty(T),
            "kvbuf": aligned_empty(5 * kvd),
            "xi": aligned_empty((T, max(c.d_model, qd, c.ffn_dim)), np.int16),
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


def weights_table(layers: list[LayerWeights]) -> ctypes.Array:
    """The layers' structs as one C array (``layers_forward`` reads them in order)."""
    return (LayerWeights * len(layers))(*layers)


def layers_forward(lib: ctypes.CDLL, table: ctypes.Array, ws: Workspace, pool: Any, memo: Any, bits: tuple[int, int]) -> None:
    """Every layer (``layer_qkv``, ``store_kv``, ``layer_rest`` each; layer 0's ``layer_qkv``
    already done by the caller) in one C call, for a float32 pool (``KVPool``: its layers' rows
    are ``pool.layer_rows``) and its memo (``KVMemo``, the fresh slots' entries already dropped).
    Why one call: 90 calls from Python cost a request ~0.15 ms more (measured: a 1-token request
    over 1 cached token 6.76 -> 6.62 ms CPU time)."""
    k0, v0 = pool.layer_rows(0)
    stride = (pool.layer_rows(1)[0] - k0) // 4 if pool.n_layers > 1 else 0  # float32 elements per layer
    flat = (_P * (5 * len(table)))(*(a for li in range(len(table)) for a in memo.addresses(li)))
    bad = lib.layers_forward(ctypes.addressof(table), len(table), ctypes.addressof(ws.struct), ws.slots.size, ws._slots_at, k0, v0,
                             stride, flat, *bits)
    if bad:
        _raise(bad)


def layer_rest(lib: ctypes.CDLL, w: LayerWeights, ws: Workspace, memo: tuple[int, ...]) -> None:
    """``memo``: the addresses of the layer's ``KVMemo`` arrays (``KVMemo.addresses``), in which
    every one of ``ws.slots`` has its entry for its position."""
    bad = lib.layer_rest(ctypes.addressof(w), ctypes.addressof(ws.struct), ws.slots.size, ws._slots_at, *memo[:4])
    if bad:
        _raise(bad)
