"""radixcheck adapters for Dynamo's KV router index (``ai-dynamo-runtime==1.6.1``, CPU).

Select one with ``radixcheck audit radixcheck.properties.adapters.dynamo_index:<factory>``. They
need the registry package in the audit environment (``.audit-venv/``, installed by
``python -m radixcheck.reports.audit_env`` from :data:`PIP_REQUIREMENTS`); where it is missing (the
gate's environment) importing this module imports nothing of Dynamo, and a factory call fails
with ImportError. Nothing of Dynamo's is copied: the adapter calls the Python binding only.

What is under test
------------------
``dynamo._core.RadixTree``, the Python binding of Dynamo's single-threaded KV router index
(``lib/kv-router/src/indexer/radix_tree.rs``: a compressed radix tree of blocks with per-worker
lookup tables; the binding runs it on a dedicated thread). Its methods map one to one:

* ``apply_event(worker_id, dp_rank, event)`` = ``RadixTree.apply_event(worker_id, json)``, the JSON
  being Dynamo's ``KvCacheEvent`` wire form as its publishers send it: ``{"event_id": n, "dp_rank":
  r, "data": {"stored": {"parent_hash": p, "blocks": [{"block_hash": h, "tokens_hash": t}, ...]}}}``,
  ``{"removed": {"block_hashes": [...]}}`` or ``"cleared"``; event ids count up per rank. Dynamo
  raises ``RuntimeError`` for an event it cannot apply (parent not found, block not found, a
  self-referencing store) and ``ValueError`` for one it cannot parse.
* ``find_matches(tokens_hashes)`` = ``RadixTree.find_matches(hashes).scores``, a dict keyed by
  ``(worker_id, dp_rank)``, as the contract's.
* ``remove_worker(worker_id)`` = ``RadixTree.remove_worker``.
* ``dump()`` = ``RadixTree.dump_tree_as_events()``, parsed (each a ``RouterEvent`` JSON with a
  ``stored`` event; a compressed edge is one event of several blocks).

Declared (capabilities)
-----------------------
* ``counts_copies=False``: the index mirrors a deduplicated stream; Dynamo deduplicates vLLM's
  duplicate copies on the worker side, before publishing (``EventDedupFilter``,
  ai-dynamo/dynamo#8012), so the suite sends the filtered stream.
* ``tolerates_redelivery=True``: "Kv events act idempotently on the Indexer ... replaying an event
  twice to the indexer is fine" (ai-dynamo/dynamo#2756).
* ``validates_events=True``: the single-threaded tree rejects self-referencing stores ("a
  single-threaded indexer defense", after #4394/#4395), stores under unknown parents and removes
  of unknown blocks, each with an error and (per the code) no change.
* ``max_dp_ranks=4``: events carry ``dp_rank``; scores are per ``(worker, dp_rank)``.
* ``reports_sizes=False``: the binding's ``OverlapScores`` exposes ``scores`` and ``frequencies``,
  not Dynamo's ``tree_sizes``; ``reports_resident=False``: no count of what it keeps, so memory
  is measured as process RSS (``reports/index_memory.py``), and the emptiness check uses the dump.
* ``accepts_any_removal_order``: two factories. ``dynamo_radix_tree`` declares True (the contract's
  general case: an engine may evict a block whose children stay cached, and vLLM matches those
  children again once the parent is back); ``dynamo_radix_tree_leaves_first`` declares False, the
  order vLLM's LRU free queue and SGLang's leaf eviction (one event per radix node since
  sgl-project/sglang#29265) deliver.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.index.contract import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    IndexCapabilities,
    Rank,
    StoredBlock,
)

PIP_REQUIREMENTS: list[str] = ["ai-dynamo-runtime==1.6.1"]
"""Installed with its dependencies (pydantic<=2.13.5, uvloop: both already in the audit environment)."""


def _block_json(block: Any) -> Any:
    if isinstance(block, StoredBlock):
        return {"block_hash": block.block_hash, "tokens_hash": block.tokens_hash}
    return block


def event_json(event: Any, event_id: int, dp_rank: int) -> bytes:
    """The contract's event in Dynamo's ``KvCacheEvent`` JSON (malformed fields passed as they are,
    so Dynamo's own parsing judges them)."""
    if isinstance(event, BlockStored):
        blocks = [_block_json(b) for b in event.blocks] if isinstance(event.blocks, tuple) else event.blocks
        data: Any = {"stored": {"parent_hash": event.parent_hash, "blocks": blocks}}
    elif isinstance(event, BlockRemoved):
        data = {"removed": {"block_hashes": list(event.block_hashes) if isinstance(event.block_hashes, tuple) else event.block_hashes}}
    elif isinstance(event, AllBlocksCleared):
        data = "cleared"
    else:
        raise TypeError(f"not a KV event: {event!r}")
    return json.dumps({"event_id": event_id, "dp_rank": dp_rank, "data": data}).encode()


def parse_dump(events: list[str]) -> list[tuple[int, int, BlockStored]]:
    """``dump_tree_as_events()`` as the contract's dump."""
    out = []
    for text in events:
        router_event = json.loads(text)
        inner = router_event["event"]
        stored = inner["data"]["stored"]
        blocks = tuple(StoredBlock(b["block_hash"], b["tokens_hash"]) for b in stored["blocks"])
        out.append((router_event["worker_id"], inner.get("dp_rank", 0), BlockStored(stored["parent_hash"], blocks)))
    return out


class DynamoIndex:
    """Dynamo's ``RadixTree`` behind the index contract (see the module docstring)."""

    def __init__(self) -> None:
        from dynamo._core import RadixTree

        self.tree = RadixTree()
        self._event_ids: dict[Rank, int] = {}

    def apply_event(self, worker_id: int, dp_rank: int, event: Any) -> None:
        rank = (worker_id, dp_rank)
        self._event_ids[rank] = self._event_ids.get(rank, 0) + 1
        self.tree.apply_event(worker_id, event_json(event, self._event_ids[rank], dp_rank))

    def find_matches(self, tokens_hashes: Sequence[int]) -> dict[Rank, int]:
        return dict(self.tree.find_matches(list(tokens_hashes)).scores)

    def remove_worker(self, worker_id: int) -> None:
        self.tree.remove_worker(worker_id)

    def dump(self) -> list[tuple[int, int, BlockStored]]:
        return parse_dump(self.tree.dump_tree_as_events())


CAPABILITIES = IndexCapabilities(
    counts_copies=False,
    accepts_any_removal_order=True,
    max_dp_ranks=4,
    validates_events=True,
    tolerates_redelivery=True,
    reports_sizes=False,
    offers_dump=True,
    reports_resident=False,
)


def _factory(name: str, capabilities: IndexCapabilities) -> Callable[[], DynamoIndex]:
    def factory() -> DynamoIndex:
        return DynamoIndex()

    factory.__name__ = factory.__qualname__ = name
    factory.capabilities = capabilities  # type: ignore[attr-defined]
    return factory


FACTORIES: dict[str, Callable] = {
    # The contract's general case: a block may be removed while blocks stored under it stay cached.
    "dynamo_radix_tree": _factory("dynamo_radix_tree", CAPABILITIES),
    # The order vLLM's LRU and SGLang's leaf eviction deliver: a block's children go before it.
    "dynamo_radix_tree_leaves_first": _factory("dynamo_radix_tree_leaves_first",
                                               dataclasses.replace(CAPABILITIES, accepts_any_removal_order=False)),
}


def installed() -> bool:
    return importlib.util.find_spec("dynamo") is not None


__getattr__ = factory_lookup(__name__, FACTORIES)  # `module:<factory>` names a factory (PEP 562)


__all__ = ["FACTORIES", "PIP_REQUIREMENTS", "DynamoIndex", "event_json", "parse_dump", *FACTORIES]

if __name__ == "__main__":  # list the factories
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.dynamo_index:{_name}", _f.capabilities, file=sys.stdout)
