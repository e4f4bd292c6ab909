"""KV primitives on a per-sequence view: clone independence, truncate, evict-span == never-saw.

Also pins down exactly where the seed's cheap "re-rotation" eviction (``evict_span_relabel``)
is exact — tail spans, and any span of a 1-layer model — and where it is not: a middle span of a
model with more than one layer.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from radixcheck.model import DEFAULT_CONFIG, KVPool, load_default
from radixcheck.model.checks import assert_bit_identical, describe_difference
from radixcheck.model.sequence import Sequence

MODEL = load_default()
ONE_LAYER = load_default(config=dataclasses.replace(DEFAULT_CONFIG, n_layers=1, name="synthetic-1-layer"))
VOCAB = MODEL.config.vocab_size


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread_by_default():
    with threadpool_limits(limits=1):
        yield


tokens_st = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=40)


def fresh(model, tokens, num_slots: int = 256) -> Sequence:
    s = Sequence(model, KVPool(model.config, num_slots))
    s.extend(tokens)
    return s


def assert_same_cache(got: Sequence, want: Sequence, what: str) -> None:
    assert list(got.tokens) == list(want.tokens), f"{what}: tokens differ"
    (k1, v1), (k2, v2) = got.kv(), want.kv()
    assert_bit_identical(k1.astype(np.float32), k2.astype(np.float32), f"{what}: K")
    assert_bit_identical(v1.astype(np.float32), v2.astype(np.float32), f"{what}: V")


@st.composite
def tokens_and_span(draw: st.DrawFn, min_len: int = 1) -> tuple[list[int], int, int]:
    toks = draw(st.lists(st.integers(0, VOCAB - 1), min_size=min_len, max_size=40))
    a = draw(st.integers(0, len(toks)))
    b = draw(st.integers(a, len(toks)))
    return toks, a, b


@settings(deadline=None)
@given(case=tokens_and_span(), probe=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6))
def test_evict_span_equals_never_saw(case: tuple[list[int], int, int], probe: list[int]) -> None:
    toks, a, b = case
    seq = fresh(MODEL, toks)
    seq.evict_span(a, b)
    never = fresh(MODEL, toks[:a] + toks[b:])
    assert_same_cache(seq, never, f"evict_span({a}, {b})")
    assert_bit_identical(seq.extend(probe), never.extend(probe), f"logits after evict_span({a}, {b})")


@settings(deadline=None)
@given(toks=tokens_st, data=st.data())
def test_truncate_equals_never_saw_the_tail(toks: list[int], data: st.DataObject) -> None:
    n = data.draw(st.integers(0, len(toks)), label="n")
    seq = fresh(MODEL, toks)
    free_before = seq.pool.available()
    seq.truncate(n)
    assert seq.pool.available() == free_before + len(toks) - n
    assert_same_cache(seq, fresh(MODEL, toks[:n]), f"truncate({n})")


@settings(deadline=None, max_examples=max(10, settings.default.max_examples // 2))  # 6 prefills per example
@given(toks=tokens_st, more_a=tokens_st, more_b=tokens_st)
def test_clone_is_independent(toks: list[int], more_a: list[int], more_b: list[int]) -> None:
    a = fresh(MODEL, toks)
    b = a.clone()
    assert set(a.slots).isdisjoint(b.slots)
    la = a.extend(more_a)
    a.truncate(len(toks) // 2)  # mutating the original must not touch the clone
    lb = b.extend(more_b)
    assert_bit_identical(lb, fresh(MODEL, toks).extend(more_b), "clone's logits after the original changed")
    assert_same_cache(b, fresh(MODEL, toks + more_b), "clone's cache")
    assert_bit_identical(la, fresh(MODEL, toks).extend(more_a), "original's logits")


@settings(deadline=None)
@given(case=tokens_and_span())
def test_relabel_eviction_of_a_tail_span_is_exact(case: tuple[list[int], int, int]) -> None:
    toks, a, _ = case
    seq = fresh(MODEL, toks)
    seq.evict_span_relabel(a, len(toks))
    assert_same_cache(seq, fresh(MODEL, toks[:a]), f"relabel-evict of tail [{a}, {len(toks)})")


@settings(deadline=None)
@given(case=tokens_and_span(), probe=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=4))
def test_relabel_eviction_is_exact_in_a_one_layer_model(case: tuple[list[int], int, int], probe: list[int]) -> None:
    toks, a, b = case
    seq = fresh(ONE_LAYER, toks)
    seq.evict_span_relabel(a, b)
    never = fresh(ONE_LAYER, toks[:a] + toks[b:])
    assert_same_cache(seq, never, f"1-layer relabel-evict [{a}, {b})")
    assert_bit_identical(seq.extend(probe), never.extend(probe), "1-layer logits after relabel-evict")


def test_relabel_eviction_of_a_middle_span_is_not_exact_with_two_or_more_layers() -> None:
    """Every middle span of this prompt leaks: layer >= 1 K/V after the span attended to it."""
    toks = list(np.random.default_rng(5).integers(0, VOCAB, 24))
    for a, b in [(0, 1), (3, 9), (10, 11), (5, 23)]:
        seq = fresh(MODEL, toks)
        seq.evict_span_relabel(a, b)
        never = fresh(MODEL, toks[:a] + toks[b:])
        (k1, _), (k2, _) = seq.kv(), never.kv()
        # layer 0 is untouched (it depends on token and position only) ...
        assert_bit_identical(k1[0], k2[0], "layer-0 K after relabel-evict")
        # ... but deeper layers of every token after the span differ
        assert not np.array_equal(k1[1:, a:], k2[1:, a:]), f"span [{a}, {b}) did not leak"
        print(describe_difference(k1[1:, a:].astype(np.float32), k2[1:, a:].astype(np.float32), f"[{a},{b})"))


def test_evict_span_validates_bounds() -> None:
    seq = fresh(MODEL, [1, 2, 3])
    with pytest.raises(ValueError, match="span"):
        seq.evict_span(2, 5)
    with pytest.raises(ValueError, match="span"):
        seq.evict_span(2, 1)
    assert list(seq.tokens) == [1, 2, 3]
