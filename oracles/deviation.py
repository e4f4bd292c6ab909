"""Named deviations of the order model: what one known bug makes of a leaf's statistics.

A waiver ``4 eviction order  known: <name>`` (:mod:`radixcheck.properties.findings.waivers`)
names one known order bug by its behaviour. The machine then keeps, beside the contract's
statistics (:class:`~radixcheck.oracles.prefix_set.PrefixSetModel`), the ones a cache with that
bug keeps, and accepts an eviction that is right by either; an eviction right by neither is
still a finding. Each deviation here is a few lines that say what the bug does to the stamps,
from the model's two hooks:

- :meth:`Deviation.split`: a match or insert ended inside a cache node (one that does not end
  there), so a cache splits it after page ``upper``; ``lower`` is the last page of the node's
  lower half. ``clock`` is the model's clock of that use.
- :meth:`Deviation.unlinked`: a page left the tree (evicted or quarantined); a deviation that
  stamps a page hands the stamp to its parent, as the model does with ``last_use``.
- :meth:`Deviation.left_device`: on a tiered cache, a page left the device but stays cached on
  host (its host copy is done or being written); by default as :meth:`Deviation.unlinked`.

:meth:`Deviation.stats` then gives a leaf's statistics as the deviating cache keeps them. A hook
may change the statistics of the pages of the node it is told of (a split: the split node's pages;
a page that leaves: its parent), no others: the tier model refiles those in the deviation's order
(:class:`~radixcheck.oracles.tier_model.TierModel`), never the whole tree.
Nothing here reads a cache: these model the bug from its description (reports/sglang_findings.md
#3, reports/findings/sglang_trees.md #9), not from the code that has it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from radixcheck.oracles.policy import LeafStats


class Deviation:
    """A known order bug, as the statistics it changes. A subclass overrides what it needs; a
    new instance is made for each run (it keeps per-page state)."""

    name = "deviation"

    def split(self, upper: Any, lower: Any, clock: int) -> None:
        """A use at ``clock`` ended inside a node: it is split after page ``upper``; ``lower`` ends its lower half."""

    def unlinked(self, entry: Any) -> None:
        """Page ``entry`` left the tree (``entry.parent`` is the page above it)."""

    def left_device(self, entry: Any) -> None:
        """Page ``entry`` left the device of a tiered cache and stays cached on host."""
        self.unlinked(entry)

    def stats(self, stats: LeafStats, leaf: Any) -> LeafStats:
        """``stats``, the contract's statistics of ``leaf``, as the deviating cache keeps them."""
        return stats


class SuffixRefreshedOnMidEdgeUse(Deviation):
    """SGLang #3: a match or insert stamps every node it walks into, then splits the last one
    where it diverges; the lower half (the unused suffix) keeps the fresh stamp. The upper half is
    stamped by the split too, which a use shows only when the split lies past its answer (a dead
    window ends the answer, the walk goes on: reports/findings/sglang_trees.md)."""

    name = "suffix-refreshed-on-mid-edge-use"

    def __init__(self) -> None:
        self.used: dict[Any, int] = {}  # a page of a refreshed suffix -> when

    def split(self, upper: Any, lower: Any, clock: int) -> None:
        # every page of the lower half: it is one node with one stamp, and a tiered cache frees it
        # whole (its pages picked together are judged by the most recently used of them)
        page = lower
        while page is not None and page is not upper:
            self.used[page] = clock
            page = page.parent
        while page is not None and page.parent is not None:  # the upper half: up to the node above it
            self.used[page] = clock
            page = page.parent
            if page.ends_node:
                break

    def unlinked(self, entry: Any) -> None:
        when = self.used.pop(entry, None)
        if when is not None and entry.parent is not None:  # the page above was used then too
            self.used[entry.parent] = max(when, self.used.get(entry.parent, when))

    def left_device(self, entry: Any) -> None:
        """The parent, now a device leaf, shows the stamp; the page keeps it on host (a node
        keeps its stamp when only its device copy goes, so host eviction reads it)."""
        when = self.used.get(entry)
        if when is not None and entry.parent is not None:
            self.used[entry.parent] = max(when, self.used.get(entry.parent, when))

    def stats(self, stats: LeafStats, leaf: Any) -> LeafStats:
        return dataclasses.replace(stats, last_use=max(stats.last_use, self.used.get(leaf, stats.last_use)))


class SplitParentFreshCreationTime(Deviation):
    """SGLang #9: a split makes the upper half a new node, created at the split (the lower half,
    the old node, keeps its creation time)."""

    name = "split-parent-fresh-creation-time"

    def __init__(self) -> None:
        self.created: dict[Any, int] = {}  # the page that ends a split's upper half -> when

    def split(self, upper: Any, lower: Any, clock: int) -> None:
        self.created[upper] = clock

    def unlinked(self, entry: Any) -> None:
        self.created.pop(entry, None)

    def stats(self, stats: LeafStats, leaf: Any) -> LeafStats:
        return dataclasses.replace(stats, created=self.created.get(leaf, stats.created))
