"""Deliberately broken variants of the hybrid reference (a sliding-window second pool), one bug
class of issue 32 each, and the correct hybrid caches that must pass. Catalogued with the others
(``radixcheck.properties.cache.mutants`` re-exports them: ``MUTANTS``, ``CORRECT_VARIANTS``).

Point the suite at one: ``radixcheck audit radixcheck.properties.cache.mutants:TombstoneHidesBranch``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.oracles.violations import PinViolation, SecondSlotViolation, SecondValueViolation, TombstoneViolation
from radixcheck.properties.cache.contract import Capabilities, SlidingWindow, StatePool
from radixcheck.reference.hybrid_cache import NONE, WINDOW, WindowRadixCache, as_window
from radixcheck.reference.radix_cache import Node, RadixCache
from radixcheck.reference.state_cache import StateRadixCache, as_state
from radixcheck.reference.validation import as_count, as_tokens, as_values


class WindowStaleMapping(WindowRadixCache):
    """Frees a node's window slots through a KV-to-window mapping (SGLang's
    ``full_to_swa_index_mapping``) that a window eviction does not clear: when the tombstoned
    node's KV goes, its stale entries free window slots it no longer owns, which the pool may
    have handed to another request (sglang #27586)."""

    bug_class = "window-stale-mapping"
    sources = ("sgl-project/sglang#27586",)
    caught_by = (SecondSlotViolation,)
    page_size_for_test = 4

    def __init__(self, allocator: Any, page_size: int = 1, second_allocator: Any = None) -> None:
        super().__init__(allocator, page_size, second_allocator)
        self.mapping: dict[int, int] = {}  # KV slot -> window slot

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               window: Any = None) -> int:
        prefix_len = super().insert(tokens, values, namespace, priority, window)
        key = as_tokens(tokens, "tokens")
        aligned = len(key) // self.page_size * self.page_size
        slots = as_window(window, len(key))
        for kv, slot in zip(np.asarray(values)[prefix_len:aligned].tolist(), slots[prefix_len:aligned].tolist(), strict=True):
            if slot != NONE:
                self.mapping[kv] = slot
        return prefix_len

    def _free(self, node: Node) -> None:
        RadixCache._free(self, node)
        stale = [self.mapping.pop(kv) for kv in node.value.tolist() if kv in self.mapping]
        if stale:
            self.second_allocator.free(np.asarray(stale, dtype=np.int64))
        self.window.pop(node, None)
        self.pins.pop(node, None)

    def reset(self) -> None:
        super().reset()
        self.mapping.clear()


class WindowFreedKeptLive(WindowRadixCache):
    """A window eviction frees the window slots but leaves them in the node as if live: later
    matches serve freed (and reused) window KV, and the node's eviction frees them again
    (sglang #30845, #36909: freed SWA pages cached as live)."""

    bug_class = "window-freed-kept-live"
    sources = ("sgl-project/sglang#30845", "sgl-project/sglang#36909")
    caught_by = (SecondValueViolation, SecondSlotViolation)  # served as live (20), or freed again at eviction (3s)
    page_size_for_test = 1

    def evict_window(self, num_tokens: int) -> int:
        wanted = as_count(num_tokens, "num_tokens", minimum=0)
        freed = 0
        for node in sorted(self.window, key=lambda n: (n.last_access, n.serial)):
            if freed >= wanted:
                break
            window = self.window[node]
            doomed = (window != NONE) & (self._pins_of(node) == 0)
            if node.state == "linked" and doomed.any():
                self.second_allocator.free(window[doomed])  # ... and the node keeps them
                freed += int(doomed.sum())
        return freed


class TombstoneHidesBranch(WindowRadixCache):
    """A match stops at the first tombstone on its path, though ``W`` live tokens follow it: one
    tombstone makes the whole branch below it unmatchable (sglang #35515)."""

    bug_class = "tombstone-hides-branch"
    sources = ("sgl-project/sglang#35515",)
    caught_by = (TombstoneViolation,)
    page_size_for_test = 1

    def resumable_length(self, live: np.ndarray) -> int:
        dead = np.flatnonzero(~live)
        return super().resumable_length(live[: dead[0]] if len(dead) else live)


