"""radixcheck adapters for SGLang's radix caches (sglang 0.5.23, CPU).

Select one with ``radixcheck audit radixcheck.properties.adapters.sglang_radix:<factory>``; they need the
audit environment (``python reports/audit_env.py`` builds ``.audit-venv/``). Where sglang is
not installed (the main gate's environment), importing this module imports neither torch nor
sglang, and a factory call fails with ImportError. Where it is installed, the module imports
them at once (about 6 s), after :mod:`properties.adapters._sglang_stubs` has put stand-ins in
place of triton and torchvision: the suite times every call into the target (5 s by default)
and an import interrupted half-way leaves ``sys.modules`` broken, so it must not happen inside
the first factory call. ``RADIXCHECK_SGLANG_LAZY=1`` defers it anyway.

Factories (each ``factory(allocator, page_size) -> cache`` with a ``capabilities`` attribute)
---------------------------------------------------------------------------------------------
``radix_<policy>``            ``sglang.srt.mem_cache.radix_cache.RadixCache`` with eviction
                              policy ``<policy>`` in lru, lfu, fifo, mru, filo, priority, slru,
                              tlru. ``checks_locks=False``: SGLang trusts its callers to pair
                              locks, so the unmatched-unlock properties are skipped.
``radix_lru_strict``          The same LRU cache declaring ``checks_locks=True``: the strict
                              contract, which SGLang is *expected to fail* (an unmatched
                              ``dec_lock_ref`` silently drives ``lock_ref`` to -1). It exists
                              so the suite reports that behaviour as a finding.
``unified_python_<policy>``   ``UnifiedRadixCache`` (the production cache in 0.5.23) with the
``unified_rust_<policy>``     pure-Python or the bundled Rust tree core, FULL component only;
                              policies lru, lfu, fifo, mru, filo, priority, slru, tlru. The
                              unified tree asserts on an unmatched unlock, so these declare
                              ``checks_locks=True``; ``unified_*_lru_lenient`` declare False.

No SGLang cache has ``evict_prefix``; every factory declares ``supports_quarantine=False``
and the adapter's ``evict_prefix`` raises ``NotImplementedError``. The adapter adds no checks
of its own to SGLang's locking, handles, matching or eviction: it converts types and forwards
calls. It does validate at the type-conversion boundary (token ids, values, ``num_tokens``,
``page_size``), which SGLang's typed API leaves to its callers (the scheduler builds the
``array('q')`` keys, the server validates ``page_size``); so the suite's bad-input and
bad-page-size properties pass on the adapter's account, not SGLang's.

What the adapter does besides forwarding (contract differences, all documented)
-------------------------------------------------------------------------------
* Tokens become ``RadixKey(array('q', ids))``; ids that are not non-negative integers are
  refused with ``TypeError``/``ValueError`` while converting (SGLang's API takes an already
  built ``array('q')``, it has no boundary of its own for such input).
* Values go in as ``torch.int64`` tensors and come back as ``np.int64`` arrays. ``match_prefix``
  reads the matched slots with SGLang's ``path_device_indices``.
* The KV allocator SGLang frees into is :class:`_ForwardingAllocator`, a CPU
  ``BaseTokenToKVPoolAllocator`` whose ``free`` hands every slot id to the suite's
  :class:`SlotAllocator` one by one (no page rounding), so the suite counts every slot.
* ``reset()``: SGLang's ``reset`` drops the tree without freeing anything (the server's
  ``flush_cache`` pairs it with ``allocator.clear()``, which would also take back slots that
  requests hold). The adapter frees the tree's slots and then resets. It finds them by walking
  the tree with a stack, not with SGLang's ``all_values_flatten``: that recurses once per node in
  both Python trees and raises RecursionError on a path 1,000 nodes deep, which the production-
  scale test builds (finding #8); the server's flush never calls it, so the adapter must not.
* An empty match returns the sentinel :data:`ROOT` (the contract's root handle: lock and
  unlock are no-ops, before and after ``reset``). SGLang's own root handle is replaced by
  ``reset()``; locking the old one afterwards raises in RadixCache after it has already
  incremented the old root's counter (see reports/sglang_findings.md).
* UnifiedRadixCache's ``insert`` frees the caller's duplicate slots (those past
  ``InsertParams.prev_prefix_len``) itself; the contract leaves them to the caller, so the
  adapter passes ``prev_prefix_len=len(key)``, as SGLang's own prompt-split re-insert does.
* UnifiedRadixCache: ``total_size()`` returns ``(full, aux)``; the adapter reports ``full``.
  Its ``dec_lock_ref`` needs the receipt that ``inc_lock_ref`` returned; the adapter keeps a
  stack of receipts per node id and, for an unlock with no receipt, passes a bare
  ``DecLockRefParams(node_id=handle)`` so the tree itself decides what to do.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.cache import policies
from radixcheck.properties.cache.contract import Capabilities, Policy, SlotAllocator

RADIX_POLICIES = ("lru", "lfu", "fifo", "mru", "filo", "priority", "slru", "tlru")
TLRU_CONFIG = {"threshold": 8, "next_prompt_estimate": 2}
"""``--radix-eviction-policy-config`` for tlru, in tokens. SGLang's defaults (0, 0) make no node
TEL-safe (a leaf starts above the depth its branch reached), so tlru would be plain LRU."""


def declared_policy(policy: str) -> str | Policy:
    """What a factory of SGLang policy ``policy`` declares: ``"lru"`` (the LRU oracle), or the named
    :class:`Policy` with SGLang's meaning (the eviction-order oracle; its configuration for tlru)."""
    if policy == "lru":
        return "lru"
    return policies.tlru(**TLRU_CONFIG) if policy == "tlru" else policies.NAMED[policy]()


