"""A home-grown prefix KV cache shaped like vLLM's v1 KV cache manager.

What it keeps from vLLM (``vllm/v1/core``):

* block-hash prefix caching: a block is one page of ``page_size`` tokens, found by a chained key
  (the parent block's id, its tokens, and the request's extra keys on the first block only, as
  vLLM puts ``cache_salt``/LoRA into the first block's hash); a parent always outlives its children;
* a free-block queue: every cached block in LRU order (``OrderedDict``); eviction pops the coldest
  block nobody holds (ref count 0); a path is touched leaf first, so a child goes before its parent;
* reference counts held by running requests (``inc_lock_ref`` = a request holds the blocks);
* hybrid groups: a full-attention group (the KV slots) and a sliding-window group (one window slot
  per token, ``-1`` once freed: vLLM's null block) whose hit must keep the last ``window`` tokens;
* the request lifecycle: allocate (``match_req``/``lock_req``), publish full blocks
  (``cache_unfinished_req``), free on finish or abort (``cache_finished_req``);
* it trusts its callers: no lock checks, no input validation (declared).

Where it differs from vLLM, on purpose: a lookup is a use and a release is not (the contract's
LRU; vLLM stamps recency when a request frees its blocks), and the suite owns the slot pools.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any

import numpy as np

from radixcheck import Capabilities, Request, SlidingWindow

WINDOW = 4
_ROOT_ID = 0
_ids = itertools.count(1)  # block ids: never reused, so a key naming a parent is exact


class Block:
    """One cached page: its tokens' KV slots and window slots, and who holds it."""

    __slots__ = ("bid", "key", "parent", "depth", "slots", "window", "ref_cnt", "win_pins", "children")

    def __init__(self, key: tuple, parent: Block | None, slots: np.ndarray, window: np.ndarray) -> None:
        self.bid = next(_ids)
        self.key = key
        self.parent = parent
        self.depth = 1 if parent is None else parent.depth + 1
        self.slots = slots
        self.window = window
        self.ref_cnt = 0
        self.win_pins = 0
        self.children = 0


class Handle:
    """What a match returns: the blocks of the matched prefix, root first (empty: the root)."""

    __slots__ = ("blocks", "pinned")

    def __init__(self, blocks: list[Block], pinned: list[Block]) -> None:
        self.blocks = blocks
        self.pinned = pinned  # the blocks holding the last `window` tokens: a lock pins their window


