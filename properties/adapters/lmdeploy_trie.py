"""radixcheck adapters for lmdeploy's PyTorch-engine prefix cache, ``paging/block_trie/`` (lmdeploy 0.18.0).

Select one with ``radixcheck audit radixcheck.properties.adapters.lmdeploy_trie:<factory>``. They
need lmdeploy from the package registry in an environment of its own (it pins
``torch<=2.12.1``, and the audit environment has torch 2.13.0; the trie imports fine with it)::

    python3 -m venv .lmdeploy-venv && . .lmdeploy-venv/bin/activate
    pip install torch==2.13.0 && pip install lmdeploy==0.18.0 --no-deps
    pip install pydantic transformers mmengine psutil pybase64 pyzmq xgrammar shortuuid && pip install -e ".[all]"

(:data:`PIP_REQUIREMENTS` / :data:`PIP_REQUIREMENTS_NO_DEPS`: what ``import lmdeploy.pytorch``
needs, nothing of lmdeploy's CUDA side). Where lmdeploy is not installed (the gate's environment)
importing this module imports nothing of it, and a factory call raises ImportError.

What is under test
------------------
``lmdeploy.pytorch.paging.block_trie.BlockTrie`` (``trie.py``, ``node.py``, ``kv_lifecycle.py``)
with lmdeploy's own ``DefaultBlockManager`` and ``LogicalAllocator`` (reference counts and access
times per logical block) and its own ``SchedulerSequence`` (``SchedulerSequenceDefault`` of the AR
strategy, made by ``SchedulerSession.add_sequence`` as the engine makes it). Nothing is re-implemented:
the stand-ins are only what a sequence needs around it, a sequence-id counter for the session
(the engine's ``SequenceLifecycle`` tracks statuses for the scheduler; the trie reads none), and a
subclass of ``LogicalAllocator`` whose ``free`` also reports which blocks reached reference count 0
(so the suite's slots go back to its pool). Prefix caching on, no SSM checkpoints (a
``StateManager`` and the engine loop's publication are needed for those: not driven), no
multimodal spans, no routed experts, no recompute overlap.

The calls, as lmdeploy's scheduler makes them (``_PrefillAdmissionAttempt``):

* ``match_prefix(tokens)``: a request whose prompt is ``tokens[:L] + [0]`` (``L`` block-aligned; the
  extra token stands for the one the forward must compute, since lmdeploy reuses a block only if
  it ends strictly before ``num_valid_ids``): ``BlockTrie.match(seq)`` (the tentative match: it
  touches the matched blocks and takes the sequence's references), then the scheduler's rollback
  (``block_manager.free(seq)``, the sequence's references dropped). The slots are those the suite
  inserted for the matched blocks; the handle is the matched tokens (and namespace).
* ``insert(tokens, values)``: a request for exactly ``tokens[:L]`` runs to completion:
  ``match``, ``block_manager.allocate(seq)`` (blocks for the uncached rest, including the last block,
  which the engine always recomputes), ``BlockTrie.allocate(seq)`` (attaches new full blocks;
  a block already in the trie is deduplicated: the sequence's copy is freed and the trie's used),
  then the request ends (``block_manager.free(seq)``). ``prefix_len`` = the blocks the trie had
  before (matched or deduplicated) times the block size.
* ``inc_lock_ref(handle)``: a request for the handle's tokens is admitted (``match`` and commit: the
  sequence holds one reference on every block of the path); ``dec_lock_ref(handle)``: the most
  recent such request ends (``block_manager.free(seq)``).
* ``evict(n)`` = ``BlockTrie.evict(ceil(n / block_size))``: frozen SSM checkpoints first (none
  here), then trie leaves whose block only the trie references (count 1), oldest access time first.
* Sizes: the trie's nodes (every adapter root, walked), times the block size; protected = nodes
  whose block a sequence also references (count > 1).
* ``namespace`` = the sequence's ``adapter_name`` (lmdeploy keeps one root per adapter).

Capabilities (non-defaults, and why)
------------------------------------
* ``eviction_policy="lru-match-or-release"``: recency is the allocator's ``access_time``, set when a
  block is matched, allocated, or *freed by a sequence* (``LogicalAllocator.free`` touches every
  block it is given). So the end of a request, an unlock in the contract's terms, is a use, which
  the contract's LRU says it is not. ``newest_lru`` declares ``"lru"`` anyway, to show the difference
  as a verdict.
* ``supports_quarantine=False``: no prefix-keyed removal in the trie.
* ``supports_reset=False``: no reset of the trie (the engine rebuilds its scheduler).
* ``checks_locks=False``: references belong to sequences; freeing a sequence twice is the engine's
  business (it never does), and there is no handle to refuse.
* ``locks_only_after_match=True``: a lock is a new request's match; straight after the suite's match
  it covers exactly the same blocks.
* ``validates_input=False``: token ids come from lmdeploy's own tokenizer and input processor.
* ``namespaces=True``: adapter names; the engine passes a LoRA name (str) or ``None``, the trie keys
  its roots by the value (the suite's tuples and ints are keys like any other).
* ``page_sizes=(1, 2, 4, 16)``: lmdeploy's ``block_size`` (64 by default on GPU).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import Capabilities, SlotAllocator

PIP_REQUIREMENTS: list[str] = ["pydantic", "transformers", "mmengine", "psutil", "pybase64", "pyzmq", "xgrammar", "shortuuid"]
"""What ``import lmdeploy.pytorch.messages`` needs besides torch (installed with their dependencies)."""
PIP_REQUIREMENTS_NO_DEPS: list[str] = ["lmdeploy==0.18.0"]
"""lmdeploy itself, without its CUDA and serving dependencies (and its torch pin)."""
VERSION = "0.18.0"

try:
    from lmdeploy.pytorch.messages import SchedulerSession, SequenceMeta
    from lmdeploy.pytorch.paging.block_manager.base_block_manager import LogicalAllocator
    from lmdeploy.pytorch.paging.block_manager.default_block_manager import DefaultBlockManager
    from lmdeploy.pytorch.paging.block_trie import BlockTrie
    from lmdeploy.pytorch.strategies.ar.sequence import ARSequenceStrategy
except ImportError as exc:  # the gate's environment
    _IMPORT_ERROR: ImportError | None = exc
    LogicalAllocator = object  # type: ignore[assignment,misc]
else:
    _IMPORT_ERROR = None

MAX_BLOCKS = 1 << 20
SPARE_BLOCKS = 64  # an insert's recomputed last block exists twice until the trie deduplicates it


class WatchedAllocator(LogicalAllocator):  # type: ignore[misc,valid-type]
    """lmdeploy's ``LogicalAllocator``, whose ``free`` also reports the blocks that reached count 0."""

    def __init__(self, num_blocks: int, on_released: Any) -> None:
        super().__init__(0, num_blocks)
        self._on_released = on_released

    def free(self, blocks: np.ndarray) -> None:
        blocks = np.asarray(blocks)
        super().free(blocks)
        gone = blocks[self.get_ref_count(blocks) == 0]
        if len(gone):
            self._on_released(np.unique(gone))