def _policy_config(policy: str) -> dict[str, int] | None:
    return dict(TLRU_CONFIG) if policy == "tlru" else None
UNIFIED_POLICIES = RADIX_POLICIES
PAGE_SIZES = (1, 2, 4)


class _RootHandle:
    """The handle of the empty prefix. SGLang's root is a node (RadixCache) or a node id
    (UnifiedRadixCache) that ``reset()`` replaces, so an empty match returns this sentinel:
    the contract's root handle, whose lock and unlock are no-ops across resets too."""

    def __repr__(self) -> str:
        return "<root handle>"


ROOT = _RootHandle()

_sg: Any = None  # namespace of the sglang/torch names we use, filled by _load()


def _load() -> Any:
    """Import torch and sglang (once), with triton/torchvision stand-ins registered first."""
    global _sg
    if _sg is not None:
        return _sg
    import types
    import warnings

    from radixcheck.properties.adapters import _sglang_stubs

    _sglang_stubs.install()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Only CUDA ... supports X" at import time
        import torch
        from sglang.srt.mem_cache.allocator import BaseTokenToKVPoolAllocator
        from sglang.srt.mem_cache.base_prefix_cache import (
            DecLockRefParams,
            EvictParams,
            InsertParams,
            MatchPrefixParams,
        )
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
        from sglang.srt.mem_cache.unified_cache.components import ComponentType
        from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
    import logging

    # UnifiedRadixCache logs one INFO line per construction; the suite builds thousands.
    logging.getLogger("sglang").setLevel(logging.WARNING)

    class _ForwardingAllocator(BaseTokenToKVPoolAllocator):
        """A CPU token allocator whose pool is the suite's SlotAllocator."""

        def __init__(self, slots: SlotAllocator, page_size: int) -> None:
            super().__init__(slots.pool_size, page_size, torch.int64, "cpu", None, False)
            self.slots = slots

        def clear(self) -> None:  # never called by the tree; the suite owns the pool
            pass

        def available_size(self) -> int:
            return self.slots.available()

        def alloc(self, need_size: int):
            return torch.from_numpy(self.slots.alloc(need_size))

        def free(self, free_index) -> None:
            if self.free_group is not None:  # honour SGLang's free_group_begin/end batching
                self.free_group.append(free_index)
                return
            if isinstance(free_index, torch.Tensor):
                free_index = free_index.detach().cpu().numpy()
            self.slots.free(np.asarray(free_index).reshape(-1))

    _sg = types.SimpleNamespace(
        torch=torch,
        RadixCache=RadixCache,
        RadixKey=RadixKey,
        UnifiedRadixCache=UnifiedRadixCache,
        ComponentType=ComponentType,
        CacheInitParams=CacheInitParams,
        DecLockRefParams=DecLockRefParams,
        EvictParams=EvictParams,
        InsertParams=InsertParams,
        MatchPrefixParams=MatchPrefixParams,
        ForwardingAllocator=_ForwardingAllocator,
    )
    return _sg


