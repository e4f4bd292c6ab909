"""Q8_0 byte-compatibility with GGUF, and GGUF loading: round trip, truncated, corrupted and
unsupported files (no download needed: the synthetic model is written to a temporary GGUF)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from radixcheck.model import KVPool, load_default
from radixcheck.model.checks import assert_bit_identical
from radixcheck.model.gguf_io import GGUFError, UnsupportedArchitecture, read_gguf, write_gguf
from radixcheck.model.llama import Model
from radixcheck.model.q8 import Q8Matrix, dequantize, from_gguf_bytes, quantize, round_half_away_from_zero, to_gguf_bytes

gguf = pytest.importorskip("gguf")

MODEL = load_default()


def test_rounding_is_half_away_from_zero() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 126.5], dtype=np.float32)
    assert round_half_away_from_zero(x).tolist() == [1, 2, 3, -1, -2, -3, 0, 127]


finite32 = st.floats(-1e4, 1e4, width=32, allow_subnormal=False)
# A GGUF stores a Q8_0 block's scale (its largest magnitude / 127) as float16, whose smallest positive
# value is 2**-24: a non-zero block below 127 * 2**-24 has no GGUF form (its scale is stored as 0, and
# far enough below, 1 / scale overflows float32 in gguf-py's quantiser and ours: RuntimeWarnings, and
# casts of infinities to int8 whose result NumPy does not define).
SMALLEST_STORABLE_MAX = 127 * 2.0**-24


def _storable(x: np.ndarray) -> np.ndarray:
    """``x`` with every block that a GGUF cannot hold (0 < max |block| < SMALLEST_STORABLE_MAX) set to zeros."""
    blocks = x.reshape(x.shape[0], -1, 32)
    amax = np.abs(blocks).max(axis=2, keepdims=True)
    return np.where((amax > 0) & (amax < SMALLEST_STORABLE_MAX), np.float32(0), blocks).reshape(x.shape)


@settings(deadline=None, max_examples=60)
@given(x=arrays(np.float32, st.tuples(st.integers(1, 4), st.sampled_from([32, 64, 96])), elements=finite32).map(_storable))
def test_q8_0_quantize_is_byte_identical_to_gguf_py(x: np.ndarray) -> None:
    ours = to_gguf_bytes(quantize(x))
    theirs = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
    assert np.array_equal(ours, theirs)
    back = from_gguf_bytes(ours, *x.shape)
    assert np.array_equal(dequantize(back), gguf.quants.dequantize(theirs, gguf.GGMLQuantizationType.Q8_0))


def test_q8_matrix_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize(np.zeros((2, 33), np.float32))
    with pytest.raises(ValueError, match="shape mismatch"):
        Q8Matrix(np.zeros((2, 32), np.int8), np.zeros((2, 2), np.float16))


@pytest.fixture(scope="module")
def synthetic_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "synthetic.Q8_0.gguf"
    write_gguf(path, MODEL.config, MODEL.weights)
    return path


def test_gguf_round_trip_gives_the_same_model(synthetic_gguf: Path) -> None:
    config, weights, _ = read_gguf(synthetic_gguf)
    assert config == MODEL.config
    loaded = Model(config, weights)
    toks = np.arange(0, 300, 7)
    want = MODEL.prefill(KVPool(MODEL.config, 64), toks, np.arange(toks.size))
    got = loaded.prefill(KVPool(config, 64), toks, np.arange(toks.size))
    assert_bit_identical(got, want, "logits after a GGUF round trip")


def test_tied_embeddings_round_trip(tmp_path: Path) -> None:
    tied = load_default(tied=True)
    write_gguf(tmp_path / "tied.gguf", tied.config, tied.weights)
    _, weights, _ = read_gguf(tmp_path / "tied.gguf")
    assert weights.output is None


@pytest.mark.parametrize("fraction", [0.001, 0.01, 0.3, 0.9, 0.99999])
def test_truncated_gguf_is_rejected(synthetic_gguf: Path, tmp_path: Path, fraction: float) -> None:
    data = synthetic_gguf.read_bytes()
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(data[: max(4, int(len(data) * fraction))])
    with pytest.raises(GGUFError, match=r"truncated|corrupt|missing"):
        read_gguf(bad)


def test_not_a_gguf_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(GGUFError, match="not a GGUF file"):
        read_gguf(bad)
    with pytest.raises(GGUFError, match="not found"):
        read_gguf(tmp_path / "missing.gguf")


def test_corrupted_metadata_is_rejected(synthetic_gguf: Path, tmp_path: Path) -> None:
    data = bytearray(synthetic_gguf.read_bytes())
    data[4:8] = (999).to_bytes(4, "little")  # an unknown GGUF version
    bad = tmp_path / "corrupt.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(GGUFError, match="corrupt"):
        read_gguf(bad)


def test_corrupted_tensor_count_is_rejected(synthetic_gguf: Path, tmp_path: Path) -> None:
    data = bytearray(synthetic_gguf.read_bytes())
    data[8:16] = (10**12).to_bytes(8, "little")  # absurd tensor count
    bad = tmp_path / "corrupt2.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(GGUFError):
        read_gguf(bad)


def test_unsupported_architecture_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "gpt2.gguf"
    write_gguf(path, MODEL.config, MODEL.weights, architecture="gpt2")
    with pytest.raises(UnsupportedArchitecture, match="'gpt2'"):
        read_gguf(path)


def test_missing_tensor_is_rejected(tmp_path: Path) -> None:
    cfg = dataclasses.replace(MODEL.config, n_layers=MODEL.config.n_layers + 1)
    path = tmp_path / "short.gguf"
    write_gguf(path, cfg, MODEL.weights)  # claims one more layer than it holds
    with pytest.raises(GGUFError, match=r"blk\.3\..*missing"):
        read_gguf(path)
