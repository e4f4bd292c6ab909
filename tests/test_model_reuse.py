"""KV-level bit-identity properties of the exact NumPy model (synthetic default model).

Reusing cached K/V and prefilling only the suffix must give logits bit-identical to a full
prefill, for every split point, every chunking, every KV storage dtype and BLAS thread count.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from radixcheck.model import STORAGE_DTYPES, KVPool, load_default
from radixcheck.model.checks import assert_bit_identical, check_chunked_equals_full, check_reuse_after_split
from radixcheck.model.llama import Model

MODEL = load_default()
VOCAB = MODEL.config.vocab_size
MAX_LEN = 48


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread_by_default():
    """Tests run on 1 BLAS thread unless they ask for more (2 OpenBLAS threads per xdist worker on a
    2-core machine oversubscribe it badly); exactness must not depend on it either way."""
    with threadpool_limits(limits=1):
        yield


@contextmanager
def model_threads(model: Model, threads: int, blas_threads: int) -> Iterator[None]:
    """The model owns its threads (``Model.threads``, ``Model.blas_threads``; an outer
    ``threadpool_limits`` no longer reaches inside a call): set both for a block."""
    old = model.threads, model.blas_threads
    model.threads, model.blas_threads = threads, blas_threads
    try:
        yield
    finally:
        model.threads, model.blas_threads = old


tokens_st = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=MAX_LEN)


@st.composite
def tokens_and_split(draw: st.DrawFn) -> tuple[list[int], int]:
    toks = draw(tokens_st)
    return toks, draw(st.integers(0, len(toks)))


@settings(deadline=None)
@given(case=tokens_and_split(), seed=st.integers(0, 2**16))
def test_reuse_after_split_is_bit_identical(case: tuple[list[int], int], seed: int) -> None:
    toks, split = case
    check_reuse_after_split(MODEL, toks, split, seed=seed)


# 2 model threads, 2 BLAS threads each: the same property with fewer examples (an eighth of the
# profile's), because 2-thread OpenBLAS on a busy 2-core machine (pytest -n auto) spends most of
# its time spinning.
# `python -m radixcheck.model.kernel_check` and the thorough profile cover it at length.
@settings(deadline=None, max_examples=max(5, settings.default.max_examples // 8))
@given(case=tokens_and_split(), seed=st.integers(0, 2**16))
def test_reuse_after_split_is_bit_identical_with_two_blas_threads(case: tuple[list[int], int], seed: int) -> None:
    toks, split = case
    with model_threads(MODEL, 2, 2):
        check_reuse_after_split(MODEL, toks, split, seed=seed)


@settings(deadline=None)
@given(case=tokens_and_split(), chunk=st.integers(1, 17), seed=st.integers(0, 2**16))
def test_reuse_then_chunked_suffix_is_bit_identical(case: tuple[list[int], int], chunk: int, seed: int) -> None:
    toks, split = case
    check_reuse_after_split(MODEL, toks, split, seed=seed, chunk_size=chunk)


@settings(deadline=None)
@given(toks=tokens_st, chunk=st.integers(1, 20))
def test_chunked_prefill_equals_full_prefill(toks: list[int], chunk: int) -> None:
    check_chunked_equals_full(MODEL, toks, chunk)


@pytest.mark.parametrize("dtype", sorted(STORAGE_DTYPES))
@settings(deadline=None, max_examples=15)
@given(case=tokens_and_split(), seed=st.integers(0, 2**16))
def test_reuse_is_bit_identical_for_each_storage_dtype(dtype: str, case: tuple[list[int], int], seed: int) -> None:
    toks, split = case
    check_reuse_after_split(MODEL, toks, split, dtype=dtype, seed=seed)


def test_every_split_point_of_one_prompt_under_one_and_two_threads() -> None:
    toks = np.random.default_rng(7).integers(0, VOCAB, 28)
    for split in range(toks.size + 1):
        check_reuse_after_split(MODEL, toks, split, seed=split)
    with model_threads(MODEL, 2, 2):
        for split in (0, 14, 27):
            check_reuse_after_split(MODEL, toks, split, seed=split)


def test_thread_count_does_not_change_logits() -> None:
    toks = np.random.default_rng(8).integers(0, VOCAB, 33)
    out = []
    for threads, blas in ((1, 1), (2, 1), (1, 2), (2, 2)):
        with model_threads(MODEL, threads, blas):
            out.append(MODEL.prefill(KVPool(MODEL.config, 64), toks, np.arange(33)))
    for o in out[1:]:
        assert_bit_identical(out[0], o, "1 thread vs 2 (model and BLAS threads)")


def test_an_outer_blas_limit_is_restored_after_a_call() -> None:
    """The model limits BLAS inside its calls and leaves the caller's setting as it was."""
    from threadpoolctl import threadpool_info

    with threadpool_limits(limits=2):
        MODEL.prefill(KVPool(MODEL.config, 8), [1, 2, 3], np.arange(3))
        assert all(i["num_threads"] == 2 for i in threadpool_info() if i["user_api"] == "blas")


def test_last_only_equals_last_row() -> None:
    toks = np.random.default_rng(9).integers(0, VOCAB, 21)
    full = MODEL.prefill(KVPool(MODEL.config, 32), toks, np.arange(21))
    last = MODEL.prefill(KVPool(MODEL.config, 32), toks, np.arange(21), last_only=True)
    assert_bit_identical(last, full[-1:], "last_only logits")


def test_logits_shape_and_dtype() -> None:
    pool = KVPool(MODEL.config, 16)
    MODEL.prefill(pool, [1], np.arange(1), 0)
    out = MODEL.prefill(pool, [1, 2, 3, 4], np.arange(4), 1)
    assert out.shape == (3, VOCAB) and out.dtype == np.float32
    assert MODEL.prefill(pool, [1, 2, 3, 4], np.arange(4), 4).shape == (0, VOCAB)


def test_exact_model_stays_close_to_the_float64_reference() -> None:
    """Fidelity, not exactness: integerising activations / q / k / v / probabilities moves the
    logits only slightly from an unquantised float64 forward pass on the same Q8_0 weights."""
    ref = load_default(arithmetic="float64")
    toks = np.random.default_rng(10).integers(0, VOCAB, 40)
    got = MODEL.prefill(KVPool(MODEL.config, 40), toks, np.arange(40))
    want = ref.prefill(KVPool(MODEL.config, 40), toks, np.arange(40))
    assert np.max(np.abs(got - want)) < 0.02 * np.max(np.abs(want))
    assert np.array_equal(got.argmax(axis=1), want.argmax(axis=1))


def test_long_prompt_reuse_spanning_several_attention_chunks() -> None:
    """Prompts longer than the attention query chunk (64 rows) run chunks on a thread pool and skip
    masked keys per chunk; neither may change a bit."""
    toks = np.random.default_rng(12).integers(0, VOCAB, 200)
    for split in (0, 1, 63, 64, 65, 128, 199):
        check_reuse_after_split(MODEL, toks, split, seed=split)
    check_chunked_equals_full(MODEL, toks, 70)
