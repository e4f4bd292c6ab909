"""Stand-ins for the three ``minisgl`` names mini-sglang's radix cache imports.

Written for radixcheck (not mini-sglang code). The cache files (``python/minisgl/kvcache/
radix_cache.py`` at 20fcd7f, ``radix_manager.py`` at f074873) are imported from the user's
checkout unchanged (see :mod:`checkout`); importing the real ``minisgl`` package would pull in the
whole engine (models, attention backends, tvm-ffi JIT kernels, CUDA-only packages), so these go
into ``sys.modules`` first, as ``minisgl.core``, ``minisgl.utils`` and ``minisgl.kernel``:

* ``minisgl.kernel.fast_compare_key(x, y)``: mini-sglang's is a C++ kernel (``kernel/csrc/src/
  radix.cpp``, built at run time). It returns the index of the first position where two 1-D CPU
  int tensors differ (the common length if one is a prefix of the other), and raises
  ``RuntimeError`` unless both are 1-D, contiguous, on the CPU, int32 or int64, and of one dtype.
  This does the same in torch. The cache imports it inside a method, at call time, which is why
  the stand-ins stay in ``sys.modules``.
* ``minisgl.utils.align_down(a, b)``: ``a`` rounded down to a multiple of ``b``.
* ``minisgl.core.get_global_ctx()``: mini-sglang's returns the process-wide ``Context`` the engine
  sets once; ``RadixPrefixCache.__init__`` reads only its ``page_size``. This one returns a
  context whose ``page_size`` the caller sets with :func:`global_ctx` around the construction, so
  caches of different page sizes can be built in one process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from types import ModuleType, SimpleNamespace

import torch

_context: SimpleNamespace | None = None


def get_global_ctx() -> SimpleNamespace:
    if _context is None:
        raise RuntimeError("radixcheck's stand-in context is not set: build the cache inside global_ctx(page_size)")
    return _context


@contextmanager
def global_ctx(page_size: int) -> Iterator[SimpleNamespace]:
    """Within the block, ``get_global_ctx().page_size == page_size``."""
    global _context
    previous, _context = _context, SimpleNamespace(page_size=page_size)
    try:
        yield _context
    finally:
        _context = previous


def align_down(a: int, b: int) -> int:
    return a - a % b


def _cpu_int_vector(t: torch.Tensor) -> bool:
    return t.dim() == 1 and t.is_contiguous() and t.device.type == "cpu" and t.dtype in (torch.int32, torch.int64)


def fast_compare_key(x: torch.Tensor, y: torch.Tensor) -> int:
    """Index of the first position where ``x`` and ``y`` differ, over their common length."""
    if not (_cpu_int_vector(x) and _cpu_int_vector(y)):
        raise RuntimeError("fast_compare_key takes two 1-D contiguous CPU int32/int64 tensors")
    if x.dtype != y.dtype:
        raise RuntimeError(f"fast_compare_key: dtypes differ ({x.dtype} vs {y.dtype})")
    common = min(len(x), len(y))
    differ = torch.nonzero(x[:common] != y[:common])
    return int(differ[0, 0]) if len(differ) else common


@cache
def stand_in_modules() -> dict[str, ModuleType]:
    """``minisgl`` and the three submodules the cache imports, holding only the names above (made once)."""
    modules = {name: ModuleType(name, "radixcheck's stand-in (properties/adapters/_minisgl_stubs.py)")
               for name in ("minisgl", "minisgl.core", "minisgl.utils", "minisgl.kernel")}
    modules["minisgl"].__path__ = []  # a package, with nothing to find on disk
    modules["minisgl.core"].get_global_ctx = get_global_ctx
    modules["minisgl.utils"].align_down = align_down
    modules["minisgl.kernel"].fast_compare_key = fast_compare_key
    for sub in ("core", "utils", "kernel"):
        setattr(modules["minisgl"], sub, modules[f"minisgl.{sub}"])
    return modules