class _Lifecycle:
    """The one thing ``SchedulerSession.add_sequence`` asks of the engine's ``SequenceLifecycle``
    (ids); statuses are the scheduler's, and the trie reads none."""

    def __init__(self) -> None:
        self._ids = itertools.count()

    def new_sequence_id(self) -> int:
        return next(self._ids)

    def add_sequence(self, seq: Any, status: Any) -> None:
        pass  # the scheduler's status maps; the trie reads none


@dataclass
class Handle:
    tokens: tuple[int, ...]
    namespace: Hashable
    requests: list[Any]


class LmdeployTrieCache:
    """The contract's calls on lmdeploy's ``BlockTrie``, through its own sequences and allocator."""

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        if _IMPORT_ERROR is not None:
            raise ImportError(f"lmdeploy {VERSION} is not installed here ({_IMPORT_ERROR}); see this module's docstring")
        self.page_size = page_size
        self.slots = allocator
        blocks = min(MAX_BLOCKS, allocator.pool_size // page_size + SPARE_BLOCKS)
        self.block_manager = DefaultBlockManager(blocks, 0)
        self.block_manager.allocator = WatchedAllocator(blocks, self._released)
        self.trie = BlockTrie(allocator=self.block_manager.allocator, block_size=page_size, enabled=True)
        meta = SequenceMeta(block_size=page_size, strategy=ARSequenceStrategy(), enable_prefix_caching=True)
        self.session = SchedulerSession(0, meta, _Lifecycle())
        self.pages: dict[int, np.ndarray] = {}  # trie-owned block -> the suite's slots for its tokens
        self.root = Handle((), None, [])

    # ---- sequences, as the scheduler makes and ends them --------------------------------------

    def _aligned(self, tokens: Sequence[int]) -> list[int]:
        tokens = [int(t) for t in tokens]
        return tokens[: len(tokens) // self.page_size * self.page_size]

    def _request(self, tokens: list[int], namespace: Hashable) -> Any:
        return self.session.add_sequence(np.asarray(tokens, dtype=np.int64), adapter_name=namespace)

    def _end(self, seq: Any) -> None:
        """The request ends: its block references go (``release_paging_resources``)."""
        seq.prefix_cache.trie_cursor = None
        if seq.num_blocks > 0:
            self.block_manager.free(seq)
        seq.set_step(0)

    def _released(self, blocks: np.ndarray) -> None:
        for block in blocks.tolist():
            page = self.pages.pop(block, None)
            if page is not None:  # a trie block; a deduplicated copy carried no slots of the suite
                self.slots.free(page)

    def _matched(self, tokens: list[int], namespace: Hashable) -> Any:
        """A request for ``tokens`` plus the token to compute, tentatively matched (it holds references)."""
        seq = self._request(tokens + [0], namespace)
        self.trie.match(seq)
        return seq

    # ---- the contract -------------------------------------------------------------------------

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None) -> tuple[np.ndarray, Handle]:
        key = self._aligned(tokens)
        if not key:
            return np.zeros(0, dtype=np.int64), self.root
        seq = self._matched(key, namespace)
        blocks = seq.logical_blocks.get_real_blocks().tolist()
        values = np.concatenate([self.pages[b] for b in blocks]) if blocks else np.zeros(0, dtype=np.int64)
        self._end(seq)  # the scheduler's rollback: a lookup admits nothing
        if not blocks:
            return values, self.root
        return values, Handle(tuple(key[: len(blocks) * self.page_size]), namespace, [])

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None) -> int:
        key = self._aligned(tokens)
        if not key:
            return 0
        seq = self._request(key, namespace)
        self.trie.match(seq)
        matched = seq.num_blocks
        self.block_manager.allocate(seq)
        fresh = seq.logical_blocks.get_real_blocks()[matched:].copy()
        self.trie.allocate(seq)
        after = seq.logical_blocks.get_real_blocks()
        kept = [i for i in range(matched, len(after)) if after[i] == fresh[i - matched]]
        first_new = kept[0] if kept else len(after)
        for i in kept:
            self.pages[int(after[i])] = np.asarray(values[i * self.page_size:(i + 1) * self.page_size], dtype=np.int64).copy()
        self._end(seq)
        return first_new * self.page_size

    def inc_lock_ref(self, handle: Handle) -> None:
        if handle is self.root:
            return
        seq = self._matched(list(handle.tokens), handle.namespace)
        if seq.num_blocks * self.page_size != len(handle.tokens):
            got = seq.num_blocks * self.page_size
            self._end(seq)
            raise RuntimeError(f"the lock's match covers {got} tokens, not the handle's {len(handle.tokens)}")
        handle.requests.append(seq)

    def dec_lock_ref(self, handle: Handle) -> None:
        if handle is self.root:
            return
        self._end(handle.requests.pop())

    def evict(self, num_tokens: int) -> int:
        blocks = -(-int(num_tokens) // self.page_size)
        return int(self.trie.evict(blocks)) * self.page_size if blocks else 0

    def evict_prefix(self, tokens: Sequence[int], namespace: Hashable = None) -> int:
        raise NotImplementedError("lmdeploy's BlockTrie has no prefix-keyed removal")

    def reset(self) -> None:
        raise NotImplementedError("lmdeploy's BlockTrie has no reset")

    def _nodes(self) -> list[Any]:
        nodes, stack = [], [child for root in self.trie._roots.values() for child in root.children.values()]
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(node.children.values())
        return nodes

    def total_size(self) -> int:
        return len(self._nodes()) * self.page_size

    def protected_size(self) -> int:
        nodes = self._nodes()
        if not nodes:
            return 0
        counts = self.block_manager.allocator.get_ref_count(np.array([n.block_id for n in nodes]))
        return int((counts > 1).sum()) * self.page_size

    def evictable_size(self) -> int:
        return self.total_size() - self.protected_size()


CAPABILITIES = Capabilities(eviction_policy="lru-match-or-release", supports_quarantine=False, supports_reset=False,
                            checks_locks=False, locks_only_after_match=True, validates_input=False, namespaces=True,
                            page_sizes=(1, 2, 4, 16))


def newest(allocator: SlotAllocator, page_size: int = 1) -> LmdeployTrieCache:
    """lmdeploy 0.18.0's ``BlockTrie`` as its scheduler drives it."""
    return LmdeployTrieCache(allocator, page_size)


newest.capabilities = CAPABILITIES


def newest_lru(allocator: SlotAllocator, page_size: int = 1) -> LmdeployTrieCache:
    """The same, declaring the contract's LRU: shows that a request's end counts as a use."""
    return LmdeployTrieCache(allocator, page_size)


newest_lru.capabilities = Capabilities(**{**CAPABILITIES.__dict__, "eviction_policy": "lru"})

FACTORIES = {"newest": newest, "newest_lru": newest_lru}
