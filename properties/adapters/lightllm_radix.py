"""radixcheck adapter for LightLLM's radix cache (``RadixCache`` of
``lightllm/server/router/dynamic_prompt/radix_cache.py``), imported from the user's checkout;
validated at ModelTC/lightllm ``fc72ffab9a3455cfb571f22d45ab777cc29de0de`` (2025-07-11).

Select it with ``radixcheck audit radixcheck.properties.adapters.lightllm_radix:radix_cache
--page-sizes 1`` in the audit environment (``.audit-venv``: torch CPU; ``sortedcontainers``
comes with hypothesis). LightLLM's only registry release (0.0.1, 2024-08) is far behind that
commit, so the module comes from a git checkout the user names with
``RADIXCHECK_LIGHTLLM_SRC=/path/to/lightllm`` (see :mod:`radixcheck.properties.adapters.checkout`;
without it a factory raises one ``CheckoutMissing`` saying what to clone; a commit other than
the validated one is used, with a warning). The file is imported unchanged; its two heavy
imports (the shared-memory counters, the GPU memory manager) are the stand-ins documented in
:mod:`properties.adapters._lightllm_stubs`, put into ``sys.modules`` first. Where torch is
installed and the setting given, importing this module imports torch and LightLLM's module at
once (a few seconds: the suite times every call into the target, so it must not happen inside
the first factory call); where it is not (the main gate), nothing is imported and a factory call
fails with ImportError.

Factories (``factory(allocator, page_size) -> cache``, each with a ``capabilities`` attribute)
----------------------------------------------------------------------------------------------
``radix_cache``         LightLLM's ``RadixCache`` with the capabilities below.
``release_0_0_1``, ``release_0_0_1_strict``
                        The same, and the same capabilities, on LightLLM 0.0.1 as installed from
                        the package registry (``pip install --no-deps lightllm==0.0.1``: what pip
                        users get; imported as is, its real POSIX shared-memory counters included,
                        each cache under a name of its own that is unlinked at once). Its tree
                        has the same API; its ``insert`` asserts a non-empty key, so the adapter
                        answers an empty insert with 0 itself (callers never send one).
``radix_cache_strict``  The same cache declaring ``checks_locks=True``: the strict contract,
                        which LightLLM is expected to fail (its ``dec_node_ref_counter`` checks
                        nothing; an unmatched release drives ``ref_counter`` to -1). It exists
                        so the suite reports that behaviour; see reports/findings/lightllm.md.

Capabilities (``radix_cache``) and why
--------------------------------------
* ``eviction_policy="lru"``: ``evict`` pops ``evict_tree_set``, a ``SortedSet`` of the current
  leaves keyed by ``(0 if ref_counter == 0 else 1, len(children), time_id)``; every leaf has
  no children, so it takes unreferenced leaves, smallest ``time_id`` first, and a parent left
  childless is added back with its own ``time_id``. ``time_id`` is a global counter stamped on
  every node that a match or an insert walks (``update_time`` in their ``finally`` blocks), and
  on a node's creation. That is least-recently-used, leaf first, and the suite's LRU oracle
  checks it. One deviation is LightLLM's, not the adapter's (reports/findings/lightllm.md #1):
  an insert that ends inside an edge stamps the whole edge without splitting it.
* ``supports_quarantine=False``: LightLLM has no ``evict_prefix``; the adapter's raises
  ``NotImplementedError`` and the suite never calls it.
* ``page_sizes=(1,)``: the tree is token-granular (no page size anywhere; the server's KV is
  per token). The factory refuses any other page size.
* ``checks_locks=False``: ``dec_node_ref_counter`` decrements every counter on the path with no
  check (LightLLM's callers pair each ``match_prefix(update_refs=True)`` with one release).
* ``supports_reset=False``: the server never flushes the tree; ``clear_tree_nodes`` is
  documented "only called in tests" and frees no KV slots (the caller's pool keeps them).
* ``locks_only_after_match=True``: LightLLM locks only while matching
  (``match_prefix(key, update_refs=True)``), see "Adapting a match-and-lock API" in
  :mod:`properties.cache.contract`.
* ``validates_input=False``: the tree trusts its callers with arguments (it takes int64 CPU
  tensors that the inference process builds); the adapter converts and does not validate.

What the adapter does besides forwarding (every difference)
------------------------------------------------------------
* Tokens become ``torch.int64`` CPU tensors (a fresh copy; the tree keeps views of the keys and
  values it inserts). Values go in as ``torch.int64`` tensors and come back as ``np.int64``.
* ``match_prefix(tokens)`` calls ``match_prefix(key, update_refs=False)`` (the unlocked match of
  LightLLM's unit tests). Its handle is a :class:`LightLLMHandle`: the node LightLLM returned
  and the matched tokens. A miss (LightLLM returns ``(None, 0, None)``) gives :data:`ROOT`.
* An empty query is answered by the adapter (no match, :data:`ROOT`) without calling LightLLM,
  whose ``match_prefix`` asserts ``len(key) != 0``: its callers never send one (e.g.
  ``InferReq.init_all`` matches only when the request has more than one token). An empty
  insert is forwarded (LightLLM returns 0 for it).
* ``inc_lock_ref(handle)`` matches the handle's tokens again with ``update_refs=True`` (the
  contract's recipe) and keeps the node that match returned; ``dec_lock_ref(handle)`` passes
  the most recent such node to ``dec_node_ref_counter`` (or, for a handle that holds no lock,
  the node of its match, so that LightLLM itself decides what an unmatched release does).
  ``inc_lock_ref`` raises :class:`LockNotAfterMatch` if the second match does not end at the
  handle's node with its length: that happens only if a caller locks a handle other than
  straight after its match, which ``locks_only_after_match=True`` promises the suite never
  does (the engine has then already counted the lock, and the adapter keeps it for the unlock).
* ``evict(n)`` calls ``evict(need, callback)``. LightLLM ``assert``s when ``need`` exceeds its
  own count of unreferenced tokens (``get_tree_total_tokens_num() - get_refed_tokens_num()``,
  what the router reads to schedule); its callers ask for no more. The adapter asks for
  ``min(n, that count)`` (0 if the count is negative, so LightLLM's assert still fires on a
  broken count). Like ``free_radix_cache_to_get_enough_token``, the callback only collects the
  evicted nodes' slot tensors; the adapter then frees them into the suite's ``SlotAllocator``
  one node at a time, in eviction order, and returns how many it freed.
* ``total_size``/``protected_size`` are LightLLM's own counters ``get_tree_total_tokens_num()``
  and ``get_refed_tokens_num()``; ``evictable_size`` is their difference (LightLLM's
  ``get_unrefed_tokens_num`` on the read-only client). The adapter never recounts the tree.
* ``RadixCache(unique_name, total_token_num, rank_in_node, mem_manager=None)`` is built with a
  name unique per cache, the pool size and rank 0 (with the stand-in ``SharedArray`` the name
  only labels the counters).
* ``evict_prefix`` and ``reset`` raise ``NotImplementedError`` (declared, never sent).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import itertools
import os
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from radixcheck.properties.adapters.checkout import (
    LIGHTLLM,
    EngineUnavailable,
    Installed,
    NotInstalled,
    Source,
    at_commit,
    import_unchanged,
    stand_ins_while_importing,
    working_tree,
)
from radixcheck.properties.cache.contract import Capabilities, SlotAllocator

REPO = LIGHTLLM  # where to clone it, its setting, the validated commit
LIGHTLLM_REPO = "ModelTC/lightllm"
LIGHTLLM_COMMIT = "fc72ffab9a3455cfb571f22d45ab777cc29de0de"
LIGHTLLM_PATH = "lightllm/server/router/dynamic_prompt/radix_cache.py"

PIP_REQUIREMENTS_NO_DEPS: list[str] = ["lightllm==0.0.1"]
"""LightLLM's one registry release, for the ``release_0_0_1`` factories: ``--no-deps``, because its
declared dependencies (triton, CUDA kernels, a server stack) are not needed to import its radix
cache, which needs only torch, numpy and sortedcontainers."""

PIP_REQUIREMENTS: list[str] = ["sortedcontainers>=2.4"]
"""Besides torch and numpy, LightLLM's module imports ``sortedcontainers`` (its eviction set is a
``SortedSet``). It is already in the audit environment as a dependency of hypothesis (2.4.0
there), so nothing extra was installed; it is listed so the environment states it."""

PAGE_SIZES = (1,)

_loaded: dict[str | None, tuple[ModuleType, Source]] = {}  # commit (None: the working tree) -> module, source
_names = itertools.count()


class _RootHandle:
    """The handle of the empty prefix: lock and unlock are no-ops (LightLLM returns no node)."""

    def __repr__(self) -> str:
        return "<root handle>"


ROOT = _RootHandle()


class LockNotAfterMatch(RuntimeError):
    """``inc_lock_ref``'s second match did not end where the handle's match ended: the handle
    was locked other than straight after its match (see ``locks_only_after_match``)."""


class LightLLMHandle:
    """What the adapter's ``match_prefix`` returns: LightLLM's node and the matched tokens."""

    __slots__ = ("key", "node", "locked")

    def __init__(self, key: Any, node: Any) -> None:
        self.key = key  # torch.int64 tensor: the matched prefix
        self.node = node  # LightLLM's TreeNode where the match ended
        self.locked: list[Any] = []  # nodes returned by the locking matches, not yet released

    def __repr__(self) -> str:
        return f"<LightLLM node, {len(self.key)} tokens, {len(self.locked)} locks>"


def load(commit: str | None = None) -> tuple[ModuleType, Source]:
    """LightLLM's ``radix_cache`` module from the user's checkout, with its source (once per commit).

    ``commit=None`` (the factories) takes the working tree as it is, warning if its commit was
    not validated; a commit id takes that commit from the checkout's history (the repros). Raises
    :class:`CheckoutMissing` without the checkout."""
    if commit not in _loaded:
        source = working_tree(LIGHTLLM) if commit is None else at_commit(LIGHTLLM, commit)
        from radixcheck.properties.adapters import _lightllm_stubs

        with stand_ins_while_importing(_lightllm_stubs.stand_in_modules()):  # imported at its top only
            module = import_unchanged(source, "radix_cache", siblings={"shared_arr": _lightllm_stubs.shared_arr_module()})
        _loaded[commit] = module, source
    return _loaded[commit]


RELEASE = "0.0.1"
"""LightLLM's one package-registry release (2024-08): what ``pip install lightllm`` gets."""


