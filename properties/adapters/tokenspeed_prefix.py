"""radixcheck adapters for TokenSpeed's radix prefix cache, imported from the user's checkout (CPU).

Select one with ``radixcheck audit radixcheck.properties.adapters.tokenspeed_prefix:<factory>``.
TokenSpeed (lightseekorg/tokenspeed) is not on the package registry as this cache: the registry's
``tokenspeed`` 0.1.1 wheel has no ``runtime/cache/prefix_cache.py``, and the repository removed the
file in f3e4d1e ("Remove Radix cache path and consolidate runtime cache handling", #864). So the
adapter takes it from your clone's *history*, at the last commit that has it, 418ec9d (2026-08-03),
whatever is checked out (``git archive`` of ``python/tokenspeed/runtime`` into the user's cache
directory, once, as mini-sglang's ``pre_fix_52``): ``RADIXCHECK_TOKENSPEED_SRC=/path/to/tokenspeed``
(see :mod:`radixcheck.properties.adapters.checkout`). It needs torch; ``with_events`` also needs
``msgspec``, ``pyzmq`` and ``pydantic`` (what ``runtime/pd/kv_events.py`` imports).

What is imported, unchanged: ``runtime/cache/prefix_cache.py`` (``PrefixCache``, ``TreeNode``),
``evict_policy.py``, ``base_prefix_cache.py``, ``allocator.py`` (only for the ``KVAllocator`` name)
and, for ``with_events``, ``runtime/pd/kv_events.py``. Stand-ins (``sys.modules``, for the life of
the process): the packages ``tokenspeed``, ``tokenspeed.runtime``, ``tokenspeed.runtime.cache`` and
``tokenspeed.runtime.pd`` (their ``__init__`` would import the engine; their paths are the
checkout's folders, so the files above load from there); ``tokenspeed.runtime.utils`` (only
``get_colorful_logger``: a plain ``logging`` logger); the names ``ReqToTokenPool`` and
``BaseTokenToKVPool`` (type annotations and ``CacheInitParams`` fields the tree never calls).

The calls (``PrefixCache`` works in *pages*: its keys are lists of page tuples, its values one page
id per page, its sizes and ``evict`` amounts count pages)
----------------------------------------------------------------------------------------------
* ``insert(tokens, values)`` = ``insert(paged_key, page_ids)`` as ``cache_finished_req`` calls it:
  the full pages of ``tokens`` as tuples, and one fresh page id per page (a torch int64 tensor).
  The adapter maps each page id to the suite's slots for that page; ``prefix_len`` = the pages the
  tree already had (its return value) times the page size; those pages' ids are dropped, as the
  engine's ``free_with_diff`` frees them (the caller frees its slots, as the contract says). Then,
  as ``cache_finished_req`` and ``cache_unfinished_req`` always do, ``match_prefix(paged_key)``
  (to learn the tree's pages): that match is what refreshes a fully cached path, since
  ``_insert_helper`` stamps the nodes it walks *into* but returns before stamping the last node of
  a key that was already cached whole (the engine's own sequence hides it; insert alone is not a
  use of that node).
* ``match_prefix(tokens)`` = ``match_prefix(tokens)`` (the tree pages a raw token list itself):
  ``device_indices`` are page ids, mapped back to the suite's slots; the handle is
  ``last_device_node``.
* ``inc_lock_ref`` / ``dec_lock_ref`` forward the node; an empty match returns :data:`ROOT`, whose
  lock and unlock do nothing (TokenSpeed's ``reset()`` replaces its root node, and an old root
  unlocked after it raises ``AttributeError``: a contract difference the adapter bridges, as
  SGLang's adapter does).
* ``evict(n)`` = ``evict(ceil(n / page_size))`` with an allocator stand-in whose
  ``append_to_later_free(page_ids)`` collects the pages and ``free_group_end()`` frees their slots
  into the suite's pool (the real ``KVAllocator`` returns them to its free list there); the return
  value (pages) times the page size.
* ``reset()`` = ``PrefixCache.reset()`` and then what the engine's flush does with the
  ``KVAllocator`` (``clear()``: every page back to the free list): the adapter frees the slots of
  every page the tree held.
* Sizes: ``total_size()`` (a recursive walk), ``evictable_size()``, ``protected_size()``, in pages,
  times the page size.

Capabilities
------------
* ``eviction_policy``: the policy the factory builds (``lru``, ``lfu``, ``fifo``, ``mru``,
  ``filo``, ``priority``; ``CacheInitParams.eviction_policy``), declared as the named
  :class:`Policy` of SGLang's meaning for ``lfu``, ``fifo``, ``mru`` and ``filo`` (TokenSpeed's
  strategies are SGLang's: ``hit_count``, ``creation_time``, ``last_access_time``), so their order
  is judged. ``priority`` stays a name: TokenSpeed's ``insert`` takes no priority, so every node
  has 0 and the order could only be judged as LRU's by another name.
* ``supports_quarantine=False``: no prefix-keyed removal.
* ``checks_locks=False``: ``dec_lock_ref`` decrements whatever it is given; the scheduler pairs locks.
* ``validates_input=False``: token ids come from the engine's tokenizer.
* ``page_sizes=(1, 2, 4, 16)``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from radixcheck.properties.adapters.checkout import TOKENSPEED, Source, at_commit, install_stand_ins
from radixcheck.properties.cache import policies
from radixcheck.properties.cache.contract import Capabilities, SlotAllocator

REPO = TOKENSPEED
COMMIT = "418ec9d26dc324cbdb14d44b34f5216d4dfb9b8e"
POLICIES = ("lru", "lfu", "fifo", "mru", "filo", "priority")
PIP_REQUIREMENTS: list[str] = ["msgspec", "pyzmq", "pydantic"]
"""For ``runtime/pd/kv_events.py`` (``with_events`` only); the cache itself needs torch alone."""

_loaded: dict[str, Any] = {}


def _stand_ins(runtime: Any) -> dict[str, ModuleType]:
    def package(name: str, path: Any = None) -> ModuleType:
        module = ModuleType(name, "radixcheck's stand-in package (properties/adapters/tokenspeed_prefix.py)")
        module.__path__ = [str(path)] if path is not None else []  # type: ignore[attr-defined]
        return module

    modules = {
        "tokenspeed": package("tokenspeed"),
        "tokenspeed.runtime": package("tokenspeed.runtime", runtime),
        "tokenspeed.runtime.cache": package("tokenspeed.runtime.cache", runtime / "cache"),
        "tokenspeed.runtime.pd": package("tokenspeed.runtime.pd", runtime / "pd"),
        "tokenspeed.runtime.layers": package("tokenspeed.runtime.layers"),
        "tokenspeed.runtime.layers.attention": package("tokenspeed.runtime.layers.attention"),
        "tokenspeed.runtime.layers.attention.kv_cache": package("tokenspeed.runtime.layers.attention.kv_cache"),
    }
    utils = ModuleType("tokenspeed.runtime.utils", "radixcheck's stand-in: get_colorful_logger only")
    utils.get_colorful_logger = logging.getLogger  # type: ignore[attr-defined]
    pool = ModuleType("tokenspeed.runtime.cache.req_to_token_pool", "radixcheck's stand-in: the ReqToTokenPool name")
    pool.ReqToTokenPool = type("ReqToTokenPool", (), {})  # type: ignore[attr-defined]
    base = ModuleType("tokenspeed.runtime.layers.attention.kv_cache.base", "radixcheck's stand-in: the BaseTokenToKVPool name")
    base.BaseTokenToKVPool = type("BaseTokenToKVPool", (), {})  # type: ignore[attr-defined]
    modules.update({utils.__name__: utils, pool.__name__: pool, base.__name__: base})
    return modules


def load() -> tuple[ModuleType, Source]:
    """``prefix_cache`` at :data:`COMMIT` from the checkout's history (torch imported here)."""
    if "module" not in _loaded:
        source = at_commit(TOKENSPEED, COMMIT)
        install_stand_ins(_stand_ins(source.folder))
        _loaded["module"] = importlib.import_module("tokenspeed.runtime.cache.prefix_cache"), source
    return _loaded["module"]


