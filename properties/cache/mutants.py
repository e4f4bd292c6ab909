"""Deliberately broken variants of the reference cache: the suite must catch every one.

Each mutant reproduces one class of bug seen in real radix caches (the catalogue in
``reports/BUG_CATALOGUE.md`` links each to its public thread) with the smallest change to the
reference, and names in ``obligation`` the clause of the contract it breaks. Each also names,
in ``caught_by``, the oracle exception(s) that must report it, so a mutant killed for the wrong
reason (say, a crash in the harness) does not count as caught. Mutants whose bug needs pages say
so in ``page_size_for_test``.

The correct variants at the end (``CORRECT_VARIANTS``) are the other half: caches that are right
but unusual (one that trusts its callers, one without ``reset``) and must pass.

The hybrid (second-pool) mutants and correct caches live in ``hybrid_mutants`` and are
re-exported here (``WindowStaleMapping``, ``TrustingWindow``, ...), so every catalogued cache is
``radixcheck.properties.cache.mutants:<name>``.

Point the suite at one to see a failure as a user would:
``radixcheck audit radixcheck.properties.cache.mutants:EvictsLockedLeaf``
"""

from __future__ import annotations

import dataclasses
import heapq
import pickle
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.oracles.violations import (
    BadInputViolation,
    EvictionAmountViolation,
    EvictionOrderViolation,
    LRUOrderViolation,
    NeverSawViolation,
    PrefixSetViolation,
    RefcountViolation,
    ReturnValueViolation,
    SlotViolation,
    TenantIsolationViolation,
)
from radixcheck.properties.cache import policies
from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES, Capabilities, LeafStats
from radixcheck.properties.cache.machine import RadixCacheMachine, machine_for
from radixcheck.properties.cache.scale_machine import scale_machine_for
from radixcheck.reference.bigram import BigramRadixCache, bigrams
from radixcheck.reference.radix_cache import Node, RadixCache
from radixcheck.reference.validation import as_count, as_namespace, as_tokens, as_values


class SplitOffByOne(RadixCache):
    """Match splits one token past the divergence (unaligned/boundary split, sglang #28692)."""

    bug_class = "split-off-by-one"
    sources = ('sgl-project/sglang#28692', 'sgl-project/sglang#36696')
    caught_by = (PrefixSetViolation, NeverSawViolation, LRUOrderViolation)  # oracle 5 after a quarantine; LRU: it stamps a token too many

    def _split(self, child: Node, at: int) -> Node:
        return super()._split(child, min(at + 1, len(child.key) - 1)) if len(child.key) > 1 else child


class LockSkipsAncestors(RadixCache):
    """inc/dec_lock_ref touch only the handle's own node, not its ancestors."""

    bug_class = "lock-skips-ancestors"
    sources = ('sgl-project/sglang#26218 (review: release walks past the lock boundary)',)
    caught_by = (RefcountViolation, SlotViolation)  # or a quarantine frees the unprotected ancestors

    def _path(self, handle: Any) -> list[Node]:
        return super()._path(handle)[:1]


class LockSkipsSelf(RadixCache):
    """The lock walk starts at the parent, so the matched node itself stays evictable
    (mini-sglang #52)."""

    bug_class = "lock-skips-self"
    sources = ('sgl-project/mini-sglang#52',)
    caught_by = (RefcountViolation, SlotViolation)  # a quarantine frees the unprotected node

    def _path(self, handle: Any) -> list[Node]:
        return super()._path(handle)[1:]


class EvictsLockedLeaf(RadixCache):
    """Eviction ignores lock_ref."""

    bug_class = "evicts-locked-leaf"
    sources = ('sgl-project/mini-sglang#52 (its consequence: a locked node evicted)',)
    caught_by = RefcountViolation

    def _evictable_leaf(self, node: Node) -> bool:
        return node is not self.root and not node.children


class MostRecentFirst(RadixCache):
    """The eviction heap is keyed the wrong way round: most recently used leaf goes first."""

    bug_class = "mru-instead-of-lru"
    sources = ('RadixAttention paper §3.2 (LRU leaf eviction); SGLang eviction_policy',)
    caught_by = LRUOrderViolation

    def _eviction_key(self, node: Node) -> tuple[int, int]:
        return -node.last_access, node.serial


class UnmatchedUnlockAccepted(RadixCache):
    """dec_lock_ref trusts its caller and drives lock_ref below zero (SGLang 0.5.23)."""

    bug_class = "unmatched-unlock-accepted"
    sources = ('SGLang 0.5.23 RadixCache.dec_lock_ref (lock_ref driven to -1; reports/sglang_findings.md)',)
    caught_by = RefcountViolation

    def dec_lock_ref(self, handle: Any) -> None:
        for node in self._path(handle):  # the reference's walk, minus its lock_ref > 0 check
            node.lock_ref -= 1
            if node.lock_ref == 0 and node.state == "detached":
                self._free(node)
                self._detached.remove(node)


class SplitKeepsStaleValues(RadixCache):
    """A split shortens the lower node's key but not its slot ids: KV lost/duplicated in a split
    (sglang #16946)."""

    bug_class = "split-loses-values"
    sources = ('sgl-project/sglang#16946', 'sgl-project/sglang#35270 (two nodes hold the same slots)')
    caught_by = (PrefixSetViolation, NeverSawViolation, SlotViolation, ReturnValueViolation)  # any wrong match; evict frees too many

    def _split(self, child: Node, at: int) -> Node:
        value = child.value
        upper = super()._split(child, at)
        child.value = value[: len(value)]  # the lower half keeps every slot id
        return upper


class QuarantineTakesSiblings(RadixCache):
    """evict_prefix removes every branch at the cut, not only the one it was given."""

    bug_class = "quarantine-removes-sibling"
    sources = ('seed: fak radixkv.EvictPrefix (a colliding first token may evict a benign sibling)',)
    caught_by = (NeverSawViolation, SlotViolation)

    def _branches(self, node: Node, head: tuple[int, ...]) -> list[Node]:
        return list(node.children.values())


class ProtectedCountsNodes(RadixCache):
    """protected_size counts locked nodes instead of locked tokens (size counter drift,
    sglang #35270 / mllm #656)."""

    bug_class = "size-counter-drift"
    sources = ('sgl-project/sglang#35270', 'UbiquitousLearning/mllm#656')
    caught_by = RefcountViolation

    def protected_size(self) -> int:
        return sum(1 for n in self._linked_nodes() if n.lock_ref > 0 and n is not self.root)

    def evictable_size(self) -> int:
        return self.total_size() - self.protected_size()