class UnlockReleasesAncestorPins(WindowRadixCache):
    """An unlock releases the window pins of its whole path, not of its own window: the pins a
    shorter request holds on the ancestors are released under it, and a window eviction
    tombstones values it still needs (sglang #27038: a copy-on-write over-releases its ancestors'
    SWA locks)."""

    bug_class = "unlock-releases-ancestor-pins"
    sources = ("sgl-project/sglang#27038",)
    caught_by = (PinViolation,)
    page_size_for_test = 4

    def dec_lock_ref(self, handle: Any) -> None:
        self._path(handle)
        whole = [(node, 0) for node in self._path(handle)] if handle.parent is not None else []
        RadixCache.dec_lock_ref(self, handle)
        for node, first in whole:
            if node in self.pins:
                self.pins[node][first:] = np.maximum(0, self.pins[node][first:] - 1)


class _HeldByItsOwnPins:
    """What the two lmdeploy #4700 mutants share: a node is held by its KV counter or by the pins a
    lock put on its own node in the other pool (``_own_pins``); a node split above it takes those
    locks into its KV counter (an ancestor now); a held node is detached, not freed, until released."""

    def _own_pins(self, node: Node) -> int:
        raise NotImplementedError

    def _held(self, node: Node) -> bool:
        return node.lock_ref > 0 or self._own_pins(node) > 0

    def _split(self, child: Node, at: int) -> Node:
        upper = super()._split(child, at)
        upper.lock_ref += self._own_pins(child)
        return upper

    def _free_released(self, path: list[Node]) -> None:
        for node in path:
            if node.state == "detached" and not self._held(node):
                self._free(node)
                self._detached.remove(node)

    def _retire(self, node: Node) -> None:
        if self._held(node):
            node.state = "detached"
            self._detached.append(node)
        else:
            self._free(node)

    def protected_size(self) -> int:
        return sum(len(n.key) for n in self._linked_nodes() if self._held(n) and n.parent is not None)

    def evictable_size(self) -> int:
        return sum(len(n.key) for n in self._linked_nodes() if not self._held(n))


class LeafHeldOnlyByItsWindow(_HeldByItsOwnPins, WindowRadixCache):
    """A lock counts the handle's own node in the window pool only (its window pins protect it, the
    cache reasons), while the KV eviction judges leaves by the KV counter: the handle's node is
    evicted under a running request whose window it pins (lmdeploy #4700: a leaf evictable by its
    KV refcount while its state is pinned)."""

    bug_class = "leaf-held-only-by-its-window"
    sources = ("InternLM/lmdeploy#4700",)
    caught_by = (PinViolation,)
    page_size_for_test = 1

    def __init__(self, allocator: Any, page_size: int = 1, second_allocator: Any = None) -> None:
        super().__init__(allocator, page_size, second_allocator)
        self.window_locks: dict[Node, int] = {}  # node -> locks counted in the window pool instead of lock_ref

    def _own_pins(self, node: Node) -> int:
        return self.window_locks.get(node, 0)

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        if handle.parent is not None:
            handle.lock_ref -= 1
            self.window_locks[handle] = self.window_locks.get(handle, 0) + 1

    def dec_lock_ref(self, handle: Any) -> None:
        path = self._path(handle)
        if handle.parent is None:
            return
        if self.window_locks.get(handle, 0) <= 0 or any(node.lock_ref <= 0 for node in path[1:]):
            raise ValueError(f"unmatched unlock of {handle!r}")
        span = self._window_span(handle)
        self.window_locks[handle] -= 1
        for node in path[1:]:
            node.lock_ref -= 1
        for node, first in span:
            if node in self.pins:
                self.pins[node][first:] -= 1
        self._free_released(path)


class LeafHeldOnlyByItsState(_HeldByItsOwnPins, StateRadixCache):
    """The state pool's version (lmdeploy #4700 as it was: an SSM checkpoint): a lock pins the
    handle's state and counts the handle's node there only, so the KV eviction, judging leaves by
    the KV counter, evicts the node (KV and state) under the request that pinned its state."""

    bug_class = "leaf-held-only-by-its-state"
    sources = ("InternLM/lmdeploy#4700",)
    caught_by = (PinViolation,)
    page_size_for_test = 1

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        if handle.parent is not None:
            handle.lock_ref -= 1  # the state pin holds it, the cache reasons

    def dec_lock_ref(self, handle: Any) -> None:
        path = self._path(handle)
        if handle.parent is None:
            return
        if self.pins.get(handle, 0) <= 0 or any(node.lock_ref <= 0 for node in path[1:]):
            raise ValueError(f"unmatched unlock of {handle!r}")
        self.pins[handle] -= 1
        for node in path[1:]:
            node.lock_ref -= 1
        self._free_released(path)

    def _own_pins(self, node: Node) -> int:
        return self.pins.get(node, 0)


