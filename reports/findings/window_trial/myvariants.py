"""Legal variants of mycache (each a choice the contract leaves to the cache): probes for false alarms."""

from __future__ import annotations

import dataclasses

from mycache import NONE, MyWindowTierCache, Node, make


def _factory(cls):
    def factory(allocator, host_pool, controller, page_size, write_policy):
        return cls(allocator, host_pool, controller, page_size, write_policy)
    factory.tier_capabilities = getattr(cls, "caps", make.tier_capabilities)
    return factory


class StrictRevive(MyWindowTierCache):
    """A load-back restores the window only on the pages of the path's last W tokens; a page it
    loads further back stays tombstoned (the contract: "or leave it tombstoned"). Pages an earlier
    load-back revived keep their values."""

    def _revive(self, path: list[Node]) -> None:
        end = path[-1].depth if path else 0
        super()._revive([node for node in path if node.depth > end - self.window])


class HostGainsWindow(MyWindowTierCache):
    """An insert onto a backed-up page whose device window is live where its host copy is tombstoned
    copies those values into the host copy with no transfer (SGLang's incremental SWA backup; the
    contract: "it may gain more later, each its own")."""

    def insert(self, tokens, values, window=None, namespace=None) -> int:
        prefix = super().insert(tokens, values, window=window, namespace=namespace)
        for node in self._walk(tokens, namespace):
            if node.host is not None and node.device is not None:
                gain = (node.win_host == NONE) & (node.win_dev != NONE)
                node.win_host[gain] = node.win_dev[gain]
        return prefix


class LeafFirstWriteBack(MyWindowTierCache):
    """Under write_back, evict() writes the evicted leaf alone (SGLang's design), declared as
    ``write_back_order="leaf_first"``; write-through stays top-down."""

    caps = dataclasses.replace(make.tier_capabilities, write_back_order="leaf_first")

    def evict(self, num_tokens: int) -> int:
        chain, self._backup_chain = self._backup_chain, lambda path: chain(path[-1:])
        try:
            return super().evict(num_tokens)
        finally:
            del self._backup_chain


VARIANTS = [StrictRevive, HostGainsWindow, LeafFirstWriteBack]
for _cls in VARIANTS:
    globals()["make_" + _cls.__name__] = _factory(_cls)
