"""The self-test every compiled kernel path passes before it is used: its bits against the NumPy path's.

``model.q8kernel`` runs ``run(lib)`` once, right after a path's library is built
(``model.kernel_build.ensure`` keeps the verdict beside the library). A path that fails is never
used, and ``q8kernel`` warns, naming the path and the first difference; ``python -m
radixcheck.model.kernel_check`` prints every path's verdict.

What it compares, with ``np.array_equal`` (so NaN-free outputs; a difference of one bit fails):

* the Q8_0 product (``ExactOps.linear``, float64 and float32 outputs) for 1 to 37 activation rows —
  every tile shape of every form: the AVX-512 path's 16- and 8-row tiles, whole and partial, in
  its byte and its widening forms (the latter on a matrix without integer multipliers too), the
  AVX2 path's lanes form (16- and 8-row tiles, groups of 4 weight rows; 8 rows or more) and its
  4-row and 1-row tiles (fewer), weight chunks cut short, a weight-row range as a thread takes it
  (starting inside a group of 8), a 150-row product (the lanes form's activation tiles in three
  blocks) — on random blocks (block scales spread over 12 binary
  orders), on blocks whose scales are 2**18 apart (``integerise`` lowers the activation bits; the
  byte form steps aside) and at the extremes: every weight -128 or 127 and every activation the
  largest integer the quantiser produces (2**15 - 1 in magnitude), the largest block sums;
* the activation quantisation (int16 and float64 forms) on zero rows, subnormals, huge values and
  exact halves, and on quotients exactly on and a few ulps either side of half-integers, at row
  magnitudes 2^-1040 to 2^1023 (``half_integer_rows``: where a quotient not computed by one IEEE
  division, e.g. ``x * (1 / scale)``, rounds to another integer);
* exact attention (the query / key tiles, softmax, probability / value tiles) over memo-like
  scattered rows, in order and shuffled, including head sizes that leave scalar tails; and its
  probability quantisation on and next to half-integers (a zero query: every exponential is 1,
  so the probabilities are the value scales quantised, and those are ``half_integer_rows``);
* a whole synthetic model (RMSNorm, RoPE, SwiGLU, the fused layers and the K/V memo): its logits
  and stored K/V after a prefill and a reused-prefix prefill, against the NumPy model's.

It takes about a tenth of a second.
"""

from __future__ import annotations

import ctypes
from dataclasses import replace

import numpy as np


def _first_difference(name: str, got: np.ndarray, want: np.ndarray) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape == want.shape and np.array_equal(got, want):
        return None
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} instead of {want.shape}"
    idx = tuple(int(i) for i in np.argwhere(got != want)[0])
    first = f"{got[idx].item()!r} instead of {want[idx].item()!r}"
    return f"{name}: {int((got != want).sum())} of {got.size} values differ, first at {idx}: {first}"


