"""radixcheck adapter for vLLM production stack's router ``HashTrie``, from the user's checkout.

``src/vllm_router/prefix/hashtrie.py`` is not on the package registry as Python (the registry's
``vllm-router`` is a Rust router), so it is imported from a git checkout named by
``RADIXCHECK_PRODUCTION_STACK_SRC`` (:mod:`radixcheck.properties.adapters.checkout`), unchanged. It
imports ``xxhash`` (``pip install xxhash==3.5.0``, its pin: xxhash 4 refuses ``str`` input) and
``vllm_router.log.init_logger``, whose module imports starlette for its request logging:
radixcheck stands in for ``vllm_router.log`` during the import with ``init_logger =
logging.getLogger`` (the trie only logs).

The trie is a chunk-hash trie of endpoints (the contract's tenants): the request text is cut into
chunks of ``chunk_size`` characters, each hashed with xxh64; a node per chunk hash holds the
endpoints that inserted through it. Its calls are coroutines (one ``asyncio.Lock`` per node), run
here on one event loop of the adapter's. It has no tenant registry, no eviction, no removal, no
sizes: declared (``supports_removal=False``, ``supports_eviction=False``, ``reports_sizes=False``,
``reports_nodes=False``), never sent. Matching in whole chunks is declared lossy
(``match_granularity=chunk_size``): a match may be the truth rounded down to a chunk. Mapping:

* ``add_tenants``: nothing (any endpoint may insert);
* ``insert(key, tenant, time_s)``: ``insert(key, tenant)`` (no time: no LRU);
* ``match(key, available)``: ``longest_prefix_match(key, set(available))``.

Factories: ``hashtrie_chunk4`` (``chunk_size=4``: prompts of the machine's lengths span several
chunks) and ``hashtrie_default`` (``chunk_size=128``, the router's default: every prompt the machine
sends is one partial chunk).
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import Iterable
from typing import Any

from radixcheck.properties.adapters.checkout import (
    PRODUCTION_STACK,
    NotInstalled,
    Source,
    import_unchanged,
    stand_ins_while_importing,
    working_tree,
)
from radixcheck.properties.tenant_tree.contract import TenantTreeCapabilities

PIP_REQUIREMENTS = ["xxhash==3.5.0"]  # what the production stack pins (pyproject.toml); xxhash 4 refuses str input
_loaded: dict[str, Any] = {}


def source_of(factory_name: str) -> Source:
    return working_tree(PRODUCTION_STACK)


def _log_stand_in() -> dict[str, types.ModuleType]:
    package = types.ModuleType("vllm_router")
    package.__path__ = []  # type: ignore[attr-defined]
    log = types.ModuleType("vllm_router.log")
    log.init_logger = logging.getLogger  # type: ignore[attr-defined]
    package.log = log  # type: ignore[attr-defined]
    return {"vllm_router": package, "vllm_router.log": log}


def load() -> Any:
    """The checkout's ``hashtrie`` module (imported once)."""
    if "hashtrie" not in _loaded:
        try:
            import xxhash  # noqa: F401 - the trie's own import, checked first for a clear message
        except ImportError as exc:
            raise NotInstalled("the production stack's HashTrie imports xxhash: pip install xxhash==3.5.0 (its pin)",
                               "xxhash not installed") from exc
        source = working_tree(PRODUCTION_STACK)
        with stand_ins_while_importing(_log_stand_in()):
            _loaded["hashtrie"] = import_unchanged(source, "hashtrie")
    return _loaded["hashtrie"]


class ProductionStackHashTrie:
    """``HashTrie(chunk_size)`` behind the tenant-tree contract (module docstring)."""

    def __init__(self, chunk_size: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.trie = load().HashTrie(chunk_size=chunk_size)

    def add_tenants(self, tenants: list[str], time_s: float) -> None:
        pass  # the trie has no tenant registry

    def insert(self, key: str, tenant: str, time_s: float) -> None:
        self.loop.run_until_complete(self.trie.insert(key, tenant))

    def match(self, key: str, available: Iterable[str]) -> tuple[int, frozenset[str]]:
        length, endpoints = self.loop.run_until_complete(self.trie.longest_prefix_match(key, set(available)))
        return length, frozenset(endpoints)

    def close(self) -> None:
        self.loop.close()


def _capabilities(chunk_size: int) -> TenantTreeCapabilities:
    return TenantTreeCapabilities(key_kind="text", match_granularity=chunk_size, thread_safe=False, supports_removal=False,
                                  supports_eviction=False, reports_sizes=False, reports_nodes=False)


def hashtrie_chunk4() -> ProductionStackHashTrie:
    return ProductionStackHashTrie(4)


def hashtrie_default() -> ProductionStackHashTrie:
    return ProductionStackHashTrie(128)


hashtrie_chunk4.capabilities = _capabilities(4)
hashtrie_default.capabilities = _capabilities(128)

FACTORIES = {"hashtrie_chunk4": hashtrie_chunk4, "hashtrie_default": hashtrie_default}

__all__ = ["FACTORIES", "PIP_REQUIREMENTS", "ProductionStackHashTrie", "hashtrie_chunk4", "hashtrie_default", "load", "source_of"]
