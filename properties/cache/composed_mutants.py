"""Composed mutants: caches whose bug needs two declared parts to show (issue 39: a second pool
with the request lifecycle, bigram keys with a second pool), and the correct composed caches that
must pass, trusting ones among them. Catalogued with the others (``radixcheck.properties.cache.mutants``
re-exports them: ``MUTANTS``, ``CORRECT_VARIANTS``).

Each bug is invisible to either part alone: the window reference's request methods are right
without a window, the window reference is right without request methods; a bigram cache that
aligns its window to raw tokens aligns nothing else wrongly.

Point the suite at one: ``radixcheck audit radixcheck.properties.cache.mutants:RequestKeepsTakenWindow``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.oracles.violations import SecondSlotViolation, SecondValueViolation
from radixcheck.properties.cache.contract import Capabilities, SlidingWindow, StatePool
from radixcheck.properties.cache.hybrid_mutants import TrustingState, TrustingWindow
from radixcheck.reference.bigram import bigrams
from radixcheck.reference.bigram_hybrid import BigramStateCache, BigramWindowCache
from radixcheck.reference.hybrid_cache import NONE, WINDOW, as_window
from radixcheck.reference.hybrid_requests import (
    StateRequestsCache,
    StateRequestSteps,
    StateTreeCache,
    WindowRequestsCache,
    WindowRequestSteps,
)
from radixcheck.reference.radix_cache import RadixCache
from radixcheck.reference.validation import as_tokens, as_values


class RequestKeepsTakenWindow(WindowRequestsCache):
    """``cache_unfinished_req`` inserts the request's window, and the tree takes the window slots of
    the tokens it newly caches; the request goes on naming them as its own (``Request.window`` is
    not cleared there), so its finish frees them again: window values the tree holds live, freed
    under it. Needs a second pool (no window, nothing to keep) and the cache's own request methods
    (with ``lifecycle="tree"`` the engine keeps the request's window, not the cache)."""

    bug_class = "request-keeps-taken-window"
    sources = ("composition: SGLang's SWA tree with its cache_unfinished_req (swa_radix_cache.py)",)
    caught_by = (SecondSlotViolation,)
    page_size_for_test = 4

    def _insert_req(self, req: Any) -> int:
        own = self._own_window(req)
        req.window = own
        prefix_len = self.insert(req.tokens[: req.filled], req.slots[: req.filled], namespace=req.namespace, window=own.copy())
        self._free_slots(req.slots[req.protected : prefix_len])
        tree = self._cached_windows(as_tokens(req.tokens[:prefix_len], "tokens"), req.namespace)
        self._free_own_window(req, [i for i in range(req.protected, prefix_len) if req.window[i] != NONE and tree[i] != NONE])
        return req.filled // self.page_size * self.page_size  # the bug: req.window[prefix_len:aligned] still names the tree's


class FinishFreesTakenState(StateRequestsCache):
    """``cache_finished_req`` inserts the request's final state, which the tree takes where that
    prefix had none, and then frees the state it brought as if it were still the request's: the
    tree's live state, freed under it. Needs a state pool and the cache's own request methods."""

    bug_class = "finish-frees-taken-state"
    sources = ("composition: SGLang's Mamba tree with its cache_finished_req (mamba_radix_cache.py)",)
    caught_by = (SecondSlotViolation,)
    page_size_for_test = 1  # every finish ends on a page boundary: its state is brought to the insert

    def cache_finished_req(self, req: Any, insert: bool = True) -> None:
        brought = req.state
        end = self._insert_req(req) if insert else req.protected
        self._free_slots(req.slots[end : req.filled])
        req.state = brought  # the bug: what it brought is freed, taken or not
        self._free_own_state(req)
        self.dec_lock_ref(req.handle)
        req.handle = None


class BigramWindowAlignsRawTokens(BigramWindowCache):
    """Gives key ``i`` the window slot of raw token ``i + 1`` (the token that ends the pair, the way
    a raw-token cache reads its window) instead of raw token ``i``'s: each key's window value is its
    neighbour's, the first raw token's slot is never taken nor freed, and the last one's, which the
    caller frees, stays cached. Needs bigram keys (with tokens, key ``i`` is raw token ``i``) and a
    second pool."""

    bug_class = "bigram-window-aligns-raw-tokens"
    sources = ("composition: SGLang's is_eagle=True over an SWA tree (bigram keys, window counted in keys)",)
    caught_by = (SecondValueViolation, SecondSlotViolation)
    page_size_for_test = 4

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               window: Any = None) -> int:
        raw = as_tokens(tokens, "tokens")
        vals = as_values(values, len(raw))
        slots = as_window(window, len(raw))
        keys = bigrams(raw)
        return super(BigramWindowCache, self).insert(keys, vals[: len(keys)], namespace, priority, window=slots[1 : len(keys) + 1])


COMPOSED_MUTANTS: list[type[RadixCache]] = [RequestKeepsTakenWindow, FinishFreesTakenState, BigramWindowAlignsRawTokens]


# ---- correct composed caches ----------------------------------------------------------------------


class TrustingWindowRequests(WindowRequestSteps, TrustingWindow):
    """Correct: a sliding window and ``lifecycle="requests"``, trusting its callers as SGLang's SWA
    tree does (no refusals; it asserts its own tree and pins before every eviction)."""

    capabilities = Capabilities(checks_locks=False, validates_input=False, page_sizes=(1, 4, 16), second_pool=SlidingWindow(WINDOW),
                                lifecycle="requests")
    page_size_for_test = 4


class TrustingStateRequests(StateRequestSteps, TrustingState):
    """Correct: a state pool and ``lifecycle="requests"``, trusting its callers as SGLang's Mamba
    tree does."""

    capabilities = Capabilities(checks_locks=False, validates_input=False, page_sizes=(1, 4, 16), second_pool=StatePool(),
                                lifecycle="requests")
    page_size_for_test = 1


COMPOSED_VARIANTS: list[type[RadixCache]] = [WindowRequestsCache, StateRequestsCache, StateTreeCache, BigramWindowCache,
                                             BigramStateCache, TrustingWindowRequests, TrustingStateRequests]
