"""A tenant tree's program replayed past its failures: what else one finding's program shows.

A tenant-tree machine records its checked calls as it makes them (``TenantTreeMachine.program``:
each add, insert, match, eviction, removal and check of every known key, with its arguments,
whether a rule of the state machine or a threaded round's rerun on one thread made it). The
audit's root cause (:mod:`radixcheck.properties.findings.root_cause`) sends that program to a
fresh tree, with the sizes and memory checks after each call, **going on past each failure**, then
probes what another check would read (:func:`_probe`: reads only).

Measured on a router trial's bugs (reports/findings/router_trial.md), this joins none of T1, T2, T3
or T5's two findings: each program meets its own check only. Probes that also trimmed each tenant
one element at a time (and routed every key to every tenant) did join T1 and T2, but they also
joined a tree's two distinct bugs in every stream: with three oracles, "another oracle in any shape"
(``shows_cause``) is met by an echo.
"""

from __future__ import annotations

from collections.abc import Callable

from radixcheck.properties.findings.root_cause import Signature, each_step, shown_past_failures
from radixcheck.properties.tenant_tree.machine import TenantTreeMachine, tenant_tree_machine_for


def shown_by_tenant_tree(machine: TenantTreeMachine, waived: Callable[[BaseException], bool] | None = None) -> list[Signature]:
    """Every signature ``machine``'s program shows on a fresh tree of its target, replayed past each
    failure and probed (module docstring), in the order first met (a finding ``waived`` accepts is not counted)."""
    made = tenant_tree_machine_for(type(machine).factory, type(machine).capabilities, "root_cause")
    program = list(machine.program)

    def run(seen: Callable[[BaseException], bool]) -> None:
        tree = made()

        def sent(call: Callable[[], object]) -> bool:  # False: stop (a hang, or a target that answers nothing)
            return each_step((call, tree.sizes_agree if tree.capabilities.reports_sizes else None, tree._check_memory), seen)

        try:
            for name, args, kwargs in program:
                if not sent(lambda name=name, args=args, kwargs=kwargs: getattr(tree, name)(*args, **kwargs)):
                    return
            _probe(tree, sent)
        finally:
            tree.teardown()

    return shown_past_failures(run, waived)


def _probe(tree: TenantTreeMachine, sent: Callable[[Callable[[], object]], bool]) -> None:
    """What another check of the tree would read, reads only: every known key matched against the
    present tenants, then against each alone. No insert or eviction: a probe that routes every key
    to every tenant and trims each one meets every bug a tree has, from any program, so a tree with
    two bugs (``MatchLongerThanQuery`` and ``EvictionCrossesTenants``) gave one finding."""
    if not sent(tree._check_every_known):
        return
    for tenant in list(tree.present):
        for key in list(tree.known):
            if not sent(lambda key=key, tenant=tenant: tree._match(key, frozenset([tenant]))):
                return
