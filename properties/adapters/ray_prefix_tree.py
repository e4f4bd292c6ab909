"""radixcheck adapter for Ray Serve LLM's ``PrefixTree``, the prefix-aware router's tenant tree.

``ray/llm/_internal/serve/routing_policies/prefix_aware/prefix_tree.py`` of the ``ray`` release on
the package registry (2.60.0 audited), driven through the tenant-tree contract
(:mod:`radixcheck.properties.tenant_tree.contract`). Importing it imports Ray Serve's constants,
which need Ray Serve's own dependencies: ``pip install "ray[serve]==2.60.0"`` in an environment of
its own (not the gate's; the matrix runs these rows there, see :mod:`radixcheck.reports.matrix`).

The tree is character-level (``str`` keys), thread-safe (one ``RLock``), and counts each tenant's
characters (``tenant_to_char_count``: the contract's sizes). A match does not refresh recency;
``insert(text, tenant, time_s)`` is the only use. Mapping:

* ``add_tenants``, ``insert``, ``remove_tenants``: the same calls;
* ``match(key, available)``: ``prefix_match(key, sorted(available))`` -> ``(len(matched_text),
  tenants or ())`` (Ray returns ``None`` for no tenant; an empty list of available tenants would mean
  *all* to Ray, and the contract never sends one);
* ``evict(tenant, amount)``: ``evict_tenant_by_lru(tenant, amount)`` (it removes every node of the
  oldest timestamp together, which the contract allows: one insert's unrefreshed tail is a group);
* ``sizes()``: ``tenant_to_char_count``; ``node_count()``: the nodes reachable from the root (a walk
  under the tree's lock, for the memory check).

Factories: ``prefix_tree`` (the tree); ``prefix_tree_eviction_thread`` (the same, with its
background eviction thread running every millisecond at a threshold no tenant reaches: the
thread takes the lock and walks the tenants concurrently with every call, but never evicts,
which the model could not predict).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterable
from typing import Any

from radixcheck.properties.adapters.checkout import Installed, NotInstalled
from radixcheck.properties.tenant_tree.contract import TenantTreeCapabilities

RELEASE = "2.60.0"
MODULE = "ray.llm._internal.serve.routing_policies.prefix_aware.prefix_tree"
PIP_REQUIREMENTS = [f"ray[serve]=={RELEASE}"]


def release() -> Installed:
    try:
        version = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError as exc:
        raise NotInstalled(f'ray is not installed: pip install "ray[serve]=={RELEASE}" in an environment of its own',
                           "ray not installed") from exc
    return Installed("Ray Serve LLM", "ray[serve]", version)


def source_of(factory_name: str) -> Installed:
    return release()


def _module() -> Any:
    release()
    return importlib.import_module(MODULE)


class RayPrefixTree:
    """Ray Serve LLM's ``PrefixTree`` behind the tenant-tree contract (module docstring)."""

    capabilities = TenantTreeCapabilities(key_kind="text", thread_safe=True)

    def __init__(self, eviction_thread: bool = False) -> None:
        self.tree = _module().PrefixTree()
        if eviction_thread:
            self.tree.start_eviction_loop(eviction_threshold=10**12, eviction_target=10**12, interval_secs=0.001)

    def add_tenants(self, tenants: list[str], time_s: float) -> None:
        self.tree.add_tenants(list(tenants), time_s)

    def insert(self, key: str, tenant: str, time_s: float) -> None:
        self.tree.insert(key, tenant, time_s)

    def match(self, key: str, available: Iterable[str]) -> tuple[int, tuple[str, ...]]:
        text, tenants = self.tree.prefix_match(key, sorted(available))
        return len(text), tuple(tenants or ())

    def remove_tenants(self, tenants: list[str]) -> None:
        self.tree.remove_tenants(list(tenants))

    def evict(self, tenant: str, amount: int) -> int:
        return self.tree.evict_tenant_by_lru(tenant, amount)

    def sizes(self) -> dict[str, int]:
        with self.tree.lock:
            return dict(self.tree.tenant_to_char_count)

    def node_count(self) -> int:
        with self.tree.lock:
            count, stack = 0, [self.tree.root]
            while stack:
                node = stack.pop()
                count += 1
                stack.extend(node.edge_label_to_child.values())
            return count

    def close(self) -> None:
        self.tree.stop_eviction_loop()


def prefix_tree() -> RayPrefixTree:
    return RayPrefixTree()


def prefix_tree_eviction_thread() -> RayPrefixTree:
    return RayPrefixTree(eviction_thread=True)


prefix_tree.capabilities = RayPrefixTree.capabilities
prefix_tree_eviction_thread.capabilities = RayPrefixTree.capabilities

FACTORIES = {"prefix_tree": prefix_tree, "prefix_tree_eviction_thread": prefix_tree_eviction_thread}

__all__ = ["FACTORIES", "PIP_REQUIREMENTS", "RayPrefixTree", "prefix_tree", "prefix_tree_eviction_thread", "release", "source_of"]
