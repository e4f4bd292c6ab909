"""All of the exactness machinery, in one place.

Why this module exists (see ``/work/shared/design/exactness.md``): ordinary float BLAS is not
shape-stable. Row ``i`` of ``A @ W`` can change, bit for bit, with the number of rows in ``A``, the
kernel set OpenBLAS picked for this CPU, and the thread count. Reusing a cached prefix and
prefilling only the suffix changes exactly those things, so a plain float model does not give
bit-identical logits after reuse.

What *is* stable: integer-valued arithmetic held exactly in floating point. If every operand of a
GEMM is an integer and every partial sum stays below 2**53, float64 BLAS returns the exact result
whatever its kernel, blocking, thread count or batch shape. Element-wise operations are stable too.

So every shape-sensitive step of the forward pass is routed through this module:

``linear``
    Q8_0 weights are integerised once (``IntMatrix``): a float16 block scale is an 11-bit integer
    mantissa times a power of two, so a Q8_0 row is an exact integer matrix times one power of two
    per row. Activations are quantised *per row* to signed integers (15 bits by default) with a
    scale that depends only on that row's own data. The product is then an exact integer sum,
    computed either by the C kernel in ``model.q8kernel`` (int8 x int16 per 32-block, blocks summed
    in float64; the default) or by a float64 GEMM on the widened integers: the same integers, so
    the same bits. Scales are applied element-wise afterwards.
``attention``
    q, k and v are quantised per row (one token, one head); q.k is an exact GEMM; masking, max and
    exp are element-wise; the softmax denominator is an exact sum of ``rint(e * 2**30)``; the
    probabilities (times each value row's scale) are quantised per query row and p.v is an exact
    GEMM. Every scale depends only on the row's own data, so cached K/V rows are reused as they are.
    The exponential is ``model.fixed_exp`` (a fixed formula, so that the C kernel, which computes
    attention by default, and the NumPy body agree bit for bit on every CPU; SiLU uses it too).
``rowsum``
    A fixed-order tree reduction (each step element-wise), used for RMSNorm, so its result for a
    row never depends on how many rows are in the batch.
``exp``
    ``model.fixed_exp``, a formula of correctly rounded IEEE operations (softmax and SiLU): the same
    bits element by element in NumPy and in the C kernel, whatever the CPU or the array's layout.

``FloatOps`` is the opposite: the same interface with plain float32 BLAS and NumPy reductions. It
is *deliberately inexact* and exists only so the meta-tests can show the bit-identity properties
catch a model written the ordinary way.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache, cached_property

import numpy as np

from radixcheck.model import q8kernel
from radixcheck.model.fixed_exp import fixed_exp
from radixcheck.model.q8 import BLOCK, Q8Matrix, dequantize

F64_EXACT = 2.0**53
ACT_BITS = 15  # activations quantised to |x| <= 2**15 - 1, i.e. the int16 range
QK_BITS = 20  # q and k rows: a q.k dot is < head_dim * 2**40, far below 2**53
V_BITS = 15  # value rows
P_BITS = 21  # probability rows (times the value row's scale): p.v < L * 2**36, so L < 2**16
DENOM_BITS = 30  # softmax denominators: exact sum of rint(e * 2**30), e in [0, 1]
QUERY_CHUNK = 64  # attention processes this many query rows at once (memory, causal skipping)
LINEAR_CHUNK = 1 << 17  # NumPy path: weight elements widened to float64 per GEMM call (~1 MB: stays in cache)


@cache
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="radixcheck-exact")


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    """``[0, n)`` in ``parts`` contiguous ranges of even length (the kernel does rows in pairs)."""
    parts = max(1, min(parts, n // 64))
    cuts = [(n * i // parts) & ~1 for i in range(parts)] + [n]
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


class ExactnessError(ArithmeticError):
    """An integer GEMM could overflow 2**53 and so would no longer be exact."""


def _why_not(kernel: str) -> str:
    """Why ``ExactOps(kernel)`` found no usable compiled path."""
    if kernel == "c" and q8kernel.chosen() == "numpy":
        return f"{q8kernel.ENV}=numpy"
    paths = q8kernel.PATHS if kernel == "c" else (kernel,)
    return "; ".join(str(q8kernel.status(p)) for p in paths)


def _contig(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


def quantize_rows(x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Quantise each row (last axis) of ``x`` to integers in ``[-(2**bits - 1), 2**bits - 1]``.

    Returns ``(x_int, scale)`` with ``x ~= x_int * scale[..., None]``; ``x_int`` holds exact
    integers as float64. The scale of a row depends only on that row (its max magnitude).
    """
    x = np.asarray(x, dtype=np.float64)
    amax = np.abs(x).max(axis=-1)
    scale = amax / float(2**bits - 1)
    scale = np.where(scale > 0, scale, 1.0)
    return np.rint(x / scale[..., None]), scale


