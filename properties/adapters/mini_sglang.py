"""radixcheck adapters for mini-sglang's radix prefix cache, imported from the user's checkout (CPU).

Select one with ``radixcheck audit radixcheck.properties.adapters.mini_sglang:<factory>``. They need
torch (the audit environment ``.audit-venv/`` has it) and a git checkout of mini-sglang, which is
not on the package registry: ``RADIXCHECK_MINISGLANG_SRC=/path/to/mini-sglang`` (see
:mod:`radixcheck.properties.adapters.checkout`; without it a factory raises one
:class:`~radixcheck.properties.adapters.checkout.CheckoutMissing` saying what to clone). The
cache files are imported from that checkout unchanged; the three ``minisgl`` names they import
(the C++ ``fast_compare_key`` kernel, ``align_down``, the global context) are radixcheck's
stand-ins, put into ``sys.modules`` first (``_minisgl_stubs.py``).

Where torch is not installed (the main gate's environment), importing this module imports
neither torch nor mini-sglang, and a factory call fails with ImportError. Where it is installed
and the setting is given, the module imports both at once (``import torch`` takes 6-7 s on the
audit machine): the suite times every call into the target, the factory included (5 s by
default), so the import must not happen inside the first factory call. ``RADIXCHECK_MINISGL_LAZY=1``
defers it anyway.

Factories (each ``factory(allocator, page_size) -> cache`` with a ``capabilities`` attribute)
---------------------------------------------------------------------------------------------
``newest``         ``minisgl.kvcache.radix_cache.RadixPrefixCache`` from the checkout's working
                   tree as it is; validated at 20fcd7f (2026-03-13; the cache files last changed
                   in c7f800d), and a warning names any other commit. Page sizes: any positive
                   int (the engine's ``--page-size``); declared ``(1, 2, 4, 16)``.
``newest_strict``  The same cache declaring ``checks_locks=True``: the strict contract, which
                   mini-sglang is *expected to fail* (an unmatched unlock trips an ``assert``
                   only after it has taken the counter to -1; a foreign handle is accepted).
                   It exists so the suite reports that behaviour (findings 3 and 4 of
                   reports/findings/mini_sglang.md). The matrix waives finding 2 (the LRU
                   order, reports/waivers/mini_sglang.txt) so that its state machine goes on
                   past it to the lock properties.
``pre_fix_52``     ``minisgl.kvcache.radix_manager.RadixCacheManager`` at f074873, taken from the
                   checkout's history whatever is checked out (``git archive`` into the user's
                   cache directory, once), the parent of the fix for mini-sglang#52 (8827b0f, "lock/unlock missed the current node").
                   No pages yet at that commit (the child key is one token and insert does not
                   align), so ``page_sizes=(1,)`` and the factory refuses any other page size.
``FACTORIES`` maps these names to the factories. (The ``*_no_lru_oracle`` diagnostics, which
declared ``eviction_policy="lru-split-stale"`` to get past finding 2, are replaced by the waiver
file ``reports/waivers/mini_sglang.txt``: ``radixcheck audit ...:pre_fix_52 --waive
reports/waivers/mini_sglang.txt`` fails for mini-sglang#52, and the matrix passes the file.)

Capabilities (all factories; non-defaults and why)
----------------------------------------------
* ``supports_quarantine=False``: mini-sglang has no ``evict_prefix``; the adapter's raises
  ``NotImplementedError``.
* ``checks_locks=False`` (not for ``newest_strict``): ``lock_handle(handle, unlock=True)``
  decrements first and asserts ``ref_count >= 0`` after, walking root-ward, so an unmatched
  unlock leaves a counter at -1 before the ``AssertionError`` (and raises nothing under
  ``python -O``); handles are not checked for staleness or for belonging to this cache. The
  engine's scheduler (``CacheManager.lock/unlock``) pairs every lock with one unlock: it trusts
  its callers, as SGLang does.
* ``supports_reset=False``: ``reset()`` raises ``NotImplementedError("RadixManager.reset is not
  implemented")`` at both commits. The adapter's ``reset`` forwards to it (never sent).
* ``validates_input=False``: the cache takes ``torch.Tensor`` token ids and indices that the
  engine builds itself (the tokenizer's int32 ids, the int32 page table) and the page size from
  the server's arguments; it checks none of them. The adapter converts the suite's lists/arrays
  to those tensors and adds no validation of its own, so malformed input is never sent.
* ``eviction_policy="lru"`` (every factory): leaves are evicted in order of a
  ``time.monotonic_ns()`` stamp that every fully matched node gets on ``match_prefix`` /
  ``insert_prefix`` (a heap of leaves; a parent left childless is pushed in turn): the
  contract's LRU, which the engine means to implement. The node a mid-edge split creates keeps
  the old stamp (finding 2); that is a deviation the suite reports, so it is not declared away
  here (to look past it, waive it: ``reports/waivers/mini_sglang.txt``).

What the adapter does besides forwarding (contract differences, all documented)
-------------------------------------------------------------------------------
* Tokens become a fresh 1-D ``torch.int32`` CPU tensor, values a fresh 1-D ``torch.int32`` tensor,
  the dtypes the engine passes (``LLM`` builds ``torch.tensor(prompt, dtype=torch.int32)``, the
  page table is int32). Ids outside the int32 range raise ``OverflowError`` while converting
  instead of wrapping (the contract's ids are all in that range). The fresh copy of the values
  means the suite's arrays are never aliased: the aliasing fixed upstream in 94fe255 (before it,
  ``insert_prefix`` stored a view of the caller's page-table row) cannot be observed here; the
  suite never writes to an array after inserting it anyway.
* ``match_prefix``: ``newest`` reads the slots with the handle's ``get_matched_indices()`` only when
  ``handle.cached_len > 0`` (as the engine's ``PrefillManager`` does: on the root handle it calls
  ``torch.cat([])`` and raises); ``pre_fix_52``'s ``match_prefix`` returns them itself. The handle
  returned is the engine's own ``RadixCacheHandle`` (an empty match gives the root's, whose
  lock/unlock walks nothing: the contract's no-op root handle; there is no reset to replace it).
* ``insert`` returns the engine's ``cached_len`` (``InsertResult.cached_len`` for ``newest``, the
  bare ``int`` for ``pre_fix_52``); the handle ``newest`` also returns is dropped (the contract's
  insert has none).
* ``inc_lock_ref(h)`` / ``dec_lock_ref(h)`` are ``lock_handle(h)`` / ``lock_handle(h, unlock=True)``.
* ``evict(n)``: the engine's ``evict(size)`` returns the evicted slot ids instead of freeing them
  (``CacheManager`` puts them back in its free list); the adapter hands them to the suite's
  :class:`SlotAllocator` and returns how many there were. The engine asserts
  ``size <= evictable_size`` (its caller checks ``available_size`` before allocating); the
  contract's ``evict(n)`` for ``n`` above that means "evict everything evictable", so the adapter
  asks for ``min(n, size_info.evictable_size)``, the engine's own count.
* ``total_size`` / ``evictable_size`` / ``protected_size`` read ``size_info``.
* ``newest`` reads ``page_size`` from the global context (``get_global_ctx().page_size``); the
  adapter sets it (through the stand-in, see ``_minisgl_stubs.py``) around the construction only.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import ModuleType
from typing import Any

import numpy as np

from radixcheck.properties.adapters.checkout import (
    MINI_SGLANG,
    CheckoutMissing,
    Source,
    at_commit,
    import_unchanged,
    install_stand_ins,
    working_tree,
)
from radixcheck.properties.cache.contract import Capabilities, SlotAllocator

PIP_REQUIREMENTS: list[str] = []
"""Extra pip specs for the audit environment: none (the cache files need only torch, which the
environment already has; mini-sglang itself is not installed but read from the user's checkout)."""

REPO = MINI_SGLANG  # where to clone it, its setting, the validated commits
NEWEST = "20fcd7f3c6a1898a61139fae1c97cc7a40bd8d66"
PRE_FIX_52 = "f07487349b5a285dffd3cf66753247a0a9b262e0"
_INT32 = np.iinfo(np.int32)

_torch: Any = None
_loaded: dict[str | None, tuple[ModuleType, Source]] = {}  # commit (None: the working tree) -> module, source


def load(commit: str | None = None) -> tuple[ModuleType, Source]:
    """mini-sglang's radix cache module from the user's checkout, and where it came from (once per commit).

    ``commit=None`` takes the working tree as it is (warning if its commit was not validated);
    a commit id takes that commit from the checkout's history. The module is ``radix_cache``
    (``RadixPrefixCache``, since the cache was paged) or, at older commits, ``radix_manager``
    (``RadixCacheManager``), whichever the commit has. Raises :class:`CheckoutMissing` without
    the checkout."""
    global _torch
    if commit not in _loaded:
        source = working_tree(MINI_SGLANG) if commit is None else at_commit(MINI_SGLANG, commit)
        import torch

        from radixcheck.properties.adapters import _minisgl_stubs

        _torch = torch
        install_stand_ins(_minisgl_stubs.stand_in_modules())
        module = "radix_cache" if (source.folder / "radix_cache.py").is_file() else "radix_manager"
        _loaded[commit] = import_unchanged(source, module), source
    return _loaded[commit]


def source_of(factory_name: str) -> Source:
    """Where factory ``factory_name``'s cache comes from (no torch needed; raises CheckoutMissing)."""
    return at_commit(MINI_SGLANG, PRE_FIX_52) if factory_name.startswith("pre_fix_52") else working_tree(MINI_SGLANG)


def _int32_tensor(xs: Any) -> Any:
    """A fresh 1-D int32 CPU tensor of ``xs`` (a list/tuple or integer array)."""
    arr = np.asarray(xs, dtype=np.int64).reshape(-1)
    if arr.size and (arr.min() < _INT32.min or arr.max() > _INT32.max):
        raise OverflowError("ids outside the int32 range the engine uses")
    return _torch.from_numpy(arr.astype(np.int32))


def _np(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.int64).reshape(-1)


class _MiniSGLangCache:
    """Conversion layer shared by both commits; subclasses bind one engine cache class."""

    cache: Any

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        self.allocator = allocator
        self.page_size = page_size

    def _match(self, tokens: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def _insert(self, tokens: Any, values: Any) -> int:
        raise NotImplementedError

    # -- the contract ------------------------------------------------------------------
    def match_prefix(self, tokens: Sequence[int]) -> tuple[np.ndarray, Any]:
        values, handle = self._match(_int32_tensor(tokens))
        return _np(values), handle

    def insert(self, tokens: Sequence[int], values: Any) -> int:
        return int(self._insert(_int32_tensor(tokens), _int32_tensor(values)))

    def inc_lock_ref(self, handle: Any) -> None:
        self.cache.lock_handle(handle)

    def dec_lock_ref(self, handle: Any) -> None:
        self.cache.lock_handle(handle, unlock=True)

    def evict(self, num_tokens: int) -> int:
        evicted = _np(self.cache.evict(min(int(num_tokens), self.cache.size_info.evictable_size)))
        if len(evicted):
            self.allocator.free(evicted)
        return len(evicted)

    def evict_prefix(self, tokens: Sequence[int]) -> int:
        raise NotImplementedError("mini-sglang's radix cache has no evict_prefix (quarantine)")

    def total_size(self) -> int:
        return int(self.cache.size_info.total_size)

    def evictable_size(self) -> int:
        return int(self.cache.size_info.evictable_size)

    def protected_size(self) -> int:
        return int(self.cache.size_info.protected_size)

    def reset(self) -> None:
        self.cache.reset()  # raises NotImplementedError at both commits (supports_reset=False)


class MiniSGLangRadixCache(_MiniSGLangCache):
    """``RadixPrefixCache`` from the checkout's working tree (validated at 20fcd7f)."""

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        super().__init__(allocator, page_size)
        module, source = load(None)
        if not hasattr(module, "RadixPrefixCache"):
            raise MINI_SGLANG.missing(f"{source.describe()} has no RadixPrefixCache (the paged cache of 20fcd7f)")
        from radixcheck.properties.adapters._minisgl_stubs import global_ctx

        with global_ctx(page_size):
            self.cache = module.RadixPrefixCache(device=_torch.device("cpu"))

    def _match(self, tokens: Any) -> tuple[Any, Any]:
        handle = self.cache.match_prefix(tokens).cuda_handle
        values = handle.get_matched_indices() if handle.cached_len > 0 else self.cache.empty_tensor
        return values, handle

    def _insert(self, tokens: Any, values: Any) -> int:
        return self.cache.insert_prefix(tokens, values).cached_len


class MiniSGLangRadixManagerPre52(_MiniSGLangCache):
    """``RadixCacheManager`` at f074873 (parent of the fix for mini-sglang#52)."""

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        if page_size != 1:
            raise ValueError(f"mini-sglang at {PRE_FIX_52[:7]} has no pages: page_size must be 1, got {page_size!r}")
        super().__init__(allocator, page_size)
        self.cache = load(PRE_FIX_52)[0].RadixCacheManager(device=_torch.device("cpu"))

    def _match(self, tokens: Any) -> tuple[Any, Any]:
        handle, values = self.cache.match_prefix(tokens)
        return values, handle

    def _insert(self, tokens: Any, values: Any) -> int:
        return self.cache.insert_prefix(tokens, values)


# -- the request lifecycle: CacheManager.cache_req ---------------------------------------------

_ROWS, _ROW_LEN = 16, 1 << 13  # page-table rows (at most three lifecycle requests run at once) and tokens per row


def load_cache_manager() -> ModuleType:
    """``scheduler/cache.py`` (``CacheManager``) from the checkout's working tree, unchanged. Its
    imports are stood in for as the cache's are (:mod:`_minisgl_stubs`): ``minisgl.core.Req`` (a
    type it names only), ``minisgl.utils.div_ceil``, and ``minisgl.kvcache`` holding the checkout's
    own ``BaseCacheHandle``/``MatchResult`` and a ``create_prefix_cache`` that builds the
    checkout's ``RadixPrefixCache`` (the engine's default ``"radix"`` type)."""
    import dataclasses

    from radixcheck.properties.adapters import _minisgl_stubs
    from radixcheck.properties.adapters.checkout import import_unchanged

    module, source = load(None)
    base = import_unchanged(source, "base")
    stand_ins = _minisgl_stubs.stand_in_modules()
    kvcache = stand_ins.get("minisgl.kvcache") or ModuleType("minisgl.kvcache", "radixcheck's stand-in")

    def create_prefix_cache(device: Any, type: str) -> Any:
        if type != "radix":
            raise ValueError(f"radixcheck's stand-in builds the radix prefix cache only, not {type!r}")
        return module.RadixPrefixCache(device=device)

    kvcache.BaseCacheHandle, kvcache.MatchResult, kvcache.create_prefix_cache = base.BaseCacheHandle, base.MatchResult, create_prefix_cache
    stand_ins["minisgl.core"].Req = type("Req", (), {"__doc__": "radixcheck's stand-in: CacheManager names the type only"})
    stand_ins["minisgl.utils"].div_ceil = lambda a, b: (a + b - 1) // b
    install_stand_ins({**stand_ins, "minisgl.kvcache": kvcache})
    scheduler = dataclasses.replace(source, repo=dataclasses.replace(source.repo, folder="python/minisgl/scheduler"))
    return import_unchanged(scheduler, "cache")


class MiniSGLangRequests(MiniSGLangRadixCache):
    """mini-sglang's ``CacheManager`` (``scheduler/cache.py``) over its radix cache, driven through the
    contract's request steps (``Capabilities(lifecycle="requests")``):

    * ``match_req``: ``prefix_cache.match_prefix(tokens)`` of the request's tokens (``CacheManager.match_req``
      matches all but the last token, the scheduler's choice of query; the suite chooses its own);
    * ``lock_req``: ``CacheManager.lock(handle)``, a page-table row, and the matched slots written into it
      (``PrefillManager``);
    * ``cache_unfinished_req``: the request's slots written into its row (``allocate_paged``), then
      ``CacheManager.cache_req(req, finished=False)`` (what the scheduler runs after each chunk);
    * ``cache_finished_req(req, True)``: ``cache_req(req, finished=True)`` (a finish, and mini-sglang's
      abort: ``_free_req_resources``). mini-sglang has no retract and no skipped insert, and its abort
      caches what the request computed, which the contract's abort does not: for ``insert=False`` the
      adapter frees the request's own slots (``row[handle.cached_len:filled]``) through the manager's
      ``_free`` and unlocks, as ``cache_req`` would without the insert.

    The request is a stand-in with the four fields ``cache_req`` reads (``input_ids``, ``cached_len``,
    ``table_idx``, ``cache_handle``). The manager's page table is a CPU int32 tensor; its ``_free``
    (which puts pages back on its own free list) is replaced on the instance by one that hands the
    same token indices to the suite's allocator (the suite owns the pool; mini-sglang's own
    ``lazy_free_region`` swaps ``_free`` the same way), and its free list is never used."""

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        _MiniSGLangCache.__init__(self, allocator, page_size)
        manager_module = load_cache_manager()
        from radixcheck.properties.adapters._minisgl_stubs import global_ctx

        table = _torch.zeros((_ROWS, _ROW_LEN), dtype=_torch.int32)
        with global_ctx(page_size):
            self.manager = manager_module.CacheManager(1, page_size, table, "radix")
        self.manager._free = self._free_to_suite
        self.cache = self.manager.prefix_cache
        self.table = table
        self._rows = list(range(_ROWS))
        self._reqs: dict[int, Any] = {}

    def _free_to_suite(self, indices: Any) -> None:
        if len(indices) > 0:
            self.allocator.free(_np(indices))

    def match_req(self, request: Any) -> None:
        values, handle = self._match(_int32_tensor(request.tokens))
        request.slots, request.handle = _np(values), handle
        request.filled = request.protected = len(request.slots)
        from types import SimpleNamespace

        self._reqs[id(request)] = SimpleNamespace(input_ids=None, cached_len=0, table_idx=None, cache_handle=handle, written=0)

    def lock_req(self, request: Any) -> None:
        req = self._reqs[id(request)]
        self.manager.lock(req.cache_handle)
        if not self._rows:
            raise MemoryError("radixcheck adapter: no free page-table row")
        req.table_idx = self._rows.pop()
        self._write(req, request)

    def _write(self, req: Any, request: Any) -> Any:
        if request.filled > _ROW_LEN:
            raise MemoryError(f"radixcheck adapter: a request of {request.filled} tokens exceeds the row ({_ROW_LEN})")
        if request.filled > req.written:
            self.table[req.table_idx, req.written : request.filled] = _int32_tensor(request.slots[req.written : request.filled])
            req.written = request.filled
        req.input_ids = _int32_tensor(request.tokens)
        req.cached_len = request.filled
        return req

    def cache_unfinished_req(self, request: Any) -> None:
        req = self._write(self._reqs[id(request)], request)
        self.manager.cache_req(req, finished=False)
        request.slots = _np(self.table[req.table_idx, : request.filled])
        request.protected, request.handle = int(req.cache_handle.cached_len), req.cache_handle

    def cache_finished_req(self, request: Any, insert: bool = True) -> None:
        req = self._write(self._reqs.pop(id(request)), request)
        if insert:
            self.manager.cache_req(req, finished=True)
        else:
            self.manager._free(self.table[req.table_idx, req.cache_handle.cached_len : request.filled])
            self.manager.unlock(req.cache_handle)
        self._rows.append(req.table_idx)
        request.handle = None


# -- factories --------------------------------------------------------------------------


def _factory(name: str, build: Callable[[SlotAllocator, int], Any], caps: Capabilities):
    def factory(allocator: SlotAllocator, page_size: int):
        return build(allocator, page_size)

    factory.__name__ = factory.__qualname__ = name
    factory.capabilities = caps  # type: ignore[attr-defined]
    factory.__doc__ = f"radixcheck target {name}: {caps}"
    return factory


def _caps(page_sizes: tuple[int, ...], checks_locks: bool = False) -> Capabilities:
    return Capabilities(
        eviction_policy="lru",
        supports_quarantine=False,
        page_sizes=page_sizes,
        checks_locks=checks_locks,
        supports_reset=False,
        validates_input=False,
    )


newest = _factory("newest", MiniSGLangRadixCache, _caps((1, 2, 4, 16)))
newest_strict = _factory("newest_strict", MiniSGLangRadixCache, _caps((1, 2, 4, 16), checks_locks=True))
pre_fix_52 = _factory("pre_fix_52", MiniSGLangRadixManagerPre52, _caps((1,)))

def _lifecycle_caps() -> Capabilities:
    return replace(_caps((1, 2, 4, 16)), lifecycle="requests")


newest_requests = _factory("newest_requests", MiniSGLangRequests, _lifecycle_caps())

FACTORIES: dict[str, Callable] = {
    "newest": newest,
    "newest_strict": newest_strict,
    "pre_fix_52": pre_fix_52,
    "newest_requests": newest_requests,
}

if (os.environ.get("RADIXCHECK_MINISGL_LAZY") != "1" and os.environ.get(MINI_SGLANG.setting)
        and importlib.util.find_spec("torch") is not None):
    try:
        load(None)
        load(PRE_FIX_52)
    except CheckoutMissing:
        pass  # each factory raises it, with its message

__all__ = ["FACTORIES", "PIP_REQUIREMENTS", "MiniSGLangRadixCache", "MiniSGLangRequests", "MiniSGLangRadixManagerPre52", "load",
           "source_of",
           *FACTORIES]

if __name__ == "__main__":  # list the factories
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.mini_sglang:{_name}", _f.capabilities)
