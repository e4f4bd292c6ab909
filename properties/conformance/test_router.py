"""The end-to-end check of an engine and a router index (a router pair target,
``radixcheck.properties.index.router_contract``): the cache machine drives the engine, and after every
step the router's view of every known prompt must equal the engine's own (``router_e2e``)."""

from __future__ import annotations

import pytest

from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.index.router_e2e import router_machine_for

pytestmark = pytest.mark.radix_router


def test_router_follows_engine(target, page_size: int, radix_waivers) -> None:
    run_machine(router_machine_for(target.factory, target.capabilities, page_size, target.name), waived=radix_waivers or None)
