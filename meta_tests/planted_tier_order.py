"""Order bugs planted into the reference tiered cache, for the tier order oracle's ``known:``
meta-tests (meta_tests/test_tier_known_deviations.py): SGLang 0.5.23's #3 as a tiered cache whose
nodes are the pages between the points where a use ended (or the tree forked) would have it, and a
second, different order bug to sit behind it.

The reference keeps one node per page; the planted cache keeps, beside its nodes, where a
compressed cache's nodes would end, and stamps the lower half of a node a use ends inside with
that use's time, as SGLang's ``_match_prefix_helper`` does before its split (reports/sglang_findings.md
#3). Written against the cache's own nodes, not the model's pages.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from radixcheck.properties.tiers.contract import TierMatch
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode


class SuffixRefreshedTiers(TieredRadixCache):
    """SGLang #3 on the tiers: a match or insert that ends inside a (compressed) node refreshes
    the node's unused lower half too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ends: set[TierNode] = set()  # the nodes after which a compressed cache's node ends

    def _lower_half(self, path: list[TierNode]) -> list[TierNode]:
        """A node ends after ``path[-1]``: the pages below it on a single chain, if the use ended inside a node."""
        if not path or path[-1] in self._ends:
            return []
        node, lower = path[-1], []
        self._ends.add(node)
        while len(node.children) == 1:
            node = next(iter(node.children.values()))
            lower.append(node)
            if node in self._ends:
                break
        on_device = [i for i, n in enumerate(lower) if n.device is not None]
        # a node is on one tier whole: host-only pages below a device page are another node's
        return lower[: on_device[-1] + 1] if on_device else lower

    def _refresh(self, lower: list[TierNode]) -> None:
        for node in lower:  # the bug: the unused lower half keeps the use's stamp
            node.last_access = self._clock

    def match_prefix(self, tokens: Any, namespace: Hashable = None, priority: int = 0) -> TierMatch:
        match = super().match_prefix(tokens, namespace, priority)
        covered = (len(match.device_values) + match.host_length) // self.page_size
        self._refresh(self._lower_half(self._walk(tuple(int(t) for t in tokens), namespace)[:covered]))
        return match

    def insert(self, tokens: Any, values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        key = tuple(int(t) for t in tokens)
        before = self._walk(key, namespace)
        forked = self._lower_half(before) if len(before) < len(key) // self.page_size else []  # new pages hang here
        prefix = super().insert(tokens, values, namespace, priority)
        self._refresh(forked + self._lower_half(self._walk(key, namespace)))
        return prefix


class SuffixRefreshedFifoTiers(SuffixRefreshedTiers):
    """#3, and a second order bug behind it: device leaves go first-cached first, not least recently used."""

    def _eviction_key(self, node: TierNode) -> tuple[int, int]:
        return node.created, node.serial

    def _host_eviction_key(self, node: TierNode) -> tuple[int, int]:
        return node.last_access, node.serial  # the host tier keeps its order: the bug is the device tier's


class SuffixRefreshedFifoHostTiers(SuffixRefreshedTiers):
    """#3, and a host-order bug behind it: host-only leaves go first-cached first, not least recently used."""

    def _host_eviction_key(self, node: TierNode) -> tuple[int, int]:
        return node.created, node.serial
