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
        if tokens.size and tokens.min() < 0:
            raise ValueError(f"{name} holds negative token id {int(tokens.min())}")
        return tuple(tokens.tolist())
    if not isinstance(tokens, (list, tuple, range)):
        raise TypeError(f"{name} must be a list, tuple or 1-D integer array, got {type(tokens).__name__}")
    if all(type(t) is int for t in tokens):  # the common case in one pass (a 3,000-page history is matched 3,000 times)
        items = tuple(tokens)
    else:  # find what is wrong, else convert NumPy integers
        for t in tokens:
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
                raise TypeError(f"{name} must hold integer token ids, got {type(t).__name__} {t!r}")
        items = tuple(int(t) for t in tokens)
    if items and min(items) < 0:
        raise ValueError(f"{name} holds negative token id {min(items)}")
    return items


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


def as_namespace(namespace: Any) -> Any:
    """A namespace (the contract's "Namespaces"): any hashable value, used as it is. An unhashable
    one (a list, a dict, a tuple holding one) is refused before anything changes."""
    try:
        hash(namespace)
    except TypeError as exc:
        raise TypeError(f"namespace must be hashable (a str, an int, None or a tuple of those), "
                        f"got {type(namespace).__name__} {namespace!r}: {exc}") from None
    return namespace


def as_priority(priority: Any) -> int:
    """A request's priority (``priority=`` of ``match_prefix`` and ``insert``): an int, any sign."""
    if isinstance(priority, bool) or not isinstance(priority, (int, np.integer)):
        raise TypeError(f"priority must be an int, got {type(priority).__name__} {priority!r}")
    return int(priority)
