"""A request carries its namespace (contract: "The request lifecycle" with "Namespaces"): for a target
that declares both, the lifecycle machine draws a namespace per request (``Request.namespace``: vLLM's
``cache_salt``, SGLang's ``extra_key``) and judges each request's match by oracle 10, as the tenants'
rules judge ``match_prefix``. A correct cache passes; one whose request methods drop the namespace
(every request the base model's) is caught by oracle 10."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.violations import TenantIsolationViolation
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference import RadixCache
from radixcheck.reference.hybrid_requests import WindowRequestsCache

SEARCH = settings(profiles.SETTINGS["mutation"], max_examples=15)


class _DropsNamespace:
    """Every request method forgets ``req.namespace`` (a request path that drops the tenant salt)."""

    def match_req(self, req: Any) -> None:
        req.namespace = None
        super().match_req(req)  # type: ignore[misc]


class RequestsDropNamespace(_DropsNamespace, RadixCache):
    pass


class WindowRequestsDropNamespace(_DropsNamespace, WindowRequestsCache):
    pass


WINDOW_TENANTS = replace(WindowRequestsCache.capabilities, namespaces=True)  # the window reference takes namespace= too


def test_lifecycle_requests_carry_a_namespace_when_declared() -> None:
    """The reference (namespaces and request methods) passes with namespaced requests; a mutant that drops the
    namespace in its request path is caught by oracle 10 (the gate's one check; the strength run is ``deep``)."""
    run_machine(machine_for(RadixCache, RadixCache.capabilities, 4, "ns_requests_reference"), SEARCH)
    with pytest.raises(TenantIsolationViolation):
        run_machine(machine_for(RequestsDropNamespace, RadixCache.capabilities, 4, "ns_requests_drop"), SEARCH)
