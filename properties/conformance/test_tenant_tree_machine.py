"""The conformance tests of routers' tenant prefix trees, run against a tenant-tree target
(``radixcheck audit mymodule:make_tree``; the target's ``capabilities`` is a
``TenantTreeCapabilities``): the tenant-tree machine (requests routed across tenants that come
and go) and, for a tree that declares ``thread_safe``, the threaded stress test. Findings waived
by ``--radix-waive`` are recorded and looked past."""

from __future__ import annotations

import pytest

from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import alarm_handler
from radixcheck.properties.tenant_tree.machine import stress_with_threads, tenant_tree_machine_for

pytestmark = pytest.mark.radix_tenant_tree


def test_tenant_tree_state_machine(target, radix_waivers) -> None:
    run_machine(tenant_tree_machine_for(target.factory, target.capabilities, target.name), waived=radix_waivers or None)


def test_tenant_tree_under_threads(target) -> None:
    """Bounded rounds of a fixed number of threads routing at once, the model checked after each join."""
    if not target.capabilities.thread_safe:
        pytest.skip("thread_safe=False: one thread only")
    with alarm_handler():
        stress_with_threads(target.factory, target.capabilities)