def release() -> Installed:
    """The installed registry release, or :class:`NotInstalled` saying how to install it."""
    try:
        version = importlib.metadata.version("lightllm")
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version != RELEASE:
        found = f"lightllm {version} is installed" if version else "lightllm is not installed"
        raise NotInstalled(f"{found}; the release_0_0_1 factories audit LightLLM's registry release: pip install "
                           f"--no-deps lightllm=={RELEASE} (python -m radixcheck.reports.audit_env installs it)", found)
    return Installed("LightLLM", "lightllm", version)


def load_release() -> tuple[ModuleType, Installed]:
    """LightLLM 0.0.1's ``radix_cache`` as installed from the registry, imported as is (once)."""
    if RELEASE not in _loaded:
        installed = release()
        _loaded[RELEASE] = importlib.import_module("lightllm.server.router.dynamic_prompt.radix_cache"), installed
    return _loaded[RELEASE]


def source_of(factory_name: str) -> Source | Installed:
    """Where factory ``factory_name``'s cache comes from (no torch needed; raises
    CheckoutMissing, or NotInstalled for the registry release)."""
    return release() if factory_name.startswith("release_") else working_tree(LIGHTLLM)


def _tensor(ids: Any):
    """A fresh ``torch.int64`` CPU tensor of ``ids`` (no validation: the tree trusts callers)."""
    import torch

    return torch.from_numpy(np.array(ids, dtype=np.int64).reshape(-1))


