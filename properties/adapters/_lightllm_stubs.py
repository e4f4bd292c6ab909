"""Stand-ins for the two heavy imports of LightLLM's ``radix_cache.py`` (vendored, unchanged
apart from its imports, in ``vendored/lightllm_fc72ffa/``).

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

Neither stand-in touches the tree logic: ``radix_cache.py`` is otherwise verbatim.
"""

from __future__ import annotations

import numpy as np


class SharedArray:
    """``SharedArray(name, shape, dtype)`` with ``.arr`` in private memory (see the module doc)."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype) -> None:
        self.name = name
        self.arr = np.zeros(shape, dtype=dtype)


class MemoryManager:
    """Only a type annotation in ``radix_cache.py``; never instantiated by the adapter."""
