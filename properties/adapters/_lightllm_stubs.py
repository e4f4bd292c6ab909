"""Stand-ins for the two heavy imports of LightLLM's ``radix_cache.py``, which radixcheck imports
unchanged from the user's checkout (``RADIXCHECK_LIGHTLLM_SRC``, see :mod:`checkout`). Written
for radixcheck, not LightLLM code; :func:`stand_in_modules` and :func:`shared_arr_module` make the
modules that are in ``sys.modules`` while the file is imported (the ``lightllm.*`` names only for
that import, so the registry release can be imported in the same process).

LightLLM's module imports, besides torch, numpy and sortedcontainers:

``from .shared_arr import SharedArray``
    ``lightllm/server/router/dynamic_prompt/shared_arr.py``: a numpy array placed in a POSIX
    shared-memory segment (``multiprocessing.shared_memory``) named after the server, so that
    the router process can read the tree's two counters (``refed_tokens_num``,
    ``tree_total_tokens_num``) while the inference process writes them. It also imports
    ``lightllm.utils.log_utils`` (logging setup) to log "create shm"/"link shm".
    The tree only ever reads and writes ``.arr[0]`` of it. :class:`SharedArray` below is the
    same array in private memory: ``.arr`` is an ``np.ndarray`` of the requested shape and
    dtype, zero-filled like a fresh segment, so every read and write the tree makes behaves
    identically. What is dropped: cross-process visibility, the log lines, and the real class's
    habit of *linking to an existing segment of the same name* (two caches built with the same
    ``unique_name`` and rank would share their counters; the suite builds thousands of caches,
    which would also leak as many segments in ``/dev/shm``).

``from lightllm.common.mem_manager import MemoryManager``
    The GPU KV pool (it imports CUDA kernels, torch.distributed, NCCL). The tree uses the name
    only as a type annotation and, through ``self.mem_manager``, in
    ``free_radix_cache_to_get_enough_token`` and ``assert_leafs_is_right``, which the adapter
    does not call (it calls ``evict(need, callback)`` itself and frees into the suite's slot
    pool). :class:`MemoryManager` below is an empty class for the annotation; the cache is
    built with ``mem_manager=None``, as LightLLM's own unit tests build it.

Neither stand-in touches the tree logic, and ``radix_cache.py`` itself is not edited.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType

import numpy as np


class SharedArray:
    """``SharedArray(name, shape, dtype)`` with ``.arr`` in private memory (see the module doc)."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype) -> None:
        self.name = name
        self.arr = np.zeros(shape, dtype=dtype)


class MemoryManager:
    """Only a type annotation in ``radix_cache.py``; never instantiated by the adapter."""


_DOC = "radixcheck's stand-in (properties/adapters/_lightllm_stubs.py)"


@cache
def shared_arr_module() -> ModuleType:
    """The module ``from .shared_arr import SharedArray`` finds (a sibling of ``radix_cache``)."""
    module = ModuleType("shared_arr", _DOC)
    module.SharedArray = SharedArray
    return module


@cache
def stand_in_modules() -> dict[str, ModuleType]:
    """``lightllm``, ``lightllm.common`` and ``lightllm.common.mem_manager`` (holding
    :class:`MemoryManager`), for ``from lightllm.common.mem_manager import MemoryManager``."""
    modules = {name: ModuleType(name, _DOC) for name in ("lightllm", "lightllm.common", "lightllm.common.mem_manager")}
    modules["lightllm"].__path__ = []  # packages, with nothing to find on disk
    modules["lightllm.common"].__path__ = []
    modules["lightllm"].common = modules["lightllm.common"]
    modules["lightllm.common"].mem_manager = modules["lightllm.common.mem_manager"]
    modules["lightllm.common.mem_manager"].MemoryManager = MemoryManager
    return modules
