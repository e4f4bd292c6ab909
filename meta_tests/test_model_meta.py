"""Tests of the suite itself: the model's bit-identity properties must catch an ordinary model.

A plain-float-BLAS variant of the same model (``load_default(arithmetic="float")``: float32 GEMMs
and NumPy reductions) is what most people would write. exactness.md measured that it is not
shape-stable; these tests show the very checks the properties run reject it, while the exact
model passes them on the same inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from model import load_default
from model.checks import check_chunked_equals_full, check_reuse_after_split

EXACT = load_default()
FLOAT = load_default(arithmetic="float")
VOCAB = EXACT.config.vocab_size


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread_by_default():
    with threadpool_limits(limits=1):
        yield


def _reuse_property(model):
    """The reuse-after-split property of properties/test_model_reuse.py, bound to ``model``."""

    @settings(deadline=None, max_examples=60, database=None, phases=[Phase.explicit, Phase.generate])
    @given(toks=st.lists(st.integers(0, VOCAB - 1), min_size=2, max_size=48), data=st.data())
    def prop(toks: list[int], data: st.DataObject) -> None:
        split = data.draw(st.integers(1, len(toks) - 1), label="split")
        check_reuse_after_split(model, toks, split)

    return prop


def test_reuse_property_rejects_the_float_blas_model() -> None:
    with pytest.raises(AssertionError, match="logits"):
        _reuse_property(FLOAT)()


def test_reuse_property_accepts_the_exact_model() -> None:
    _reuse_property(EXACT)()


def test_float_model_differs_at_most_split_points() -> None:
    toks = np.random.default_rng(3).integers(0, VOCAB, 32)
    failures = 0
    for split in range(1, toks.size):
        try:
            check_reuse_after_split(FLOAT, toks, split)
        except AssertionError:
            failures += 1
    assert failures > 0, "the float model happened to be shape-stable here; the properties would not catch it"


def test_chunked_property_rejects_the_float_blas_model() -> None:
    toks = np.random.default_rng(4).integers(0, VOCAB, 30)
    with pytest.raises(AssertionError, match="chunked prefill"):
        for chunk in (1, 3, 7):
            check_chunked_equals_full(FLOAT, toks, chunk)


def test_serving_state_machine_rejects_the_float_blas_model() -> None:
    from hypothesis.stateful import run_state_machine_as_test

    from properties.test_model_radix import ServingMachine

    class FloatServing(ServingMachine):
        MODEL = FLOAT

    cfg = settings(deadline=None, max_examples=30, stateful_step_count=10, database=None, phases=[Phase.generate])
    with pytest.raises(AssertionError, match="reused"):
        run_state_machine_as_test(FloatServing, settings=cfg)
