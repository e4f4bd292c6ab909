"""Planted bugs: each a one-idea change to myrouter, needing a second worker/tenant, reordering or scale."""

from __future__ import annotations

import zlib

import myrouter
from myrouter import EventIndex, TenantTree


def _factory(cls, caps):
    def make():
        return cls()
    make.capabilities = caps
    make.__name__ = cls.__name__
    return make


# --- the index ----------------------------------------------------------------------------------
class RemoveWorkerDropsSharedBlocks(EventIndex):
    """I1: a leaving worker forgets its blocks for every rank (holders popped whole)."""

    def remove_worker(self, worker_id):
        for rank in [r for r in self.held if r[0] == worker_id]:
            for h in self.held.pop(rank):
                if h in self.holders:
                    del self.holders[h]
                    del self.child[self.info.pop(h)]


class RemovalForgetsSharedChild(EventIndex):
    """I2: a remove by one rank drops the block's lookup entry though another rank still holds it."""

    def _drop(self, rank, h):
        self.held[rank].discard(h)
        if not self.held[rank]:
            del self.held[rank]
        ranks = self.holders[h]
        ranks.discard(rank)
        self.child.pop(self.info[h], None)       # the bug: forgotten at the first remove, not the last
        if not ranks:
            del self.holders[h]
            del self.info[h]


class ChildKeyedByTokensOnly(EventIndex):
    """I3: the lookup is keyed by the block's tokens hash alone, not (parent, tokens): the same block
    content after another prefix collides."""

    def _store(self, rank, event):
        self._check_store(rank, event)
        parent = event.parent_hash
        held = self.held.setdefault(rank, set())
        for b in event.blocks:
            h = b.block_hash
            if h not in self.info:
                self.info[h] = (parent, b.tokens_hash)
                self.child[(None, b.tokens_hash)] = h
            held.add(h)
            self.holders.setdefault(h, set()).add(rank)
            parent = h

    def _drop(self, rank, h):
        self.held[rank].discard(h)
        if not self.held[rank]:
            del self.held[rank]
        ranks = self.holders[h]
        ranks.discard(rank)
        if not ranks:
            del self.holders[h]
            _, th = self.info.pop(h)
            if self.child.get((None, th)) == h:
                del self.child[(None, th)]

    def find_matches(self, tokens_hashes):
        result, active, depth, parent = {}, None, 0, None
        for th in tokens_hashes:
            h = self.child.get((None, th))
            ranks = self.holders.get(h, set()) if h is not None else set()
            now = set(ranks) if active is None else active & ranks
            for r in (active or set()) - now:
                result[r] = depth
            active = now
            if not active:
                break
            depth += 1
            parent = h
        del parent
        for r in active or ():
            result[r] = depth
        return result


class OrphansDropped(EventIndex):
    """I4: removing a block also drops the rank's blocks stored under it (as if removals came leaves first)."""

    def _remove(self, rank, hashes):
        super()._remove(rank, hashes)
        held = self.held.get(rank, set())
        changed = True
        while changed:
            changed = False
            for h in list(held):
                parent = self.info[h][0]
                if parent is not None and parent not in held:
                    self._drop(rank, h)
                    changed = True
                    held = self.held.get(rank, set())


class DropOutCountedAfterIncrement(EventIndex):
    """I5: a rank that stops matching while another goes on is recorded one block too long."""

    def find_matches(self, tokens_hashes):
        result, active, depth, parent = {}, None, 0, None
        for th in tokens_hashes:
            h = self.child.get((parent, th))
            ranks = self.holders.get(h, set()) if h is not None else set()
            now = set(ranks) if active is None else active & ranks
            if not now:
                break                       # every rank stopped here: recorded below at depth
            depth += 1
            for r in (active or set()) - now:
                result[r] = depth           # the bug: recorded after the increment
            active = now
            parent = h
        for r in active or ():
            result[r] = depth
        return result


class LookupScansEveryBlock(EventIndex):
    """I6: the child lookup scans every known block (correct, O(blocks) per query block)."""

    def find_matches(self, tokens_hashes):
        result, active, depth, parent = {}, None, 0, None
        for th in tokens_hashes:
            h = next((b for b, (p, t) in self.info.items() if p == parent and t == th), None)
            ranks = self.holders.get(h, set()) if h is not None else set()
            now = set(ranks) if active is None else active & ranks
            for r in (active or set()) - now:
                result[r] = depth
            active = now
            if not active:
                break
            depth += 1
            parent = h
        for r in active or ():
            result[r] = depth
        return result


class HoldersAsList(EventIndex):
    """I7: holders kept as a list; a redelivered store appends the rank twice, one remove takes one."""

    def _store(self, rank, event):
        self._check_store(rank, event)
        parent = event.parent_hash
        held = self.held.setdefault(rank, set())
        for b in event.blocks:
            h = b.block_hash
            if h not in self.info:
                self.info[h] = (parent, b.tokens_hash)
                self.child[(parent, b.tokens_hash)] = h
            held.add(h)
            self.holders.setdefault(h, []).append(rank)
            parent = h

    def _drop(self, rank, h):
        self.held[rank].discard(h)
        if not self.held[rank]:
            del self.held[rank]
        ranks = self.holders[h]
        ranks.remove(rank)
        if not ranks:
            del self.holders[h]
            del self.child[self.info.pop(h)]


