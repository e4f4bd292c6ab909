"""The third contract: what radixcheck expects of a router's multi-tenant prefix tree.

Most prefix-aware routers (Ray Serve LLM's ``PrefixTree``, vLLM production stack's ``HashTrie``,
SGLang's router, smg) keep one approximate prefix tree for all their replicas. Each replica is a
*tenant*: the tree remembers which prompts were routed to which tenant, matches a new prompt
against the tenants available now, and trims a tenant that grew too large by LRU. Read this
module to write an adapter; :mod:`radixcheck.properties.tenant_tree.machine` drives any tree
through it.

Vocabulary
----------
* A *key* is a prompt: a ``str`` (``key_kind="text"``, compared character by character, i.e. by
  code point) or a ``tuple[int, ...]`` of token ids (``key_kind="tokens"``). Its *length* is
  ``len(key)``.
* A *tenant* is a replica, named by a ``str``. A tenant *holds* a prefix ``p`` when some key
  inserted for it since it was (last) added, and not evicted since, starts with ``p``. Its *size* is
  the number of distinct non-empty prefixes it holds (for text: characters of its trie; Ray's
  ``tenant_to_char_count``).
* Times are floats (seconds) the caller passes with each insert; the suite's never go backwards
  and never repeat for one tenant (two inserts in one clock tick are not sent: which of two equally
  old branches an eviction takes first would be the tree's choice, which the model does not judge).
  A held prefix's *last use* is the time of the latest insert that passed through it.

The calls (``TenantTreeLike``)
------------------------------
``add_tenants(tenants, time_s) -> None``
    The tenants join, holding nothing. Adding a present tenant changes nothing.
``insert(key, tenant, time_s) -> None``
    ``key`` was routed to ``tenant`` at ``time_s``: the tenant holds every prefix of it, each last
    used at ``time_s``. Only sent for a present tenant.
``match(key, available) -> (length, tenants)``
    ``available`` is a non-empty set of tenant names (a router's live replicas; it may name tenants
    that were removed or never added: they hold nothing). ``length`` is the longest prefix of ``key``
    that some available tenant holds, and ``tenants`` the available tenants holding that prefix (a
    ``frozenset`` or any iterable of names). At ``length == 0``, ``tenants`` may be any subset of
    ``available`` (every tenant "holds" the empty prefix: routers return all, or none).
``remove_tenants(tenants) -> None`` (``supports_removal``)
    The tenants leave: afterwards nothing of them stays, in matches, sizes or memory. A removed
    tenant may be added again later under the same name, holding nothing.
``evict(tenant, amount) -> int`` (``supports_eviction``)
    Trim ``tenant`` by LRU: remove its least recently used prefixes, deepest first among equal
    times (a leaf before its parent), until at least ``min(amount, size)`` are gone; return how many
    went. It may overshoot ``amount`` only to finish the *group* in which it reached ``amount``: the
    prefixes with that same last-use time (one insert's tail that no later insert refreshed; a tree
    node never straddles two groups). Other tenants lose nothing. ``amount == 0`` removes nothing.
``sizes() -> dict[str, int]`` (``reports_sizes``)
    Each present tenant's size (tenants of size 0 may be left out).
``close() -> None`` (optional)
    Called once when the suite is done with a tree (an adapter's background thread or event loop
    stops here).
``node_count() -> int`` (``reports_nodes``)
    How many nodes the tree keeps, root included: memory. It must stay at most
    :data:`NODE_SLACK` + the number of distinct prefixes the present tenants hold (a node holds at
    least one prefix some present tenant holds), through any churn of tenants joining, inserting and
    leaving (smg #2132: a removed worker's tenant never purged).

What "approximate" may mean, and may not
----------------------------------------
Routers call their trees approximate. The suite holds every tree to four rules, whatever it
declares:

1. a match may be **shorter than the truth** only where the tree declares lossy splitting
   (``match_granularity > 1``: the tree matches in chunks of that many elements, so a match is at
   least the truth rounded down to a multiple of it); otherwise it is exactly the truth;
2. a match is **never longer than the query**;
3. it **never names a tenant that does not hold** the matched prefix (at length > 0);
4. it **never names a tenant that is not available**.

A match names *every* available tenant holding the matched prefix, with one allowance for lossy
splitting: a match whose length is not a multiple of ``match_granularity`` ended inside a chunk (a
chunk trie sees a prefix there only as the whole tail of some keys, not inside the chunks of
others), so it may name only some of the holders (at least one). And a match never exceeds the
truth: a tree that matches more than any available tenant holds routes by prefixes that are not
cached anywhere. Beyond that, "approximate" may mean only what a
capability declares: character- vs token-level keys (``key_kind``), a match that refreshes recency by
a clock of the tree's own (``match_refreshes_recency``: the LRU order is then not judged), the
chunking above, and whether the tree may be called from several threads (``thread_safe``).

Target selection
----------------
A tenant-tree target is a factory ``package.module:attribute`` called with no arguments that
returns a fresh, empty tree; its ``capabilities`` attribute is a :class:`TenantTreeCapabilities`
(that type is how ``radixcheck audit`` tells a tenant tree from a cache or an index). The
reference is ``radixcheck.reference.tenant_tree:TenantTree``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

NODE_SLACK = 1
"""The root: the one node a tree may keep while no tenant holds anything."""

Key = str | tuple[int, ...]


@dataclass(frozen=True)
class TenantTreeCapabilities:
    """What a tenant tree offers, and what is approximate in it by design. The suite never sends
    what a tree does not offer, and judges approximations only as the four rules allow (module
    docstring)."""

    key_kind: str = "text"
    """"text" (``str`` keys, per code point) or "tokens" (``tuple[int, ...]`` keys)."""
    match_granularity: int = 1
    """Lossy splitting: a tree that matches in chunks of this many elements may return the truth
    rounded down to a multiple of it (never less; 1: exact)."""
    match_refreshes_recency: bool = False
    """True: a match refreshes the matched prefixes by a clock of the tree's own, so which prefix is
    least recently used is not known to the caller: the LRU order of evictions is not judged (their
    amounts still are)."""
    thread_safe: bool = False
    """True: the tree may be called from several threads at once; the machine then adds a bounded
    stress step (a fixed number of threads, the model checked after joining)."""
    supports_removal: bool = True
    """Whether ``remove_tenants`` exists."""
    supports_eviction: bool = True
    """Whether ``evict`` exists (per-tenant LRU trimming)."""
    reports_sizes: bool = True
    """Whether ``sizes()`` exists."""
    reports_nodes: bool = True
    """Whether ``node_count()`` exists (the memory check)."""

    def __post_init__(self) -> None:
        if self.key_kind not in ("text", "tokens"):
            raise ValueError(f"TenantTreeCapabilities.key_kind must be 'text' or 'tokens', got {self.key_kind!r}")
        g = self.match_granularity
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise ValueError(f"TenantTreeCapabilities.match_granularity must be a positive int, got {g!r}")
        for flag in ("match_refreshes_recency", "thread_safe", "supports_removal", "supports_eviction", "reports_sizes",
                     "reports_nodes"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"TenantTreeCapabilities.{flag} must be a bool, got {getattr(self, flag)!r}")

    def tenant_isolation(self) -> str:
        """The report card's "Tenant isolation" line: a tenant tree's tenants are its whole subject."""
        return ("checked (oracle 11): a match names only available tenants that hold the prefix; "
                "a removed tenant leaves nothing behind (oracle 12)")

    def not_exercised(self) -> list[str]:
        """What the suite leaves out for this tree, and why: for headers and report cards."""
        gaps = []
        if self.match_granularity > 1:
            gaps.append(f"exact match lengths (match_granularity={self.match_granularity}: a match may be rounded down to "
                        "a multiple of it)")
        if self.match_refreshes_recency:
            gaps.append("LRU order of evictions (match_refreshes_recency=True: recency follows a clock of the tree's own)")
        if not self.thread_safe:
            gaps.append("concurrent callers (thread_safe=False: one thread only)")
        if not self.supports_removal:
            gaps.append("tenants leaving (supports_removal=False: never sent)")
        if not self.supports_eviction:
            gaps.append("per-tenant LRU eviction (supports_eviction=False: never sent)")
        if not self.reports_sizes:
            gaps.append("per-tenant sizes (reports_sizes=False)")
        if not self.reports_nodes:
            gaps.append("memory (reports_nodes=False: no node count)")
        return gaps


DEFAULT_TENANT_TREE_CAPABILITIES = TenantTreeCapabilities()


@runtime_checkable
class TenantTreeLike(Protocol):
    """The methods the suite calls (the others only where declared)."""

    def add_tenants(self, tenants: list[str], time_s: float) -> None: ...

    def insert(self, key: Key, tenant: str, time_s: float) -> None: ...

    def match(self, key: Key, available: frozenset[str]) -> tuple[int, Iterable[str]]: ...


CORE_TENANT_TREE_METHODS = ("add_tenants", "insert", "match")


def required_tenant_tree_methods(capabilities: TenantTreeCapabilities) -> list[str]:
    """The methods the suite will call on a tree with these capabilities."""
    optional = [("remove_tenants", capabilities.supports_removal), ("evict", capabilities.supports_eviction),
                ("sizes", capabilities.reports_sizes), ("node_count", capabilities.reports_nodes)]
    return list(CORE_TENANT_TREE_METHODS) + [name for name, offered in optional if offered]


def is_tenant_tree(capabilities: Any) -> bool:
    """Whether ``capabilities`` declare a tenant tree (a :class:`TenantTreeCapabilities`)."""
    return isinstance(capabilities, TenantTreeCapabilities)
