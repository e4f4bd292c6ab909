"""radixcheck's stand-ins for the three minisgl names ``radix_cache.py`` imports.

Not mini-sglang code (written for radixcheck; see ORIGIN.md). Each keeps the behaviour the
cache relies on:

* ``fast_compare_key(x, y)``: mini-sglang's is a C++ kernel (``python/minisgl/kernel/csrc/src/
  radix.cpp``, built at run time through tvm-ffi's ``load_aot``). It returns the index of the
  first position where two 1-D CPU int tensors differ (``std::mismatch`` over the common length,
  so the common length if one is a prefix of the other), and raises ``RuntimeError`` unless
  both are 1-D, contiguous, on the CPU, int32 or int64, and of the same dtype. This does the
  same in torch.
* ``align_down(a, b)``: copied verbatim from ``python/minisgl/utils/misc.py``.
* ``get_global_ctx()``: mini-sglang's returns the process-wide ``Context`` (set once by the
  engine); ``RadixPrefixCache.__init__`` reads only its ``page_size``. Here it returns a context
  whose ``page_size`` the caller sets with :func:`global_ctx` around the construction, so caches of
  different page sizes can be built in one process (the value is read only in ``__init__``).
"""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import torch

_GLOBAL_CTX: SimpleNamespace | None = None


def get_global_ctx() -> SimpleNamespace:
    assert _GLOBAL_CTX is not None, "Global context is not set"
    return _GLOBAL_CTX


@contextmanager
def global_ctx(page_size: int):
    """Make ``get_global_ctx().page_size == page_size`` inside the block."""
    global _GLOBAL_CTX
    previous, _GLOBAL_CTX = _GLOBAL_CTX, SimpleNamespace(page_size=page_size)
    try:
        yield _GLOBAL_CTX
    finally:
        _GLOBAL_CTX = previous


def align_down(a: int, b: int) -> int:
    """Aligns a to the previous multiple of b"""
    return (a // b) * b


def _is_1d_cpu_int_tensor(t: torch.Tensor) -> bool:
    return t.dim() == 1 and t.is_contiguous() and t.device.type == "cpu" and t.dtype in (torch.int32, torch.int64)


def fast_compare_key(x: torch.Tensor, y: torch.Tensor) -> int:
    # compare 2 1-D int cpu tensors for equality (position of the first difference)
    if not (_is_1d_cpu_int_tensor(x) and _is_1d_cpu_int_tensor(y)):
        raise RuntimeError("Both tensors must be 1D CPU int tensors.")
    if x.dtype != y.dtype:
        raise RuntimeError("Check failed: a.dtype() == b.dtype()")
    n = min(len(x), len(y))
    diff = torch.nonzero(x[:n] != y[:n])
    return int(diff[0, 0]) if len(diff) else n
