"""The request lifecycle of the reference cache (the contract's "The request lifecycle").

Each step is a sequence of the tree's own calls, as an engine's cache runs it (SGLang's
``checkpoint`` + ``release_kv_cache``, mini-sglang's ``cache_req``): nothing here touches a node.
The request (:class:`~radixcheck.properties.cache.contract.Request`) is the caller's; the cache
reads it, frees into the suite's allocator what it must, and updates the request's row, its
protected length and its handle.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class RequestSteps:
    """``match_req``, ``lock_req``, ``cache_unfinished_req`` and ``cache_finished_req`` over
    ``match_prefix``, ``insert``, ``inc_lock_ref``, ``dec_lock_ref`` and ``allocator.free`` (a
    mixin of :class:`~radixcheck.reference.radix_cache.RadixCache`, which has them)."""

    page_size: int
    allocator: Any
    match_prefix: Any
    insert: Any
    inc_lock_ref: Any
    dec_lock_ref: Any

    def match_req(self, req: Any) -> None:
        """Admission's match: the request's row starts with the cached prefix; no lock yet."""
        values, handle = self.match_prefix(req.tokens, namespace=req.namespace, priority=req.priority)
        req.slots = np.array(values, dtype=np.int64)
        req.filled = req.protected = len(values)
        req.handle = handle

    def lock_req(self, req: Any) -> None:
        """The admission succeeded: lock the matched prefix for the request."""
        self.inc_lock_ref(req.handle)

    def cache_unfinished_req(self, req: Any) -> None:
        """Publish every whole page computed so far; the request then reads the tree's copy and
        its lock moves to the node the publish ended on."""
        aligned = self._insert_req(req)
        values, handle = self.match_prefix(req.tokens[:aligned], namespace=req.namespace, priority=req.priority)
        req.slots[: len(values)] = values  # the duplicates just freed are never read again
        self.inc_lock_ref(handle)
        self.dec_lock_ref(req.handle)
        req.handle, req.protected = handle, len(values)

    def cache_finished_req(self, req: Any, insert: bool = True) -> None:
        """End the request: with ``insert``, cache what it computed (its duplicates and unaligned
        tail freed); without (retract, abort, a skipped insert), free every slot of its own."""
        end = self._insert_req(req) if insert else req.protected
        self._free_slots(req.slots[end : req.filled])
        self.dec_lock_ref(req.handle)
        req.handle = None

    def _insert_req(self, req: Any) -> int:
        """Insert ``req.tokens[:req.filled]`` with the request's row and free the slots of it the
        tree already had, behind the request's protected prefix; returns the page-aligned length."""
        prefix_len = self.insert(req.tokens[: req.filled], req.slots[: req.filled], namespace=req.namespace, priority=req.priority)
        self._free_slots(req.slots[req.protected : prefix_len])
        return req.filled // self.page_size * self.page_size

    def _free_slots(self, slots: np.ndarray) -> None:
        if len(slots):
            self.allocator.free(slots)