def _np(values: Any) -> np.ndarray:
    return values.detach().cpu().numpy().astype(np.int64, copy=True).reshape(-1)


class LightLLMRadixCache:
    """LightLLM's ``RadixCache`` behind the radixcheck contract (see the module docstring)."""

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        if page_size != 1 or isinstance(page_size, bool):
            raise ValueError(f"LightLLM's radix cache is token-granular: page_size must be 1, got {page_size!r}")
        self.lightllm = self._module()
        self.allocator = allocator
        self.page_size = 1
        self.cache = self.lightllm.RadixCache(f"radixcheck_{next(_names)}", allocator.pool_size, 0, mem_manager=None)

    @staticmethod
    def _module() -> ModuleType:
        return load()[0]

    def match_prefix(self, tokens: Sequence[int]) -> tuple[np.ndarray, Any]:
        key = _tensor(tokens)
        if len(key) == 0:  # LightLLM asserts on it; its caller never sends one
            return np.empty(0, np.int64), ROOT
        node, length, values = self.cache.match_prefix(key, update_refs=False)
        if node is None:
            return np.empty(0, np.int64), ROOT
        return _np(values), LightLLMHandle(key[: int(length)], node)

    def insert(self, tokens: Sequence[int], values: Any) -> int:
        return int(self.cache.insert(_tensor(tokens), _tensor(values)))

    def inc_lock_ref(self, handle: Any) -> None:
        if handle is ROOT:
            return
        node, length, _ = self.cache.match_prefix(handle.key, update_refs=True)
        if node is not None:
            handle.locked.append(node)
        if node is not handle.node or int(length) != len(handle.key):
            raise LockNotAfterMatch(
                f"locking {handle}: matching its {len(handle.key)} tokens again with update_refs=True ended at "
                f"{'no node' if node is None else 'another node'} after {int(length)} tokens"
            )

    def dec_lock_ref(self, handle: Any) -> None:
        if handle is ROOT:
            return
        node = handle.locked[-1] if handle.locked else handle.node
        self.cache.dec_node_ref_counter(node)
        if handle.locked:
            handle.locked.pop()

    def evict(self, num_tokens: int) -> int:
        unreferenced = int(self.cache.get_tree_total_tokens_num()) - int(self.cache.get_refed_tokens_num())
        need = int(num_tokens) if num_tokens <= unreferenced else max(unreferenced, 0)
        released: list[Any] = []
        self.cache.evict(need, released.append)
        freed = 0
        for slots in released:
            ids = _np(slots)
            self.allocator.free(ids)
            freed += len(ids)
        return freed

    def evict_prefix(self, tokens: Sequence[int]) -> int:
        raise NotImplementedError("LightLLM's radix cache has no evict_prefix (quarantine)")

    def total_size(self) -> int:
        return int(self.cache.get_tree_total_tokens_num())

    def protected_size(self) -> int:
        return int(self.cache.get_refed_tokens_num())

    def evictable_size(self) -> int:
        return self.total_size() - self.protected_size()

    def reset(self) -> None:
        raise NotImplementedError("LightLLM's radix cache has no reset (clear_tree_nodes is test-only and frees no slots)")