def _products(lib: ctypes.CDLL, rng: np.random.Generator) -> str | None:
    from radixcheck.model import q8kernel
    from radixcheck.model.exact import ExactOps, integerise
    from radixcheck.model.q8 import Q8Matrix

    c, ref = ExactOps(lib), ExactOps("numpy")
    rows, nb = 45, 3  # 45 rows: a 32-row chunk, then 13 (an 8-row group and 5 left over, an odd one last)
    qs = rng.integers(-128, 128, size=(rows, nb * 32), dtype=np.int8)
    scales = (rng.uniform(0.5, 1.0, (rows, nb)) * 2.0 ** rng.integers(-12, 1, (rows, nb)) * 2**-6).astype(np.float16)
    scales[rng.random((rows, nb)) < 0.1] = 0
    random_w = integerise(Q8Matrix(qs, scales))
    extreme_q = rng.choice(np.array([-128, 127], dtype=np.int8), size=(19, 64))
    extreme_w = integerise(Q8Matrix(extreme_q, np.full((19, 2), 0.01, np.float16)))
    # block scales 2**18 apart in a row: integerise lowers the activation bits, and the AVX-512
    # short-request form (IntMatrix.wsum) steps aside for the widening one
    wide = np.full((21, nb), 2.0**-4, np.float16)
    wide[:, 1] = 2.0**-22
    spread_w = integerise(Q8Matrix(qs[:21], wide))
    if spread_w.act_bits == 15 or spread_w.wsum is not None or random_w.wsum is None or random_w.mult_groups is None:
        return (f"self-test matrices: activation bits {spread_w.act_bits}, "
                f"weight sums {spread_w.wsum is not None} / {random_w.wsum is not None}")
    # the same blocks without the integer multipliers: the widening form, where the byte form would run
    ungrouped_w = replace(random_w, mult_groups=None)
    for n in (1, 2, 3, 5, 8, 13, 16, 24, 32, 37):  # 24 and 32: a block of two tiles (16 + 8, 16 + 16)
        x = rng.standard_normal((n, nb * 32)) * 10.0 ** rng.integers(-3, 4, (n, 1))
        x[rng.random(x.shape) < 0.05] = 0
        xe = np.where(rng.random((n, 64)) < 0.5, -1.0, 1.0) * 3.0  # every element quantises to +-(2**bits - 1)
        for w, xs, what in ((random_w, x, "random"), (extreme_w, xe, "extreme"), (spread_w, x, "widely spread"),
                            (ungrouped_w, x, "random, without integer multipliers")):
            for dtype in (np.float64, np.float32):
                failure = _first_difference(f"Q8_0 product, {what} blocks, {n} rows, {dtype.__name__}", c.linear(xs, w, dtype),
                                            ref.linear(xs, w, dtype))
                if failure:
                    return failure
    x = rng.standard_normal((21, nb * 32))
    xi, sx = q8kernel.quantize(lib, x, random_w.act_bits)
    want = ref.linear(x, random_w)
    want[:, :10] = want[:, 40:] = 0
    for w in (random_w, ungrouped_w):
        got = np.zeros((21, rows))
        q8kernel.matmul(lib, xi, w, sx, got, 10, 40)  # a thread's row range (not a multiple of 8: the byte form's groups)
        if failure := _first_difference(f"Q8_0 product over rows 10:40, integer multipliers {w.mult_groups is not None}", got, want):
            return failure
    # a long product: the AVX2 lanes form takes its 16-row tiles in blocks of ~192 KB of activations
    # (4 tiles at 1536 columns), so 150 rows are three blocks, the last ending in an 8-row tile; 29
    # weight rows are two chunks of its 24 (the first tile of each block widens each chunk again)
    long_w = integerise(Q8Matrix(rng.integers(-128, 128, size=(29, 1536), dtype=np.int8),
                                 (rng.uniform(0.5, 1.0, (29, 48)) * 2.0**-7).astype(np.float16)))
    x = rng.standard_normal((150, 1536))
    return _first_difference("Q8_0 product, 150 rows x 1536 columns", c.linear(x, long_w), ref.linear(x, long_w))


def _quantisation(lib: ctypes.CDLL, rng: np.random.Generator) -> str | None:
    from radixcheck.model import q8kernel
    from radixcheck.model.exact import quantize_rows

    x = rng.standard_normal((8, 96)) * 10.0 ** rng.integers(-300, 300, (8, 1))
    x[0] = 0.0
    x[1] = -0.0
    x[2, :3] = [5e-324, -5e-324, 1e-310]
    x[3] = np.arange(96) - 47.5  # exact halves at low bits: round half to even
    for bits in (8, 15):
        got_i, got_s = q8kernel.quantize(lib, x, bits)
        want_i, want_s = quantize_rows(x, bits)
        failure = _first_difference(f"int16 quantisation ({bits} bits)", got_i.astype(np.float64), want_i)
        failure = failure or _first_difference(f"int16 quantisation scales ({bits} bits)", got_s, want_s)
        if failure:
            return failure
    for bits in (15, 20, 21):
        got = q8kernel.quantize_rows(lib, x.reshape(2, 4, 96), bits)
        want = quantize_rows(x.reshape(2, 4, 96), bits)
        for g, w, what in zip(got, want, ("integers", "scales"), strict=True):
            if failure := _first_difference(f"float64 quantisation {what} ({bits} bits)", g, w):
                return failure
    return None


# Row magnitudes (binary exponents of amax) for the half-integer cases: ordinary ones, 2^+-large, and
# 2^-1040, whose scale amax / (2^bits - 1) is subnormal (its reciprocal overflows)
HALF_INTEGER_EXPONENTS = (0, -20, 20, -500, 500, -1000, 1000, 1023, -1040)


