"""The end-to-end pairing: an engine that publishes KV events, and a router index that reads them.

A *router pair* target is a factory, called with no arguments, returning a :class:`RouterPair`:
how to build the engine (a radix cache factory, as in ``radixcheck.properties.cache.contract``, whose
cache also offers ``take_published()`` and ``tap_events``), how to build the index (as in
``radixcheck.properties.index.contract``), and how the engine's events become the index's (the
publisher's translation, with the tokens hash a router computes from a request). Its
``capabilities`` is a :class:`RouterCapabilities` (that type is how ``radixcheck audit`` tells a
pair from a cache or an index). :mod:`radixcheck.properties.index.router_e2e` runs the cache machine on
the engine and, after every step, checks that the router's view equals the engine's own cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from radixcheck.properties.cache.contract import Capabilities
from radixcheck.properties.index.contract import IndexCapabilities


@dataclass(frozen=True)
class RouterCapabilities:
    """The engine's capabilities (what the cache machine sends it), the index's, and whether the
    engine's events pass through a deduplicating filter first (Dynamo's worker-side
    ``EventDedupFilter``: a remove only with a hash's last copy)."""

    engine: Capabilities
    index: IndexCapabilities
    deduplicated: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.engine, Capabilities) or not isinstance(self.index, IndexCapabilities):
            raise TypeError("RouterCapabilities needs the engine's Capabilities and the index's IndexCapabilities")
        if not isinstance(self.deduplicated, bool):
            raise TypeError(f"RouterCapabilities.deduplicated must be a bool, got {self.deduplicated!r}")

    def page_sizes_tested(self) -> tuple[int, ...]:
        return self.engine.page_sizes_tested()

    def tenant_isolation(self) -> str:
        """The report card's "Tenant isolation" line: the router's view per namespace, where the engine has them."""
        if not self.engine.namespaces:
            return "not exercised: the engine declares no namespaces"
        return ("checked on the router's view (oracle 10): each request's tokens hashes computed with its namespace, "
                f"and the router's answer for it compared with the engine's own under it; the engine: {self.engine.tenant_isolation()}")

    def not_exercised(self) -> list[str]:
        return ([f"engine: {gap}" for gap in self.engine.not_exercised() if not gap.startswith("lock counters wider")]
                + ["engine: lock counters (the end-to-end test runs the small machine only: no production-scale crowd)"]
                + [f"index: {gap}" for gap in self.index.not_exercised() if "raw duplicate" not in gap and "malformed" not in gap]
                + ["index: malformed events (the engine publishes them, or nothing does)"])


@dataclass(frozen=True)
class RouterPair:
    """What a router pair target's factory returns: ``engine(allocator, page_size)`` builds a cache that
    publishes KV events (``take_published()``, ``tap_events``), ``index()`` a fresh router index,
    ``events(engine_events, page_size)`` turns the engine's events into the index's (the publisher's
    translation), and ``tokens_hashes(tokens, block_size)`` gives the hash per block a router computes
    from a request's tokens."""

    engine: Callable[[Any, int], Any]  # (allocator, page_size) -> a cache that publishes events
    index: Callable[[], Any]
    events: Callable[[list[Any], int], list[Any]] = field(repr=False)  # (engine's events, page size) -> index events
    tokens_hashes: Callable[[list[int], int], list[int]] = field(repr=False)  # (tokens, block size) -> one hash per block