class LightLLMRelease(LightLLMRadixCache):
    """The same adapter on LightLLM 0.0.1 from the package registry (see the module docstring)."""

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        if page_size != 1 or isinstance(page_size, bool):
            raise ValueError(f"LightLLM's radix cache is token-granular: page_size must be 1, got {page_size!r}")
        self.lightllm = load_release()[0]
        self.allocator = allocator
        self.page_size = 1
        # Real POSIX shared memory: a name no other process or cache uses, unlinked at once (the
        # mapping lives on with the cache), so caches never share counters and /dev/shm keeps nothing.
        self.cache = self.lightllm.RadixCache(f"radixcheck_{os.getpid()}_{next(_names)}", allocator.pool_size, 0)
        for shared in (self.cache.refed_tokens_num, self.cache.tree_total_tokens_num, self.cache.shared_idx_manager._shm_array):
            shared.shm.unlink()

    def insert(self, tokens: Sequence[int], values: Any) -> int:
        if len(tokens) == 0:  # 0.0.1 asserts len(key) >= 1; its callers never insert an empty prompt
            return 0
        return super().insert(tokens, values)


def _factory(name: str, caps: Capabilities, cls: type[LightLLMRadixCache] = LightLLMRadixCache
             ) -> Callable[[SlotAllocator, int], LightLLMRadixCache]:
    def factory(allocator: SlotAllocator, page_size: int) -> LightLLMRadixCache:
        return cls(allocator, page_size)

    what = f"LightLLM {RELEASE} (registry)" if cls is LightLLMRelease else f"LightLLM checkout (validated {LIGHTLLM_COMMIT[:7]})"
    factory.__name__ = factory.__qualname__ = name
    factory.capabilities = caps  # type: ignore[attr-defined]
    factory.__doc__ = f"radixcheck target {name}: {what} RadixCache, {caps}"
    return factory


_CAPS = Capabilities(
    eviction_policy="lru",
    supports_quarantine=False,
    page_sizes=PAGE_SIZES,
    checks_locks=False,
    supports_reset=False,
    locks_only_after_match=True,
    validates_input=False,
)

radix_cache = _factory("radix_cache", _CAPS)
radix_cache_strict = _factory("radix_cache_strict", dataclasses.replace(_CAPS, checks_locks=True))
release_0_0_1 = _factory("release_0_0_1", _CAPS, LightLLMRelease)
release_0_0_1_strict = _factory("release_0_0_1_strict", dataclasses.replace(_CAPS, checks_locks=True), LightLLMRelease)

FACTORIES: dict[str, Callable[[SlotAllocator, int], LightLLMRadixCache]] = {
    "radix_cache": radix_cache,
    "radix_cache_strict": radix_cache_strict,
    "release_0_0_1": release_0_0_1,
    "release_0_0_1_strict": release_0_0_1_strict,
}

if importlib.util.find_spec("torch") is not None and importlib.util.find_spec("sortedcontainers") is not None:
    for _loader in (load, load_release):
        try:
            _loader()
        except EngineUnavailable:
            pass  # each factory raises it, with its message

__all__ = ["FACTORIES", "RELEASE", "ROOT", "LightLLMHandle", "LightLLMRadixCache", "LightLLMRelease", "LockNotAfterMatch",
           "load", "load_release", "radix_cache", "radix_cache_strict", "release", "release_0_0_1", "release_0_0_1_strict",
           "source_of"]

if __name__ == "__main__":  # list the factories
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.lightllm_radix:{_name}", _f.capabilities)
