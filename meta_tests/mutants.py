"""Deliberately broken variants of the reference cache: the suite must catch every one.

Each mutant reproduces one class of bug seen in real radix caches (the catalogue in
``reports/`` links each to its public thread) with the smallest change to the reference. Each
also names, in ``caught_by``, a phrase of the oracle message that must report it, so a mutant
killed for the wrong reason (say, a crash in the harness) does not count as caught. Mutants whose
bug needs pages say so in ``page_size_for_test``.

Point the gate at one to see a failure as a user would:
``pytest properties -p no:randomly --radix-target meta_tests.mutants:EvictsLockedLeaf``
"""

from __future__ import annotations

from typing import Any

import numpy as np

from properties.cache_machine import RadixCacheMachine, machine_for
from properties.contract import DEFAULT_CAPABILITIES
from reference.radix_cache import Node, RadixCache
from reference.validation import as_count, as_tokens


class SplitOffByOne(RadixCache):
    """Match splits one token past the divergence (unaligned/boundary split, sglang #28692)."""

    bug_class = "split-off-by-one"
    sources = ('sgl-project/sglang#28692', 'sgl-project/sglang#36696')
    caught_by = "match_prefix"

    def _split(self, child: Node, at: int) -> Node:
        return super()._split(child, min(at + 1, len(child.key) - 1)) if len(child.key) > 1 else child


class LockSkipsAncestors(RadixCache):
    """inc/dec_lock_ref touch only the handle's own node, not its ancestors."""

    bug_class = "lock-skips-ancestors"
    sources = ('sgl-project/sglang#26218 (review: release walks past the lock boundary)',)
    caught_by = ("protected_size", "should free")  # or a quarantine frees the unprotected ancestors

    def _path(self, handle: Any) -> list[Node]:
        return super()._path(handle)[:1]


class LockSkipsSelf(RadixCache):
    """The lock walk starts at the parent, so the matched node itself stays evictable
    (mini-sglang #52)."""

    bug_class = "lock-skips-self"
    sources = ('sgl-project/mini-sglang#52',)
    caught_by = ("protected_size", "locked", "unmatched unlock", "should free")  # a quarantine frees the unprotected node

    def _path(self, handle: Any) -> list[Node]:
        return super()._path(handle)[1:]


class EvictsLockedLeaf(RadixCache):
    """Eviction ignores lock_ref."""

    bug_class = "evicts-locked-leaf"
    sources = ('sgl-project/mini-sglang#52 (its consequence: a locked node evicted)',)
    caught_by = "locked"

    def _evictable_leaf(self, node: Node) -> bool:
        return node is not self.root and not node.children


class MostRecentFirst(RadixCache):
    """The eviction heap is keyed the wrong way round: most recently used leaf goes first."""

    bug_class = "mru-instead-of-lru"
    sources = ('RadixAttention paper §3.2 (LRU leaf eviction); SGLang eviction_policy',)
    caught_by = "survived"

    def _eviction_key(self, node: Node) -> tuple[int, int]:
        return -node.last_access, node.serial


class UnmatchedUnlockAccepted(RadixCache):
    """dec_lock_ref trusts its caller and drives lock_ref below zero (SGLang 0.5.23)."""

    bug_class = "unmatched-unlock-accepted"
    sources = ('SGLang 0.5.23 RadixCache.dec_lock_ref (lock_ref driven to -1; reports/sglang_findings.md)',)
    caught_by = "unmatched unlock"

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
    caught_by = ("match_prefix", "double free", "should free")

    def _split(self, child: Node, at: int) -> Node:
        value = child.value
        upper = super()._split(child, at)
        child.value = value[: len(value)]  # the lower half keeps every slot id
        return upper


class QuarantineTakesSiblings(RadixCache):
    """evict_prefix removes every branch at the cut, not only the one it was given."""

    bug_class = "quarantine-removes-sibling"
    sources = ('seed: fak radixkv.EvictPrefix (a colliding first token may evict a benign sibling)',)
    caught_by = "evict_prefix"

    def _branches(self, node: Node, head: tuple[int, ...]) -> list[Node]:
        return list(node.children.values())


