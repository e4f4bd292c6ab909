"""Bad input to the model: a clear error naming the problem, and nothing written to the pool."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixcheck.model import DEFAULT_CONFIG, InputError, KVPool, KVPoolError, load_default

MODEL = load_default()
VOCAB = MODEL.config.vocab_size
SLOTS = 64


def pool_state(pool: KVPool) -> tuple[bytes, bytes, bytes]:
    return pool.k.tobytes(), pool.v.tobytes(), pool.filled.tobytes()


def used_pool() -> KVPool:
    pool = KVPool(MODEL.config, SLOTS)
    MODEL.prefill(pool, [5, 6, 7, 8], np.arange(4), 0)
    return pool


def assert_rejected(match: str, tokens, slots, num_cached: int = 0, pool: KVPool | None = None) -> None:
    pool = pool or used_pool()
    before = pool_state(pool)
    with pytest.raises(InputError, match=match):
        MODEL.prefill(pool, tokens, slots, num_cached)
    assert pool_state(pool) == before, "the pool changed although the input was rejected"


CASES = [
    ("out of vocabulary", [1, 2, VOCAB], [10, 11, 12], 0),
    ("negative", [1, -3, 2], [10, 11, 12], 0),
    ("not an integer", [1, 2.0, 3], [10, 11, 12], 0),
    ("not an integer", [1, True, 3], [10, 11, 12], 0),
    ("must be integers", np.array([1.0, 2.0]), [10, 11], 0),
    ("1-D", np.array([[1, 2]]), [10, 11], 0),
    ("outside the pool", [1, 2, 3], [10, 11, SLOTS], 0),
    ("outside the pool", [1, 2, 3], [10, -1, 12], 0),
    ("distinct", [1, 2, 3], [10, 11, 10], 0),
    ("integer slot ids", [1, 2, 3], np.array([10.0, 11.0, 12.0]), 0),
    ("length mismatch", [1, 2, 3], [10, 11], 0),
    ("num_cached", [1, 2, 3], [10, 11, 12], 4),
    ("num_cached", [1, 2, 3], [10, 11, 12], -1),
    ("never written", [1, 2, 3], [10, 11, 12], 2),  # claims a cached prefix that is not there
    ("max_seq_len", [1] * (DEFAULT_CONFIG.max_seq_len + 1), list(range(DEFAULT_CONFIG.max_seq_len + 1)), 0),
]


@pytest.mark.parametrize(("match", "tokens", "slots", "num_cached"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_rejected_before_anything_is_written(match, tokens, slots, num_cached) -> None:
    pool = KVPool(MODEL.config, max(SLOTS, DEFAULT_CONFIG.max_seq_len + 2))
    if match != "max_seq_len":
        pool = used_pool()
    assert_rejected(match, tokens, slots, num_cached, pool)


@settings(deadline=None, max_examples=30)
@given(
    toks=st.lists(st.integers(-5, VOCAB + 5), min_size=1, max_size=12),
    slots=st.lists(st.integers(-2, SLOTS + 2), min_size=1, max_size=12),
    num_cached=st.integers(-1, 13),
)
def test_any_input_either_succeeds_or_leaves_the_pool_untouched(toks, slots, num_cached) -> None:
    pool = used_pool()
    before = pool_state(pool)
    try:
        MODEL.prefill(pool, toks, slots, num_cached)
    except InputError as e:
        assert str(e), "error without a message"
        assert pool_state(pool) == before
    else:
        assert all(0 <= t < VOCAB for t in toks) and len(toks) == len(slots)


def test_pool_that_does_not_fit_the_model_is_rejected() -> None:
    other = load_default(config=dataclasses.replace(DEFAULT_CONFIG, n_layers=1))
    with pytest.raises(InputError, match="does not fit"):
        MODEL.prefill(KVPool(other.config, 8), [1], [0])


def test_pool_rejects_bad_construction_and_double_free() -> None:
    with pytest.raises(KVPoolError, match="dtype"):
        KVPool(MODEL.config, 8, dtype="float64")
    with pytest.raises(KVPoolError, match="positive"):
        KVPool(MODEL.config, 0)
    pool = KVPool(MODEL.config, 8)
    ids = pool.alloc(3)
    pool.free(ids)
    with pytest.raises(KVPoolError, match="already free"):
        pool.free(ids[:1])
    with pytest.raises(KVPoolError, match="cannot allocate"):
        pool.alloc(9)
