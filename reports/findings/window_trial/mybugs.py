"""Planted one-idea bugs in mycache, each needing the window and the host tier (or a second tenant)."""

from __future__ import annotations

import numpy as np
from mycache import NONE, MyWindowTierCache, Node, make


def _factory(cls):
    def factory(allocator, host_pool, controller, page_size, write_policy):
        return cls(allocator, host_pool, controller, page_size, write_policy)
    factory.tier_capabilities = make.tier_capabilities
    return factory


class LoadBackWindowFromParent(MyWindowTierCache):
    """B1: a load-back revives each page's tombstones from its parent's host copy (off by one page)."""

    def _revive(self, path: list[Node]) -> None:
        for i, node in enumerate(path):
            src = path[i - 1] if i else node
            win = self._host_win(src) if src.host is not None else None
            if win is not None:
                dead = node.win_dev == NONE
                node.win_dev[dead] = win[dead]


class HostWindowSkipsTombstones(MyWindowTierCache):
    """B2: host window values live in an array indexed by host slot; a write stores only the live
    values, so a tombstoned token shows the value left in its host slot by the slot's last owner."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.host_win = np.full(self.host_pool.pool_size, NONE, dtype=np.int64)

    def _write_done(self, node: Node, transfer) -> None:
        node.host = np.asarray(transfer.host_slots, dtype=np.int64).copy()
        live = node.win_dev != NONE
        self.host_win[node.host[live]] = node.win_dev[live]      # bug: tombstones not written

    def _host_win(self, node: Node) -> np.ndarray | None:
        return self.host_win[node.host].copy()


class WriteBackDropsWindowPart(MyWindowTierCache):
    """B3: a write-back started by evict() copies the KV but not the window (write-through does)."""

    def _write_done(self, node: Node, transfer) -> None:
        super()._write_done(node, transfer)
        if node.evicting:
            node.win_host = np.full(self.page_size, NONE, dtype=np.int64)


class HostWindowKeyedByTokens(MyWindowTierCache):
    """B4: host window values are kept in a table keyed by the path's tokens, not its namespace:
    a tenant's twin page (same tokens) overwrites the other tenant's host window."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.table: dict[tuple, np.ndarray] = {}

    @staticmethod
    def _tokens(node: Node) -> tuple:
        return tuple(t for n in node.path() for t in n.key)

    def _write_done(self, node: Node, transfer) -> None:
        super()._write_done(node, transfer)
        self.table[self._tokens(node)] = node.win_dev.copy()

    def _host_win(self, node: Node) -> np.ndarray | None:
        return self.table.get(self._tokens(node), node.win_host)


class WriteBackFreesWindowOfKeptLeaf(MyWindowTierCache):
    """B5: a write-back's completion frees the page's device window even when the page stays on
    device (a request locked it, or an insert extended it, while the write was pending)."""

    def transfer_done(self, transfer) -> None:
        node = self.pending.get(id(transfer))
        evicting = node is not None and node.evicting and not node.removed
        super().transfer_done(transfer)
        if evicting and node.device is not None:
            node.win_dev = np.full(self.page_size, NONE, dtype=np.int64)


class HostPartReadsOnlyHostCopy(MyWindowTierCache):
    """B6: the host part of a match reads a backed-up page's window from its host copy only,
    ignoring values live on device (an insert onto a host-only page brought live ones)."""

    @staticmethod
    def _live_any(node: Node, j: int) -> bool:
        if node.host is not None:
            win = node.owner._host_win(node)
            return win is not None and win[j] != NONE
        return node.device is not None and node.win_dev is not None and node.win_dev[j] != NONE


class LoadBackReversesPageWindow(MyWindowTierCache):
    """B7: a load-back restores a page's window values in reverse token order (visible at page size 2)."""

    def _revive(self, path: list[Node]) -> None:
        for node in path:
            win = self._host_win(node) if node.host is not None else None
            if win is not None:
                dead = node.win_dev == NONE
                node.win_dev[dead] = win[::-1][dead]


class LoadFailReturnsDevicePath(MyWindowTierCache):
    """B8: a load-back whose first load fails returns the whole device KV path, not the part a
    request can resume from (its window may be tombstoned at the end)."""

    def load_back(self, host_handle):
        if host_handle.parent is not None:
            path = host_handle.path()
            first = next((i for i, n in enumerate(path) if n.device is None), None)
            if first is not None and self.host_pool is not None:
                values, handle = super().load_back(host_handle)
                if path[first].device is None:            # the load failed: nothing moved
                    dev = path[:first]
                    ns = self._ns(host_handle)
                    return self._device_values(dev), self._handle(path, first, ns)
                return values, handle
        return super().load_back(host_handle)


class WriteBackStartFreesWindow(MyWindowTierCache):
    """B9: evict() frees a leaf's device window as soon as it starts its write-back (the window part
    is staged for the write), keeping the KV on device until the write lands."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.staged: dict[int, np.ndarray] = {}

    def evict(self, num_tokens: int) -> int:
        before = {id(n) for n in self._nodes() if n.evicting}
        freed = super().evict(num_tokens)
        for n in self._nodes():
            if n.evicting and id(n) not in before:
                self.staged[id(n)] = n.win_dev.copy()
                n.win_dev = np.full(self.page_size, NONE, dtype=np.int64)
        return freed

    def _write_done(self, node: Node, transfer) -> None:
        super()._write_done(node, transfer)
        if id(node) in self.staged:
            node.win_host = self.staged.pop(id(node))


class TwinWindowOverwrite(MyWindowTierCache):
    """B10: device window values are indexed by the path's tokens (a window pool shared by tenants):
    an insert's window values, tombstones included, land on the other tenants' twin pages too."""

    def insert(self, tokens, values, window=None, namespace=None) -> int:
        prefix = super().insert(tokens, values, window=window, namespace=namespace)
        path = self._walk(tokens, namespace)
        for i, node in enumerate(path[prefix // self.page_size:], start=prefix // self.page_size):
            for ns in self.roots:
                if ns == namespace:
                    continue
                twins = self._walk(tokens, ns)
                if len(twins) > i and twins[i].device is not None:
                    twins[i].win_dev = node.win_dev.copy()
        return prefix


BUGS = [LoadBackWindowFromParent, HostWindowSkipsTombstones, WriteBackDropsWindowPart, HostWindowKeyedByTokens,
        WriteBackFreesWindowOfKeptLeaf, HostPartReadsOnlyHostCopy, LoadBackReversesPageWindow, LoadFailReturnsDevicePath,
        WriteBackStartFreesWindow, TwinWindowOverwrite]
for _cls in BUGS:
    globals()["make_" + _cls.__name__] = _factory(_cls)
