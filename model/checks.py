"""KV-level oracles: plain functions that raise ``AssertionError`` with a readable verdict.

The Hypothesis properties in ``properties/test_model_*.py`` and the meta-tests in
``meta_tests/test_model_meta.py`` (which show a plain-float-BLAS model *fails* them) both call
these, so the suite and its meta-tests check exactly the same thing. Comparisons are bit-for-bit
(``np.array_equal``), never ``allclose``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from radixcheck.model.kv_pool import KVPool
from radixcheck.model.llama import Model


def describe_difference(got: np.ndarray, want: np.ndarray, what: str) -> str:
    """A one-line verdict: where the first difference is, max|Δ|, whether argmax agrees."""
    if got.shape != want.shape:
        return f"{what}: shape {got.shape} != {want.shape}"
    diff = np.argwhere(got != want)
    i = tuple(int(v) for v in diff[0])
    maxd = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    line = f"{what}: {len(diff)} of {got.size} values differ, first at {i}, max|Δ| = {maxd:.3g}"
    if got.ndim == 2:
        agree = float(np.mean(got.argmax(-1) == want.argmax(-1)))
        line += f", argmax agreement {agree:.0%}"
    return line


def assert_bit_identical(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(describe_difference(got, want, what))


def full_prefill(model: Model, tokens: Sequence[int] | np.ndarray, dtype: str = "float32") -> tuple[np.ndarray, KVPool]:
    """Logits of a from-scratch prefill in a fresh pool (slots 0..n-1), and that pool."""
    n = len(tokens)
    pool = KVPool(model.config, num_slots=max(1, n), dtype=dtype)
    return model.prefill(pool, tokens, np.arange(n, dtype=np.int64), 0), pool


def check_reuse_after_split(
    model: Model,
    tokens: Sequence[int] | np.ndarray,
    split: int,
    dtype: str = "float32",
    seed: int = 0,
    chunk_size: int | None = None,
) -> None:
    """Prefill ``tokens[:split]``, then reuse it and prefill the rest (optionally in chunks).

    The suffix logits, the prefix logits and every K/V row must equal a full prefill's bit for bit.
    Slots are a random permutation of a larger pool, so slot order plays no role.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    n = tokens.size
    want, want_pool = full_prefill(model, tokens, dtype)
    rng = np.random.default_rng(seed)
    pool = KVPool(model.config, num_slots=2 * n + 3, dtype=dtype)
    slots = rng.permutation(pool.num_slots)[:n].astype(np.int64)
    first = model.prefill(pool, tokens[:split], slots[:split], 0)
    if chunk_size is None:
        rest = model.prefill(pool, tokens, slots, split)
    else:
        rest = model.prefill_chunked(pool, tokens, slots, split, chunk_size)
    assert_bit_identical(first, want[:split], f"prefix logits (split {split} of {n})")
    assert_bit_identical(rest, want[split:], f"suffix logits after reusing {split} of {n} tokens")
    k, v = pool.rows(slots)
    k0, v0 = want_pool.rows(np.arange(n))
    assert_bit_identical(k.astype(np.float32), k0.astype(np.float32), "stored K")
    assert_bit_identical(v.astype(np.float32), v0.astype(np.float32), "stored V")


def check_chunked_equals_full(model: Model, tokens: Sequence[int] | np.ndarray, chunk_size: int, dtype: str = "float32") -> None:
    """Chunked prefill from scratch gives the full prefill's logits bit for bit."""
    tokens = np.asarray(tokens, dtype=np.int64)
    want, _ = full_prefill(model, tokens, dtype)
    pool = KVPool(model.config, num_slots=max(1, tokens.size), dtype=dtype)
    got = model.prefill_chunked(pool, tokens, np.arange(tokens.size), 0, chunk_size)
    assert_bit_identical(got, want, f"chunked prefill (chunk {chunk_size}) vs full prefill")
