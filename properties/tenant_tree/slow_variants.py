"""A correct but slow tenant tree: it passes every conformance property, and ``radixcheck bench`` flags it.

The smallest change to the reference that makes one operation's cost per unit of work grow with
the tree, named in ``flagged_on``; the bench's meta-tests check both halves (this one is flagged
on that operation, the reference is not).

Try it: ``radixcheck bench radixcheck.properties.tenant_tree.slow_variants:EvictScansTenantNodes``.
"""

from __future__ import annotations

from radixcheck.reference.tenant_tree import TenantTree


class EvictScansTenantNodes(TenantTree):
    """Eviction finds the tenant's least recently used leaf by scanning every node the tenant
    holds, once per leaf it removes (the reference's own eviction until session 53): trimming a
    tenant by one prompt costs the tenant's whole size. Same order as the reference."""

    flagged_on = ("evict",)
    sources = ("reports/findings/router_trial.md, bug T6: 10.7 ms against 5 µs per evict at 10^4 prompts",)

    def evict(self, tenant: str, amount: int) -> int:
        with self.lock:
            removed = 0
            while removed < amount and self.nodes_of.get(tenant):
                leaves = [n for n in self.nodes_of[tenant] if not any(tenant in c.times for c in n.children.values())]
                leaf = min(leaves, key=lambda n: (n.times[tenant], -n.end))
                removed += len(leaf.segment)
                self._drop(tenant, leaf)
            return removed


class LeaverScansEveryNode(TenantTree):
    """A tenant that leaves (``remove_tenants``) is taken off by walking the whole tree from the
    root (a tree with no per-tenant set of nodes) instead of its own nodes: each element a leaving
    tenant held costs the whole tree."""

    flagged_on = ("remove_tenants",)
    sources = ("radixcheck bench's router world: a leaving tenant's cost per element of its share",)

    def remove_tenants(self, tenants: list[str]) -> None:
        with self.lock:
            for tenant in tenants:
                stack, found = list(self.root.children.values()), []
                while stack:
                    node = stack.pop()
                    stack.extend(node.children.values())
                    if tenant in node.times:
                        found.append(node)
                for node in sorted(found, key=lambda n: -n.end):  # leaves first: a node is unlinked after its children
                    self._drop(tenant, node)
                self.nodes_of.pop(tenant, None)
                self.size_of.pop(tenant, None)
                self.lru.pop(tenant, None)


SLOW_TENANT_TREE_VARIANTS: list[type[TenantTree]] = [EvictScansTenantNodes, LeaverScansEveryNode]
