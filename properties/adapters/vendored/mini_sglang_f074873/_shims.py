"""radixcheck's stand-in for the one minisgl name ``radix_manager.py`` imports.

Not mini-sglang code (written for radixcheck; see ORIGIN.md). ``fast_compare_key`` stands for
mini-sglang's C++ kernel ``python/minisgl/kernel/csrc/src/radix.cpp``, which is identical at
f074873 and at 20fcd7f, so both copies use the one stand-in, documented in
``mini_sglang_20fcd7f/_shims.py``.
"""

from radixcheck.properties.adapters.vendored.mini_sglang_20fcd7f._shims import fast_compare_key

__all__ = ["fast_compare_key"]