def _token_array(tokens: Sequence[int]):
    """``tokens`` as ``array('q')``, refusing what is not a 1-D run of non-negative ints."""
    from array import array

    if isinstance(tokens, np.ndarray):
        if tokens.ndim != 1 or (tokens.size and not np.issubdtype(tokens.dtype, np.integer)):
            raise TypeError(f"tokens must be a 1-D integer array, got {tokens.dtype}{tokens.shape}")
        ids = tokens.tolist()
    elif isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise TypeError(f"tokens must be a sequence of ints, got {type(tokens).__name__}")
    else:
        ids = list(tokens)
    for t in ids:
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"token ids must be ints, got {t!r}")
        if t < 0:
            raise ValueError(f"token ids must be non-negative, got {t}")
    return array("q", [int(t) for t in ids])


def _np(values) -> np.ndarray:
    if hasattr(values, "numpy"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.int64).reshape(-1).copy()


class _Adapter:
    """Shared conversion layer. Subclasses bind one SGLang cache class."""

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be a positive int, got {page_size!r}")
        self.sg = _load()
        self.allocator = allocator
        self.page_size = page_size
        self.kv_allocator = self.sg.ForwardingAllocator(allocator, page_size)

    # -- conversions -------------------------------------------------------------------
    def _key(self, tokens: Sequence[int]):
        return self.sg.RadixKey(_token_array(tokens))

    def _value(self, values, n: int):
        arr = np.asarray(values)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise TypeError(f"values must be a 1-D integer array, got {arr.dtype}{arr.shape}")
        if len(arr) != n:
            raise ValueError(f"values has {len(arr)} slots for {n} tokens")
        return self.sg.torch.from_numpy(arr.astype(np.int64, copy=True))

    # -- the contract ------------------------------------------------------------------
    def _insert_params(self, key, value, priority: int):
        return self.sg.InsertParams(key=key, value=value, priority=priority)

    def insert(self, tokens: Sequence[int], values, priority: int = 0) -> int:
        """``priority``: the request's (``req.priority``), sent only to the priority policy."""
        key = self._key(tokens)
        value = self._value(values, len(key))
        result = self.cache.insert(self._insert_params(key, value, int(priority)))
        return int(result.prefix_len)

    def _is_root(self, node: Any) -> bool:
        raise NotImplementedError

    def match_prefix(self, tokens: Sequence[int], priority: int = 0) -> tuple[np.ndarray, Any]:
        """``priority`` is the request's; SGLang's match reads none (``MatchPrefixParams`` has no field)."""
        result = self.cache.match_prefix(self.sg.MatchPrefixParams(key=self._key(tokens)))
        node = result.last_device_node
        values = _np(self.cache.path_device_indices(node))
        if len(values) != result.device_prefix_len:
            raise AssertionError(
                f"SGLang reported a {result.device_prefix_len}-token match but its path holds "
                f"{len(values)} slots"
            )
        return values, (ROOT if self._is_root(node) else node)

    def inc_lock_ref(self, handle: Any) -> None:
        if handle is not ROOT:
            self._inc(handle)

    def dec_lock_ref(self, handle: Any) -> None:
        if handle is not ROOT:
            self._dec(handle)

    def evict(self, num_tokens: int) -> int:
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, (int, np.integer)):
            raise TypeError(f"num_tokens must be an int, got {num_tokens!r}")
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be >= 0, got {num_tokens}")
        result = self.cache.evict(self.sg.EvictParams(num_tokens=int(num_tokens)))
        return int(result.num_tokens_evicted)

    def evict_prefix(self, tokens: Sequence[int]) -> int:
        raise NotImplementedError("SGLang's radix caches have no evict_prefix (quarantine)")

    def evictable_size(self) -> int:
        return int(self.cache.evictable_size())

    def protected_size(self) -> int:
        return int(self.cache.protected_size())

    def _tree_values(self) -> np.ndarray:
        """Every slot the tree holds. SGLang's ``all_values_flatten`` would do, but in both Python
        trees it recurses once per node and raises RecursionError on a path 1,000 nodes deep
        (``reports/sglang_findings.md`` #8); the server never calls it on a reset, so the adapter
        walks the tree with a stack instead (subclasses name their tree's nodes)."""
        values, stack = [], list(self._children(self._root()))
        while stack:
            node = stack.pop()
            value = self._node_value(node)
            if value is not None and len(value):
                values.append(_np(value))
            stack.extend(self._children(node))
        return np.concatenate(values) if values else np.empty(0, np.int64)

    def reset(self) -> None:
        held = self._tree_values() if self.total_size() else np.empty(0, np.int64)
        if len(held):
            self.allocator.free(held)
        self.cache.reset()


