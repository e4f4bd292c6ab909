"""A tenant tree's program replayed past its failures: what else one finding's program shows.

A tenant-tree machine records its checked calls as it makes them (``TenantTreeMachine.program``:
each add, insert, match, eviction, removal and check of every known key, with its arguments,
whether a rule of the state machine or a threaded round's rerun on one thread made it). The
audit's root cause (:mod:`radixcheck.properties.findings.root_cause`) sends that program to a
fresh tree, with the sizes and memory checks after each call, **going on past each failure**, then
probes what another check would read: every known key routed to every present tenant, matched
against the present tenants and against each alone, and each tenant trimmed by LRU one element at
a time. A router trial's bug that leaves a split's lower half under its old parent met the machine
as a ``KeyError`` and a threaded round (rerun on one thread) as a match too long; each program,
replayed on, meets the other's, so they are one finding. A second bug in the same tree is met by
its own program, and the first bug's program does not meet it back: two findings.
"""

from __future__ import annotations

from collections.abc import Callable

from radixcheck.properties.findings.root_cause import Signature, shown_past_failures
from radixcheck.properties.tenant_tree.machine import TenantTreeMachine, tenant_tree_machine_for

TRIMS = 64  # the most one-element evictions a probe sends per tenant (a tenant holds at most a few hundred elements)


def shown_by_tenant_tree(machine: TenantTreeMachine, waived: Callable[[BaseException], bool] | None = None) -> list[Signature]:
    """Every signature ``machine``'s program shows on a fresh tree of its target, replayed past each
    failure and probed (module docstring), in the order first met (a finding ``waived`` accepts is not counted)."""
    made = tenant_tree_machine_for(type(machine).factory, type(machine).capabilities, "root_cause")
    program = list(machine.program)

    def run(seen: Callable[[BaseException], bool]) -> None:
        tree = made()

        def sent(call: Callable[[], object]) -> bool:  # False: stop (a hang)
            for step in (call, tree.sizes_agree if tree.capabilities.reports_sizes else None, tree._check_memory):
                if step is None:
                    continue
                try:
                    step()
                except Exception as exc:  # noqa: BLE001 - a failure is what the replay looks for
                    if not seen(exc):
                        return False
            return True

        try:
            for name, args, kwargs in program:
                if not sent(lambda name=name, args=args, kwargs=kwargs: getattr(tree, name)(*args, **kwargs)):
                    return
            _probe(tree, sent)
        finally:
            tree.teardown()

    return shown_past_failures(run, waived)


def _probe(tree: TenantTreeMachine, sent: Callable[[Callable[[], object]], bool]) -> None:
    """What another check of the tree would read: every known key routed to every present tenant
    (shared prefixes across tenants, where a tenant's own times and sizes can be lost), matched against
    the present tenants and against each alone, then each tenant trimmed by LRU one element at a
    time (each eviction judged)."""
    for tenant in list(tree.present):
        for key in list(tree.known):
            if not sent(lambda key=key, tenant=tenant: tree._insert(key, tenant)):
                return
    if not sent(tree._check_every_known):
        return
    for tenant in list(tree.present):
        for key in list(tree.known):
            if not sent(lambda key=key, tenant=tenant: tree._match(key, frozenset([tenant]))):
                return
    if tree.capabilities.supports_eviction:
        for tenant in list(tree.present):
            for _ in range(TRIMS):
                if tree.model.size(tenant) == 0:
                    break
                if not sent(lambda tenant=tenant: tree._evict(tenant, 1)):
                    return
