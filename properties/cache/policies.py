"""Eviction policies as keys: what a target declares so that the suite judges its eviction order.

``Capabilities(eviction_policy=Policy(key=...))``: ``key`` maps what the suite observes of an
unlocked leaf (:class:`LeafStats`) to a value; the leaf with the smallest goes first (oracle 4,
:mod:`radixcheck.oracles.policy`). The named policies below are SGLang 0.5.23's
(``mem_cache/evict_policy.py``), with its meaning. A user's own, e.g. frequency that saturates at
three hits, then recency::

    Capabilities(eviction_policy=Policy(key=lambda s: (min(s.hits, 3), s.last_use), name="lfu3-then-lru",
                                        hits_on_match=True))

**Ties.** Every named policy ends its key with a clock (``last_use`` or ``created``), and no two
unlocked leaves share one (one call stamps one path; only an ancestor of a leaf can share its
stamp, and an ancestor is no leaf). So the named policies never tie and the order they fix is the
engine's, whatever its tie-breaker. A user's key may tie (``key=lambda s: s.hits``): any order is
accepted within a tie, since the suite cannot know how a cache breaks it.

A policy that is not a key over these statistics (a per-tenant quota, a cost model over the KV
bytes) is declared by name, ``eviction_policy="my-policy"``: its order is then not exercised, and
the amount and lock-safety checks still run (the report card says so).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from radixcheck.oracles.policy import LeafStats

__all__ = ["LeafStats", "Policy", "filo", "fifo", "lfu", "lru", "mru", "priority", "slru", "tlru", "NAMED"]


@dataclass(frozen=True, repr=False)
class Policy:
    """An eviction order the suite can judge: ``key(stats)`` smallest goes first."""

    key: Callable[[LeafStats], Any]
    """The policy: a function of :class:`LeafStats` returning anything comparable."""
    name: str = "custom"
    """How reports name it."""
    hits_on_match: bool = False
    """Whether a match counts as a hit (``LeafStats.hits``). ``False`` is SGLang's meaning: a hit is
    an insert that covers the node (a request counts once, when its KV is cached); ``True``: every
    match that covers it counts too."""
    takes_priority: bool = False
    """Whether requests carry a priority: the suite then sends ``priority=`` (an int) to
    ``insert`` and ``match_prefix``, as SGLang's requests carry ``req.priority``; never otherwise."""
    prompt_priority_bonus: int = 0
    """For a ``lifecycle="requests"`` cache under a policy that takes priorities: when a request's
    own publish or finish caches pages past its prompt, the cache inserts the prompt's whole pages
    again at the request's priority plus this (SGLang 0.5.23: 1, its ``checkpoint`` splits the leaf
    at the prompt "so eviction can drop the output KV without the prompt"). 0: the request's pages
    all take its priority."""

    def __post_init__(self) -> None:
        if not callable(self.key):
            raise TypeError(f"Policy.key must be a function of LeafStats, got {self.key!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Policy.name must be a non-empty str, got {self.name!r}")
        for flag in ("hits_on_match", "takes_priority"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"Policy.{flag} must be a bool, got {getattr(self, flag)!r}")
        bonus = self.prompt_priority_bonus
        if isinstance(bonus, bool) or not isinstance(bonus, int) or bonus < 0:
            raise TypeError(f"Policy.prompt_priority_bonus must be an int >= 0, got {bonus!r}")
        if bonus and not self.takes_priority:
            raise ValueError(f"Policy.prompt_priority_bonus={bonus} for a policy that takes no priority (takes_priority=False)")

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:  # reports and repro files name it; the key function's address says nothing
        flags = "".join(f", {f}=True" for f in ("hits_on_match", "takes_priority") if getattr(self, f))
        flags += f", prompt_priority_bonus={self.prompt_priority_bonus}" if self.prompt_priority_bonus else ""
        return f"Policy({self.name!r}{flags})"


def _lru(s: LeafStats) -> Any:
    return s.last_use


def _lfu(s: LeafStats) -> Any:
    return s.hits, s.last_use


def _fifo(s: LeafStats) -> Any:
    return s.created


def _mru(s: LeafStats) -> Any:
    return -s.last_use


def _filo(s: LeafStats) -> Any:
    return -s.created


def _priority(s: LeafStats) -> Any:
    return s.priority, s.last_use


def _slru(threshold: int, s: LeafStats) -> Any:
    return (1 if s.hits >= threshold else 0), s.last_use


def _tlru(threshold: int, next_prompt_estimate: int, s: LeafStats) -> Any:
    budget = max(s.history + next_prompt_estimate - threshold, 0)
    return (-1 if s.start >= budget else 0), s.last_use


def lru() -> Policy:
    """Least recently used first: ``last_use``."""
    return Policy(_lru, "lru")


def lfu(hits_on_match: bool = False) -> Policy:
    """Fewest hits first, then least recently used: ``(hits, last_use)``."""
    return Policy(_lfu, "lfu" + ("(hits on match)" if hits_on_match else ""), hits_on_match=hits_on_match)


def fifo() -> Policy:
    """First cached first: ``created``."""
    return Policy(_fifo, "fifo")


def mru() -> Policy:
    """Most recently used first: ``-last_use``."""
    return Policy(_mru, "mru")


def filo() -> Policy:
    """Last cached first: ``-created``."""
    return Policy(_filo, "filo")


def priority(prompt_bonus: int = 0) -> Policy:
    """Lowest request priority first, then least recently used: ``(priority, last_use)``.
    ``prompt_bonus``: :attr:`Policy.prompt_priority_bonus` (SGLang's own request steps: 1)."""
    name = "priority" + (f"(prompt +{prompt_bonus})" if prompt_bonus else "")
    return Policy(_priority, name, takes_priority=True, prompt_priority_bonus=prompt_bonus)


def slru(threshold: int = 2, hits_on_match: bool = False) -> Policy:
    """Segmented LRU: leaves with fewer than ``threshold`` hits (probation) before the protected
    ones, least recently used first within each: ``(hits >= threshold, last_use)``."""
    return Policy(functools.partial(_slru, threshold), f"slru(threshold={threshold})", hits_on_match=hits_on_match)


def tlru(threshold: int = 0, next_prompt_estimate: int = 0) -> Policy:
    """Tail-optimized LRU (SGLang's TLRUStrategy, in tokens): a node is TEL-safe, and goes before any
    other, when the tokens cached above it already cover ``history + next_prompt_estimate -
    threshold``; least recently used first within each group."""
    return Policy(functools.partial(_tlru, threshold, next_prompt_estimate),
                  f"tlru(threshold={threshold}, next_prompt_estimate={next_prompt_estimate})")


NAMED: dict[str, Callable[..., Policy]] = {"lru": lru, "lfu": lfu, "fifo": fifo, "mru": mru, "filo": filo,
                                           "priority": priority, "slru": slru, "tlru": tlru}
"""SGLang 0.5.23's eight policies by its names (``--radix-eviction-policy``)."""
