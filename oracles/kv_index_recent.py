"""Oracle 7's companion for an index that forgets on its own: which (rank, block) pairs it must still know.

An index bounded by an LRU of ``C`` entries forgets a pair only once ``C`` other pairs were used
(stored, or looked up where lookups refresh) after it. So, whatever it refreshes on, a pair stored
and not removed since, with fewer than ``keep`` other pairs stored or looked up after that store,
is still known (``keep``: the index's ``keeps_recent_blocks``). Counting lookups as uses whether or
not the index refreshes on them, and counting every rank that holds a block a query names, only
ever makes the promise smaller: never a false alarm, for either kind of LRU.

Kept incrementally: ``_recent`` is the last ``keep`` distinct pairs used, oldest first (an
``OrderedDict`` trimmed on every use), ``_trimmed`` the last use of the most recent pair trimmed
from it, and ``_stored_at`` each held pair's last store, per rank. A pair is *kept* iff its last
store came after ``_trimmed``: then it is itself in ``_recent``, so at most ``keep - 1`` other
pairs were used since; otherwise the trimmed pair and the ``keep`` pairs used after it were, and
an LRU of ``keep`` may have dropped it. Blocks are the model's chains (small ints).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

Rank = tuple[int, int]


class RecentStores:
    """Which held (rank, chain) pairs an index keeping the ``keep`` most recently used must still know."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._clock = 0
        self._recent: OrderedDict[tuple[Rank, int], int] = OrderedDict()  # pair -> time of its last use
        self._trimmed = 0  # the last use of the latest pair trimmed from _recent (0: none yet)
        self._stored_at: dict[Rank, dict[int, int]] = {}  # rank -> chain -> time of its last store

    def _use(self, pair: tuple[Rank, int]) -> int:
        self._clock += 1
        self._recent[pair] = self._clock
        self._recent.move_to_end(pair)
        if len(self._recent) > self.keep:
            self._trimmed = self._recent.popitem(last=False)[1]
        return self._clock

    def stored(self, rank: Rank, chains: Iterable[int]) -> None:
        """A ``BlockStored`` of these chains by ``rank``: each is used, and its promise starts again."""
        mine = self._stored_at.setdefault(rank, {})
        for chain in chains:
            mine[chain] = self._use((rank, chain))

    def used(self, pairs: Iterable[tuple[Rank, int]]) -> None:
        """A lookup (or a store delivered again) that may have refreshed these pairs: used, no new promise."""
        for pair in pairs:
            self._use(pair)

    def removed(self, rank: Rank, chain: int) -> None:
        """One copy of ``chain`` gone from ``rank``: the index may have dropped it, copies or not."""
        self._stored_at.get(rank, {}).pop(chain, None)

    def cleared(self, rank: Rank) -> None:
        self._stored_at.pop(rank, None)

    def kept(self, rank: Rank, chain: int) -> bool:
        """Whether the index must still know that ``rank`` holds ``chain`` (the caller checks it is held)."""
        stored = self._stored_at.get(rank, {}).get(chain)
        return stored is not None and self.keep > 0 and stored > self._trimmed