# --- the tenant tree ----------------------------------------------------------------------------
class EvictTakesWholeNode(TenantTree):
    """T1: evicting a tenant's leaf unlinks the node, with every other tenant's hold on it."""

    def _release(self, node, tenant):
        others = [t for t in node.tenants if t != tenant]
        super()._release(node, tenant)
        for t in others:                          # the bug: the node goes for them too
            if t in node.tenants:
                node.tenants.pop(t)
                self.nodes[t].discard(node)
                self.size[t] -= len(node.edge)
                node.parent.tenant_children[t] -= 1
                if not node.parent.tenant_children[t]:
                    del node.parent.tenant_children[t]
        if others and node.parent.children.get(node.edge[0]) is node:
            del node.parent.children[node.edge[0]]
            self.count -= 1


class StaleParentAfterSplit(TenantTree):
    """T2: a split leaves the lower half pointing at its old parent."""

    def _split(self, node, at):
        old_parent = node.parent
        upper = super()._split(node, at)
        node.parent = old_parent                  # the bug: the back pointer is not moved
        return upper


class SplitStampsEveryTenant(TenantTree):
    """T3: the upper half of a split takes the inserting tenant's time for every tenant."""

    def insert(self, key, tenant, time_s):
        self._now = time_s
        super().insert(key, tenant, time_s)

    def _split(self, node, at):
        upper = super()._split(node, at)
        for t in upper.tenants:
            upper.tenants[t] = self._now          # the bug: other tenants' times are lost
        return upper


class MatchDepthIgnoresAvailability(TenantTree):
    """T4: match walks as deep as any tenant holds, then names the available ones at the last node holding any."""

    def match(self, key, available):
        with self.lock:
            node, i, best = self.root, 0, frozenset()
            while i < len(key):
                child = node.children.get(key[i])
                if child is None:
                    break
                n = 0
                while n < len(child.edge) and i + n < len(key) and child.edge[n] == key[i + n]:
                    n += 1
                here = frozenset(t for t in child.tenants if t in available)
                if here:
                    best = here
                elif not best:
                    break
                i += n
                if n < len(child.edge):
                    break
                node = child
            return i, best


class TenantIdFolded:
    """T5: tenants are interned as a 2-bit id (crc32 & 3) to keep nodes small: ids collide."""

    def __init__(self):
        self.tree = TenantTree()
        self.names: dict[int, set[str]] = {}

    @staticmethod
    def _id(name):
        return f"t{zlib.crc32(name.encode()) & 3}"

    def add_tenants(self, tenants, time_s):
        for t in tenants:
            self.names.setdefault(self._id(t), set()).add(t)
        self.tree.add_tenants([self._id(t) for t in tenants], time_s)

    def insert(self, key, tenant, time_s):
        self.tree.insert(key, self._id(tenant), time_s)

    def match(self, key, available):
        length, ids = self.tree.match(key, frozenset(self._id(t) for t in available))
        return length, frozenset(t for t in available if self._id(t) in ids)

    def remove_tenants(self, tenants):
        self.tree.remove_tenants([self._id(t) for t in tenants])

    def evict(self, tenant, amount):
        return self.tree.evict(self._id(tenant), amount)

    def sizes(self):
        sizes = self.tree.sizes()
        return {n: sizes[i] for i, ns in self.names.items() for n in ns if i in sizes}

    def node_count(self):
        return self.tree.node_count()


class EvictScansWholeTree(TenantTree):
    """T6: evict finds the LRU leaf by walking the whole tree each time (correct, O(nodes) per leaf)."""

    def evict(self, tenant, amount):
        with self.lock:
            removed = 0
            while removed < amount:
                leaves, stack = [], [self.root]
                while stack:
                    node = stack.pop()
                    stack.extend(node.children.values())
                    if (node is not self.root and tenant in node.tenants
                            and not node.tenant_children.get(tenant)):
                        leaves.append((node.tenants[tenant], -node.end, id(node), node))
                if not leaves:
                    break
                node = min(leaves)[3]
                removed += len(node.edge)
                self._release(node, tenant)
            return removed


IC = myrouter.make_index.capabilities
TC = myrouter.make_tree.capabilities
I1 = _factory(RemoveWorkerDropsSharedBlocks, IC)
I2 = _factory(RemovalForgetsSharedChild, IC)
I3 = _factory(ChildKeyedByTokensOnly, IC)
I4 = _factory(OrphansDropped, IC)
I5 = _factory(DropOutCountedAfterIncrement, IC)
I6 = _factory(LookupScansEveryBlock, IC)
I7 = _factory(HoldersAsList, IC)
T1 = _factory(EvictTakesWholeNode, TC)
T2 = _factory(StaleParentAfterSplit, TC)
T3 = _factory(SplitStampsEveryTenant, TC)
T4 = _factory(MatchDepthIgnoresAvailability, TC)
T5 = _factory(TenantIdFolded, TC)
T6 = _factory(EvictScansWholeTree, TC)


class StampsAndMatchesDeep(SplitStampsEveryTenant, MatchDepthIgnoresAvailability):
    """T3 + T4 together: an order bug and a match bug, to see a waiver of one leave the other."""


T34 = _factory(StampsAndMatchesDeep, TC)


class RareEvictOvershoot(TenantTree):
    """R: a rare bug, to see where a --seed run's repro file replays: evict(t, 11) takes one node more."""

    def evict(self, tenant, amount):
        removed = super().evict(tenant, amount)
        if amount == 11 and len(self.present) >= 4:
            removed += super().evict(tenant, 1)
        return removed


R = _factory(RareEvictOvershoot, TC)


# The trusting index declared as if it validated: the declaration is what keeps the suite silent.
TRUSTING_DECLARED_STRICT = _factory(myrouter.TrustingIndex, IC)
