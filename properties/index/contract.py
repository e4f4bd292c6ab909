"""The second contract: what radixcheck expects of a KV-event index (a KV-aware router's view).

A KV-aware router (Dynamo's ``RadixTree``, SGLang's gateway, llm-d's KV cache index) keeps, for
each worker, which KV blocks it holds, built from the events the engines publish, and sends each
request to the worker with the longest cached prefix. Read this module to write an adapter for
an index; :mod:`radixcheck.properties.index.machine` drives any index through it.

Vocabulary
----------
* A *worker* is an engine replica, named by ``worker_id`` (an int); one worker may run several
  data-parallel ranks (``dp_rank``, from 0), each with its own KV cache and its own events. The
  index answers per ``(worker_id, dp_rank)``, called a *rank* below.
* A *block* is one page of KV. Each carries two 64-bit hashes, as in vLLM's and Dynamo's events:
  ``block_hash``, the hash of the whole sequence up to and including the block (a chain: the same
  block content after another prefix has another ``block_hash``), and ``tokens_hash``, the hash of
  the block's own tokens only (Dynamo's ``LocalBlockHash``). A query is a list of ``tokens_hash``
  values, one per block of the request, which is what a router can compute from a request alone.
  Within one index the two are consistent: ``(parent block_hash, tokens_hash)`` names one
  ``block_hash`` (Dynamo: "a deterministic one-to-one mapping"). Hashes are ints in
  ``[0, 2**64)``; the suite sends values across that range, at and above ``2**63`` too.

The events an engine publishes (vLLM's ``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared``)
-------------------------------------------------------------------------------------------------
``BlockStored(parent_hash, blocks)``
    The rank cached ``blocks`` (a chain: each block's parent is the one before it, the first
    one's is ``parent_hash``; ``None`` at the start of a sequence). The parent is a block the rank
    holds. Storing a block the rank already holds is allowed (vLLM caches a recomputed block
    again; Dynamo's publisher passes every store through).
``BlockRemoved(block_hashes)``
    The rank no longer holds these blocks (it evicted them). A block may be removed while blocks
    stored under it stay cached (an engine that evicts any unreferenced block, vLLM's
    ``evict_blocks``), unless the index declares ``accepts_any_removal_order=False``: then the
    suite removes a block only after every block stored under it on that rank.
``AllBlocksCleared()``
    The rank holds nothing any more (vLLM's ``reset_prefix_cache``). Other ranks of the same
    worker are not affected.

**What "holds" means, and duplicate block hashes.** vLLM does not deduplicate: a block-aligned
prompt that is fully cached recomputes its last block into a second physical block with the same
``block_hash``, both copies publish ``BlockStored``, and each copy's eviction publishes
``BlockRemoved`` (``reports/findings/vllm.md``, finding 1). An index declares which stream it
reads:

* ``counts_copies=False`` (Dynamo, most routers): the index mirrors a *deduplicated* stream, as
  Dynamo's publisher-side ``EventDedupFilter`` (ai-dynamo/dynamo#8012) delivers it: every store
  passes, a remove comes only when the rank's last copy goes. A rank holds a block from a store
  to the next remove.
* ``counts_copies=True`` (llm-d's ``eventDedupFilter``, llm-d/llm-d-kv-cache#680): the index reads
  vLLM's raw stream and counts copies: a rank holds a block while it has had more stores of it
  than removes.

Events of one rank arrive in the order it published them (transports number them: Dynamo's
event ids); events of different ranks interleave freely.

The queries a router makes (``KvIndexLike``)
--------------------------------------------
``apply_event(worker_id, dp_rank, event) -> None``
    Apply one event (the dataclasses below) published by that rank.
``find_matches(tokens_hashes) -> dict[(worker_id, dp_rank), int]``
    For each rank, its overlap: the number of leading blocks of the query that it holds as a
    chain, i.e. the largest ``k`` such that the rank holds the blocks of the query's first 1, 2,
    ... ``k`` blocks (the prefix the engine itself would match: vLLM's ``get_computed_blocks``
    walks the hashes until the first miss). Ranks with overlap 0 may be left out. A block held
    again after its parent came back counts again: what the engine holds is what matches.
``remove_worker(worker_id) -> None``
    The worker is gone (every rank). It may come back later under the same id, empty.
``sizes() -> dict[(worker_id, dp_rank), int]`` (``reports_sizes=True``)
    How many distinct blocks each rank holds (Dynamo's ``tree_sizes``, used by its cost model).
    Ranks holding nothing may be left out.
``dump() -> list[(worker_id, dp_rank, BlockStored)]`` (``offers_dump=True``)
    Events that would rebuild the index (Dynamo's ``dump_tree_as_events``, a router's warm
    restart): every block a rank holds with all its ancestors must be in it, and no block a rank
    does not hold; replayed in order they rebuild it, so a block comes after its parent when the
    dump lists both for that rank.
``resident() -> int`` (``reports_resident=True``)
    How many entries the index keeps in memory, of whatever kind (nodes, lookup entries): the
    memory check. Once nothing is held it must be 0, and it must stay bounded by what is held
    (:data:`RESIDENT_PER_BLOCK` entries per held block) through any churn. Dynamo's binding
    offers no such count; its memory is measured as process RSS in the field
    (``reports/index_memory.py``).

Bad events
----------
An index that declares ``validates_events=True`` must refuse a malformed event (an exception,
or ignoring it) *and leave itself unchanged*: a ``BlockStored`` whose parent is one of its own
blocks (ai-dynamo/dynamo#4394: the indexer panicked and every request then saw it offline) or
that names a block twice, a ``BlockStored`` under a parent the rank does not hold (for good:
not kept and applied once that parent is stored, as an index that buffers out-of-order stores
would), a ``BlockRemoved`` of a block the rank does not hold, hashes that are not ints in ``[0, 2**64)``
(in any block of a store, the first included: a store refused at its second block must not have
stored its first). The suite checks "unchanged" by comparing matches (and sizes and the dump,
where offered) before and after, and checks the index still answers. Left open, and never sent: a
``BlockRemoved`` naming both blocks the rank holds and one it does not (refusing it whole and
applying its held part are both defensible: the engine did evict those; Dynamo 1.6.1 does the
latter).

An index that forgets on its own (``evicts_on_its_own``)
------------------------------------------------------
A router may bound its index and forget blocks that ranks still hold: llm-d's in-memory index is
an LRU of block keys (``pkg/kvcache/kvblock/in_memory.go``, ``NewInMemoryIndex``: a
``golang-lru`` cache of ``Size`` keys, each with an LRU of at most ``PodCacheSize`` pods;
``Lookup`` refreshes every key it finds, ``Evict`` of a key it no longer has is a no-op); Dynamo's
``PruneManager`` (``lib/kv-router/src/indexer/pruning.rs``) expires blocks after a TTL and, past
``max_tree_size``, prunes the earliest-expiring down to ``max_tree_size * prune_target_ratio``
(a store renews a block's timer). Such an index declares ``evicts_on_its_own=True``, and the
contract becomes one of bounds:

* it never answers *more* than the events say: each rank's overlap, size and dumped blocks are
  at most what the rank holds (a block it never stored, or removed, is never matched);
* every legal event is still taken: a ``BlockRemoved`` of a block it forgot, and a
  ``BlockStored`` under a parent it forgot (it cannot tell such a parent from one the rank never
  held, so no store under an unheld parent is sent to it as malformed);
* ``keeps_recent_blocks=K`` (0: no promise, e.g. a TTL alone, which the suite has no clock for)
  says which blocks it keeps: a ``(rank, block)`` stored and not removed since is still known if
  fewer than ``K`` other ``(rank, block)`` pairs were stored or looked up after that store. An LRU
  of ``C`` entries, refreshed by stores and (or not) by lookups, keeps ``K = C``; Dynamo's
  size pruning keeps ``K = max_tree_size * prune_target_ratio``. So each rank's overlap is at
  least its run of leading blocks that are all held and kept, and a dump lists every block kept
  with all its ancestors. A pair is counted per rank: a key shared by several ranks (llm-d's
  ``PodCache``) is as many pairs, which the bound allows for, but an LRU of pods per key smaller
  than the ranks that hold it can drop a rank the bound still promises (not modelled).

Target selection
----------------
An index target is a factory named ``package.module:attribute``, called with no arguments, that
returns a fresh, empty index; its ``capabilities`` attribute is an :class:`IndexCapabilities`
(that type is how ``radixcheck audit`` tells an index from a cache). The reference is
``radixcheck.reference.kv_index:KvIndex``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

HASH_LIMIT = 2**64
"""Hashes are ints in ``[0, HASH_LIMIT)``."""

RESIDENT_PER_BLOCK = 4
"""At most this many resident entries per held (rank, block) pair, plus :data:`RESIDENT_SLACK`."""

RESIDENT_SLACK = 16

Rank = tuple[int, int]
"""``(worker_id, dp_rank)``."""


@dataclass(frozen=True)
class StoredBlock:
    """One block of a ``BlockStored`` chain: its ``block_hash`` (hashed with its prefix) and ``tokens_hash`` (its own tokens only)."""

    block_hash: int
    tokens_hash: int


@dataclass(frozen=True)
class BlockStored:
    """The rank cached ``blocks``, a chain under ``parent_hash`` (``None`` at a sequence's start; see the module docstring)."""

    parent_hash: int | None
    blocks: tuple[StoredBlock, ...]


@dataclass(frozen=True)
class BlockRemoved:
    """The rank no longer holds these blocks (it evicted them; see the module docstring)."""

    block_hashes: tuple[int, ...]


@dataclass(frozen=True)
class AllBlocksCleared:
    """The rank holds nothing any more (vLLM's ``reset_prefix_cache``); its worker's other ranks keep theirs."""


KvEvent = BlockStored | BlockRemoved | AllBlocksCleared


@dataclass(frozen=True)
class IndexCapabilities:
    """What an index offers, and what it leaves to its callers. The suite never sends what an
    index leaves to its callers, and skips (with a reason) what it does not offer."""

    counts_copies: bool = False
    """True: the index reads vLLM's raw stream and counts physical copies of a block hash (see the
    module docstring). False: it reads the deduplicated stream (a remove only with the last copy)."""
    accepts_any_removal_order: bool = True
    """False: the index needs every block stored under a block removed before it (left to the
    publishers); the suite's engines then evict leaves first."""
    max_dp_ranks: int = 4
    """Data-parallel ranks per worker the index tells apart (1: every event comes from rank 0)."""
    validates_events: bool = True
    """Whether malformed events are refused (or ignored) with the index unchanged; False: none sent."""
    tolerates_redelivery: bool = False
    """Whether an event delivered twice (an at-least-once transport, a replay) leaves the index as
    if delivered once (Dynamo: "Kv events act idempotently on the Indexer", ai-dynamo/dynamo#2756).
    Never sent together with ``counts_copies`` (a repeated store would be another copy)."""
    reports_sizes: bool = True
    """Whether ``sizes()`` exists."""
    offers_dump: bool = True
    """Whether ``dump()`` exists."""
    reports_resident: bool = True
    """Whether ``resident()`` exists (the in-process memory check)."""
    evicts_on_its_own: bool = False
    """True: the index may forget blocks ranks still hold (an LRU or TTL bound); its answers are
    checked as bounds (see "An index that forgets on its own" above)."""
    keeps_recent_blocks: int = 0
    """With ``evicts_on_its_own``: a (rank, block) stored with fewer than this many other pairs
    stored or looked up since (and not removed) is still known. 0: no promise."""

    def __post_init__(self) -> None:
        for flag in ("counts_copies", "accepts_any_removal_order", "validates_events", "tolerates_redelivery",
                     "reports_sizes", "offers_dump", "reports_resident", "evicts_on_its_own"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"IndexCapabilities.{flag} must be a bool, got {getattr(self, flag)!r}")
        ranks = self.max_dp_ranks
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise ValueError(f"IndexCapabilities.max_dp_ranks must be a positive int, got {ranks!r}")
        keeps = self.keeps_recent_blocks
        if isinstance(keeps, bool) or not isinstance(keeps, int) or keeps < 0:
            raise ValueError(f"IndexCapabilities.keeps_recent_blocks must be an int >= 0, got {keeps!r}")
        if keeps and not self.evicts_on_its_own:
            raise ValueError("IndexCapabilities.keeps_recent_blocks is a promise of an index that evicts on its own: "
                             "set evicts_on_its_own=True too (an index that never forgets keeps every block)")

    def tenant_isolation(self) -> str:
        """The report card's "Tenant isolation" line."""
        return ("not exercised on the index alone: its contract carries no namespace (a router folds a request's "
                "namespace into the tokens hashes it computes, as Dynamo's compute_block_hash_for_seq does); checked end "
                "to end, per namespace, by a router pair whose engine has namespaces")

    def not_exercised(self) -> list[str]:
        """What the suite leaves out for this index, and why: for headers and report cards."""
        gaps = []
        if not self.counts_copies:
            gaps.append("vLLM's raw duplicate copies (counts_copies=False: the stream sent is deduplicated, "
                        "as Dynamo's publisher-side filter delivers it)")
        if not self.accepts_any_removal_order:
            gaps.append("a block removed before the blocks stored under it (accepts_any_removal_order=False: leaves first)")
        if self.max_dp_ranks == 1:
            gaps.append("data-parallel ranks (max_dp_ranks=1)")
        if not self.validates_events:
            gaps.append("refusal of malformed events (validates_events=False: none sent)")
        if not self.tolerates_redelivery:
            gaps.append("an event delivered twice (tolerates_redelivery=False: never sent)")
        elif self.counts_copies:  # declared, but a repeated store would be another copy: the machine sends none
            gaps.append("an event delivered twice (never sent with counts_copies=True: a repeated store is another copy)")
        if self.evicts_on_its_own:
            gaps.append("a store under a parent the rank never held staying refused (evicts_on_its_own: a forgotten "
                        "parent looks the same)")
            gaps.append("exact answers (evicts_on_its_own: matches, sizes and dump are checked as bounds; "
                        + (f"blocks stored among the last {self.keeps_recent_blocks} pairs must be kept)" if self.keeps_recent_blocks
                           else "keeps_recent_blocks=0: no block must be kept, only never more than the events)"))
        if not self.reports_sizes:
            gaps.append("per-rank sizes (reports_sizes=False)")
        if not self.offers_dump:
            gaps.append("the dump (offers_dump=False)")
        if not self.reports_resident:
            gaps.append("the in-process memory count (reports_resident=False: memory measured as RSS in the field)")
        return gaps


DEFAULT_INDEX_CAPABILITIES = IndexCapabilities()


@runtime_checkable
class KvIndexLike(Protocol):
    """The methods the suite calls (``sizes``, ``dump``, ``resident`` only where declared)."""

    def apply_event(self, worker_id: int, dp_rank: int, event: KvEvent) -> None: ...

    def find_matches(self, tokens_hashes: Sequence[int]) -> dict[Rank, int]: ...

    def remove_worker(self, worker_id: int) -> None: ...


CORE_INDEX_METHODS = ("apply_event", "find_matches", "remove_worker")


def required_index_methods(capabilities: IndexCapabilities) -> list[str]:
    """The methods the suite will call on an index with these capabilities."""
    optional = [("sizes", capabilities.reports_sizes), ("dump", capabilities.offers_dump),
                ("resident", capabilities.reports_resident)]
    return list(CORE_INDEX_METHODS) + [name for name, offered in optional if offered]
