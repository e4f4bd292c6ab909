"""Bugs planted into vllm_like.VllmLikeCache, one a class, each needing one layer to show.

Each class is a factory and carries the correct cache's capabilities. What each needs is in its docstring:
[tenant], [window], [abort], [collision], [duplicate], [scale].
"""

from __future__ import annotations

from typing import Any

import numpy as np
from vllm_like import VllmLikeCache, make

from radixcheck import Request


class SaltKeyedByStr(VllmLikeCache):
    """[tenant] The first block's extra keys are hashed as str(salt): 5 and "5" are one tenant."""

    def _key(self, parent: Any, page: tuple, namespace: Any) -> tuple:
        if parent is None:
            return (0, page, ("extra", str(namespace)))
        return (parent.bid, page)


class ExtraKeysConcatenated(VllmLikeCache):
    """[tenant] LoRA name and salt joined into one string: ("ab", "c") is ("a", "bc")."""

    def _key(self, parent: Any, page: tuple, namespace: Any) -> tuple:
        if parent is None:
            extra = "".join(map(str, namespace)) if isinstance(namespace, tuple) else namespace
            return (0, page, ("extra", extra))
        return (parent.bid, page)


class RequestPathDropsSalt(VllmLikeCache):
    """[tenant] The request path (match_req, publish) forgets req.namespace: every request is the base model's."""

    def match_req(self, req: Request) -> None:
        req.namespace = None
        super().match_req(req)


class WindowPinsLastBlockOnly(VllmLikeCache):
    """[window] A lock pins the window of the handle's last block only, not of every block of its last W tokens."""

    def _pinned(self, path: list) -> list:
        return path[-1:] if self.window_size else []


class MatchIgnoresWindow(VllmLikeCache):
    """[window] A hit is the full-attention group's alone: it ends where the window was freed."""

    def _resumable(self, path: list) -> int:
        return len(path)


class EvictLeaksWindow(VllmLikeCache):
    """[window] Evicting a block returns its KV slots but not its sliding-window slots."""

    def _drop(self, block: Any) -> None:
        block.window = np.full(self.page_size, -1, dtype=np.int64)
        super()._drop(block)


class AbortFreesCachedPrefix(VllmLikeCache):
    """[abort] An aborted (or preempted) request frees its whole row, the cached blocks it hit included."""

    def cache_finished_req(self, req: Request, insert: bool = True) -> None:
        if not insert:
            req.protected = 0
        super().cache_finished_req(req, insert)


class AbortKeepsLock(VllmLikeCache):
    """[abort] An aborted (or preempted) request frees its slots but never drops its ref counts."""

    def cache_finished_req(self, req: Request, insert: bool = True) -> None:
        if insert:
            return super().cache_finished_req(req, insert)
        handle = req.handle
        self.dec_lock_ref = lambda h: None  # type: ignore[method-assign]
        try:
            super().cache_finished_req(req, insert)
        finally:
            del self.dec_lock_ref
        req.handle = handle


class AbortLeaksWindow(VllmLikeCache):
    """[abort][window] An abort frees the request's KV but not its own sliding-window slots."""

    def cache_finished_req(self, req: Request, insert: bool = True) -> None:
        if not insert:
            req.window = np.full(len(req.window), -1, dtype=np.int64)
        super().cache_finished_req(req, insert)


class TokensHashedAsUint16(VllmLikeCache):
    """[collision] A block's tokens are hashed as uint16 bytes: token 65536 collides with token 0."""

    def _key(self, parent: Any, page: tuple, namespace: Any) -> tuple:
        packed = np.asarray(page, dtype=np.int64).astype(np.uint16).tobytes()
        if parent is None:
            return (0, packed, ("extra", namespace))
        return (parent.bid, packed)


class DuplicateBlockTakesNewSlots(VllmLikeCache):
    """[duplicate] A block computed again (a duplicate of a cached one) replaces the cached copy's slots,
    which are never freed, while the caller is told the prefix was cached and frees its own copy too."""

    def insert(self, tokens: Any, values: Any, window: Any = None, namespace: Any = None) -> int:
        vals = np.asarray(values, dtype=np.int64)
        path = self._walk(tokens, namespace)
        for i, block in enumerate(path):
            block.slots = vals[i * self.page_size:(i + 1) * self.page_size].copy()
        return super().insert(tokens, values, window, namespace)


class SizesScanEveryBlock(VllmLikeCache):
    """[scale] The sizes are recounted over every cached block at each call: right, and O(n)."""

    def protected_size(self) -> int:
        return sum(self.page_size for b in self.queue.values() if b.ref_cnt > 0)

    def evictable_size(self) -> int:
        return sum(self.page_size for b in self.queue.values() if b.ref_cnt == 0)

    def total_size(self) -> int:
        return sum(self.page_size for _ in self.queue.values())


class TouchWalksQueue(VllmLikeCache):
    """[scale] A touch looks each block up by scanning the free queue (a list, as a naive queue is): O(n) per block."""

    def _touch(self, path: list) -> None:
        order = list(self.queue)
        for block in reversed(path):
            order.index(block.bid)  # the naive queue's search
            self.queue.move_to_end(block.bid)


BUGS = [SaltKeyedByStr, ExtraKeysConcatenated, RequestPathDropsSalt, WindowPinsLastBlockOnly, MatchIgnoresWindow,
        EvictLeaksWindow, AbortFreesCachedPrefix, AbortKeepsLock, AbortLeaksWindow, TokensHashedAsUint16,
        DuplicateBlockTakesNewSlots, SizesScanEveryBlock, TouchWalksQueue]
for _cls in BUGS:  # each class is its own factory: cls(allocator, page_size, second_allocator=...)
    _cls.capabilities = make.capabilities


class SaltByStrAndEvictLeaksWindow(SaltKeyedByStr, EvictLeaksWindow):
    """Two bugs at once (tenant + window), to check that a waiver silences exactly its own finding."""


SaltByStrAndEvictLeaksWindow.capabilities = make.capabilities
