"""Bugs planted into hybridcache, one class each. Each needs a part the plain cache machine lacks:
a second tenant, the host tier, an aborted or retracted request, the state pool, or production scale."""

from __future__ import annotations

from typing import Any

from hybridcache import HybridHiCache, Node, make

HybridHiCache.tier_capabilities = make.tier_capabilities    # every class below is a factory too


def _tokens(node: Node) -> tuple[int, ...]:
    out: list[int] = []
    while not node.root:
        out[:0] = node.key
        node = node.parent
    return tuple(out)


class HostStatesByTokens(HybridHiCache):
    """[tenant + tier + pool] A state on host lives in a side table keyed by the page's tokens,
    not its tenant: two tenants' pages of the same tokens share one host state."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._host_states: dict[tuple[int, ...], int] = {}

    def _demote(self, node: Node) -> None:
        self._host_states[_tokens(node)] = node.state
        node.state = -1                                  # the device state slot goes with the device KV
        super()._demote(node)

    def _promote(self, node: Node, slots: Any) -> None:
        super()._promote(node, slots)
        node.state = self._host_states.get(_tokens(node), -1)

    def _loaded(self, node: Node) -> None:
        super()._loaded(node)
        node.state = self._host_states.get(_tokens(node), -1)


class DemoteDropsState(HybridHiCache):
    """[tier + pool] The state lives in the device pool: a page moved to host loses it."""

    def _demote(self, node: Node) -> None:
        node.state = -1
        super()._demote(node)


class StateOutlivesPage(HybridHiCache):
    """[tier + pool] States are kept by (tenant, token path) and never forgotten: a page that left
    both tiers and is cached again, as an inner page, reports its old state."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._state_of: dict[tuple[Any, tuple[int, ...]], int] = {}

    def insert(self, tokens: Any, values: Any, namespace: Any = None, priority: int = 0,
               state: int | None = None) -> int:
        n = len(tokens) // self.page_size * self.page_size
        if n and n == len(tokens) and state is not None:
            self._state_of[(id(self._root(namespace)), tuple(int(t) for t in tokens))] = state
        return super().insert(tokens, values, namespace=namespace, priority=priority, state=state)

    def states(self, handle: Node) -> list[int]:
        root = id(self._root_of(handle))
        return [self._state_of.get((root, _tokens(n)), -1) for n in self._path(handle)]


class QuarantineAllTenants(HybridHiCache):
    """[tenant] evict_prefix cuts the branch in every tenant's tree, not only the caller's."""

    def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
        mine = super().evict_prefix(tokens, namespace=namespace)
        for other in [ns for ns in self.roots if ns != namespace]:
            super().evict_prefix(tokens, namespace=other)
        return mine


class AbortLeaksLoadLock(HybridHiCache):
    """[abort + tier] A load-back holds a load lock until it lands; the completion releases it only
    while the request still holds its own, so an abort before the load lands leaks it."""

    def load_back(self, host_handle: Node) -> Any:
        values, handle = super().load_back(host_handle)
        for node in self._path(handle):
            if node.loading is not None:
                node.lock += 1
        return values, handle

    def transfer_done(self, transfer: Any) -> None:
        if transfer.kind == "load":
            for node in self._pending[transfer]:
                if node.lock > 1:                        # the request still holds it
                    node.lock -= 1
        super().transfer_done(transfer)


class LoadDoneNoRequeue(HybridHiCache):
    """[abort + tier] A landed load does not re-enter the eviction heap ("the request that loaded it
    will unlock it, and that pushes it"); an aborted request unlocked it before it landed."""

    def transfer_done(self, transfer: Any) -> None:
        if transfer.kind != "load":
            return super().transfer_done(transfer)
        for node in self._pending.pop(transfer):
            self._loaded(node)
            if node.removed:
                self.allocator.free(node.device)
                self.host_pool.free(node.host)


class HostEvictIgnoresChildren(HybridHiCache):
    """[tier] A host-only page is a host-eviction candidate even with host-only children below it."""

    def _host_candidate(self, node: Node) -> bool:
        return node.device is None and node.host is not None and not node.removed and node.lock == 0


class LoadBackResetsHits(HybridHiCache):
    """[tier + policy] A page loaded back starts its hit count afresh, as a new page would."""

    def _loaded(self, node: Node) -> None:
        super()._loaded(node)
        node.hits = 1


class EvictScansLeaves(HybridHiCache):
    """[scale] Device eviction finds its victim by scanning every node of every tenant: O(n) a leaf."""

    def _pop(self, heap: list, candidate: Any) -> Node | None:
        if heap is not self._dev_heap:
            return super()._pop(heap, candidate)
        best, stack = None, list(self.roots.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if not node.root and candidate(node) and (best is None or self._order(node) < self._order(best)):
                best = node
        return best


class RecursiveLocks(HybridHiCache):
    """[scale] inc/dec_lock_ref recurse up the path: a 1,000-page conversation overflows the stack."""

    def inc_lock_ref(self, handle: Node) -> None:
        if not handle.root:
            handle.lock += 1
            self.inc_lock_ref(handle.parent)

    def dec_lock_ref(self, handle: Node) -> None:
        if not handle.root:
            handle.lock -= 1
            if handle.lock == 0:
                self._push(handle)
            self.dec_lock_ref(handle.parent)


# ---- controls: the same bug with the part it needs not declared (each should conform) ----------
def _without(cls: type, **changes: Any) -> type:
    from dataclasses import replace
    return type(f"{cls.__name__}_control", (cls,), {"tier_capabilities": replace(make.tier_capabilities, **changes)})


HostStatesByTokensOneTenant = _without(HostStatesByTokens, namespaces=False)
AbortLeaksLoadLockNoAborts = _without(AbortLeaksLoadLock, lifecycle="off")
LoadDoneNoRequeueNoAborts = _without(LoadDoneNoRequeue, lifecycle="off")
LoadBackResetsHitsUnderLru = _without(LoadBackResetsHits, eviction_policy=None)
LoadBackResetsHitsUnderLru._order = lambda self, node: node.last_use      # declared LRU: evict by recency alone


class TwoBugs(DemoteDropsState, QuarantineAllTenants):
    """For the waiver check: a state bug and a tenant bug in one cache."""