class WindowPinCountWraps8Bit(WindowRadixCache):
    """Window pins counted in 8 bits (a uint8 beside each page): the 256th request admitted on one
    system prompt wraps the pins of its last window to 0, and window pressure frees values every
    running request still reads. Only the production world holds that many locks at once."""

    bug_class = "window-pin-count-8-bit"
    sources = ("production load: 256-1,024 requests admitted at once on one system prompt, with a sliding window",)
    caught_by = (PinViolation,)
    page_size_for_test = 4
    scale = True

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        if handle.parent is not None:
            for node, _ in self._window_span(handle):
                self.pins[node] %= 1 << 8  # the bug: the field wraps

    def dec_lock_ref(self, handle: Any) -> None:
        span = self._window_span(handle) if handle.parent is not None else []
        super().dec_lock_ref(handle)
        for node, _ in span:
            if node in self.pins:
                self.pins[node] %= 1 << 8  # ... both ways (0 - 1 reads 255)


class StatePinCountWraps8Bit(StateRadixCache):
    """State pins counted in 8 bits: the 256th request admitted on one prompt wraps the pin of the
    state it resumes from to 0, and state pressure frees a state running requests resume from."""

    bug_class = "state-pin-count-8-bit"
    sources = ("production load: 256-1,024 requests admitted at once on one system prompt, with a Mamba state",)
    caught_by = (PinViolation,)
    page_size_for_test = 1
    scale = True

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        if handle.parent is not None:
            self.pins[handle] %= 1 << 8  # the bug: the field wraps

    def dec_lock_ref(self, handle: Any) -> None:
        super().dec_lock_ref(handle)
        if handle in self.pins:
            self.pins[handle] %= 1 << 8


HYBRID_MUTANTS: list[type[RadixCache]] = [WindowStaleMapping, WindowFreedKeptLive, TombstoneHidesBranch, UnlockReleasesAncestorPins,
                                          LeafHeldOnlyByItsWindow, LeafHeldOnlyByItsState, WindowPinCountWraps8Bit,
                                          StatePinCountWraps8Bit]


# ---- correct hybrid caches ----------------------------------------------------------------------


class TrustingWindow(WindowRadixCache):
    """Correct, with a sliding window, and trusting its callers as SGLang's trees do
    (``checks_locks=False``, ``validates_input=False``): lock and unlock check nothing, and it
    asserts its own state instead, before every eviction (no lock or pin counter below zero, no
    node locked less than its children) and on every
    argument (bad input the suite sent would fail the run, not be refused)."""

    capabilities = Capabilities(checks_locks=False, validates_input=False, page_sizes=(1, 4, 16), second_pool=SlidingWindow(WINDOW),
                                lifecycle="tree")
    page_size_for_test = 4

    def inc_lock_ref(self, handle: Any) -> None:
        node = handle
        while node.parent is not None:
            node.lock_ref += 1
            node = node.parent
        if handle.parent is not None:
            for node, first in self._window_span(handle):
                self._pins_of(node)[first:] += 1

    def dec_lock_ref(self, handle: Any) -> None:
        span = self._window_span(handle) if handle.parent is not None else []
        node = handle
        while node.parent is not None:
            node.lock_ref -= 1
            if node.lock_ref == 0 and node.state == "detached":
                self._free(node)
                self._detached.remove(node)
            node = node.parent
        for node, first in span:
            if node in self.pins:
                self.pins[node][first:] -= 1

    def _assert_state(self) -> None:
        for node in self._linked_nodes():
            if node.parent is None:
                continue
            below = sum(c.lock_ref for c in node.children.values())
            assert node.lock_ref >= max(0, below), f"tree corrupted by its callers: {node!r} has children locked {below} times"
            assert (self._pins_of(node) >= 0).all(), f"a window pin below zero on {node!r}"

    def evict(self, num_tokens: int) -> int:
        self._assert_state()
        return super().evict(num_tokens)

    def evict_window(self, num_tokens: int) -> int:
        self._assert_state()
        return super().evict_window(num_tokens)

    @staticmethod
    def _trusted(tokens: Any, values: Any = None, window: Any = None) -> None:
        try:
            as_tokens(tokens, "tokens")
            if values is not None:
                as_values(values, len(tokens))
            as_window(window, len(tokens))
        except (TypeError, ValueError) as exc:
            raise AssertionError(f"a cache that trusts its callers was sent bad input: {exc}") from None

    def match_prefix(self, tokens: Any, namespace: Any = None, priority: int = 0) -> Any:
        self._trusted(tokens)
        return super().match_prefix(tokens, namespace, priority)

    def insert(self, tokens: Any, values: np.ndarray, namespace: Any = None, priority: int = 0, window: Any = None) -> int:
        self._trusted(tokens, values, window)
        return super().insert(tokens, values, namespace, priority, window)


