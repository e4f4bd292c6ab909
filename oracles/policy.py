"""Oracle 4, for any eviction policy given as a key — the leaf that goes is the coldest one left.

A policy is a *key* over what the suite observes of each unlocked leaf (:class:`LeafStats`):
the smaller the key, the sooner the leaf goes. A cache evicts as SGLang's ``evict`` does: it takes
the unlocked leaf with the smallest key, frees it, and a parent left childless and unlocked joins
the candidates at once. So each ``free()`` call of one ``evict`` must free a leaf whose key is no
larger than that of any unlocked leaf still there at that moment (a parent freed by an earlier
call has become a candidate; a leaf freed by a later call was still there). Keys that tie may go
in any order. A call that frees several leaves at once is judged by its largest key.

The model (:class:`radixcheck.oracles.prefix_set.PrefixSetModel`) keeps the statistics and the
unlocked leaves in key order, incrementally; this module only compares. That ``evict`` frees
enough and no more is :mod:`radixcheck.oracles.amount`, for every policy; the plain LRU order of
``eviction_policy="lru"`` is :mod:`radixcheck.oracles.lru`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from radixcheck.oracles.violations import Check, EvictionOrderViolation, shown, shown_namespace


@dataclass(frozen=True, slots=True)
class LeafStats:
    """What the suite observes of one leaf (the contract's "Eviction policies" says exactly how
    each is counted). Times are the model's clock: one tick per ``match_prefix`` or ``insert``."""

    last_use: int
    """The clock of the last match or insert that covered the leaf (a lock is not a use)."""
    created: int
    """The clock of the insert that first cached it (a split keeps it: the prefix is as old as before)."""
    hits: int
    """How many hits covered it: every insert that covered it, and every match if the policy counts them."""
    priority: int
    """The highest request priority of the inserts that covered it (0 without one)."""
    depth: int
    """Tokens from the root to the leaf's end."""
    start: int
    """Tokens from the root to where the cache's node ending at the leaf begins (a node ends where a
    match or an insert ended, or where the tree forked)."""
    history: int
    """The deepest (in tokens) the leaf's branch ever reached since it was cached: TLRU's L. It does
    not shrink when the tail is evicted."""


@dataclass(frozen=True)
class Choice:
    """What one ``free()`` call of an eviction chose, as the model saw it at that moment: the
    statistics of the leaves it freed, and of the unlocked leaves it left. Kept on an order
    finding (``EvictionOrderViolation.choice``), so that a known deviation can be named by the
    order the cache does follow (a waiver's ``as <policy>``)."""

    freed: tuple[LeafStats, ...]
    left: tuple[LeafStats, ...]

    def made_by(self, key: Callable[[LeafStats], Any]) -> bool:
        """Whether a cache evicting by ``key`` could have made this choice: no leaf it left has a
        key smaller than the largest of those it freed (keys that tie may go in any order)."""
        if not self.freed or not self.left:
            return True
        return not min(map(key, self.left)) < max(map(key, self.freed))


def check_order(victims: list[Any], colder: Any | None, colder_freed_later: bool, num_tokens: int,
                key: Callable[[Any], Any], describe: Callable[[Any], str], policy: str) -> None:
    """``victims``: the leaves one ``free()`` call of ``evict(num_tokens)`` freed; ``colder``: the
    unlocked leaf with the smallest key among those still there at that moment (``None`` if none),
    freed by a later call of the same ``evict`` if ``colder_freed_later``. ``key`` maps a leaf to
    its policy key, ``describe`` to the statistics a message shows."""
    if not victims or colder is None:
        return
    hotter = max(victims, key=key)
    if not key(colder) < key(hotter):
        return
    apart = hotter.namespace != colder.namespace  # then the same tokens may be two leaves: name their tenants

    def leaf(e: Any) -> str:
        return f"{shown(e.prefix)}" + (f" under namespace {shown_namespace(e.namespace)}" if apart else "")

    if colder_freed_later:
        raise EvictionOrderViolation(
            f"evict({num_tokens}) evicted out of {policy} order: leaf {leaf(hotter)} ({describe(hotter)}, key "
            f"{key(hotter)!r}) went before leaf {leaf(colder)} ({describe(colder)}, key {key(colder)!r})",
            Check("call_freeing(colder[0], free_calls) <= call_freeing(hotter[0], free_calls)",
                  "(call_freeing(hotter[0], free_calls), call_freeing(colder[0], free_calls))",
                  {"hotter": list(hotter.values), "colder": list(colder.values)}),
        )
    raise EvictionOrderViolation(
        f"evict({num_tokens}) evicted leaf {leaf(hotter)} ({describe(hotter)}, key {key(hotter)!r}) while leaf "
        f"{leaf(colder)} ({describe(colder)}, key {key(colder)!r}) survived: under {policy} it goes first",
        Check("not (set(hotter) <= set(freed) and set(colder_leaf).isdisjoint(freed))",
              "{'the hotter leaf freed': set(hotter) <= set(freed), 'the colder leaf freed': not set(colder_leaf).isdisjoint(freed)}",
              {"hotter": list(hotter.values), "colder_leaf": list(colder.values)}),
    )