class SGLangRadixCache(_Adapter):
    """``RadixCache`` (the classic single-file radix tree)."""

    def __init__(self, allocator: SlotAllocator, page_size: int, eviction_policy: str = "lru"):
        super().__init__(allocator, page_size)
        params = self.sg.CacheInitParams(
            disable=False,
            req_to_token_pool=None,
            token_to_kv_pool_allocator=self.kv_allocator,
            page_size=page_size,
            eviction_policy=eviction_policy,
            eviction_policy_config=_policy_config(eviction_policy),
        )
        self.cache = self.sg.RadixCache(params)

    def _is_root(self, node: Any) -> bool:
        return node is self.cache.root_node

    def _root(self) -> Any:
        return self.cache.root_node

    def _children(self, node: Any) -> list[Any]:
        return list(node.children.values())

    def _node_value(self, node: Any) -> Any:
        return node.value

    def _inc(self, handle: Any) -> None:
        self.cache.inc_lock_ref(handle)

    def _dec(self, handle: Any) -> None:
        self.cache.dec_lock_ref(handle)

    def total_size(self) -> int:
        return int(self.cache.total_size())


class SGLangUnifiedRadixCache(_Adapter):
    """``UnifiedRadixCache`` with only the FULL (plain KV) component."""

    def __init__(
        self,
        allocator: SlotAllocator,
        page_size: int,
        eviction_policy: str = "lru",
        backend: str = "python",
    ):
        super().__init__(allocator, page_size)
        params = self.sg.CacheInitParams(
            disable=False,
            req_to_token_pool=None,
            token_to_kv_pool_allocator=self.kv_allocator,
            page_size=page_size,
            eviction_policy=eviction_policy,
            eviction_policy_config=_policy_config(eviction_policy),
            tree_components=(self.sg.ComponentType.FULL,),
            tree_core_backend=backend,
        )
        self.cache = self.sg.UnifiedRadixCache(params)
        core = type(self.cache.tree_core).__name__
        want = {"python": "UnifiedTreeCore", "rust": "RustUnifiedTreeCore"}[backend]
        if core != want:  # SGLang silently falls back to Python when Rust is unusable
            raise RuntimeError(f"asked for the {backend} tree core, SGLang built {core}")
        self.backend = backend
        self._receipts: dict[Any, list[Any]] = {}

    def _insert_params(self, key, value, priority: int):
        # prev_prefix_len = len(key): "the caller keeps every slot it brought". Without it the
        # unified insert frees the caller's duplicate slots itself (the scheduler's protocol).
        return self.sg.InsertParams(key=key, value=value, prev_prefix_len=len(key), priority=priority)

    def _is_root(self, node: Any) -> bool:
        return node == self.cache.root_node_handle()

    def _tree_values(self) -> np.ndarray:
        if self.backend == "rust":  # the Rust core's all_values_flatten does not recurse in Python
            return _np(self.cache.all_values_flatten())
        return super()._tree_values()

    def _root(self) -> Any:
        return self.cache.tree_core.root_node

    def _children(self, node: Any) -> list[Any]:
        return list(node.children.values())

    def _node_value(self, node: Any) -> Any:
        return node.component_data[self.sg.ComponentType.FULL].value

    def _inc(self, handle: Any) -> None:
        receipt = self.cache.inc_lock_ref(handle).to_dec_params()
        self._receipts.setdefault(handle, []).append(receipt)

    def _dec(self, handle: Any) -> None:
        stack = self._receipts.get(handle)
        receipt = stack[-1] if stack else self.sg.DecLockRefParams(node_id=handle)
        self.cache.dec_lock_ref(handle, receipt)
        if stack:
            stack.pop()

    def total_size(self) -> int:
        return int(self.cache.total_size()[0])

    def reset(self) -> None:
        super().reset()
        self._receipts.clear()