class TrustingState(StateRadixCache):
    """Correct, with a state pool, and trusting its callers (``checks_locks=False``,
    ``validates_input=False``): no refusals; it asserts its own tree and pins before every eviction
    and every argument (bad input the suite sent would fail the run)."""

    capabilities = Capabilities(checks_locks=False, validates_input=False, page_sizes=(1, 4, 16), second_pool=StatePool())
    page_size_for_test = 1

    def inc_lock_ref(self, handle: Any) -> None:
        node = handle
        while node.parent is not None:
            node.lock_ref += 1
            node = node.parent
        if handle.parent is not None:
            self.pins[handle] = self.pins.get(handle, 0) + 1

    def dec_lock_ref(self, handle: Any) -> None:
        if handle.parent is not None:
            self.pins[handle] -= 1
        node = handle
        while node.parent is not None:
            node.lock_ref -= 1
            if node.lock_ref == 0 and node.state == "detached":
                self._free(node)
                self._detached.remove(node)
            node = node.parent

    def _assert_state(self) -> None:
        for node in self._linked_nodes():
            if node.parent is not None:
                below = sum(c.lock_ref for c in node.children.values())
                assert node.lock_ref >= max(0, below), f"tree corrupted by its callers: {node!r} has children locked {below} times"
        assert all(n >= 0 for n in self.pins.values()), "a state pin below zero"

    def evict(self, num_tokens: int) -> int:
        self._assert_state()
        return super().evict(num_tokens)

    def evict_states(self, num_states: int) -> int:
        self._assert_state()
        return super().evict_states(num_states)

    def match_prefix(self, tokens: Any, namespace: Any = None, priority: int = 0) -> Any:
        TrustingWindow._trusted(tokens)
        return super().match_prefix(tokens, namespace, priority)

    def insert(self, tokens: Any, values: np.ndarray, namespace: Any = None, priority: int = 0, state: Any = NONE) -> int:
        TrustingWindow._trusted(tokens, values)
        try:
            as_state(state)
        except (TypeError, ValueError) as exc:
            raise AssertionError(f"a cache that trusts its callers was sent bad input: {exc}") from None
        return super().insert(tokens, values, namespace, priority, state)


class RefillingWindow(WindowRadixCache):
    """Correct, with a sliding window whose inserts refill tombstones
    (``SlidingWindow(W, refills_tombstones=True)``, SGLang's ``_recover_from_incoming``): where a
    token of the already cached prefix is tombstoned and the caller brings a live window value
    for it, the cache takes that value (it is then the cache's, freed with the KV or by
    ``evict_window``); everything else is the reference's."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), second_pool=SlidingWindow(WINDOW, refills_tombstones=True), lifecycle="tree")
    page_size_for_test = 4  # W = two pages; where a first refilling variant met the machine's old caller, which sent the
    # request's whole row as its window, the tree's freed values too (taken back by a refill: 3s; fixed in 288ae41)

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               window: Any = None) -> int:
        key = as_tokens(tokens, "tokens")
        slots = as_window(window, len(key))  # refused (nothing changed) before the insert, as the reference does
        prefix_len = super().insert(tokens, values, namespace, priority, window)
        node, pos = self._root_for(namespace), 0
        while pos < prefix_len:  # the cached prefix's nodes: refill their tombstones from the caller's live values
            node = self._child(node, key[pos : pos + self.page_size])
            take = min(len(node.key), prefix_len - pos)
            mine = self.window.setdefault(node, np.full(len(node.key), NONE, dtype=np.int64))
            theirs = slots[pos : pos + take]
            refill = self._refilled(mine[:take], theirs)
            mine[:take][refill] = theirs[refill]
            pos += len(node.key)
        return prefix_len

    @staticmethod
    def _refilled(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
        """Which cached tokens take the caller's window value: those without a live one of their own
        (tombstoned, or cached from a slid window), where the caller's is live."""
        return (mine == NONE) & (theirs != NONE)


HYBRID_VARIANTS: list[type[RadixCache]] = [WindowRadixCache, TrustingWindow, RefillingWindow, StateRadixCache, TrustingState]