def rowsum(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis in a fixed pairwise order that is independent of the other axes.

    The row is zero-padded to a power of two and halved repeatedly; each step is an element-wise
    add, so row ``i``'s result is the same whether it is computed alone or in a batch.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    width = 1 << max(0, (n - 1).bit_length())
    if width != n:
        pad = np.zeros(x.shape[:-1] + (width - n,), dtype=np.float64)
        x = np.concatenate([x, pad], axis=-1)
    while width > 1:
        width //= 2
        x = x[..., :width] + x[..., width:]
    return x[..., 0]


@dataclass(frozen=True)
class IntMatrix:
    """A Q8_0 matrix as exact integers: ``value[r, c] == q[r, c] * mult[r, c // 32] * row_scale[r]``.

    ``q`` is the Q8_0 matrix's own int8 array (shared, not copied); ``mult`` (one per block) is
    the block's float16 scale as an exact integer: its 11-bit mantissa shifted by the block's
    exponent above the row's smallest one (< 2**41, so float32 holds it exactly);
    ``row_scale`` is a power of two per row;
    ``act_bits`` is the activation precision for which every partial sum of a product with this
    matrix provably stays below 2**53 (at most ``ACT_BITS``);
    ``wsum`` is each row's integer weight sum ``sum_b mult[r, b] * sum(q[r, 32b:32b+32])`` (float64,
    exact), which the compiled AVX-512 path's byte form needs (it multiplies activations offset by
    2**15: ``q8_matmul.c``, matmul_bytes), or ``None`` where that form would not be exact
    (``(2**16 - 1) * max_r sum |value| >= 2**53``; it then uses its widening form);
    ``mult_groups`` is ``mult`` again as int32, laid out for that form (each group of 8 rows block
    by block: ``mult_groups[(r // 8) * 8 * nb + 8 * b + r % 8] == mult[r, b]``, a partial last group
    zero-padded, two int32 of padding at the end), or ``None`` where ``wsum`` is or a multiplier is
    2**31 or more (the form multiplies each block sum by its multiplier as an int32).
    """

    q: np.ndarray
    mult: np.ndarray
    row_scale: np.ndarray
    act_bits: int
    wsum: np.ndarray | None = None
    mult_groups: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.q.shape  # type: ignore[return-value]

    @cached_property
    def addresses(self) -> tuple[int, int, int, int | None, int | None]:
        """Where ``q``, ``mult``, ``row_scale``, ``wsum`` and ``mult_groups`` live (for the C kernel;
        looked up once; ``None`` for an absent array)."""
        opt = [None if a is None else a.ctypes.data for a in (self.wsum, self.mult_groups)]
        return self.q.ctypes.data, self.mult.ctypes.data, self.row_scale.ctypes.data, opt[0], opt[1]

    def widen(self, r0: int, r1: int) -> np.ndarray:
        """Rows ``r0:r1`` as float64 exact integers (int8 x integer multiplier: < 2**53)."""
        rows = r1 - r0
        nb = self.mult.shape[1]
        mult = self.mult[r0:r1, :, None].astype(np.float64)
        return (self.q[r0:r1].reshape(rows, nb, BLOCK) * mult).reshape(rows, nb * BLOCK)


def integerise(m: Q8Matrix, chunk_rows: int = 4096) -> IntMatrix:
    """Write each Q8_0 row as int8 values times one exact integer per block times one power of two
    per row (in row chunks, to keep float64 temporaries small for the 49152-row embedding)."""
    rows, cols = m.shape
    nb = cols // BLOCK
    if not np.all(np.isfinite(m.scales)):
        raise ExactnessError("Q8_0 matrix has a non-finite block scale")
    mult, row_scale, worst, wsum = np.empty((rows, nb), np.float32), np.empty(rows), 0.0, np.empty(rows)
    for r0 in range(0, rows, chunk_rows):
        r1 = min(rows, r0 + chunk_rows)
        frac, exp = np.frexp(m.scales[r0:r1].astype(np.float64))  # d = frac * 2**exp, frac in [0.5, 1)
        mant = frac * 2.0**11  # float16 has an 11-bit significand: an exact integer
        assert np.array_equal(mant, np.rint(mant)), "float16 scale with more than 11 significant bits"
        nonzero = mant != 0
        big = np.iinfo(np.int32).max
        emin = np.where(nonzero, exp, big).min(axis=1)
        emin = np.where(emin == big, 0, emin)  # an all-zero row
        shift = np.where(nonzero, exp - emin[:, None], 0)
        block_int = mant * np.ldexp(1.0, shift)  # (rows, nb), exact integers
        blocks = m.qs[r0:r1].reshape(r1 - r0, nb, BLOCK).astype(np.float64)
        absq = np.abs(blocks).sum(axis=2)
        worst = max(worst, float((absq * block_int).sum(axis=1).max(initial=0.0)))  # sum |w| of a row
        wsum[r0:r1] = (blocks.sum(axis=2) * block_int).sum(axis=1)  # exact: every partial sum is at most `worst`
        mult[r0:r1] = block_int  # exact in float32: 11 significant bits
        row_scale[r0:r1] = np.ldexp(1.0, emin - 11)
    bits = ACT_BITS
    while bits >= 8 and worst * (2**bits - 1) >= F64_EXACT / 2:
        bits -= 1
    if bits < 8:
        raise ExactnessError(f"Q8_0 matrix {rows}x{cols}: block scales of one row span too many binary orders for an exact float64 GEMM")
    bytes_exact = worst * (2**16 - 1) < F64_EXACT  # the AVX-512 byte form's bound (IntMatrix.wsum)
    groups = mult_groups(mult) if bytes_exact and mult.max(initial=0.0) < 2.0**31 else None
    return IntMatrix(np.ascontiguousarray(m.qs), mult, row_scale, bits, wsum if bytes_exact else None, groups)  # the kernel needs C order


def mult_groups(mult: np.ndarray) -> np.ndarray:
    """``IntMatrix.mult_groups`` of ``mult`` (rows, nb): integers below 2**31 (float32, exact)."""
    rows, nb = mult.shape
    groups = -(-rows // 8)
    padded = np.zeros((groups * 8, nb), np.int32)
    padded[:rows] = mult  # exact: float32 integers below 2**31
    out = np.zeros(groups * 8 * nb + 2, np.int32)
    out[: groups * 8 * nb] = padded.reshape(groups, 8, nb).transpose(0, 2, 1).reshape(-1)
    return out


class WeightArena:
    """One array holding the values, block multipliers and integer multipliers of many
    ``IntMatrix``es, in the order they are ``take``n (each array at a 64-byte boundary).

    Why: a short request streams every weight from memory once (a 16-token suffix of SmolLM2
    reads its ~120 MB of body weights for ~25 ms of products), and the layers' separate arrays
    (0.3-1.8 MB each) get 4 KB pages. NumPy asks Linux for transparent huge pages for any array of
    4 MB or more (``madvise``, honoured where ``/sys/kernel/mm/transparent_hugepage/enabled`` is
    ``madvise`` or ``always``; no setting is changed), so the whole body in one array gets 2 MB
    pages where the system allows them: measured on SmolLM2's body products, side by side in one
    process, 16 rows 26.2 -> 25.5 ms, 1 row 6.4 -> 5.9 ms (CPU time; a long prefill, which reads
    each weight from cache many times, does not change). The values are the same bytes: every bit
    is unchanged.
    """

    FIELDS = ("q", "mult", "mult_groups")  # the arrays a product streams per request

    def __init__(self, shapes: Sequence[tuple[int, int]]) -> None:
        """``shapes``: the (rows, cols) of the matrices to be taken, in order."""
        size = sum(self._span(n) for r, c in shapes for n in (r * c, 4 * r * (c // BLOCK), 4 * (-(-r // 8) * 8 * (c // BLOCK) + 2)))
        raw = np.empty(size + 64, np.uint8)  # untouched: memory is taken as it is written
        self._free = raw[-raw.ctypes.data % 64 :]

    @staticmethod
    def _span(nbytes: int) -> int:
        return -(-nbytes // 64) * 64

    def _copy(self, a: np.ndarray) -> np.ndarray:
        out = self._free[: a.nbytes].view(a.dtype).reshape(a.shape)
        out[...] = a
        self._free = self._free[self._span(a.nbytes) :]
        return out

    def take(self, w: IntMatrix) -> IntMatrix:
        """``w`` with its ``FIELDS`` copied into the arena (the next free places); ``w``'s own arrays are no longer referenced."""
        return replace(w, **{f: self._copy(getattr(w, f)) for f in self.FIELDS if getattr(w, f) is not None})


KERNELS = ("auto", "c", *q8kernel.PATHS, "numpy")


class ExactOps:
    """Shape-stable arithmetic: see the module docstring.

    ``kernel`` picks how ``linear`` (and attention, quantisation, RMSNorm ...) compute: ``"numpy"``
    float64 BLAS on widened weights and NumPy; a compiled path of ``model.q8kernel`` by name
    (``"avx512"``, ``"avx2"``, ``"portable"``: ``RuntimeError`` if it is not usable on this machine);
    ``"c"`` the compiled path ``$RADIXCHECK_Q8_KERNEL`` chooses (default: the best one that passes
    its self-test; ``RuntimeError`` if there is none); ``"auto"`` (the default) the same, else
    NumPy; or a loaded kernel library itself (the self-test's way in). All give the same integers,
    hence the same bits. ``kernel`` (attribute) names the path in use. ``threads`` splits a
    product's output rows over that many threads (bits unchanged).
    """

    name = "exact"

    def __init__(self, kernel: str | object = "auto") -> None:
        if isinstance(kernel, str):
            if kernel not in KERNELS:
                raise ValueError(f"unknown kernel {kernel!r} (expected one of {KERNELS})")
            self._lib = None if kernel == "numpy" else q8kernel.load(kernel if kernel in q8kernel.PATHS else None)
            if kernel != "auto" and kernel != "numpy" and self._lib is None:
                raise RuntimeError(f"the compiled Q8_0 kernel ({kernel}) is not usable here: {_why_not(kernel)}")
        else:
            self._lib = kernel
        self.kernel = q8kernel.path_of(self._lib)
        self.threads = 1

    def prepare(self, m: Q8Matrix) -> IntMatrix:
        return integerise(m)

    def linear(self, x: np.ndarray, w: IntMatrix, out_dtype: type = np.float64) -> np.ndarray:
        """``x @ W.T`` for ``x`` (n, cols), exact up to the per-row activation quantisation.

        The exact integer products come from the C kernel or from float64 BLAS (see the class);
        scales are applied element-wise afterwards, in the same order either way.
        """
        rows, cols = w.shape
        out = np.empty((len(x), rows), dtype=out_dtype)
        if self._lib is not None and out.dtype in (np.float64, np.float32):
            parts = _split(rows, self.threads) if self.threads > 1 else ()
            if len(parts) <= 1:
                q8kernel.linear(self._lib, x, w.act_bits, w.addresses, rows, out)
                return out
            xs, sx = q8kernel.quantize(self._lib, x, w.act_bits)  # = quantize_rows, as int16
            pool = _pool(self.threads)  # disjoint output columns per thread; ctypes releases the GIL
            futs = [pool.submit(q8kernel.matmul, self._lib, xs, w, sx, out, a, b) for a, b in parts]
            for f in futs:
                f.result()
            return out
        xi, sx = quantize_rows(x, w.act_bits)
        step = max(1, LINEAR_CHUNK // cols)  # ~1 MB of float64 weights per GEMM: widened in cache
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            acc = xi @ w.widen(r0, r1).T  # exact integers
            acc *= w.row_scale[None, r0:r1]  # a power of two: exact
            acc *= sx[:, None]
            out[:, r0:r1] = acc
        return out

    def rowsum(self, x: np.ndarray) -> np.ndarray:
        return rowsum(x)

    def exp(self, x: np.ndarray) -> np.ndarray:
        """``model.fixed_exp``: the same bits as the C kernel's exponential on every CPU."""
        return fixed_exp(x)

    def quantize(self, x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
        """``quantize_rows`` (in C when the kernel is built: one call instead of five; same bits)."""
        if self._lib is not None and x.ndim and x.shape[-1]:
            return q8kernel.quantize_rows(self._lib, x, bits)
        return quantize_rows(x, bits)

    def quantise_kv(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-row integer forms of (rotated) ``k`` and ``v``, both (L, Hkv, D): ``(ki, sk, vi, sv)``.

        ``ki`` holds integers below ``2**QK_BITS`` and ``vi`` below ``2**V_BITS`` (so float32 holds
        both exactly); ``sk``, ``sv`` (L, Hkv) are the row scales. Each row's result depends only on
        that row, so it may be computed once and kept (``model.kv_pool.KVMemo``).
        """
        ki, sk = self.quantize(k, QK_BITS)
        vi, sv = self.quantize(v, V_BITS)
        return ki, sk, vi, sv

    def attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, q_pos: np.ndarray) -> np.ndarray:
        """Causal grouped-query attention.

        ``q`` (T, H, D) at absolute positions ``q_pos`` (T,); ``k``, ``v`` (L, Hkv, D) at positions
        ``0..L-1``. Query ``t`` attends to keys ``0..q_pos[t]``. Returns (T, H * D) float64.
        """
        return self.attention_quantised(q, *self.quantise_kv(k, v), q_pos)

    def attention_quantised(
        self,
        q: np.ndarray,
        ki: np.ndarray,
        sk: np.ndarray,
        vi: np.ndarray,
        sv: np.ndarray,
        q_pos: np.ndarray,
        cached: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """``attention`` on K/V already in ``quantise_kv``'s integer form: ``ki``, ``vi`` (n, Hkv, D)
        (exact integers, float32 or float64), ``sk``, ``sv`` (n, Hkv) float64.

        ``cached`` (optional) = ``(slots, mk, msk, mv, msv)``: keys that come *before* ``ki``'s, key
        ``j`` being row ``slots[j]`` of ``mk``, ``msk``, ``mv``, ``msv`` (a ``KVMemo``'s arrays, laid out
        like ``ki`` ...: the kernel reads them in place instead of a gathered copy).

        Computed by the C kernel (``q8kernel.attention``) when it is built, else by the NumPy body
        below: the same IEEE operations in the same order, so the same bits.
        """
        T, H, D = q.shape
        L = (0 if cached is None else cached[0].size) + ki.shape[0]
        if L * 2.0 ** (P_BITS + V_BITS) >= F64_EXACT / 2 or L * 2.0**DENOM_BITS >= F64_EXACT / 2:
            raise ExactnessError(f"context of {L} tokens is too long for exact attention")
        if D * 2.0 ** (2 * QK_BITS) >= F64_EXACT / 2:
            raise ExactnessError(f"head_dim {D} is too large for exact attention")
        out = np.empty((T, H, D), dtype=np.float64)
        if self._lib is not None:
            fresh = (np.ascontiguousarray(ki, np.float32), _contig(sk), np.ascontiguousarray(vi, np.float32), _contig(sv))
            if cached is None:
                cached = (np.zeros(0, np.int64), *fresh)  # no cached keys: never read
            else:
                slots, mk, msk, mv, msv = cached
                cached = (np.ascontiguousarray(slots, np.int64), np.ascontiguousarray(mk, np.float32), _contig(msk),
                          np.ascontiguousarray(mv, np.float32), _contig(msv))  # fmt: skip
            qc, pos = _contig(q), np.ascontiguousarray(q_pos, dtype=np.int64)

            def chunk(t0: int, t1: int) -> None:
                q8kernel.attention(self._lib, qc, pos, cached, fresh, (QK_BITS, P_BITS, DENOM_BITS), out, t0, t1)

        else:
            if cached is not None:
                slots, mk, msk, mv, msv = cached
                ki, sk = np.concatenate([mk[slots], ki]), np.concatenate([msk[slots], sk])
                vi, sv = np.concatenate([mv[slots], vi]), np.concatenate([msv[slots], sv])
            kt, vt = _contig(ki.transpose(1, 2, 0)), _contig(vi.transpose(1, 0, 2))  # (Hkv, D, L), (Hkv, L, D)
            skt, svt = _contig(sk.T), _contig(sv.T)  # (Hkv, L)

            def chunk(t0: int, t1: int) -> None:
                self._attention_numpy(q, q_pos, kt, skt, vt, svt, out, t0, t1)

        starts = range(0, T, QUERY_CHUNK)
        if len(starts) > 1 and self.threads > 1:
            # query chunks are independent (each row depends only on its own data); the kernel and
            # NumPy's ufuncs and BLAS release the GIL: run them on a small thread pool
            list(_pool(self.threads).map(lambda t0: chunk(t0, min(T, t0 + QUERY_CHUNK)), starts))
        elif self._lib is not None:
            chunk(0, T)
        else:
            for t0 in starts:  # chunks: bounded memory, and keys after a chunk's last query skipped
                chunk(t0, min(T, t0 + QUERY_CHUNK))
        return out.reshape(T, H * D)

    def _attention_numpy(
        self,
        q: np.ndarray,
        q_pos: np.ndarray,
        kt: np.ndarray,
        skt: np.ndarray,
        vt: np.ndarray,
        svt: np.ndarray,
        out: np.ndarray,
        t0: int,
        t1: int,
    ) -> None:
        """Queries ``t0:t1`` of ``attention_quantised`` in NumPy, K/V laid out per KV head:
        ``kt`` (Hkv, D, L), ``skt`` (Hkv, L), ``vt`` (Hkv, L, D), ``svt`` (Hkv, L)."""
        _, H, D = q.shape
        Hkv, _, L = kt.shape
        G, n = H // Hkv, t1 - t0
        # keys after the chunk's last position are masked for every row of the chunk: skip them
        # (a masked key contributes exactly 0 below, so this changes no bit of any row)
        le = min(L, int(q_pos[t0:t1].max()) + 1)
        # rows ordered (kv head, group member, query): (Hkv, G * n, D)
        qc = q[t0:t1].reshape(n, Hkv, G, D).transpose(1, 2, 0, 3).reshape(Hkv, G * n, D)
        qi, sq = self.quantize(qc, QK_BITS)
        s = qi @ kt[:, :, :le]  # exact integers (Hkv, G*n, le)
        s *= (sq * (1.0 / np.sqrt(float(D))))[..., None]
        s *= skt[:, None, :le]
        masked = np.arange(le)[None, :] > q_pos[t0:t1, None]  # (n, le)
        if masked.any():
            masked = np.broadcast_to(masked[None, None], (Hkv, G, n, le)).reshape(Hkv, G * n, le)
            np.copyto(s, -np.inf, where=masked)
        s -= s.max(axis=-1, keepdims=True)
        e = fixed_exp(s)  # masked keys give exactly 0
        denom = np.rint(e * 2.0**DENOM_BITS).sum(axis=-1)  # exact integer sum
        e *= svt[:, None, :le]
        pi, sp = self.quantize(e, P_BITS)
        num = pi @ vt[:, :le, :]  # exact integers (Hkv, G*n, D)
        o = num * (sp / (denom * 2.0**-DENOM_BITS))[..., None]
        out[t0:t1] = o.reshape(Hkv, G, n, D).transpose(2, 0, 1, 3).reshape(n, H, D)


class FloatOps:
    """Plain float BLAS and NumPy reductions, NOT shape-stable.

    ``FloatOps()`` (float32, ``arithmetic="float"``) is what most people would write; the
    meta-tests show the bit-identity properties reject it. ``FloatOps(np.float64)``
    (``arithmetic="float64"``) is a high-precision *fidelity* reference: no activation, q/k/v or
    probability quantisation, so it measures how far the exact model's integerisation moves the
    logits (and how far llama.cpp's own approximations do).
    """

    def __init__(self, dtype: type = np.float32) -> None:
        self.dtype = np.dtype(dtype)
        self.name = "float" if self.dtype == np.float32 else "float64"

    def prepare(self, m: Q8Matrix) -> np.ndarray:
        return dequantize(m)  # float32 holds Q8_0 values exactly; upcast per call if float64

    def linear(self, x: np.ndarray, w: np.ndarray, out_dtype: type = np.float64) -> np.ndarray:
        return (np.asarray(x, dtype=self.dtype) @ w.astype(self.dtype, copy=False).T).astype(out_dtype)

    def rowsum(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=self.dtype).sum(axis=-1).astype(np.float64)

    def exp(self, x: np.ndarray) -> np.ndarray:
        return np.exp(x)

    def attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, q_pos: np.ndarray) -> np.ndarray:
        T, H, D = q.shape
        L, Hkv, _ = k.shape
        G = H // Hkv
        dt = self.dtype
        qf = q.astype(dt).reshape(T, Hkv, G, D).transpose(1, 2, 0, 3).reshape(Hkv, G * T, D)
        kf = k.astype(dt).transpose(1, 2, 0)
        vf = v.astype(dt).transpose(1, 0, 2)
        s = (qf @ kf) / dt.type(np.sqrt(D))
        allowed = np.arange(L)[None, :] <= q_pos[:, None]
        allowed = np.broadcast_to(allowed[None, None], (Hkv, G, T, L)).reshape(Hkv, G * T, L)
        s = np.where(allowed, s, -np.inf)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
        o = p @ vf
        return o.reshape(Hkv, G, T, D).transpose(2, 0, 1, 3).reshape(T, H * D).astype(np.float64)


def get_ops(arithmetic: str, kernel: str | object = "auto") -> ExactOps | FloatOps:
    """``"exact"`` (default), ``"float"`` (plain float32 BLAS) or ``"float64"`` (fidelity reference).
    ``kernel`` applies to ``"exact"`` only (``ExactOps``)."""
    if arithmetic == "exact":
        return ExactOps(kernel)
    if arithmetic == "float":
        return FloatOps(np.float32)
    if arithmetic == "float64":
        return FloatOps(np.float64)
    raise ValueError(f"unknown arithmetic {arithmetic!r} (expected 'exact', 'float' or 'float64')")
