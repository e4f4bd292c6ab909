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

from radixcheck.model import KVPool, load_default
from radixcheck.model.checks import check_chunked_equals_full, check_reuse_after_split

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

    from tests.test_model_radix import ServingMachine

    class FloatServing(ServingMachine):
        MODEL = FLOAT

    cfg = settings(deadline=None, max_examples=30, stateful_step_count=10, database=None, phases=[Phase.generate])
    with pytest.raises(AssertionError, match="reused"):
        run_state_machine_as_test(FloatServing, settings=cfg)


# ---- mutants: plausible model bugs the properties must catch ---------------------------------


class ChunkRelativeRope(type(EXACT)):
    """Bug: rotary positions counted from the start of the computed chunk, not of the sequence."""

    def rope(self, x, positions):
        return super().rope(x, positions - positions[0])


class UnroundedFreshKV(KVPool):
    """Bug: freshly computed K/V are attended to at full precision; only cached ones are rounded
    to the storage dtype (so a full prefill and a reused prefix see different keys)."""

    def write(self, layer, slots, k, v):
        super().write(layer, slots, k, v)
        self._fresh = (layer, np.asarray(slots), np.asarray(k, np.float64), np.asarray(v, np.float64))

    def read(self, layer, slots):
        k, v = super().read(layer, slots)
        fl, fs, fk, fv = getattr(self, "_fresh", (None, None, None, None))
        if fl == layer:
            where = {int(s): i for i, s in enumerate(fs)}
            for j, s in enumerate(slots):
                if int(s) in where:
                    k[j], v[j] = fk[where[int(s)]], fv[where[int(s)]]
        return k, v


def test_reuse_property_catches_chunk_relative_rope() -> None:
    mutant = ChunkRelativeRope(EXACT.config, EXACT.weights)
    with pytest.raises(AssertionError, match="logits"):
        _reuse_property(mutant)()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn"])
def test_reuse_property_catches_unrounded_fresh_kv(monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    """K/V are computed in float64, so even float32 storage rounds them: every dtype catches it."""
    from radixcheck.model import checks as model_checks

    monkeypatch.setattr(model_checks, "KVPool", UnroundedFreshKV)
    toks = np.random.default_rng(6).integers(0, VOCAB, 24)
    failures = 0
    for split in range(1, toks.size):
        try:
            check_reuse_after_split(EXACT, toks, split, dtype=dtype)
        except AssertionError:
            failures += 1
    assert failures > 0, f"{dtype} reuse property did not notice fresh K/V bypassing the storage rounding"
