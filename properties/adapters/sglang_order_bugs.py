"""Order bugs planted into SGLang 0.5.23's real ``RadixCache``: what a ``known:`` waiver must not hide.

Each factory builds the adapter of :mod:`radixcheck.properties.adapters.sglang_radix` for one
policy (declaring SGLang's meaning of it, as ``radix_<policy>`` does) and plants one order bug
into that instance only: a replaced eviction strategy, or a replaced hit counter. SGLang's own
code is not copied or changed. The clean caches fail ``4 eviction order`` through the known
#3 and #9 alone, which ``reports/findings/sglang_known_order.txt`` waives by name; each cache
here must still fail it with that file (the figures: that file's header)::

    .audit-venv/bin/python -m radixcheck audit radixcheck.properties.adapters.sglang_order_bugs:lfu_reinsert_not_counted \\
        --waive reports/findings/sglang_known_order.txt -n 0

Factories: ``lfu_reinsert_not_counted`` (a node counts a hit only when it is created),
``lfu_ties_most_recent`` (among equally hit leaves the most recent goes first),
``mru_takes_lru_leaf`` (MRU's time not negated: it is LRU), ``fifo_by_last_access`` (FIFO
reads the access time, not the creation time), ``slru_never_promotes`` (no leaf is ever in the
protected segment). They need the audit environment (``python reports/audit_env.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.adapters.sglang_radix import FACTORIES as CLEAN
from radixcheck.properties.adapters.sglang_radix import SGLangRadixCache
from radixcheck.properties.cache.contract import SlotAllocator


class _Strategy:
    """An eviction strategy as SGLang's ``EvictionStrategy`` is called: ``get_priority(node)``, smallest first."""

    def __init__(self, priority: Callable[[Any], Any]) -> None:
        self.get_priority = priority


def _reinsert_not_counted(cache: Any) -> None:
    def inc_hit_count(node: Any) -> None:
        if node.hit_count == 0:  # the bug: only a new node counts its hit
            node.hit_count += 1
    cache._inc_hit_count = inc_hit_count


def _strategy(priority: Callable[[Any], Any]) -> Callable[[Any], None]:
    def plant(cache: Any) -> None:
        cache.eviction_strategy = _Strategy(priority)
    return plant


PLANTED: dict[str, tuple[str, Callable[[Any], None], str]] = {
    "lfu_reinsert_not_counted": ("lfu", _reinsert_not_counted, "a re-insert does not count a hit"),
    "lfu_ties_most_recent": ("lfu", _strategy(lambda n: (n.hit_count, -n.last_access_time)),
                             "among equally hit leaves, the most recently used goes first"),
    "mru_takes_lru_leaf": ("mru", _strategy(lambda n: n.last_access_time), "MRU's time is not negated: it evicts as LRU"),
    "fifo_by_last_access": ("fifo", _strategy(lambda n: n.last_access_time), "FIFO reads last_access_time, not creation_time"),
    "slru_never_promotes": ("slru", _strategy(lambda n: (0, n.last_access_time)), "no leaf is ever protected: SLRU is LRU"),
}
"""name -> (SGLang policy, what plants the bug into a ``RadixCache``, the bug in words)."""


def _planted(name: str, policy: str, plant: Callable[[Any], None], bug: str) -> Callable[[SlotAllocator, int], SGLangRadixCache]:
    def factory(allocator: SlotAllocator, page_size: int) -> SGLangRadixCache:
        adapter = SGLangRadixCache(allocator, page_size, eviction_policy=policy)
        plant(adapter.cache)  # this instance only
        return adapter

    factory.__name__ = factory.__qualname__ = name
    factory.capabilities = CLEAN[f"radix_{policy}"].capabilities  # type: ignore[attr-defined]  # SGLang's meaning of the policy
    factory.__doc__ = f"SGLang RadixCache ({policy}) with a planted order bug: {bug}"
    return factory


FACTORIES: dict[str, Callable[[SlotAllocator, int], SGLangRadixCache]] = {
    name: _planted(name, policy, plant, bug) for name, (policy, plant, bug) in PLANTED.items()}

__getattr__ = factory_lookup(__name__, FACTORIES)  # `module:<factory>` names a factory (PEP 562)

__all__ = ["FACTORIES", "PLANTED", *FACTORIES]
