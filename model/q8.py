"""Q8_0 weight blocks, byte-compatible with llama.cpp / GGUF.

A Q8_0 row of length K (a multiple of 32) is stored as K/32 blocks. Each block holds one float16
scale ``d`` and 32 signed 8-bit integers ``q``; the block's values are ``q * d``. Quantisation
follows llama.cpp's reference ``quantize_row_q8_0_ref``:

    amax = max |x| over the block       (float32)
    d    = amax / 127                    (float32; stored rounded to float16)
    q    = roundf(x * (1/d))             (float32 product, rounded half away from zero)

Note that ``q`` is computed with the float32 ``d`` and only the stored scale is rounded to float16,
exactly as llama.cpp does. ``to_gguf_bytes`` / ``from_gguf_bytes`` convert to and from the raw
34-byte block layout (2-byte little-endian float16 scale, then 32 int8 values).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCK = 32
BLOCK_BYTES = 2 + BLOCK


def round_half_away_from_zero(x: np.ndarray) -> np.ndarray:
    """C ``roundf`` semantics, element-wise: 0.5 -> 1, -0.5 -> -1, 2.5 -> 3, 0.49999997 -> 0.

    (``floor(|x| + 0.5)`` would be wrong for the float just below 0.5: the addition rounds up.
    ``|x| - floor(|x|)`` is exact, so comparing it with 0.5 is not.)
    """
    a = np.abs(x)
    f = np.floor(a)
    return np.sign(x) * (f + (a - f >= 0.5))


@dataclass(frozen=True)
class Q8Matrix:
    """A matrix of shape ``(rows, cols)`` in Q8_0 format.

    ``qs``: int8 array ``(rows, cols)``; ``scales``: float16 array ``(rows, cols // 32)``.
    Row ``r`` of the matrix (a weight's output row; GGUF lists shapes input-first) has value
    ``qs[r, 32*b:32*b+32] * scales[r, b]`` in block ``b``.
    """

    qs: np.ndarray
    scales: np.ndarray

    def __post_init__(self) -> None:
        if self.qs.dtype != np.int8 or self.scales.dtype != np.float16:
            raise TypeError("Q8Matrix needs int8 qs and float16 scales")
        rows, cols = self.qs.shape
        if cols % BLOCK or self.scales.shape != (rows, cols // BLOCK):
            raise ValueError(f"Q8Matrix shape mismatch: qs {self.qs.shape}, scales {self.scales.shape}")

    @property
    def shape(self) -> tuple[int, int]:
        return self.qs.shape  # type: ignore[return-value]


def quantize(x: np.ndarray) -> Q8Matrix:
    """Quantise a float matrix ``(rows, cols)`` (cols a multiple of 32) to Q8_0."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[1] % BLOCK:
        raise ValueError(f"Q8_0 needs a 2-D array whose last dimension is a multiple of {BLOCK}, got {x.shape}")
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // BLOCK, BLOCK)
    d = np.abs(blocks).max(axis=2, keepdims=True) / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    q = round_half_away_from_zero(blocks * inv)
    return Q8Matrix(q.astype(np.int8).reshape(rows, cols), d[..., 0].astype(np.float16))


def dequantize(m: Q8Matrix) -> np.ndarray:
    """The exact float32 values of a Q8_0 matrix (int8 x float16 is exact in float32)."""
    rows, cols = m.shape
    blocks = m.qs.reshape(rows, cols // BLOCK, BLOCK).astype(np.float32)
    return (blocks * m.scales.astype(np.float32)[..., None]).reshape(rows, cols)


def to_gguf_bytes(m: Q8Matrix) -> np.ndarray:
    """Raw GGUF Q8_0 blocks as uint8 ``(rows, cols // 32 * 34)``."""
    rows, cols = m.shape
    nb = cols // BLOCK
    d = m.scales.astype("<f2").reshape(rows, nb, 1).view(np.uint8)
    q = m.qs.reshape(rows, nb, BLOCK).view(np.uint8)
    return np.concatenate([d, q], axis=2).reshape(rows, nb * BLOCK_BYTES)


def from_gguf_bytes(raw: np.ndarray, rows: int, cols: int) -> Q8Matrix:
    """Parse raw GGUF Q8_0 bytes (any shape holding rows*cols/32*34 bytes) into a Q8Matrix."""
    if cols % BLOCK:
        raise ValueError(f"Q8_0 row length {cols} is not a multiple of {BLOCK}")
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    nb = cols // BLOCK
    if raw.size != rows * nb * BLOCK_BYTES:
        raise ValueError(f"Q8_0 data has {raw.size} bytes, expected {rows * nb * BLOCK_BYTES} for {rows}x{cols}")
    blocks = raw.reshape(rows, nb, BLOCK_BYTES)
    scales = np.ascontiguousarray(blocks[:, :, :2]).view("<f2").reshape(rows, nb).astype(np.float16)
    qs = np.ascontiguousarray(blocks[:, :, 2:]).view(np.int8).reshape(rows, cols)
    return Q8Matrix(qs, scales)
