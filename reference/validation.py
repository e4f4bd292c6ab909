"""Input checks shared by the reference cache's public methods.

Every check runs before the cache changes anything, so bad input leaves the cache as it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_count(x: Any, name: str, minimum: int) -> int:
    """A Python/NumPy integer >= ``minimum`` (bools and floats are refused)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(x).__name__} {x!r}")
    if x < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {x}")
    return int(x)


def as_tokens(tokens: Any, name: str) -> tuple[int, ...]:
    """A 1-D sequence of non-negative integer token ids, returned as a tuple of ints."""
    if isinstance(tokens, np.ndarray):
        if tokens.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got an array of shape {tokens.shape}")
        if tokens.size and not np.issubdtype(tokens.dtype, np.integer):
            raise TypeError(f"{name} must hold integer token ids, got dtype {tokens.dtype}")
        items = tokens.tolist()
    elif isinstance(tokens, (list, tuple, range)):
        items = list(tokens)
        for t in items:
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
                raise TypeError(f"{name} must hold integer token ids, got {type(t).__name__} {t!r}")
    else:
        raise TypeError(f"{name} must be a list, tuple or 1-D integer array, got {type(tokens).__name__}")
    negative = [t for t in items if t < 0]
    if negative:
        raise ValueError(f"{name} holds negative token id {negative[0]}")
    return tuple(int(t) for t in items)


def as_values(values: Any, length: int) -> np.ndarray:
    """A 1-D integer array of ``length`` non-negative slot ids, as int64."""
    if not isinstance(values, np.ndarray):
        raise TypeError(f"values must be a 1-D integer ndarray, got {type(values).__name__}")
    if values.ndim != 1 or len(values) != length:
        raise ValueError(f"values must have shape ({length},) to match tokens, got {values.shape}")
    if length and not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"values must be integer slot ids, got dtype {values.dtype}")
    if length and values.min() < 0:
        raise ValueError(f"values holds negative slot id {int(values.min())}")
    return values.astype(np.int64)