# -- factories --------------------------------------------------------------------------


def _factory(name: str, build: Callable[[SlotAllocator, int], Any], caps: Capabilities):
    def factory(allocator: SlotAllocator, page_size: int):
        return build(allocator, page_size)

    factory.__name__ = factory.__qualname__ = name
    factory.capabilities = caps  # type: ignore[attr-defined]
    factory.__doc__ = f"radixcheck target {name}: {caps}"
    return factory


def _radix(policy: str, strict: bool = False):
    caps = Capabilities(
        eviction_policy=declared_policy(policy),
        supports_quarantine=False,
        page_sizes=PAGE_SIZES,
        checks_locks=strict,
    )
    return _factory(
        f"radix_{policy}" + ("_strict" if strict else ""),
        lambda a, p: SGLangRadixCache(a, p, eviction_policy=policy),
        caps,
    )


def _unified(backend: str, policy: str, checks_locks: bool = True):
    caps = Capabilities(
        eviction_policy=declared_policy(policy),
        supports_quarantine=False,
        page_sizes=PAGE_SIZES,
        checks_locks=checks_locks,
    )
    return _factory(
        f"unified_{backend}_{policy}" + ("" if checks_locks else "_lenient"),
        lambda a, p: SGLangUnifiedRadixCache(a, p, eviction_policy=policy, backend=backend),
        caps,
    )


FACTORIES: dict[str, Callable] = {}
for _p in RADIX_POLICIES:
    FACTORIES[f"radix_{_p}"] = _radix(_p)
FACTORIES["radix_lru_strict"] = _radix("lru", strict=True)
for _b in ("python", "rust"):
    for _p in UNIFIED_POLICIES:
        FACTORIES[f"unified_{_b}_{_p}"] = _unified(_b, _p)
    FACTORIES[f"unified_{_b}_lru_lenient"] = _unified(_b, "lru", checks_locks=False)
del _p, _b


__getattr__ = factory_lookup(__name__, FACTORIES)  # `module:<factory>` names a factory (PEP 562)


if os.environ.get("RADIXCHECK_SGLANG_LAZY") != "1" and importlib.util.find_spec("sglang") is not None:
    _load()

__all__ = ["FACTORIES", "SGLangRadixCache", "SGLangUnifiedRadixCache", *FACTORIES]

if __name__ == "__main__":  # list the factories
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.sglang_radix:{_name}", _f.capabilities, file=sys.stdout)
