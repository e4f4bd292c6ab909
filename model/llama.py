"""A Llama-architecture decoder in NumPy, top to bottom (in the spirit of llama2.c).

    tokens -> embedding -> n_layers x [RMSNorm -> GQA attention (RoPE) -> +residual
                                       RMSNorm -> SwiGLU MLP          -> +residual]
           -> RMSNorm -> output head (tied to the embedding or not) -> logits

Weights are Q8_0 (``model.q8``). Every shape-sensitive operation (matrix products, attention,
reductions) goes through an ``ops`` object from ``model.exact``; with the default ``"exact"``
arithmetic the logits of a token do not depend on how many tokens are computed together, which is
what makes prefix reuse bit-identical. The KV cache is a ``KVPool`` addressed by slot ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from radixcheck.model import fused, q8kernel
from radixcheck.model.exact import DENOM_BITS, P_BITS, QK_BITS, V_BITS, WeightArena, get_ops
from radixcheck.model.kv_pool import KVPool, KVPoolError
from radixcheck.model.q8 import Q8Matrix


class InputError(ValueError):
    """Bad token ids, slot ids or lengths passed to the model. Nothing was written to the pool."""


@dataclass(frozen=True)
class Config:
    """Model hyper-parameters (names follow llama.cpp's GGUF keys where they exist)."""

    n_layers: int
    d_model: int  # embedding length
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    vocab_size: int
    max_seq_len: int = 2048
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    name: str = "llama"

    def __post_init__(self) -> None:
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even for RoPE")


@dataclass
class LayerWeights:
    attn_norm: np.ndarray  # (d_model,) float32
    wq: Q8Matrix  # (n_heads * head_dim, d_model)
    wk: Q8Matrix  # (n_kv_heads * head_dim, d_model)
    wv: Q8Matrix  # (n_kv_heads * head_dim, d_model)
    wo: Q8Matrix  # (d_model, n_heads * head_dim)
    ffn_norm: np.ndarray  # (d_model,)
    w_gate: Q8Matrix  # (ffn_dim, d_model)
    w_up: Q8Matrix  # (ffn_dim, d_model)
    w_down: Q8Matrix  # (d_model, ffn_dim)


@dataclass
class Weights:
    token_embd: Q8Matrix  # (vocab_size, d_model)
    layers: list[LayerWeights]
    out_norm: np.ndarray  # (d_model,)
    output: Q8Matrix | None = None  # None: tied to token_embd


def _concat(*ms: Q8Matrix) -> Q8Matrix:
    return Q8Matrix(np.concatenate([m.qs for m in ms]), np.concatenate([m.scales for m in ms]))


def _layer_matrices(lw: LayerWeights) -> tuple[tuple[Q8Matrix, ...], ...]:
    """A layer's products in the order a forward pass computes them, each as the matrices it stacks."""
    return (lw.wq, lw.wk, lw.wv), (lw.wo,), (lw.w_gate, lw.w_up), (lw.w_down,)


THREADS_ENV = "RADIXCHECK_THREADS"


def default_threads() -> int:
    """Threads a model call uses unless told otherwise: ``$RADIXCHECK_THREADS``, else 1."""
    v = os.environ.get(THREADS_ENV, "").strip()
    return int(v) if v else 1


@cache
def _blas_controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # inspects the loaded BLAS libraries once


@contextmanager
def blas_limit(n: int) -> Iterator[None]:
    """BLAS limited to ``n`` threads for the duration (threadpoolctl; restored afterwards)."""
    with _blas_controller().limit(limits=n, user_api="blas"):
        yield


def rope_table(config: Config) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of ``pos * theta**(-2i/head_dim)`` for every position, (max_seq_len, head_dim/2).

    Computed once, in one contiguous call, so a position's angles never depend on the batch.
    """
    half = config.head_dim // 2
    inv_freq = config.rope_theta ** (-np.arange(half, dtype=np.float64) * 2.0 / config.head_dim)
    angles = np.ascontiguousarray(np.arange(config.max_seq_len, dtype=np.float64)[:, None] * inv_freq[None, :])
    return np.cos(angles), np.sin(angles)


class Model:
    """A Llama decoder with Q8_0 weights.

    ``Model(config, weights, arithmetic="exact", keep_q8=True)``; ``arithmetic="float"`` builds the
    deliberately inexact plain-float-BLAS variant used by the meta-tests, ``"float64"`` a
    high-precision fidelity reference (see ``model.exact.FloatOps``). ``keep_q8=False`` drops
    the Q8_0 source matrices once they are prepared (saves memory for the real model; then
    ``model.weights`` is ``None``). With exact arithmetic the integer form of cached K/V is kept in
    the pool's ``KVMemo`` between calls; ``memo_kv=False`` recomputes it every call (same bits).

    **Threads.** The model owns the threads its calls use, so a library user never has to pin
    BLAS (OpenBLAS's default, one thread per core, spins and oversubscribes a busy machine: a
    19-token prefill once took 110 s instead of 0.2 s). ``threads`` (default: ``$RADIXCHECK_THREADS``,
    else 1) is how many threads one call may use: the exact Q8_0 products split their output rows
    and attention its query chunks over that many of the model's own threads. Inside every call
    BLAS is limited (threadpoolctl) to ``blas_threads`` per calling thread (default 1: the
    model's own threads are the parallelism). Both are plain attributes (``model.threads = 2``);
    none of them changes a bit of the exact model's results (the tests vary both).
    ``kernel`` (exact arithmetic only): ``"auto"`` (default), ``"c"``, a compiled path
    (``"avx512"``, ``"avx2"``, ``"portable"``) or ``"numpy"`` — see ``model.exact.ExactOps``; same
    bits either way. With the C kernel, the memo and one thread,
    each layer runs as two C calls (``model.fused``; same bits as the step-by-step path).

    Main entry point: ``prefill(pool, tokens, slots, num_cached)`` (see its docstring).
    """

    def __init__(
        self,
        config: Config,
        weights: Weights,
        arithmetic: str = "exact",
        keep_q8: bool = True,
        memo_kv: bool = True,
        *,
        threads: int | None = None,
        blas_threads: int = 1,
        kernel: str | object = "auto",
    ) -> None:
        self.config = config
        self._embd = weights.token_embd
        self.arithmetic = arithmetic
        self.ops = get_ops(arithmetic, kernel) if arithmetic == "exact" else get_ops(arithmetic)
        self.threads = default_threads() if threads is None else threads
        self.blas_threads = blas_threads
        # exact attention on memoised integer K/V (model.kv_pool.KVMemo); the float variants read
        # and rotate the whole context on every call
        # (``memo_kv=False`` turns it off: the tests compare the two)
        self._memo_kv = memo_kv and hasattr(self.ops, "attention_quantised")
        prep = self.ops.prepare
        # exact: every layer's integer matrices in one arena (huge pages), in the order a forward pass reads them
        shapes = [(sum(m.shape[0] for m in ms), ms[0].shape[1]) for lw in weights.layers for ms in _layer_matrices(lw)]
        arena = WeightArena(shapes) if arithmetic == "exact" else None

        def prep_layer(ms: tuple[Q8Matrix, ...]) -> Any:
            w = prep(ms[0] if len(ms) == 1 else _concat(*ms))
            return w if arena is None else arena.take(w)  # the prepared matrix's own arrays are freed at once

        self._layers = []
        for lw in weights.layers:
            qkv, wo, gate_up, down = (prep_layer(ms) for ms in _layer_matrices(lw))
            self._layers.append(
                {
                    "attn_norm": lw.attn_norm.astype(np.float64),
                    "wqkv": qkv,
                    "wo": wo,
                    "ffn_norm": lw.ffn_norm.astype(np.float64),
                    "w_gate_up": gate_up,
                    "w_down": down,
                }
            )
        self._out_norm = weights.out_norm.astype(np.float64)
        self._head = prep(weights.output if weights.output is not None else weights.token_embd)
        self._cos, self._sin = rope_table(config)
        # attention reads the whole context from the memo (``_context_kv``): no separate fresh K/V
        kv0, s0 = np.zeros((0, config.n_kv_heads, config.head_dim), np.float32), np.zeros((0, config.n_kv_heads))
        self._no_kv = (kv0, s0, kv0, s0)
        # with the C kernel, one thread and the memo, a layer is two C calls (model.fused; same bits)
        self._fused_layers = [fused.layer_weights(lw) for lw in self._layers] if self._lib is not None and self._memo_kv else None
        self._fused_table = fused.weights_table(self._fused_layers) if self._fused_layers is not None else None
        self.weights: Weights | None = weights if keep_q8 else None

    @property
    def threads(self) -> int:
        return self._threads

    @threads.setter
    def threads(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"threads must be a positive integer, got {n!r}")
        self._threads = int(n)
        if hasattr(self.ops, "threads"):
            self.ops.threads = int(n)

    # ---- building blocks --------------------------------------------------------------------
    @property
    def _lib(self) -> Any:
        """The compiled kernel (``model.q8kernel``) if this model's exact arithmetic uses it, else ``None``:
        RMSNorm, RoPE, SwiGLU and the K/V rotation then run in C too, with the same bits."""
        return getattr(self.ops, "_lib", None)

    def embed(self, tokens: np.ndarray) -> np.ndarray:
        """Dequantised embedding rows (exact: int8 x float16 fits a float64)."""
        e = self._embd
        rows = e.qs[tokens].astype(np.float64).reshape(len(tokens), -1, 32)
        return (rows * e.scales[tokens].astype(np.float64)[..., None]).reshape(len(tokens), -1)

    def rmsnorm(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        if self._lib is not None and x.ndim == 2:  # the same arithmetic in C (model.q8kernel.rms_norm): same bits
            return q8kernel.rmsnorm(self._lib, x, w, self.config.norm_eps)
        ms = self.ops.rowsum(x * x) / x.shape[-1]
        return x * (1.0 / np.sqrt(ms + self.config.norm_eps))[:, None] * w[None, :]

    def rope(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Rotate adjacent pairs (x[2i], x[2i+1]) by pos * theta_i, as llama.cpp does for llama.

        ``x`` (n, heads, head_dim), ``positions`` (n,). In C when the kernel is built (same bits).
        """
        if self._lib is not None:
            return q8kernel.rope(self._lib, x, positions, self._cos, self._sin)
        cos = self._cos[positions][:, None, :]
        sin = self._sin[positions][:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    def silu(self, x: np.ndarray) -> np.ndarray:
        return x / (1.0 + self.ops.exp(-x))

    def swiglu(self, gu: np.ndarray) -> np.ndarray:
        """``silu(gate) * up`` for ``gu = [gate | up]`` (one C call when the kernel is built; same bits)."""
        if self._lib is not None:
            return q8kernel.silu_mul(self._lib, gu)
        g, u = gu[:, : self.config.ffn_dim], gu[:, self.config.ffn_dim :]
        return self.silu(g) * u

    # ---- validation -------------------------------------------------------------------------
    def check_tokens(self, tokens: Any) -> np.ndarray:
        """Token ids as an int64 1-D array, or ``InputError`` naming the problem."""
        if isinstance(tokens, np.ndarray):
            arr = tokens
        else:
            seq = list(tokens)
            for i, t in enumerate(seq):
                if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
                    raise InputError(f"token id at index {i} is not an integer: {t!r}")
            arr = np.asarray(seq, dtype=np.int64)
        if arr.ndim != 1:
            raise InputError(f"tokens must be a 1-D sequence, got shape {arr.shape}")
        if arr.size and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
            raise InputError(f"token ids must be integers, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        bad = arr[(arr < 0) | (arr >= self.config.vocab_size)]
        if bad.size:
            i = int(np.flatnonzero((arr < 0) | (arr >= self.config.vocab_size))[0])
            kind = "negative" if bad[0] < 0 else "out of vocabulary"
            raise InputError(f"token id {int(bad[0])} at index {i} is {kind} (vocab_size {self.config.vocab_size})")
        if arr.size > self.config.max_seq_len:
            raise InputError(f"{arr.size} tokens exceed the model's max_seq_len {self.config.max_seq_len}")
        return arr

    def check_pool(self, pool: KVPool) -> None:
        c = self.config
        if not isinstance(pool, KVPool):
            raise InputError(f"pool must be a KVPool, got {type(pool).__name__}")
        if (pool.n_layers, pool.n_kv_heads, pool.head_dim) != (c.n_layers, c.n_kv_heads, c.head_dim):
            raise InputError(f"{pool!r} does not fit the model (layers={c.n_layers}, kv_heads={c.n_kv_heads}, head_dim={c.head_dim})")

    def _check_prefill(self, pool: KVPool, tokens: Any, slots: Any, num_cached: int) -> tuple[np.ndarray, np.ndarray, int]:
        self.check_pool(pool)
        toks = self.check_tokens(tokens)
        try:
            sl = pool.check_slots(slots)
        except KVPoolError as e:
            raise InputError(str(e)) from None
        if sl.size != toks.size:
            raise InputError(f"length mismatch: {toks.size} tokens but {sl.size} slots")
        if isinstance(num_cached, (bool, np.bool_)) or not isinstance(num_cached, (int, np.integer)):
            raise InputError(f"num_cached must be an integer, got {num_cached!r}")
        n = int(num_cached)
        if not 0 <= n <= toks.size:
            raise InputError(f"num_cached {n} is outside [0, {toks.size}]")
        if n and not pool.filled[sl[:n]].all():
            i = int(np.flatnonzero(~pool.filled[sl[:n]])[0])
            raise InputError(f"cached slot {int(sl[i])} (token index {i}) was never written")
        return toks, sl, n

    # ---- the forward pass -------------------------------------------------------------------
    def prefill(
        self,
        pool: KVPool,
        tokens: Sequence[int] | np.ndarray,
        slots: Sequence[int] | np.ndarray,
        num_cached: int = 0,
        *,
        last_only: bool = False,
    ) -> np.ndarray:
        """Prefill ``tokens[num_cached:]`` on top of a reused prefix and return its logits.

        ``tokens``: 1-D integer token ids. ``slots``: distinct int64 slot ids, one per token.
        Pool rows ``slots[:num_cached]`` must already hold K/V for ``tokens[:num_cached]`` (e.g. a
        radix-cache match); K/V for ``tokens[num_cached:]`` is computed and written to
        ``slots[num_cached:]``. Token ``i`` is at position ``i``.

        Returns float32 logits of shape ``(len(tokens) - num_cached, vocab_size)`` (or ``(1,
        vocab_size)`` for the last token only if ``last_only``). With exact arithmetic the result is
        bit-identical to ``prefill(pool2, tokens, slots2, 0)[num_cached:]``.

        All inputs are validated before anything is written; bad input raises ``InputError``.
        On a full cache hit (``num_cached == len(tokens)``) nothing is computed and the result has
        0 rows; to get the last token's logits, reuse one token less (``num_cached =
        len(tokens) - 1``) with a fresh slot for the last token, as a serving engine does.
        """
        toks, sl, n = self._check_prefill(pool, tokens, slots, num_cached)
        if n == toks.size:
            return np.zeros((0, self.config.vocab_size), dtype=np.float32)
        return self._forward(pool, toks, sl, n, last_only)

    def prefill_chunked(
        self,
        pool: KVPool,
        tokens: Sequence[int] | np.ndarray,
        slots: Sequence[int] | np.ndarray,
        num_cached: int = 0,
        chunk_size: int = 64,
    ) -> np.ndarray:
        """``prefill`` in chunks of ``chunk_size`` tokens; returns the concatenated logits."""
        if not isinstance(chunk_size, (int, np.integer)) or chunk_size <= 0:
            raise InputError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        toks, sl, n = self._check_prefill(pool, tokens, slots, num_cached)
        out = [np.zeros((0, self.config.vocab_size), dtype=np.float32)]
        for start in range(n, toks.size, int(chunk_size)):
            end = min(toks.size, start + int(chunk_size))
            out.append(self._forward(pool, toks[:end], sl[:end], start, False))
        return np.concatenate(out)

    def _forward(self, pool: KVPool, toks: np.ndarray, sl: np.ndarray, n: int, last_only: bool) -> np.ndarray:
        with blas_limit(self.blas_threads):
            return self._forward_body(pool, toks, sl, n, last_only)

    def _forward_body(self, pool: KVPool, toks: np.ndarray, sl: np.ndarray, n: int, last_only: bool) -> np.ndarray:
        c, ops = self.config, self.ops
        if self._fused_layers is not None and self._lib is not None and self.threads == 1:
            return self._head_logits(self._layers_fused(pool, toks, sl, n), last_only)
        T = toks.size - n
        pos = np.arange(n, toks.size)
        all_pos = np.arange(toks.size)
        q_dim, kv_dim = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        x = self.embed(toks[n:])
        for li, lw in enumerate(self._layers):
            # attention block
            h = self.rmsnorm(x, lw["attn_norm"])
            qkv = ops.linear(h, lw["wqkv"])
            q = qkv[:, :q_dim].reshape(T, c.n_heads, c.head_dim)
            k_new = qkv[:, q_dim : q_dim + kv_dim].reshape(T, c.n_kv_heads, c.head_dim)
            v_new = qkv[:, q_dim + kv_dim :].reshape(T, c.n_kv_heads, c.head_dim)
            pool.write(li, sl[n:], k_new, v_new)  # K is stored before RoPE
            if self._memo_kv:
                att = ops.attention_quantised(self.rope(q, pos), *self._no_kv, pos, self._context_kv(pool, li, sl))
            else:
                k, v = pool.read(li, sl)  # the whole context, as stored
                att = ops.attention(self.rope(q, pos), self.rope(k, all_pos), v, pos)
            x = x + ops.linear(att, lw["wo"])
            # MLP block (SwiGLU)
            h = self.rmsnorm(x, lw["ffn_norm"])
            gu = ops.linear(h, lw["w_gate_up"])
            x = x + ops.linear(self.swiglu(gu), lw["w_down"])
        return self._head_logits(x, last_only)

    def _head_logits(self, x: np.ndarray, last_only: bool) -> np.ndarray:
        if last_only:
            x = x[-1:]
        x = self.rmsnorm(x, self._out_norm)
        return self.ops.linear(x, self._head, out_dtype=np.float32)

    def _layers_fused(self, pool: KVPool, toks: np.ndarray, sl: np.ndarray, n: int) -> np.ndarray:
        """The layers of ``_forward_body`` in one C call (a float32 ``KVPool``) or two C calls each
        and the pool's own write (``model.fused``; same bits): the residual stream after the last layer."""
        lib, memo = self._lib, pool.memo(self)
        ws = fused.Workspace(self.config, sl, n, self._cos, self._sin, (QK_BITS, P_BITS, DENOM_BITS))
        ws.x[:] = self.embed(toks[n:])
        # the pool write and the memo in C too, when they are KVPool's own (float32: a plain rounding):
        # then all layers in one call
        if pool.dtype == np.float32 and type(pool).write is KVPool.write and type(pool).read is KVPool.read:
            fused.layer_qkv(lib, self._fused_layers[0], ws)
            pool.mark_written(sl[n:])  # write's bookkeeping for every layer, where the step-by-step path first writes
            fused.layers_forward(lib, self._fused_table, ws, pool, memo, (QK_BITS, V_BITS))
            return ws.x
        for li, w in enumerate(self._fused_layers):
            fused.layer_qkv(lib, w, ws)
            pool.write(li, sl[n:], ws.k_new, ws.v_new)  # K is stored before RoPE
            self._context_kv(pool, li, sl)
            fused.layer_rest(lib, w, ws, memo.addresses(li))
        return ws.x

    def _context_kv(self, pool: KVPool, li: int, sl: np.ndarray) -> tuple[np.ndarray, ...]:
        """Layer ``li``'s K/V of the whole context (slots ``sl``, token ``i`` at position ``i``) in
        exact attention's integer form, ``ops.quantise_kv(rope(K), V)`` of the rows as stored, as
        ``(sl, *memo arrays)`` (``ops.attention_quantised``'s ``cached``; its rows are read in place).

        Every row without a memo entry for its position (the rows this call has just written, and
        any a pool write or relabelling invalidated) is read back from the pool, rotated, quantised
        and memoised, in one batch: so every value attention sees came out of ``KVPool.read``,
        exactly as without the memo, and a row is rotated and quantised once, not again when a later
        request reuses it.
        """
        memo = pool.memo(self)
        miss = memo.misses(li, sl, np.arange(sl.size))
        if miss.size:
            k, v = pool.read(li, sl[miss])
            memo.store(li, sl[miss], miss, *self._rotated_kv(k, v, miss))
        return (sl, *memo.arrays(li))

    def _rotated_kv(self, k: np.ndarray, v: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, ...]:
        """``ops.quantise_kv(self.rope(k, positions), v)`` (one C call when the kernel is built; same bits)."""
        if self._lib is not None:
            return q8kernel.rotate_quantise_kv(self._lib, k, v, positions, self._cos, self._sin, (QK_BITS, V_BITS))
        return self.ops.quantise_kv(self.rope(k, positions), v)

    def __repr__(self) -> str:
        return f"Model({self.config}, arithmetic={self.arithmetic!r})"
