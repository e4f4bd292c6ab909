"""The conformance test of routers' tenant prefix trees: the tenant-tree machine (requests routed
across tenants that come and go; threads where the tree claims thread safety), run against a
tenant-tree target (``radixcheck audit mymodule:make_tree``; the target's ``capabilities`` is a
``TenantTreeCapabilities``). Findings waived by ``--radix-waive`` are recorded and looked past."""

from __future__ import annotations

import pytest

from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tenant_tree.machine import tenant_tree_machine_for

pytestmark = pytest.mark.radix_tenant_tree


def test_tenant_tree_state_machine(target, radix_waivers) -> None:
    run_machine(tenant_tree_machine_for(target.factory, target.capabilities, target.name), waived=radix_waivers or None)