def source_of(factory_name: str) -> Source:
    """Where every factory's cache comes from (no torch needed; raises CheckoutMissing)."""
    return at_commit(TOKENSPEED, COMMIT)


ROOT = object()
"""The contract's root handle, for an empty match: ``reset()`` replaces TokenSpeed's ``root_node``, so
its old root, unlocked after a reset, walks past the new root to ``None`` and raises
``AttributeError`` (as SGLang's does; the SGLang adapter bridges it the same way)."""


class PagePool:
    """What ``PrefixCache.evict`` calls on its ``KVAllocator``: page ids to free at the group's end,
    here the suite's slots of those pages."""

    def __init__(self, slots: SlotAllocator, page_size: int) -> None:
        self.page_size = page_size
        self.slots = slots
        self.pages: dict[int, np.ndarray] = {}  # page id -> the suite's slots for its tokens
        self.next_page = 1
        self._later: list[list[int]] = []  # per evicted node, its pages

    def new_pages(self, values: np.ndarray) -> list[int]:
        ids = list(range(self.next_page, self.next_page + len(values) // self.page_size))
        self.next_page += len(ids)
        for i, page in enumerate(ids):
            self.pages[page] = np.asarray(values[i * self.page_size:(i + 1) * self.page_size], dtype=np.int64).copy()
        return ids

    def append_to_later_free(self, page_ids: Any) -> None:
        self._later.append([int(p) for p in page_ids.tolist()])

    def free_group_end(self) -> None:
        """One ``free`` of the suite's pool per evicted node (the tree's call per node), in eviction order."""
        later, self._later = self._later, []
        for node_pages in later:
            self.slots.free(np.concatenate([self.pages.pop(page) for page in node_pages]))

    def clear(self) -> None:
        """The engine's ``KVAllocator.clear()`` on a flush: every page back to the pool."""
        pages, self.pages = self.pages, {}
        for slots in pages.values():
            self.slots.free(slots)


class TokenSpeedCache:
    """The contract's calls on TokenSpeed's ``PrefixCache``."""

    def __init__(self, allocator: SlotAllocator, page_size: int, policy: str, events: bool) -> None:
        module, self.source = load()
        if events:
            importlib.import_module("tokenspeed.runtime.pd.kv_events")
        self.torch = importlib.import_module("torch")
        self.page_size = page_size
        self.pool = PagePool(allocator, page_size)
        params = module.CacheInitParams(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=self.pool,
                                        page_size=page_size, eviction_policy=policy, enable_kv_cache_events=events)
        self.cache = module.PrefixCache(params)

    def _paged(self, tokens: Sequence[int]) -> list[tuple[int, ...]]:
        tokens = [int(t) for t in tokens]
        p = self.page_size
        return [tuple(tokens[i * p:(i + 1) * p]) for i in range(len(tokens) // p)]

    def match_prefix(self, tokens: Sequence[int]) -> tuple[np.ndarray, Any]:
        result = self.cache.match_prefix([int(t) for t in tokens])
        pages = result.device_indices.tolist()
        values = np.concatenate([self.pool.pages[p] for p in pages]) if pages else np.zeros(0, dtype=np.int64)
        node = result.last_device_node
        return values, ROOT if node is self.cache.root_node else node

    def insert(self, tokens: Sequence[int], values: np.ndarray) -> int:
        key = self._paged(tokens)
        if not key:
            return 0
        ids = self.pool.new_pages(np.asarray(values)[: len(key) * self.page_size])
        had = int(self.cache.insert(key, self.torch.tensor(ids, dtype=self.torch.int64)))
        self.cache.match_prefix(key)  # cache_finished_req's next call: which pages the tree now holds
        for page in ids[:had]:  # the tree kept its own pages: the engine frees these (free_with_diff)
            self.pool.pages.pop(page)
        return had * self.page_size

    def inc_lock_ref(self, handle: Any) -> None:
        if handle is not ROOT:
            self.cache.inc_lock_ref(handle)

    def dec_lock_ref(self, handle: Any) -> None:
        if handle is not ROOT:
            self.cache.dec_lock_ref(handle)

    def evict(self, num_tokens: int) -> int:
        pages = -(-int(num_tokens) // self.page_size)
        return int(self.cache.evict(pages) or 0) * self.page_size

    def evict_prefix(self, tokens: Sequence[int]) -> int:
        raise NotImplementedError("TokenSpeed's PrefixCache has no prefix-keyed removal")

    def reset(self) -> None:
        self.cache.reset()
        self.pool.clear()

    def total_size(self) -> int:
        return int(self.cache.total_size()) * self.page_size

    def evictable_size(self) -> int:
        return int(self.cache.evictable_size()) * self.page_size

    def protected_size(self) -> int:
        return int(self.cache.protected_size()) * self.page_size

    def take_events(self) -> list[Any]:
        """The KV events the tree queued since the last call (``with_events``)."""
        events, self.cache.kv_event_queue = self.cache.kv_event_queue, []
        return events


NAMED = ("lfu", "fifo", "mru", "filo")  # judged by their named Policy (lru: the LRU oracle; priority: a name)


def _factory(policy: str, events: bool = False) -> Any:
    def make(allocator: SlotAllocator, page_size: int = 1) -> TokenSpeedCache:
        return TokenSpeedCache(allocator, page_size, policy, events)

    make.__name__ = make.__qualname__ = policy + ("_with_events" if events else "")
    make.__doc__ = f"TokenSpeed's PrefixCache at {COMMIT[:7]}, eviction_policy={policy!r}" + (", KV events on" if events else "")
    declared = getattr(policies, policy)() if policy in NAMED else policy
    make.capabilities = Capabilities(eviction_policy=declared, supports_quarantine=False, checks_locks=False,  # type: ignore[attr-defined]
                                     validates_input=False, page_sizes=(1, 2, 4, 16))
    return make


lru, lfu, fifo, mru, filo, priority = (_factory(p) for p in POLICIES)
with_events = _factory("lru", events=True)
FACTORIES = {p: globals()[p] for p in POLICIES} | {"with_events": with_events}
