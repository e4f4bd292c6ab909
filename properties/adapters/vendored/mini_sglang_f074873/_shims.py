"""radixcheck's stand-in for the one minisgl name ``radix_manager.py`` imports.

Not mini-sglang code (written for radixcheck; see ORIGIN.md).

* ``fast_compare_key(x, y)``: mini-sglang's is a C++ kernel (``python/minisgl/kernel/csrc/src/
  radix.cpp``, identical at f074873 and at 20fcd7f, built at run time through tvm-ffi's
  ``load_aot``). It returns the index of the first position where two 1-D CPU int tensors
  differ (``std::mismatch`` over the common length, so the common length if one is a prefix of
  the other), and raises ``RuntimeError`` unless both are 1-D, contiguous, on the CPU, int32 or
  int64, and of the same dtype. This does the same in torch.
"""

from __future__ import annotations

import torch


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