class NoSplitOnMatch(RadixCache):
    """Match returns the whole edge it stopped in as the handle: a lock covers more than was
    matched (a port that did not split on match)."""

    bug_class = "match-no-split-overlock"
    sources = ('bytedance-iaas/sglang#508',)
    caught_by = (RefcountViolation, LRUOrderViolation, SlotViolation)  # over-locks (so over-protects), over-touches

    def match_prefix(self, tokens: Any) -> tuple[np.ndarray, Node]:
        key = as_tokens(tokens, "tokens")
        key = key[: len(key) // self.page_size * self.page_size]
        self._clock += 1
        node, pos, pieces = self.root, 0, []
        while pos < len(key):
            child = node.children.get(key[pos : pos + self.page_size])
            if child is None:
                break
            shared = self._shared_length(child.key, key[pos:])
            child.last_access = self._clock
            pieces.append(child.value[:shared])
            node, pos = child, pos + shared
            if shared < len(child.key):
                break
        return (np.concatenate(pieces) if pieces else np.zeros(0, np.int64)), node


class QuarantineLeavesBranchLinked(RadixCache):
    """evict_prefix frees the branch's slots but leaves its nodes in the tree: later matches
    return freed KV slots (a policy eviction that only half happened)."""

    bug_class = "quarantine-leaves-branch-linked"
    sources = ('seed: fak radixkv.EvictPrefix (evicted prefix must be unreachable, "as if never seen")',)
    caught_by = NeverSawViolation

    def evict_prefix(self, tokens: Any) -> int:
        self._unlink = lambda node: None  # the bug: nothing is cut out of the tree
        try:
            return super().evict_prefix(tokens)
        finally:
            del self._unlink


class QuarantineFreesLocked(RadixCache):
    """evict_prefix frees a locked node's slots at once, while a request still reads them."""

    bug_class = "quarantine-frees-locked"
    sources = ('seed: policy eviction of a prefix a running request still reads',)
    caught_by = SlotViolation

    def _retire(self, node: Node) -> None:
        self._free(node)


class StaleHandleAccepted(RadixCache):
    """inc_lock_ref on an evicted node walks its old parent chain (sglang #29291)."""

    bug_class = "stale-handle-accepted"
    sources = ('sgl-project/sglang#29291',)
    caught_by = RefcountViolation

    def inc_lock_ref(self, handle: Any) -> None:
        node = handle
        while node is not self.root and node is not None:
            node.lock_ref += 1
            node = node.parent


class EvictOvershoots(RadixCache):
    """evict() ignores num_tokens and empties everything evictable."""

    bug_class = "evict-overshoots"
    sources = ('RadixAttention paper §3.2 (evict only what the budget needs)',)
    caught_by = (EvictionAmountViolation, LRUOrderViolation)  # its free() calls show it kept going; LRU tells it by recency

    def evict(self, num_tokens: int) -> int:
        return super().evict(self.total_size() if as_count(num_tokens, "num_tokens", 0) else 0)


class UnalignedPages(RadixCache):
    """Shared lengths are not rounded down to whole pages: edges split mid-page (sglang #28692)."""

    bug_class = "paged-split-unaligned"
    sources = ('sgl-project/sglang#28692', 'sgl-project/sglang#10637')
    caught_by = PrefixSetViolation
    page_size_for_test = 2

    def _shared_length(self, edge: tuple[int, ...], query: tuple[int, ...]) -> int:
        n = 0
        for a, b in zip(edge, query, strict=False):
            if a != b:
                break
            n += 1
        return n


class ResetLeaksDetached(RadixCache):
    """reset() forgets quarantined nodes that were still locked: their slots leak."""

    bug_class = "reset-leaks-detached"
    sources = ('sgl-project/sglang#6888', 'sgl-project/sglang#11970 (leak class: available + evictable != total)')
    caught_by = SlotViolation

    def reset(self) -> None:
        self._detached.clear()
        super().reset()


class AcceptsFloatTokens(RadixCache):
    """Token ids are not validated: 1.5 is silently accepted as a key."""

    bug_class = "bad-input-accepted"
    sources = ('radixcheck contract: bad input raises and changes nothing',)
    caught_by = BadInputViolation

    def match_prefix(self, tokens: Any) -> tuple[np.ndarray, Node]:
        return super().match_prefix([int(t) if not isinstance(t, list) else 0 for t in tokens])


class SplitLockNotInherited(RadixCache):
    """A split gives the new upper node lock count 0 instead of the child's: a lock taken before
    the split is released on a different set of nodes (sglang #24153, #38480)."""

    bug_class = "split-lock-not-inherited"
    sources = ('sgl-project/sglang#24153', 'sgl-project/sglang#38480', 'sgl-project/sglang#38138')
    caught_by = (RefcountViolation, SlotViolation)  # or a quarantine frees what is still locked

    def _split(self, child: Node, at: int) -> Node:
        upper = super()._split(child, at)
        upper.lock_ref = 0
        return upper


class InsertKeepsUnalignedTail(RadixCache):
    """With page_size > 1 the key is cut to whole pages but the value is not: the node holds the
    caller's unaligned tail too (sglang #10637, evictable accounting by key vs value length)."""

    bug_class = "key-vs-value-length"
    sources = ('sgl-project/sglang#10637',)
    caught_by = (PrefixSetViolation, SlotViolation)
    page_size_for_test = 2

    def insert(self, tokens: Any, values: np.ndarray) -> int:
        aligned = len(tokens) // self.page_size * self.page_size
        prefix_len = super().insert(tokens, values)
        if aligned > prefix_len:
            _, leaf = self.match_prefix(list(tokens)[:aligned])
            leaf.value = np.asarray(values[aligned - len(leaf.key) :], dtype=np.int64)
        return prefix_len


class InsertReturnsTokenPrefix(RadixCache):
    """insert returns the token-wise common prefix, not the page-aligned one, so the caller frees
    the wrong range (the paged pool-conservation class, sglang #6888 / #7130)."""

    bug_class = "paged-prefix-len-unaligned"
    sources = ('sgl-project/sglang#6888', 'sgl-project/sglang#7130')
    caught_by = PrefixSetViolation
    page_size_for_test = 2

    def insert(self, tokens: Any, values: np.ndarray) -> int:
        key = as_tokens(tokens, "tokens")
        prefix_len = super().insert(tokens, values)
        node, pos = self.root, 0
        while pos < len(key) and (child := node.children.get(key[pos : pos + self.page_size])) is not None:
            n = 0
            while n < len(child.key) and pos + n < len(key) and child.key[n] == key[pos + n]:
                n += 1
            pos += n
            if n < len(child.key):
                break
            node = child
        return max(prefix_len, min(pos, len(key)))


class SplitRefreshesSuffix(RadixCache):
    """A match or insert that ends inside an edge stamps the edge's recency before splitting it,
    so the unmatched suffix looks freshly used and outlives older-but-newer leaves under LRU
    (SGLang 0.5.23 RadixCache and UnifiedRadixCache, reports/sglang_findings.md #3)."""

    bug_class = "split-refreshes-suffix"
    sources = ('SGLang 0.5.23 _match_prefix_helper / _insert_helper (reports/sglang_findings.md #3)',)
    caught_by = LRUOrderViolation

    def _split(self, child: Node, at: int) -> Node:
        child.last_access = self._clock  # the bug: the whole edge is touched, then cut
        return super()._split(child, at)


class InsertShortStampsEdge(RadixCache):
    """An insert that ends inside an edge does not cut it: the whole edge is stamped as used,
    so its unused remainder outlives older leaves under LRU (LightLLM fc72ffa
    ``_insert_helper``, reports/findings/lightllm.md #1; its match path cuts correctly)."""

    bug_class = "insert-short-stamps-edge"
    sources = ("LightLLM fc72ffa radix_cache.py _insert_helper (reports/findings/lightllm.md #1)",)
    caught_by = LRUOrderViolation
    _insert_end: int | None = None

    def insert(self, tokens: Any, values: np.ndarray) -> int:
        self._insert_end = len(tokens) // self.page_size * self.page_size
        try:
            return super().insert(tokens, values)
        finally:
            self._insert_end = None

    def _split(self, child: Node, at: int) -> Node:
        depth, node = at, child.parent
        while node is not None:
            depth, node = depth + len(node.key), node.parent
        if depth == self._insert_end:
            return child  # the bug: the insert ends here, so the edge is left whole (and stamped whole)
        return super()._split(child, at)


class _StoresTokensAs(RadixCache):
    """A cache that keeps its keys in a narrower type: every key passes through ``_stored``."""

    @staticmethod
    def _stored(tokens: tuple[int, ...]) -> list[int]:
        raise NotImplementedError

    def match_prefix(self, tokens: Any) -> tuple[np.ndarray, Node]:
        return super().match_prefix(self._stored(as_tokens(tokens, "tokens")))

    def insert(self, tokens: Any, values: np.ndarray) -> int:
        return super().insert(self._stored(as_tokens(tokens, "tokens")), values)

    def evict_prefix(self, tokens: Any) -> int:
        return super().evict_prefix(self._stored(as_tokens(tokens, "tokens")))


class TokensNarrowedTo16Bits(_StoresTokensAs):
    """Token ids are stored as uint16: with a 128k-152k vocabulary, id 65536 is taken for id 0
    and a prompt matches KV computed for a different one."""

    bug_class = "token-ids-narrowed-16-bit"
    sources = ("Llama 3 (128,256 ids) and Qwen (151,936 ids) vocabularies exceed 2**16: a uint16 token buffer aliases ids",)
    caught_by = (PrefixSetViolation, NeverSawViolation)

    @staticmethod
    def _stored(tokens: tuple[int, ...]) -> list[int]:
        return [t & 0xFFFF for t in tokens]


class TokensThroughFloat32(_StoresTokensAs):
    """Token ids pass through float32 (a key built with a float tensor): above 2**24 neighbouring
    ids become one, so a prompt matches KV computed for a different one."""

    bug_class = "token-ids-through-float32"
    sources = ("float32 holds integers exactly only up to 2**24; ids above it collide (keys built from float tensors)",)
    caught_by = (PrefixSetViolation, NeverSawViolation)

    @staticmethod
    def _stored(tokens: tuple[int, ...]) -> list[int]:
        return np.asarray(tokens, dtype=np.int64).astype(np.float32).astype(np.int64).tolist()


class ComparesBoundedWindow(RadixCache):
    """Edge comparison looks at the first 128 tokens only and assumes the rest agree: a long
    prompt that diverges deep inside a long edge matches tokens it does not share."""

    bug_class = "long-edge-compared-partly"
    sources = ("bounded-window key comparison (fast paths that compare or hash a fixed-length key prefix)",)
    caught_by = (PrefixSetViolation, NeverSawViolation)
    WINDOW = 128

    def _shared_length(self, edge: tuple[int, ...], query: tuple[int, ...]) -> int:
        if len(edge) > self.WINDOW and edge[: self.WINDOW] == query[: self.WINDOW]:
            return min(len(edge), len(query)) // self.page_size * self.page_size
        return super()._shared_length(edge, query)


def _restore_recency(cache: RadixCache, before: dict[Node, int]) -> None:
    """Undo the recency stamps of a call: old nodes get their times back, nodes a split made
    take their lower half's (the newest of their children)."""
    for node in cache._linked_nodes():
        if node in before:
            node.last_access = before[node]
    for node in cache._linked_nodes():
        if node not in before and node.children:
            node.last_access = max(c.last_access for c in node.children.values())


class MatchDoesNotRefresh(RadixCache):
    """A match does not count as a use: a prompt every request shares is evicted as if idle."""

    bug_class = "match-not-a-use"
    sources = ("RadixAttention paper §3.2 (LRU: a hit refreshes the matched nodes); SGLang _match_prefix_helper",)
    caught_by = LRUOrderViolation

    def match_prefix(self, tokens: Any) -> tuple[np.ndarray, Node]:
        before = {n: n.last_access for n in self._linked_nodes()}
        result = super().match_prefix(tokens)
        _restore_recency(self, before)
        return result


class InsertDoesNotRefresh(RadixCache):
    """Inserting an already cached prefix does not count as a use of it (only new leaves are
    stamped): the prefix a request just extended is evicted before older ones."""

    bug_class = "insert-not-a-use"
    sources = ("SGLang _insert_helper (insert refreshes every node on the path)",)
    caught_by = LRUOrderViolation

    def insert(self, tokens: Any, values: np.ndarray) -> int:
        before = {n: n.last_access for n in self._linked_nodes()}
        prefix_len = super().insert(tokens, values)
        _restore_recency(self, before)
        return prefix_len


class LockRefreshes(RadixCache):
    """inc_lock_ref counts as a use (stamps the path): a request admitted long after its match
    makes its prefix look fresh, and the LRU order differs from the contract's."""

    bug_class = "lock-counts-as-use"
    sources = ("radixcheck contract: a lock is not a use (SGLang inc_lock_ref leaves last_access_time alone)",)
    caught_by = LRUOrderViolation

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        self._clock += 1
        for node in self._path(handle):
            node.last_access = self._clock


class EvictStopsShort(RadixCache):
    """evict() frees one leaf per call, whatever ``num_tokens`` asks: the scheduler then runs out
    of KV slots although evictable cache was left."""

    bug_class = "evict-stops-short"
    sources = ("RadixAttention paper §3.2 (evict leaves until enough memory is free)",)
    caught_by = EvictionAmountViolation

    def evict(self, num_tokens: int) -> int:
        wanted = as_count(num_tokens, "num_tokens", minimum=0)
        return super().evict(min(wanted, 1))


class EvictMiscounts(RadixCache):
    """evict() returns the number of tokens asked for, not the number it freed."""

    bug_class = "evict-miscounts"
    sources = ("radixcheck contract: evict returns the tokens it evicted (the scheduler budgets by it)",)
    caught_by = ReturnValueViolation

    def evict(self, num_tokens: int) -> int:
        super().evict(num_tokens)
        return as_count(num_tokens, "num_tokens", minimum=0)


class TotalCountsDetached(RadixCache):
    """total_size() keeps counting quarantined nodes that are still locked (unlinked, not freed)."""

    bug_class = "total-counts-detached"
    sources = ("sgl-project/sglang#11970 (size accounting drifts from the tree: available + evictable != total)",)
    caught_by = RefcountViolation

    def total_size(self) -> int:
        return super().total_size() + sum(len(n.key) for n in self._detached)

    def protected_size(self) -> int:
        return super().protected_size() + sum(len(n.key) for n in self._detached)


class LockOfQuarantinedAccepted(RadixCache):
    """inc_lock_ref on a quarantined (unlinked, still locked) node is accepted: its lock count
    grows on nodes no longer in the tree."""

    bug_class = "lock-of-quarantined-accepted"
    sources = ("radixcheck contract: inc_lock_ref on a quarantined handle raises",)
    caught_by = RefcountViolation

    def inc_lock_ref(self, handle: Any) -> None:
        for node in self._path(handle):
            node.lock_ref += 1


class ForeignHandleAccepted(RadixCache):
    """Handles are not checked to belong to this cache: another cache's node is locked (in the
    other cache) without complaint (sglang Rust core node ids, reports/sglang_findings.md #6)."""

    bug_class = "foreign-handle-accepted"
    sources = ("SGLang 0.5.23 UnifiedRadixCache Rust core (node ids accepted across caches; reports/sglang_findings.md #6)",)
    caught_by = RefcountViolation

    def _path(self, handle: Any) -> list[Node]:
        if not isinstance(handle, Node):
            raise ValueError(f"unknown handle {handle!r}")
        if handle.state == "dead":
            raise ValueError(f"stale handle {handle!r}")
        path, node = [], handle
        while node.parent is not None:  # the bug: walks to whichever root it reaches
            path.append(node)
            node = node.parent
        return path


class ResetKeepsHandlesLive(RadixCache):
    """reset() empties the tree but leaves the old nodes live: a handle from before the reset is
    still locked and unlocked as if its prefix were cached."""

    bug_class = "reset-keeps-handles-live"
    sources = ("sgl-project/sglang#29291 (a stale handle walks a dead parent chain)",)
    caught_by = (RefcountViolation, SlotViolation)  # or an unlock through a pre-reset handle frees again

    def reset(self) -> None:
        for node in list(self._linked_nodes()) + self._detached:
            if node is not self.root and len(node.value):
                self.allocator.free(node.value)  # the bug: the node is not marked dead
        self.root.children.clear()
        self._detached.clear()


class BadInputHalfApplied(RadixCache):
    """insert() checks the values' length only after caching the tokens it has values for: it
    raises, but the cache has changed."""

    bug_class = "bad-input-half-applied"
    sources = ("radixcheck contract: bad input raises and changes nothing (validate before mutating)",)
    caught_by = BadInputViolation

    def insert(self, tokens: Any, values: np.ndarray) -> int:
        key = as_tokens(tokens, "tokens")
        if isinstance(values, np.ndarray) and values.ndim == 1 and 0 < len(values) < len(key):
            super().insert(key[: len(values)], values)
            raise ValueError(f"values must have length {len(key)}, got {len(values)}")
        return super().insert(tokens, values)


class QuarantineCountsOnlyFreed(RadixCache):
    """evict_prefix returns only the tokens it freed, not those it unlinked but must keep for a
    running request: the caller's accounting of what left the tree is short."""

    bug_class = "quarantine-miscounts-locked"
    sources = ("radixcheck contract: evict_prefix returns the tokens unlinked from the tree, locked ones included",)
    caught_by = NeverSawViolation

    def evict_prefix(self, tokens: Any) -> int:
        detached_before = len(self._detached)
        removed = super().evict_prefix(tokens)
        return removed - sum(len(n.key) for n in self._detached[detached_before:])


# ---- production scale and callers that reuse their buffers ------------------------------------
# Each is correct in a small world. The first four show only in the production world
# (``scale = True``: ``radixcheck.properties.cache.scale_machine``); the buffer and slot ones need a
# caller that reuses its buffers and a churned slot pool, which every machine now is.


def _leaf_inserted(cache: RadixCache, tokens: Any, prefix_len: int) -> Node | None:
    """The node an insert of ``tokens`` just created at its end (no recency stamped), if any."""
    key = as_tokens(tokens, "tokens")
    aligned = len(key) // cache.page_size * cache.page_size
    node, pos = cache.root, 0
    while pos < aligned and (child := node.children.get(key[pos : pos + cache.page_size])) is not None:
        node, pos = child, pos + len(child.key)
    return node if aligned > prefix_len and node is not cache.root and pos == aligned else None


class _NarrowLockCount(RadixCache):
    """Lock counts kept in a field of ``_BITS`` bits: the count wraps to 0 when that many
    requests hold one prefix at once, and the prefix is evictable while they still run."""

    _BITS: int
    caught_by = RefcountViolation  # protected_size() no longer counts the prompt, or a legal unlock is refused
    scale = True

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        for node in self._path(handle):
            node.lock_ref %= 1 << self._BITS  # the bug: the field wraps


class LockCountWraps8Bit(_NarrowLockCount):
    """Lock counts in 8 bits (a uint8 in packed node metadata): the 256th request admitted on one
    system prompt wraps its count to 0."""

    bug_class = "lock-count-8-bit"
    sources = ("production load: 256-1,024 requests admitted at once on one system prompt (SGLang --max-running-requests)",)
    _BITS = 8


class LockCountWraps10Bit(_NarrowLockCount):
    """Lock counts in a 10-bit field: the 1,024th concurrent request on one prompt wraps it to 0."""

    bug_class = "lock-count-10-bit"
    sources = ("production load: 1,024 concurrent requests on one prompt (a bit field sized for a smaller batch)",)
    _BITS = 10


class CollectsNodesRecursively(RadixCache):
    """Walks the tree recursively to collect its nodes (for eviction and the sizes): a path deeper
    than Python's recursion limit (multi-turn chats, chunked prefill) raises RecursionError."""

    bug_class = "recursive-tree-walk"
    sources = ("sgl-project/sglang#154", "sgl-project/sglang#813", "sgl-project/sglang#1501 (fixed by #1499)",
               "sgl-project/sglang#3029", "sgl-project/sglang#38204")
    caught_by = RecursionError
    scale = True

    def _linked_nodes(self) -> list[Node]:
        found: list[Node] = []
        self._collect(self.root, found)
        return found

    def _collect(self, node: Node, found: list[Node]) -> None:
        found.append(node)
        for child in node.children.values():
            self._collect(child, found)  # the bug: one Python frame per level of the tree


class EvictCapsLeaves(RadixCache):
    """evict() frees at most 256 leaves per call, whatever ``num_tokens`` asks (a fixed batch):
    under memory pressure the scheduler gets back less than it needs."""

    bug_class = "evict-capped-batch"
    sources = ("production load: one eviction under memory pressure frees hundreds of leaves",)
    caught_by = EvictionAmountViolation
    scale = True

    def _wants_more(self, evicted: int, wanted: int, leaves: int) -> bool:
        return evicted < wanted and leaves < 256


class KeepsCallersValues(RadixCache):
    """insert() keeps a view of the caller's values array for the leaf it creates, not a copy: the
    engine reuses that buffer for its next request, and the cached slot ids change under it."""

    bug_class = "stores-callers-buffer"
    sources = ("radixcheck contract: a cache copies what it keeps (an engine rewrites its req_to_token row after the call)",)
    caught_by = (PrefixSetViolation, SlotViolation)

    def insert(self, tokens: Any, values: np.ndarray) -> int:
        prefix_len = super().insert(tokens, values)
        leaf = _leaf_inserted(self, tokens, prefix_len)
        if leaf is not None:
            end = len(as_tokens(tokens, "tokens")) // self.page_size * self.page_size
            leaf.value = values[end - len(leaf.key) : end]  # the bug: the caller's buffer itself
        return prefix_len


class MatchReturnsItsStorage(RadixCache):
    """match_prefix() returns a node's own value array when the match is that one node, not a
    copy: a caller that writes into its match (its request row) writes into the cache."""

    bug_class = "match-returns-storage"
    sources = ("radixcheck contract: the caller owns what match_prefix returns",)
    caught_by = (PrefixSetViolation, SlotViolation)

    def match_prefix(self, tokens: Any) -> tuple[np.ndarray, Node]:
        values, node = super().match_prefix(tokens)
        if node is not self.root and node.parent is self.root:
            return node.value, node  # the bug: the node's own array
        return values, node


class AssumesContiguousSlots(RadixCache):
    """A node keeps only its first slot id and its length, and rebuilds the rest as first + i:
    right for a fresh pool that hands out ascending ids, wrong once slots come back recycled."""

    bug_class = "assumes-contiguous-slots"
    sources = ("production load: a churned KV pool hands out recycled, non-contiguous slots",)
    caught_by = (PrefixSetViolation, SlotViolation)

    def insert(self, tokens: Any, values: np.ndarray) -> int:
        prefix_len = super().insert(tokens, values)
        leaf = _leaf_inserted(self, tokens, prefix_len)
        if leaf is not None and len(leaf.value):
            leaf.value = leaf.value[0] + np.arange(len(leaf.value), dtype=np.int64)  # the bug
        return prefix_len


class QuarantineMissReturnsNone(RadixCache):
    """evict_prefix() returns ``None`` instead of 0 when nothing is cached on the branch."""

    bug_class = "quarantine-miss-returns-none"
    sources = ("radixcheck contract: evict_prefix returns the tokens unlinked, 0 when none",)
    caught_by = ReturnValueViolation

    def evict_prefix(self, tokens: Any) -> int | None:
        return super().evict_prefix(tokens) or None  # the bug


class FifoReference(RadixCache):
    """Correct, with another policy: evicts the oldest-created unlocked leaf first (FIFO)."""

    capabilities = Capabilities(eviction_policy="fifo")
    page_size_for_test = 1

    def _eviction_key(self, node: Node) -> tuple[int, ...]:
        return (node.serial,)


class EvictOneTooMany(FifoReference):
    """Under a policy other than LRU, evict() goes on while it has freed ``<=`` the amount
    (an off-by-one in its loop): one leaf too many on every eviction that lands exactly."""

    bug_class = "evict-one-too-many-any-policy"
    sources = ("a real engine's LFU cache with `<=` planted in its evict loop: 784 extra leaves in 3,986 evictions, "
               "'conforms' before this check",)
    caught_by = EvictionAmountViolation

    def _wants_more(self, evicted: int, wanted: int, leaves: int) -> bool:
        return evicted <= wanted  # the bug


# ---- eviction policies (contract: "Eviction policies"): caught by oracle 4's eviction order ------------------------


class LfuReference(RadixCache):
    """Correct, evicting by SGLang's LFU: fewest hits first (a hit: an insert that covers the node),
    then least recently used."""

    policy = policies.lfu()
    capabilities = Capabilities(eviction_policy=policy)
    page_size_for_test = 1


class LfuMatchHitsReference(RadixCache):
    """Correct, evicting by LFU where a match counts as a hit too (``lfu(hits_on_match=True)``)."""

    policy = policies.lfu(hits_on_match=True)
    capabilities = Capabilities(eviction_policy=policy)
    page_size_for_test = 4


class FifoPolicyReference(RadixCache):
    """Correct, evicting by SGLang's FIFO: first cached first (a split keeps the creation time)."""

    policy = policies.fifo()
    capabilities = Capabilities(eviction_policy=policy)
    page_size_for_test = 1


class MruReference(RadixCache):
    """Correct, evicting by SGLang's MRU: most recently used first."""

    policy = policies.mru()
    capabilities = Capabilities(eviction_policy=policy)
    page_size_for_test = 1


class FiloReference(RadixCache):
    """Correct, evicting by SGLang's FILO: last cached first."""

    policy = policies.filo()
    capabilities = Capabilities(eviction_policy=policy)
    page_size_for_test = 4


class PriorityReference(RadixCache):
    """Correct, evicting by SGLang's priority policy: lowest request priority first, then least
    recently used (a node takes the highest priority of the inserts that covered it)."""

    policy = policies.priority()
    capabilities = Capabilities(eviction_policy=policy)
    page_size_for_test = 1


class SlruReference(RadixCache):
    """Correct, evicting by SGLang's SLRU with threshold 2: the probationary segment (fewer than two
    hits) first, least recently used first within a segment."""

    policy = policies.slru(threshold=2)
    capabilities = Capabilities(eviction_policy=policy)
    page_size_for_test = 1


class TlruReference(RadixCache):
    """Correct, evicting by SGLang's TLRU with threshold 8 and next-prompt estimate 2 (tokens): the
    TEL-safe nodes first, then least recently used."""

    policy = policies.tlru(threshold=8, next_prompt_estimate=2)
    capabilities = Capabilities(eviction_policy=policy)
    page_size_for_test = 1


POLICY_VARIANTS: list[type[RadixCache]] = [LfuReference, LfuMatchHitsReference, FifoPolicyReference, MruReference,
                                           FiloReference, PriorityReference, SlruReference, TlruReference]
"""The reference under each named policy: correct, so they must pass."""


class LfuNotBumpedOnMatch(LfuMatchHitsReference):
    """An LFU cache that says a match is a hit (``hits_on_match=True``) counts only its inserts: a
    prefix every request matches looks cold, and is evicted before a once-inserted one."""

    bug_class = "lfu-match-not-counted"
    sources = ("SGLang LFUStrategy (hit_count); a user's LFU cache whose lookups forget to count",)
    caught_by = EvictionOrderViolation

    def _hit(self, node: Node, by: str) -> None:
        if by != "match":  # the bug
            super()._hit(node, by)


class LfuNotBumpedOnReinsert(LfuReference):
    """An LFU cache counts a hit only when a node is created: re-inserting a cached prefix (a
    request that reused it caching its KV) does not bump its counter."""

    bug_class = "lfu-reinsert-not-counted"
    sources = ("SGLang _insert_helper (_inc_hit_count on every node of the path); a new user's LFU-with-recency cache",)
    caught_by = EvictionOrderViolation

    def _hit(self, node: Node, by: str) -> None:
        if by != "insert":  # the bug
            super()._hit(node, by)


class LfuSplitLosesCount(LfuReference):
    """A split gives the new parent a fresh hit count (0) instead of the child's: once its lower
    half is gone, a frequently hit prefix looks never used."""

    bug_class = "lfu-split-loses-count"
    sources = ("SGLang _split_node (new_node.hit_count = child.hit_count)",)
    caught_by = EvictionOrderViolation
    page_size_for_test = 4

    def _split(self, child: Node, at: int) -> Node:
        upper = super()._split(child, at)
        upper.hits = 0  # the bug
        return upper


class FifoByLastAccess(FifoPolicyReference):
    """A FIFO cache orders its leaves by last access (the field next to creation time): it is LRU."""

    bug_class = "fifo-by-last-access"
    sources = ("SGLang FIFOStrategy (creation_time, not last_access_time)",)
    caught_by = EvictionOrderViolation

    def _eviction_key(self, node: Node) -> tuple:
        return node.last_access, node.serial  # the bug


class MruEvictsLeastRecent(MruReference):
    """An MRU cache forgets to negate the time: it evicts the least recently used leaf first."""

    bug_class = "mru-evicts-least-recent"
    sources = ("SGLang MRUStrategy (-last_access_time)",)
    caught_by = EvictionOrderViolation

    def _eviction_key(self, node: Node) -> tuple:
        return node.last_access, node.serial  # the bug


class SlruThresholdOffByOne(SlruReference):
    """An SLRU cache protects a node only above the threshold (``>``, not ``>=``): a node hit exactly
    twice stays in probation and is evicted before probationary ones hit once."""

    bug_class = "slru-threshold-off-by-one"
    sources = ("SGLang SLRUStrategy (hit_count >= protected_threshold)",)
    caught_by = EvictionOrderViolation

    def _eviction_key(self, node: Node) -> tuple:
        return (1 if node.hits > 2 else 0, node.last_access), node.serial  # the bug: > for >=


class PriorityIgnored(PriorityReference):
    """A priority cache takes the requests' priorities but orders by recency alone."""

    bug_class = "priority-ignored"
    sources = ("SGLang PriorityStrategy ((priority, last_access_time))",)
    caught_by = EvictionOrderViolation

    def _eviction_key(self, node: Node) -> tuple:
        return (0, node.last_access), node.serial  # the bug


class TlruHistoryFromResident(TlruReference):
    """A TLRU cache derives a branch's history length from what is still cached below it: each pass
    finds the trimmed conversation over budget again and walks it down to nothing (the mistake
    SGLang's TLRUStrategy docstring warns against)."""

    bug_class = "tlru-history-from-resident"
    sources = ("SGLang TLRUStrategy docstring (_tlru_history_len deliberately does not shrink)",)
    caught_by = EvictionOrderViolation

    def _stats(self, node: Node) -> LeafStats:
        stats = super()._stats(node)
        resident = max(n.depth_end for n in self._subtree(node))  # the bug: what is left, not the high-water mark
        return dataclasses.replace(stats, history=resident)


POLICY_MUTANTS: list[type[RadixCache]] = [
    LfuNotBumpedOnMatch, LfuNotBumpedOnReinsert, LfuSplitLosesCount, FifoByLastAccess, MruEvictsLeastRecent,
    SlruThresholdOffByOne, PriorityIgnored, TlruHistoryFromResident,
]


# ---- tenant isolation (contract: "Namespaces"): caught by oracle 10 unless said otherwise -------------------------


NAMESPACED = Capabilities(namespaces=True)


class NamespacePartsUntagged(RadixCache):
    """The namespace's parts are composed untagged, the absent ones dropped: a LoRA named X,
    ``("X", None)``, and a base request salted "X", ``(None, "X")``, get one key and share KV."""

    capabilities = NAMESPACED
    bug_class = "namespace-parts-untagged"
    sources = ("vllm-project/vllm#44701 (LoRA X and cache_salt='X' hash the same first block)",
               "sgl-project/sglang#24638 (a base request whose extra_key equals a LoRA id reuses its KV)")
    caught_by = TenantIsolationViolation

    def _key(self, namespace: Any) -> Any:
        return tuple(part for part in namespace if part is not None) if isinstance(namespace, tuple) else namespace


class NamespaceConcatenated(RadixCache):
    """The namespace's parts are concatenated as strings: ``("ab", "c")`` and ``("a", "bc")`` collide
    (oracle 10). Written as text, equal parts split too (``("lora", 1)`` and ``("lora", True)``): a
    stream may catch that half first, as a match that misses what the equal namespace cached."""

    capabilities = NAMESPACED
    bug_class = "namespace-concatenated"
    sources = ("sgl-project/sglang#30827 (salted keys keyed by the pair (extra_key, cache_salt): concatenation collides)",)
    caught_by = (TenantIsolationViolation, PrefixSetViolation)

    def _key(self, namespace: Any) -> Any:
        return "".join(map(str, namespace)) if isinstance(namespace, tuple) else namespace


class NamespaceHash16(RadixCache):
    """The namespace is keyed by its hash truncated to 16 bits: ids 5 and 5 + 2**16 collide (and
    ``""`` and ``0``, whose hashes are both 0)."""

    capabilities = NAMESPACED
    bug_class = "namespace-hash-16-bit"
    sources = ("LMCache (a 16-bit multimodal hash in its cache key; 'Ignore extra keys for now')",)
    caught_by = TenantIsolationViolation

    def _key(self, namespace: Any) -> Any:
        return hash(namespace) & 0xFFFF


class NamespaceKeyedByStr(RadixCache):
    """The namespace is keyed by its rendering, ``str(namespace)``, as a cache that builds its key as
    text does: ``5`` and ``"5"``, ``None`` and ``"None"``, ``(1, 2)`` and ``"(1, 2)"`` share one tree
    (oracle 10). A rendering also splits what the contract calls one namespace (``str(1) != str(1.0)``),
    so a stream may first catch that half: a match under ``1.0`` misses what ``1`` cached (the
    prefix-set oracle)."""

    capabilities = NAMESPACED
    bug_class = "namespace-keyed-by-str"
    sources = ("radixcheck #39 (a tenant key written as text: an int tenant id and the same digits as a salt collide)",)
    caught_by = (TenantIsolationViolation, PrefixSetViolation)

    def _key(self, namespace: Any) -> Any:
        return str(namespace)


class NamespaceSplitsEqualValues(RadixCache):
    """The namespace is keyed by its serialized bytes (``pickle.dumps``), as a block hasher that
    hashes a request's extra keys does: ``5`` and ``"5"`` stay apart, but ``1``, ``1.0`` and ``True``,
    one namespace by the contract, get three trees, so a request under ``1.0`` misses the prefix
    ``1`` cached (the prefix-set oracle: a match shorter than the longest cached prefix)."""

    capabilities = NAMESPACED
    bug_class = "namespace-splits-equal-values"
    sources = ("radixcheck #39 (a key hashed from the namespace's serialized bytes: pickle or CBOR write 1, 1.0 and True "
               "apart, though they are equal)",)
    caught_by = PrefixSetViolation

    def _key(self, namespace: Any) -> Any:
        return pickle.dumps(namespace)


class NamespaceIgnoredOnMatch(RadixCache):
    """``match_prefix`` drops the namespace: every tenant matches the default namespace's tree.

    It still refuses an unhashable namespace, as the cited bug did (the namespace was checked where
    the request was built, and dropped on one path into the tree): the bug is the leak. Without the
    check, the unhashable-namespace rule (bad input) killed it before any tenant rule in 4 of 50 streams."""

    capabilities = NAMESPACED
    bug_class = "namespace-ignored-on-match"
    sources = ("sgl-project/sglang#24638 (the base model's KV served under a LoRA: the key's extra part not used)",)
    caught_by = TenantIsolationViolation

    def match_prefix(self, tokens: Any, namespace: Any = None) -> tuple[np.ndarray, Node]:
        as_namespace(namespace)
        return super().match_prefix(tokens)  # the bug: the namespace goes no further


class NamespaceIgnoredOnInsert(RadixCache):
    """``insert`` drops the namespace: every tenant's KV lands in the default namespace's tree
    (and its ``prefix_len`` counts what the default namespace had). It still refuses an unhashable
    namespace (see :class:`NamespaceIgnoredOnMatch`; without the check, bad input killed it first in
    7 of 50 streams)."""

    capabilities = NAMESPACED
    bug_class = "namespace-ignored-on-insert"
    sources = ("sgl-project/sglang#24638 (the same key built two ways on two paths)",)
    caught_by = TenantIsolationViolation

    def insert(self, tokens: Any, values: np.ndarray, namespace: Any = None) -> int:
        as_namespace(namespace)
        return super().insert(tokens, values)  # the bug: the namespace goes no further


class QuarantineCrossesNamespaces(RadixCache):
    """``evict_prefix`` under one namespace quarantines the prefix in every namespace."""

    capabilities = NAMESPACED
    bug_class = "quarantine-crosses-namespaces"
    sources = ("radixcheck #29 (evict_prefix keyed by tokens alone, as a router's block index is)",)
    caught_by = TenantIsolationViolation

    def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
        removed = super().evict_prefix(tokens, namespace)
        for other in [key for key in self.roots if key != self._key(namespace)]:
            removed += super().evict_prefix(tokens, other)
        return removed


class LockResolvedInDefaultNamespace(RadixCache):
    """A lock is taken on the path with the handle's tokens in the *default* namespace's tree (a
    cache that re-finds a handle's nodes by its tokens, as the contract's match-and-lock adapter
    does, but without its namespace): the tenant's own pages stay unprotected and the default
    namespace's are protected instead. Caught by oracle 2 (refcount safety): ``protected_size``
    disagrees with the locks taken, or an eviction frees the tenant's locked pages; or by oracle 3
    (slot conservation) when a quarantine of the tenant's "locked" prefix frees it at once."""

    capabilities = NAMESPACED
    bug_class = "lock-crosses-namespaces"
    sources = ("radixcheck #29 (a lock under N must not protect M's nodes: the contract's match-and-lock adaptation without "
               "the namespace)",)
    caught_by = (RefcountViolation, SlotViolation)  # or a quarantine frees the unprotected pages at once

    def _twin(self, handle: Any) -> Any:
        """The node the handle's tokens reach in the default tree, along whole edges (no split)."""
        if not isinstance(handle, Node) or handle.owner is not self or handle.parent is None or handle.state == "dead":
            return handle
        tokens = tuple(t for node in reversed(super()._path(handle)) for t in node.key)
        node, pos = self.root, 0
        while pos < len(tokens):
            child = self._child(node, tokens[pos : pos + self.page_size])
            if child is None or tokens[pos : pos + len(child.key)] != child.key:
                break
            node, pos = child, pos + len(child.key)
        return node

    def inc_lock_ref(self, handle: Any) -> None:
        if isinstance(handle, Node) and handle.state == "detached":
            return super().inc_lock_ref(handle)  # refused, as the reference does
        super().inc_lock_ref(self._twin(handle))

    def dec_lock_ref(self, handle: Any) -> None:
        super().dec_lock_ref(self._twin(handle))


NAMESPACE_MUTANTS: list[type[RadixCache]] = [
    NamespacePartsUntagged, NamespaceConcatenated, NamespaceHash16, NamespaceKeyedByStr, NamespaceSplitsEqualValues,
    NamespaceIgnoredOnMatch, NamespaceIgnoredOnInsert, QuarantineCrossesNamespaces, LockResolvedInDefaultNamespace,
]


# ---- the request lifecycle (contract: "The request lifecycle"): the reference's RequestSteps, one idea wrong ----

LIFECYCLE = Capabilities(lifecycle="requests")


class RetractFreesPublished(RadixCache):
    """A publish (``cache_unfinished_req``) does not advance the request's protected length, so its
    end frees, as the request's own, the pages it published: on a retract or an abort mid-prefill
    they are freed while the tree still holds them, and every later request on that prefix reads
    freed KV (sglang #38319)."""

    capabilities = LIFECYCLE
    bug_class = "retract-frees-published"
    sources = ("sgl-project/sglang#38319 (fixed by #38355)",)
    caught_by = (SlotViolation,)

    def cache_unfinished_req(self, req: Any) -> None:
        protected = req.protected
        super().cache_unfinished_req(req)
        req.protected = protected


class SkipInsertLeaks(RadixCache):
    """An end without the insert (a skipped insert, a retract, an abort) frees only what an end
    with it frees, the unaligned tail: the request's pages behind its cached prefix are owned by
    nobody, and each such request eats slots until the pool runs out (sglang #36855, #37024)."""

    capabilities = LIFECYCLE
    bug_class = "skip-insert-leaks"
    sources = ("sgl-project/sglang#36855", "sgl-project/sglang#37024")
    caught_by = (SlotViolation,)

    def cache_finished_req(self, req: Any, insert: bool = True) -> None:
        if insert:
            return super().cache_finished_req(req, insert)
        self._free_slots(req.slots[req.filled // self.page_size * self.page_size : req.filled])
        self.dec_lock_ref(req.handle)
        req.handle = None
        return None


class SkipInsertForgetsPrefix(RadixCache):
    """An end without the insert loses the request's prefix bookkeeping (its protected length is
    taken as 0) and frees its whole row, the cached prefix it matched included (sglang #33996)."""

    capabilities = LIFECYCLE
    bug_class = "skip-insert-forgets-prefix"
    sources = ("sgl-project/sglang#33996",)
    caught_by = (SlotViolation,)

    def cache_finished_req(self, req: Any, insert: bool = True) -> None:
        if not insert:
            req.protected = 0
        super().cache_finished_req(req, insert)


class RepublishLocksTwice(RadixCache):
    """A publish that finds nothing new (the same chunk published twice, or a chunk another request
    cached first) re-locks the request on the matched node without releasing its old lock: that
    path is never evictable again (sglang #25091's redundant second ``cache_unfinished_req``)."""

    capabilities = LIFECYCLE
    bug_class = "republish-locks-twice"
    sources = ("sgl-project/sglang#25091",)
    caught_by = (RefcountViolation, SlotViolation)  # or a quarantine of the path holds (does not free) what the stray lock pins

    def cache_unfinished_req(self, req: Any) -> None:
        aligned = req.filled // self.page_size * self.page_size
        prefix_len = self.insert(req.tokens[:aligned], req.slots[:aligned], namespace=req.namespace)
        if prefix_len < aligned:
            self._free_slots(req.slots[req.protected : prefix_len])
            values, handle = self.match_prefix(req.tokens[:aligned], namespace=req.namespace)
            req.slots[: len(values)] = values
            self.inc_lock_ref(handle)
            self.dec_lock_ref(req.handle)
            req.handle, req.protected = handle, len(values)
            return
        self._free_slots(req.slots[req.protected : prefix_len])
        values, handle = self.match_prefix(req.tokens[:aligned], namespace=req.namespace)
        req.slots[: len(values)] = values
        self.inc_lock_ref(handle)  # the old lock is kept as well
        req.handle, req.protected = handle, len(values)


class PublishKeepsDuplicateRow(RadixCache):
    """A publish frees the request's duplicate pages (another request cached the same tokens
    first) but leaves the request's row pointing at them: its later steps read KV that was freed
    and may be reused (mini-sglang #142)."""

    capabilities = LIFECYCLE
    bug_class = "publish-keeps-duplicate-row"
    sources = ("sgl-project/mini-sglang#142",)
    caught_by = (SlotViolation,)

    def cache_unfinished_req(self, req: Any) -> None:
        row = req.slots.copy()
        super().cache_unfinished_req(req)
        req.slots = row


class FailedAdmissionKeepsLock(RadixCache):
    """The admission's match locks the matched prefix at once (``lock_req`` then takes no lock of its
    own), and an admission that fails after the match never releases it: the prefix stays
    protected with no request on it (sglang #16067, #21404, #29349)."""

    capabilities = LIFECYCLE
    bug_class = "failed-admission-keeps-lock"
    sources = ("sgl-project/sglang#16067", "sgl-project/sglang#21404", "sgl-project/sglang#29349")
    caught_by = (RefcountViolation, SlotViolation)  # or a quarantine of the path holds (does not free) what the stray lock pins

    def match_req(self, req: Any) -> None:
        super().match_req(req)
        self.inc_lock_ref(req.handle)

    def lock_req(self, req: Any) -> None:
        pass  # the match took it


class BigramReference(BigramRadixCache):
    """Correct, keyed by EAGLE bigrams (``key_mode="bigram"``, SGLang's ``is_eagle=True``): ``n`` raw
    tokens are ``n - 1`` keys, page-aligned in keys; the suite sends every sequence as raw tokens
    (the contract's "Key modes") and plays the request lifecycle with the tree calls."""

    page_size_for_test = 4


class BigramAlignsRawTokens(BigramReference):
    """An EAGLE (bigram-keyed) cache that cuts the *raw tokens* to whole pages and then takes their
    bigrams, instead of cutting the bigrams to whole pages: ``n`` raw tokens give ``page_floor(n) - 1``
    bigrams, so a page is lost whenever ``n`` is not a page multiple (the raw-versus-bigram page
    arithmetic of sglang #24371, #28692 and #40681; SGLang's ``page_align_keys`` ordering, replaced by
    ``RadixKey.page_aligned`` over the bigram view in #23107)."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), key_mode="bigram", lifecycle="tree", supports_quarantine=False)
    # as SGLang's EAGLE trees: no evict_prefix (its oracles would see the lost page first, after a quarantine)
    bug_class = "bigram-page-alignment"
    sources = ("sgl-project/sglang#24371", "sgl-project/sglang#28692", "sgl-project/sglang#40681")
    caught_by = (PrefixSetViolation, RefcountViolation)  # a match a page short, or the sizes counting a page less
    page_size_for_test = 4

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        raw = as_tokens(tokens, "tokens")
        vals = as_values(values, len(raw))
        keys = bigrams(raw[: len(raw) // self.page_size * self.page_size])  # the raw tokens cut to pages first
        return RadixCache.insert(self, keys, vals[: len(keys)], namespace, priority)


class RequestInsertDropsPriority(PriorityReference):
    """A priority cache running its own request methods publishes and caches a request's pages at
    priority 0 (its ``insert`` forgets ``priority=req.priority``): a high-priority request's prefix is
    evicted before older low-priority ones. Its plain ``insert`` takes the priority: only a running
    request under the policy shows it (SGLang's ``cache_finished_req`` / ``cache_unfinished_req`` insert
    with the request's priority)."""

    capabilities = dataclasses.replace(RadixCache.capabilities, eviction_policy=policies.priority())  # namespaces, requests
    bug_class = "request-insert-drops-priority"
    sources = ("SGLang RadixCache.cache_finished_req / cache_unfinished_req (insert(..., priority=req.priority))",)
    caught_by = EvictionOrderViolation

    def _insert_req(self, req: Any) -> int:
        prefix_len = self.insert(req.tokens[: req.filled], req.slots[: req.filled], namespace=req.namespace)  # the bug: no priority
        self._free_slots(req.slots[req.protected : prefix_len])
        return req.filled // self.page_size * self.page_size


LIFECYCLE_MUTANTS: list[type[RadixCache]] = [
    RetractFreesPublished, SkipInsertLeaks, SkipInsertForgetsPrefix, RepublishLocksTwice, PublishKeepsDuplicateRow,
    FailedAdmissionKeepsLock, RequestInsertDropsPriority,
]


from radixcheck.properties.cache.hybrid_mutants import (  # noqa: E402 - the hybrid (second-pool) mutants, catalogued here
    HYBRID_MUTANTS,
    HYBRID_VARIANTS,
    LeafHeldOnlyByItsState,
    LeafHeldOnlyByItsWindow,
    RefillingWindow,
    StatePinCountWraps8Bit,
    StateRadixCache,
    TombstoneHidesBranch,
    TrustingState,
    TrustingWindow,
    UnlockReleasesAncestorPins,
    WindowFreedKeptLive,
    WindowPinCountWraps8Bit,
    WindowRadixCache,
    WindowStaleMapping,
)

# ``mutants:<name>`` names every catalogued cache
REEXPORTED = (LeafHeldOnlyByItsState, LeafHeldOnlyByItsWindow, RefillingWindow, StatePinCountWraps8Bit, StateRadixCache,
              TombstoneHidesBranch, TrustingState, TrustingWindow, UnlockReleasesAncestorPins, WindowFreedKeptLive, WindowPinCountWraps8Bit,
              WindowRadixCache, WindowStaleMapping)

from radixcheck.properties.cache.composed_mutants import (  # noqa: E402 - the composed mutants (two parts at once), catalogued here
    COMPOSED_MUTANTS,
    COMPOSED_VARIANTS,
    BigramStateCache,
    BigramWindowAlignsRawTokens,
    BigramWindowCache,
    FinishFreesTakenState,
    RequestKeepsTakenWindow,
    StateRequestsCache,
    StateTreeCache,
    TrustingStateRequests,
    TrustingWindowRequests,
    WindowRequestsCache,
)

REEXPORTED_COMPOSED = (BigramStateCache, BigramWindowAlignsRawTokens, BigramWindowCache, FinishFreesTakenState, RequestKeepsTakenWindow,
                       StateRequestsCache, StateTreeCache, TrustingStateRequests, TrustingWindowRequests, WindowRequestsCache)

MUTANTS: list[type[RadixCache]] = [
    AcceptsFloatTokens, BadInputHalfApplied, ComparesBoundedWindow, EvictMiscounts, EvictOvershoots, EvictStopsShort,
    EvictsLockedLeaf, ForeignHandleAccepted, InsertDoesNotRefresh, InsertKeepsUnalignedTail, InsertReturnsTokenPrefix,
    InsertShortStampsEdge,
    LockOfQuarantinedAccepted, LockRefreshes, LockSkipsAncestors, LockSkipsSelf, MatchDoesNotRefresh, MostRecentFirst,
    NoSplitOnMatch, ProtectedCountsNodes, QuarantineCountsOnlyFreed, QuarantineFreesLocked,
    QuarantineLeavesBranchLinked, QuarantineTakesSiblings, ResetKeepsHandlesLive, ResetLeaksDetached,
    SplitKeepsStaleValues, SplitLockNotInherited, SplitOffByOne, SplitRefreshesSuffix, StaleHandleAccepted,
    TokensNarrowedTo16Bits, TokensThroughFloat32, TotalCountsDetached, UnalignedPages, UnmatchedUnlockAccepted,
    LockCountWraps8Bit, LockCountWraps10Bit, CollectsNodesRecursively, EvictCapsLeaves, KeepsCallersValues,
    MatchReturnsItsStorage, AssumesContiguousSlots, QuarantineMissReturnsNone, EvictOneTooMany, *NAMESPACE_MUTANTS, *LIFECYCLE_MUTANTS,
    *POLICY_MUTANTS, BigramAlignsRawTokens, *HYBRID_MUTANTS, *COMPOSED_MUTANTS,
]


def machine_for_mutant(mutant: type[RadixCache], name: str | None = None) -> type[RadixCacheMachine]:
    """The conformance machine for one mutant (or correct variant), with its own capabilities, at
    the page size its bug needs: the production-scale machine for a bug that only shows at scale
    (``scale = True``). The name keys Hypothesis's derandomized seed, so the gate and the
    catalogue replay the same runs (the kill rates give each stream its own name)."""
    make = scale_machine_for if getattr(mutant, "scale", False) else machine_for
    capabilities = mutant.capabilities if mutant.capabilities is not RadixCache.capabilities else DEFAULT_CAPABILITIES
    return make(mutant, capabilities, getattr(mutant, "page_size_for_test", 1), name or f"mutant_{mutant.__name__}")


# ---- correct variants: unusual but right, so they must pass ---------------------------------


class TrustingReference(RadixCache):
    """Trusts its callers, as SGLang's, mini-sglang's and LightLLM's caches do: lock and unlock
    check nothing. It checks its own tree instead, before every eviction: no counter below zero
    and no node locked less than its children (an unlocked node above a locked one). Any unpaired
    or stale call the suite sent would break that, so passing shows the suite sends none."""

    capabilities = Capabilities(checks_locks=False)
    page_size_for_test = 1  # where the false alarms on real trusting caches were found

    def inc_lock_ref(self, handle: Any) -> None:
        node = handle
        while node is not self.root:
            node.lock_ref += 1
            node = node.parent

    def dec_lock_ref(self, handle: Any) -> None:
        node = handle
        while node is not self.root:
            node.lock_ref -= 1
            if node.lock_ref == 0 and node.state == "detached":
                self._free(node)
                self._detached.remove(node)
            node = node.parent

    def evict(self, num_tokens: int) -> int:
        for node in self._linked_nodes():
            if node is not self.root:
                below = sum(c.lock_ref for c in node.children.values())
                assert node.lock_ref >= max(0, below), f"tree corrupted by its callers: {node!r} has children locked {below} times"
        return super().evict(num_tokens)


class TrustingTreeLifecycle(TrustingReference):
    """A tree that offers no request methods, trusts its callers and validates nothing (SGLang's
    ``RadixCache`` seen through its tree calls): the suite plays the engine's lifecycle steps
    itself (``lifecycle="tree"``). It asserts its own tree before each eviction (as its parent)."""

    capabilities = Capabilities(checks_locks=False, validates_input=False, lifecycle="tree")
    page_size_for_test = 4

    def _not_offered(self, *args: Any) -> None:
        raise AssertionError("a request method was sent to a cache that declares lifecycle='tree'")

    match_req = lock_req = cache_unfinished_req = cache_finished_req = _not_offered


class NoResetReference(RadixCache):
    """Has no usable reset (as mini-sglang's and LightLLM's caches) and says so."""

    capabilities = Capabilities(supports_reset=False)
    page_size_for_test = 16

    def reset(self) -> None:
        raise AssertionError("reset() was sent to a target that declares supports_reset=False")


class _MatchedTokens:
    """A match-and-lock cache's handle: the tokens matched, and the node they ended at."""

    def __init__(self, tokens: tuple[int, ...], node: Node) -> None:
        self.tokens, self.node = tokens, node


class MatchAndLockReference(RadixCache):
    """Locks only through a fresh match, as LightLLM's cache does (``match_prefix(key,
    update_refs=True)``), adapted as the contract says: a handle is the matched tokens and
    ``inc_lock_ref`` matches them again, locking what that match reaches. It raises if that match
    ends anywhere but the handle's node, so passing shows the suite locks a handle only straight
    after the match that returned it (``locks_only_after_match=True``)."""

    capabilities = Capabilities(locks_only_after_match=True)
    page_size_for_test = 4

    def match_prefix(self, tokens: Any) -> tuple[np.ndarray, Any]:
        values, node = super().match_prefix(tokens)
        return values, _MatchedTokens(tuple(as_tokens(tokens, "tokens")[: len(values)]), node)

    def inc_lock_ref(self, handle: Any) -> None:
        _, node = super().match_prefix(handle.tokens)
        assert node is handle.node, f"locked {handle.tokens!r} some steps after its match (the tree changed since)"
        super().inc_lock_ref(node)

    def dec_lock_ref(self, handle: Any) -> None:
        super().dec_lock_ref(getattr(handle, "node", handle))


class _OwnLocks:
    """A per-handle cache's handle: the node a match ended at, and the locks taken through it."""

    def __init__(self, node: Node) -> None:
        self.node, self.held = node, 0


class PerHandleLockReference(RadixCache):
    """Counts locks per handle as well as per node: every match returns a handle of its own, and
    an unlock through a handle that took no lock of its own is refused, even while other requests
    hold the path (the contract leaves that unlock to the cache). Passing shows the suite sends
    it only where it is unmatched under any rule."""

    capabilities = Capabilities()
    page_size_for_test = 1

    def match_prefix(self, tokens: Any) -> tuple[np.ndarray, Any]:
        values, node = super().match_prefix(tokens)
        return values, _OwnLocks(node)

    def _node(self, handle: Any) -> Node:
        if not isinstance(handle, _OwnLocks):
            raise ValueError(f"unknown handle {handle!r}: not one this cache returned")
        return handle.node

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(self._node(handle))
        handle.held += 1

    def dec_lock_ref(self, handle: Any) -> None:
        node = self._node(handle)
        if node is not self.root and handle.held == 0:
            raise ValueError("unlock through a handle that holds no lock of its own")
        super().dec_lock_ref(node)
        handle.held = max(0, handle.held - 1)


class TreePerNamespace:
    """Correct, with namespaces as separate caches: one plain reference cache (used without the
    keyword) per namespace, in a dict keyed by the namespace, sharing the slot pool and one clock;
    ``evict`` takes the least recently used unlocked leaf of all of them (the contract's global LRU)."""

    capabilities = NAMESPACED
    page_size_for_test = 4

    def __init__(self, allocator: Any, page_size: int = 1) -> None:
        self.page_size = as_count(page_size, "page_size", minimum=1)
        self.allocator = allocator
        self.trees: dict[Any, RadixCache] = {}
        self.clock = 0

    def _tree(self, namespace: Any) -> RadixCache:
        as_namespace(namespace)
        if namespace not in self.trees:
            self.trees[namespace] = RadixCache(self.allocator, self.page_size)
        tree = self.trees[namespace]
        tree._clock = self.clock  # one clock for every tree: recency compares across namespaces
        return tree

    def _used(self, tree: RadixCache) -> None:
        self.clock = tree._clock

    def match_prefix(self, tokens: Any, namespace: Any = None) -> tuple[np.ndarray, Node]:
        as_tokens(tokens, "tokens")
        tree = self._tree(namespace)
        found = tree.match_prefix(tokens)
        self._used(tree)
        return found

    def insert(self, tokens: Any, values: np.ndarray, namespace: Any = None) -> int:
        as_tokens(tokens, "tokens")
        tree = self._tree(namespace)
        prefix_len = tree.insert(tokens, values)
        self._used(tree)
        return prefix_len

    def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
        as_tokens(tokens, "tokens")
        return self._tree(namespace).evict_prefix(tokens)

    def _owner(self, handle: Any) -> RadixCache:
        owner = getattr(handle, "owner", None) if isinstance(handle, Node) else None
        if not any(owner is tree for tree in self.trees.values()):
            raise ValueError(f"unknown handle {handle!r}: not a node of this cache")
        return owner

    def inc_lock_ref(self, handle: Any) -> None:
        self._owner(handle).inc_lock_ref(handle)

    def dec_lock_ref(self, handle: Any) -> None:
        self._owner(handle).dec_lock_ref(handle)

    def evict(self, num_tokens: int) -> int:
        wanted = as_count(num_tokens, "num_tokens", minimum=0)
        heap = [((n.last_access, n.serial), n) for t in self.trees.values() for n in t._linked_nodes() if t._evictable_leaf(n)]
        heapq.heapify(heap)
        evicted = 0
        while evicted < wanted and heap:
            _, leaf = heapq.heappop(heap)
            leaf.owner._unlink(leaf)
            leaf.owner._free(leaf)
            evicted += len(leaf.key)
            if leaf.owner._evictable_leaf(leaf.parent):
                heapq.heappush(heap, ((leaf.parent.last_access, leaf.parent.serial), leaf.parent))
        return evicted

    def reset(self) -> None:
        for tree in self.trees.values():
            tree.reset()

    def total_size(self) -> int:
        return sum(t.total_size() for t in self.trees.values())

    def evictable_size(self) -> int:
        return sum(t.evictable_size() for t in self.trees.values())

    def protected_size(self) -> int:
        return sum(t.protected_size() for t in self.trees.values())


class KeyedRootsTree(RadixCache):
    """Correct, with one shared tree (SGLang's layout): each namespace's root is a child of the one
    root, keyed by ``("namespace", namespace)`` (a tag no page of token ids can equal), so every
    walk, the sizes and eviction run over one tree."""

    capabilities = NAMESPACED
    page_size_for_test = 1

    def __init__(self, allocator: Any, page_size: int = 1) -> None:
        super().__init__(allocator, page_size)
        self.top = self.roots.pop(self._key(None))  # the one root; the namespaces' roots hang below it
        self.roots = {"the tree": self.top}  # what the reference walks (sizes, eviction)
        self.root = self._root_for(None)

    def _root_for(self, namespace: Any) -> Node:
        tag = ("namespace", namespace)
        if tag not in self.top.children:
            root = Node(self, self.top, (), np.zeros(0, dtype=np.int64))
            root.lock_ref = 1  # never evictable; a lock through it changes nothing that counts
            self.top.children[tag] = root
        return self.top.children[tag]

    def reset(self) -> None:
        for root in self.top.children.values():  # the namespaces' roots stay: a root handle is always valid
            for node in list(self._subtree(root)):
                if node is not root:
                    self._free(node)
            root.children.clear()
        for node in self._detached:
            self._free(node)
        self._detached.clear()


class TrustingTenants(RadixCache):
    """Correct, with namespaces, and trusting its callers as SGLang's and vLLM's caches do: locks
    as :class:`TrustingReference` (no refusals, its tree checked before every eviction), and no
    refusal of bad input either (``validates_input=False``): it asserts that every argument is well
    formed (a namespace that hashes, tokens that are a 1-D run of non-negative ints, values of the
    tokens' length), so bad input the suite sent it would fail the run, not be refused."""

    capabilities = Capabilities(checks_locks=False, validates_input=False, namespaces=True)
    page_size_for_test = 1

    def inc_lock_ref(self, handle: Any) -> None:
        node = handle
        while node.parent is not None:  # up to its namespace's root (each namespace has its own)
            node.lock_ref += 1
            node = node.parent

    def dec_lock_ref(self, handle: Any) -> None:
        node = handle
        while node.parent is not None:
            node.lock_ref -= 1
            if node.lock_ref == 0 and node.state == "detached":
                self._free(node)
                self._detached.remove(node)
            node = node.parent

    def evict(self, num_tokens: int) -> int:
        for node in self._linked_nodes():
            if node.parent is not None:
                below = sum(c.lock_ref for c in node.children.values())
                assert node.lock_ref >= max(0, below), f"tree corrupted by its callers: {node!r} has children locked {below} times"
        return RadixCache.evict(self, num_tokens)

    @staticmethod
    def _trusted(tokens: Any, namespace: Any, values: Any = None) -> None:
        try:
            as_namespace(namespace)
            as_tokens(tokens, "tokens")
            if values is not None:
                as_values(values, len(tokens))
        except (TypeError, ValueError) as exc:
            raise AssertionError(f"a cache that trusts its callers was sent bad input: {exc}") from None

    def match_prefix(self, tokens: Any, namespace: Any = None) -> tuple[np.ndarray, Node]:
        self._trusted(tokens, namespace)
        return super().match_prefix(tokens, namespace)

    def insert(self, tokens: Any, values: np.ndarray, namespace: Any = None) -> int:
        self._trusted(tokens, namespace, values)
        return super().insert(tokens, values, namespace)

    def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
        self._trusted(tokens, namespace)
        assert len(tokens), "a cache that trusts its callers was sent an empty evict_prefix"
        return super().evict_prefix(tokens, namespace)


CORRECT_VARIANTS: list[type[RadixCache]] = [TrustingReference, NoResetReference, MatchAndLockReference, FifoReference,
                                            PerHandleLockReference, TreePerNamespace, KeyedRootsTree, TrustingTreeLifecycle,
                                            *POLICY_VARIANTS, TrustingTenants, BigramReference, *HYBRID_VARIANTS,
                                            *COMPOSED_VARIANTS]