class ProtectedCountsNodes(RadixCache):
    """protected_size counts locked nodes instead of locked tokens (size counter drift,
    sglang #35270 / mllm #656)."""

    bug_class = "size-counter-drift"
    sources = ('sgl-project/sglang#35270', 'UbiquitousLearning/mllm#656')
    caught_by = "protected_size"

    def protected_size(self) -> int:
        return sum(1 for n in self._linked_nodes() if n.lock_ref > 0 and n is not self.root)

    def evictable_size(self) -> int:
        return self.total_size() - self.protected_size()


class NoSplitOnMatch(RadixCache):
    """Match returns the whole edge it stopped in as the handle: a lock covers more than was
    matched (a port that did not split on match)."""

    bug_class = "match-no-split-overlock"
    sources = ('bytedance-iaas/sglang#508',)
    caught_by = ("protected_size", "kept going", "survived", "should free")  # over-locks (so over-protects), over-touches

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
    caught_by = "never saw"

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
    caught_by = "should free"

    def _retire(self, node: Node) -> None:
        self._free(node)


class StaleHandleAccepted(RadixCache):
    """inc_lock_ref on an evicted node walks its old parent chain (sglang #29291)."""

    bug_class = "stale-handle-accepted"
    sources = ('sgl-project/sglang#29291',)
    caught_by = "stale"

    def inc_lock_ref(self, handle: Any) -> None:
        node = handle
        while node is not self.root and node is not None:
            node.lock_ref += 1
            node = node.parent


class EvictOvershoots(RadixCache):
    """evict() ignores num_tokens and empties everything evictable."""

    bug_class = "evict-overshoots"
    sources = ('RadixAttention paper §3.2 (evict only what the budget needs)',)
    caught_by = "kept going"

    def evict(self, num_tokens: int) -> int:
        return super().evict(self.total_size() if as_count(num_tokens, "num_tokens", 0) else 0)


class UnalignedPages(RadixCache):
    """Shared lengths are not rounded down to whole pages: edges split mid-page (sglang #28692)."""

    bug_class = "paged-split-unaligned"
    sources = ('sgl-project/sglang#28692', 'sgl-project/sglang#10637')
    caught_by = ("page-aligned", "prefix_len")
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
    caught_by = "reset"

    def reset(self) -> None:
        self._detached.clear()
        super().reset()


class AcceptsFloatTokens(RadixCache):
    """Token ids are not validated: 1.5 is silently accepted as a key."""

    bug_class = "bad-input-accepted"
    sources = ('radixcheck contract: bad input raises and changes nothing',)
    caught_by = "bad input"

    def match_prefix(self, tokens: Any) -> tuple[np.ndarray, Node]:
        return super().match_prefix([int(t) if not isinstance(t, list) else 0 for t in tokens])


class SplitLockNotInherited(RadixCache):
    """A split gives the new upper node lock count 0 instead of the child's: a lock taken before
    the split is released on a different set of nodes (sglang #24153, #38480)."""

    bug_class = "split-lock-not-inherited"
    sources = ('sgl-project/sglang#24153', 'sgl-project/sglang#38480', 'sgl-project/sglang#38138')
    caught_by = ("protected_size", "unmatched unlock")

    def _split(self, child: Node, at: int) -> Node:
        upper = super()._split(child, at)
        upper.lock_ref = 0
        return upper


class InsertKeepsUnalignedTail(RadixCache):
    """With page_size > 1 the key is cut to whole pages but the value is not: the node holds the
    caller's unaligned tail too (sglang #10637, evictable accounting by key vs value length)."""

    bug_class = "key-vs-value-length"
    sources = ('sgl-project/sglang#10637',)
    caught_by = ("match_prefix", "double free", "slot")
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
    caught_by = "prefix_len"
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
    caught_by = "survived"

    def _split(self, child: Node, at: int) -> Node:
        child.last_access = self._clock  # the bug: the whole edge is touched, then cut
        return super()._split(child, at)


MUTANTS: list[type[RadixCache]] = sorted(
    [cls for cls in list(globals().values()) if isinstance(cls, type) and issubclass(cls, RadixCache) and cls is not RadixCache],
    key=lambda cls: cls.__name__,
)


def machine_for_mutant(mutant: type[RadixCache]) -> type[RadixCacheMachine]:
    """The conformance machine for one mutant, at the page size its bug needs. The name keys
    Hypothesis's derandomized seed, so the gate and the catalogue replay the same runs."""
    return machine_for(mutant, DEFAULT_CAPABILITIES, getattr(mutant, "page_size_for_test", 1), f"mutant_{mutant.__name__}")