class VllmLikeCache:
    """Block-hash prefix cache with a free-block queue, tenants and a sliding-window group."""

    def __init__(self, allocator: Any, page_size: int, second_allocator: Any = None, window: int = WINDOW) -> None:
        self.allocator = allocator
        self.second = second_allocator
        self.page_size = page_size
        self.window_size = window if second_allocator is not None else 0
        self._reset_state()

    def _reset_state(self) -> None:
        self.cached: dict[tuple, Block] = {}  # BlockHashToBlockMap
        self.queue: OrderedDict[int, Block] = OrderedDict()  # LRU order, coldest first
        self.total = 0
        self.protected = 0

    # --- the hash chain -------------------------------------------------------------------------

    def _key(self, parent: Block | None, page: tuple, namespace: Any) -> tuple:
        if parent is None:  # extra keys (salt, LoRA) go into the first block only, as in vLLM
            return (_ROOT_ID, page, ("extra", namespace))
        return (parent.bid, page)

    def _walk(self, tokens: Any, namespace: Any) -> list[Block]:
        """The cached blocks of the longest full-block prefix of ``tokens``, root first."""
        toks = [int(t) for t in tokens]
        p = self.page_size
        path: list[Block] = []
        parent = None
        for start in range(0, len(toks) // p * p, p):
            block = self.cached.get(self._key(parent, tuple(toks[start:start + p]), namespace))
            if block is None:
                break
            path.append(block)
            parent = block
        return path

    def _touch(self, path: list[Block]) -> None:
        for block in reversed(path):  # leaf first: a parent ends up hotter than its children
            self.queue.move_to_end(block.bid)

    # --- the sliding-window group ---------------------------------------------------------------

    def _resumable(self, path: list[Block]) -> int:
        """How many blocks of ``path`` a request can resume from: the last ``window`` tokens live."""
        if not self.window_size or not path:
            return len(path)
        live = np.concatenate([b.window for b in path]) >= 0
        run = 0
        best = 0
        p = self.page_size
        for i, ok in enumerate(live):  # run of live tokens ending at i
            run = run + 1 if ok else 0
            length = i + 1
            if length % p == 0 and run >= min(self.window_size, length):
                best = length // p
        return best

    def _pinned(self, path: list[Block]) -> list[Block]:
        if not self.window_size or not path:
            return []
        need = min(self.window_size, len(path) * self.page_size)
        count = -(-need // self.page_size)
        return path[len(path) - count:]

    # --- the contract ---------------------------------------------------------------------------

    def match_prefix(self, tokens: Any, namespace: Any = None) -> tuple:
        path = self._walk(tokens, namespace)
        path = path[: self._resumable(path)]
        self._touch(path)
        handle = Handle(path, self._pinned(path))
        values = np.concatenate([b.slots for b in path]) if path else np.zeros(0, dtype=np.int64)
        if not self.window_size:
            return values, handle
        window = np.concatenate([b.window for b in path]) if path else np.zeros(0, dtype=np.int64)
        return values, handle, window

    def insert(self, tokens: Any, values: Any, window: Any = None, namespace: Any = None) -> int:
        toks = [int(t) for t in tokens]
        vals = np.asarray(values, dtype=np.int64)
        win = np.full(len(toks), -1, dtype=np.int64) if window is None else np.asarray(window, dtype=np.int64)
        p = self.page_size
        parent = None
        path: list[Block] = []
        prefix_len = 0
        fresh = True  # still inside the cached prefix
        for start in range(0, len(toks) // p * p, p):
            key = self._key(parent, tuple(toks[start:start + p]), namespace)
            block = self.cached.get(key) if fresh else None
            if block is None:
                fresh = False
                block = Block(key, parent, vals[start:start + p].copy(), win[start:start + p].copy())
                self.cached[key] = block
                self.queue[block.bid] = block
                if parent is not None:
                    parent.children += 1
                self.total += p
            else:
                prefix_len += p
            path.append(block)
            parent = block
        self._touch(path)
        return prefix_len

    def inc_lock_ref(self, handle: Handle) -> None:
        for block in handle.blocks:
            if block.ref_cnt == 0:
                self.protected += self.page_size
            block.ref_cnt += 1
        for block in handle.pinned:
            block.win_pins += 1

    def dec_lock_ref(self, handle: Handle) -> None:
        for block in handle.blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                self.protected -= self.page_size
        for block in handle.pinned:
            block.win_pins -= 1

    def _drop(self, block: Block) -> None:
        del self.cached[block.key]
        del self.queue[block.bid]
        if block.parent is not None:
            block.parent.children -= 1
        self.total -= self.page_size
        self.allocator.free(block.slots)
        live = block.window[block.window >= 0]
        if len(live):
            self.second.free(live)

    def evict(self, num_tokens: int) -> int:
        """Pop the coldest blocks nobody holds (vLLM's free queue), until ``num_tokens`` are freed."""
        evicted = 0
        victims: list[Block] = []
        gone: dict[int, int] = {}  # children of a block chosen in this pass
        for block in self.queue.values():  # coldest first; a parent comes after its children
            if evicted >= num_tokens:
                break
            if block.ref_cnt == 0 and block.children == gone.get(block.bid, 0):
                victims.append(block)
                evicted += self.page_size
                if block.parent is not None:
                    gone[block.parent.bid] = gone.get(block.parent.bid, 0) + 1
        for block in victims:
            self._drop(block)
        return evicted

    def evict_window(self, num_tokens: int) -> int:
        """Free window slots no lock pins, coldest block first; their KV stays cached."""
        freed = 0
        for block in self.queue.values():
            if freed >= num_tokens:
                break
            if block.win_pins:
                continue
            live = block.window >= 0
            if live.any():
                self.second.free(block.window[live])
                freed += int(live.sum())
                block.window = np.full(self.page_size, -1, dtype=np.int64)
        return freed

    def total_size(self) -> int:
        return self.total

    def protected_size(self) -> int:
        return self.protected

    def evictable_size(self) -> int:
        return self.total - self.protected

    def reset(self) -> None:
        """vLLM's ``reset_prefix_cache``: every block freed; handles stale (callers hold none)."""
        for block in list(self.queue.values()):
            self.allocator.free(block.slots)
            live = block.window[block.window >= 0]
            if len(live):
                self.second.free(live)
        self._reset_state()

    # --- the request lifecycle (vLLM's allocate_slots / cache_blocks / free) --------------------

    def match_req(self, req: Request) -> None:
        found = self.match_prefix(req.tokens, namespace=req.namespace)
        req.slots = np.array(found[0], dtype=np.int64)
        req.filled = req.protected = len(req.slots)
        req.handle = found[1]
        req.window = np.full(req.filled, -1, dtype=np.int64)

    def lock_req(self, req: Request) -> None:
        self.inc_lock_ref(req.handle)

    def _publish(self, req: Request, rematch: bool) -> int:
        """Cache the request's full blocks and free what duplicates the tree; on a publish (not a
        finish) move its lock to the new blocks. Returns the aligned end."""
        filled = req.filled
        aligned = filled // self.page_size * self.page_size
        tokens = req.tokens[:filled]
        own_window = req.window[:filled].copy() if self.window_size else None
        prefix_len = self.insert(tokens, req.slots[:filled].copy(), window=own_window, namespace=req.namespace)
        if prefix_len > req.protected:
            self.allocator.free(req.slots[req.protected:prefix_len])
        if self.window_size:  # the tree's window, read off its blocks (a re-match may stop short of it)
            tree_window = np.concatenate([b.window for b in self._walk(tokens[:aligned], req.namespace)] or [np.zeros(0, np.int64)])
            for i in range(aligned):
                if req.window[i] < 0:
                    continue
                if i >= prefix_len:  # the tree took it
                    req.window[i] = -1
                elif tree_window[i] >= 0:  # a duplicate of the tree's live value
                    self.second.free([req.window[i]])
                    req.window[i] = -1
        if rematch:
            found = self.match_prefix(tokens[:aligned], namespace=req.namespace)
            new_slots = np.array(found[0], dtype=np.int64)
            req.slots = np.concatenate([new_slots, req.slots[len(new_slots):filled]])
            self.inc_lock_ref(found[1])
            self.dec_lock_ref(req.handle)
            req.handle = found[1]
            req.protected = len(new_slots)
        return aligned

    def cache_unfinished_req(self, req: Request) -> None:
        self._publish(req, rematch=True)

    def cache_finished_req(self, req: Request, insert: bool = True) -> None:
        if insert:
            aligned = self._publish(req, rematch=False)
            tail = req.slots[aligned:req.filled]
        else:
            tail = req.slots[req.protected:req.filled]
        if len(tail):
            self.allocator.free(tail)
        if self.window_size:
            own = req.window[req.window >= 0]
            if len(own):
                self.second.free(own)
            req.window = np.full(len(req.window), -1, dtype=np.int64)
        self.dec_lock_ref(req.handle)
        req.handle = None


def make(allocator: Any, page_size: int, second_allocator: Any = None) -> VllmLikeCache:
    """Every layer at once: tenants, a sliding-window group, the request lifecycle."""
    return VllmLikeCache(allocator, page_size, second_allocator)


make.capabilities = Capabilities(
    eviction_policy="lru",
    supports_quarantine=False,  # vLLM has no evict_prefix
    page_sizes=(1, 2, 4, 16),
    checks_locks=False,  # trusts its callers, as vLLM's BlockPool does
    supports_reset=True,  # reset_prefix_cache
    validates_input=False,
    namespaces=True,  # cache_salt / LoRA in the first block's extra keys
    unsent_namespaces=("empty",),  # vLLM refuses an empty cache_salt
    lifecycle="requests",
    second_pool=SlidingWindow(window=WINDOW),
)


def make_full(allocator: Any, page_size: int) -> VllmLikeCache:
    """The full-attention group alone, with tenants and the lifecycle."""
    return VllmLikeCache(allocator, page_size)


make_full.capabilities = Capabilities(
    eviction_policy="lru", supports_quarantine=False, page_sizes=(1, 2, 4, 16), checks_locks=False,
    supports_reset=True, validates_input=False, namespaces=True, unsent_namespaces=("empty",), lifecycle="requests",
)