def half_integer_rows(bits: int) -> np.ndarray:
    """Rows whose ``quantize_rows(., bits)`` quotients ``x / scale`` land exactly on half-integers
    ``k + 0.5`` and a few ulps either side, ``k`` from 0 to ``2**bits - 2``: an array
    ``(len(HALF_INTEGER_EXPONENTS), n, 15)``, one group of ``n`` rows per exponent.

    Every row of a group starts with the group's ``amax`` (``m * 2**exponent``, ``m`` in [1, 2)),
    so its rows share one ``scale``; each row's other 14 values are ``(k + 0.5) * scale`` and its
    float64 neighbours (3 either side), with both signs. 15 columns: the AVX-512 loop's 8 and a
    7-column scalar tail, the AVX2 loop's 12 and a 3-column tail. Where ``scale`` is not a power
    of two, ``x * (1 / scale)`` is not always ``x / scale``, and next to a half-integer the two
    then round to different integers: a kernel that computes the quotient any other way than one
    IEEE division differs here, never on random values (a random quotient is within an ulp of a
    half-integer once in ~2^37)."""
    rng = np.random.default_rng(bits)  # fixed cases, whatever the caller's random stream
    top, groups, tries = 2**bits - 1, len(HALF_INTEGER_EXPONENTS), 8
    k = np.r_[0:8, 100, 101, top // 2 - 1, top // 2, top - 3, top - 2]
    k = np.c_[np.broadcast_to(k, (groups, k.size)), rng.integers(0, top - 1, (groups, 24))]
    # per group, `tries` mantissas for amax; kept: the one whose rows x * (1 / scale) rounds
    # differently from x / scale most often (the further 1 / scale is from its float64, the more)
    amax = np.ldexp(rng.uniform(1.0, 2.0, (tries, groups)), HALF_INTEGER_EXPONENTS)[..., None, None]
    scale = amax / top
    x0 = (k[..., None] + 0.5) * scale
    x = x0 + np.arange(-3, 4) * np.spacing(x0)  # (tries, groups, k, 7 neighbours)
    with np.errstate(over="ignore", invalid="ignore"):  # 1 / a subnormal scale overflows
        apart = (np.rint(x / scale) != np.rint(x * (1 / scale))).sum(axis=(2, 3))
    best = apart.argmax(axis=0)
    x, amax = x[best, np.arange(groups)], amax[best, np.arange(groups)]
    x = np.clip(x, -amax, amax)  # a subnormal scale rounds far enough up that (k + 0.5) * scale may pass amax
    x = np.concatenate([x, -x], axis=-1)  # one row of 14 per k
    return np.concatenate([np.broadcast_to(amax, (*x.shape[:2], 1)), x], axis=-1)


def _half_integers(lib: ctypes.CDLL, rng: np.random.Generator) -> str | None:
    """Quantisation where rounding half to even decides (``half_integer_rows``); one call per form
    and precision, compared group by group (the first difference names its rows' magnitude)."""
    from radixcheck.model import q8kernel
    from radixcheck.model.exact import quantize_rows

    for form, all_bits in (("int16", (8, 15)), ("float64", (15, 20, 21))):
        for bits in all_bits:
            x = half_integer_rows(bits)
            if form == "int16":
                got_i, got_s = q8kernel.quantize(lib, x.reshape(-1, x.shape[-1]), bits)
                got = got_i.astype(np.float64).reshape(x.shape), got_s.reshape(x.shape[:-1])
            else:
                got = q8kernel.quantize_rows(lib, x, bits)
            want = quantize_rows(x, bits)
            for g, exponent in enumerate(HALF_INTEGER_EXPONENTS):
                what = f"{form} quantisation on and next to half-integers ({bits} bits, amax ~2^{exponent})"
                for got_part, want_part, part in zip(got, want, ("integers", "scales"), strict=True):
                    if failure := _first_difference(f"{what}: {part}", got_part[g], want_part[g]):
                        return failure
    return _attention_half_integers(lib)


def half_integer_attention() -> tuple[list[int], tuple[np.ndarray, ...]]:
    """Inputs of ``ExactOps.attention_quantised`` whose probabilities are quantised on and next to
    half-integers: ``(exponents, (q, ki, sk, vi, sv, q_pos))``, one KV head per exponent.

    With a zero query every key's exponential is exactly 1, so a key's ``e`` is its value scale
    and the probabilities are ``rint(sv / sp)``, ``sp = max(sv) / (2**P_BITS - 1)``: value scales
    from ``half_integer_rows`` (their magnitudes, the maximum first) put those quotients on and
    next to half-integers. 16 queries see 285 to 570 keys (the vector loops' tails vary)."""
    from radixcheck.model.exact import P_BITS

    exponents = [e for e in HALF_INTEGER_EXPONENTS if e < 1000]  # at 2^1000 and above the output overflows
    rows = half_integer_rows(P_BITS)[[HALF_INTEGER_EXPONENTS.index(e) for e in exponents]]
    sv = np.abs(rows).reshape(len(exponents), -1).T  # (keys, heads)
    L, heads, D = sv.shape[0], sv.shape[1], 8
    vi = np.random.default_rng(P_BITS).integers(-3, 4, (L, heads, D)).astype(np.float64)
    q, pos = np.zeros((16, heads, D)), np.linspace(L // 2, L - 1, 16).astype(np.int64)
    return exponents, (q, np.zeros((L, heads, D)), np.ones((L, heads)), vi, sv, pos)


def _attention_half_integers(lib: ctypes.CDLL) -> str | None:
    from radixcheck.model.exact import P_BITS, ExactOps

    exponents, args = half_integer_attention()
    T, heads, D = args[0].shape
    got = ExactOps(lib).attention_quantised(*args).reshape(T, heads, D)
    want = ExactOps("numpy").attention_quantised(*args).reshape(T, heads, D)
    for h, exponent in enumerate(exponents):
        what = f"attention probabilities on and next to half-integers ({P_BITS} bits, value scales ~2^{exponent})"
        if failure := _first_difference(what, got[:, h], want[:, h]):
            return failure
    return None


def _attention(lib: ctypes.CDLL, rng: np.random.Generator) -> str | None:
    from radixcheck.model.exact import ExactOps

    c, ref = ExactOps(lib), ExactOps("numpy")
    for (H, Hkv, D), T, past, shuffled in (((9, 3, 64), 23, 17, False), ((4, 2, 32), 13, 40, True), ((2, 1, 6), 9, 5, False),
                                           ((3, 3, 20), 30, 0, True)):
        L = past + T
        q = rng.standard_normal((T, H, D)) * 10.0 ** rng.integers(-2, 3)
        kv = ref.quantise_kv(rng.standard_normal((L, Hkv, D)) * 3, rng.standard_normal((L, Hkv, D)))
        pos = rng.permutation(np.arange(past, L)) if shuffled else np.arange(past, L)
        cached = None
        if past:  # cached rows scattered over a larger array, as in a KVMemo
            slots = rng.permutation(3 * past)[:past]
            arrays = [np.zeros((3 * past, *a.shape[1:]), np.float32 if a.ndim == 3 else np.float64) for a in kv]
            for a, src in zip(arrays, kv, strict=True):
                a[slots] = src[:past]
            kv, cached = tuple(a[past:] for a in kv), (slots, *arrays)
        failure = _first_difference(f"attention (heads {H}/{Hkv} x {D}, {T} queries over {L} keys)",
                                    c.attention_quantised(q, *kv, pos, cached), ref.attention_quantised(q, *kv, pos, cached))
        if failure:
            return failure
    return None


def _model(lib: ctypes.CDLL, rng: np.random.Generator) -> str | None:
    from radixcheck.model.kv_pool import KVPool
    from radixcheck.model.llama import Model
    from radixcheck.model.synthetic import DEFAULT_CONFIG, synthetic_weights

    weights = synthetic_weights(DEFAULT_CONFIG, seed=5)
    toks = rng.integers(0, DEFAULT_CONFIG.vocab_size, 41)
    results = []
    for kernel, threads in ((lib, 1), (lib, 2), ("numpy", 1)):  # threads 2: the call-per-step path
        m = Model(DEFAULT_CONFIG, weights, kernel=kernel, threads=threads)
        pool = KVPool(m.config, 48)
        first = m.prefill(pool, toks[:17], np.arange(17))
        rest = m.prefill(pool, toks, np.arange(41), 17)
        results.append((first, rest, *pool.rows(np.arange(41))))
    for got, what in zip(results[:2], ("fused layers", "call per step"), strict=True):
        for g, w, part in zip(got, results[2], ("logits", "logits after reuse", "stored K", "stored V"), strict=True):
            if failure := _first_difference(f"synthetic model, {what}: {part}", g, w):
                return failure
    return None


def run(lib: ctypes.CDLL) -> str | None:
    """``None`` if ``lib`` (a kernel library with its argument types declared) gives the NumPy
    path's bits everywhere the checks look, else a description of the first difference."""
    rng = np.random.default_rng(20261201)
    for check in (_quantisation, _half_integers, _products, _attention, _model):
        try:
            failure = check(lib, rng)
        except Exception as e:  # any exception from a path under test is a failure of that path
            return f"{check.__name__.lstrip('_')}: {type(e).__name__}: {e}"
        if failure:
            return failure
    return None
