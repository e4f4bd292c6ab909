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
from radixcheck.reference.hybrid_requests import StateRequestsCache, WindowRequestsCache

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


class StateRequestsDropNamespace(_DropsNamespace, StateRequestsCache):
    pass


WINDOW_TENANTS = replace(WindowRequestsCache.capabilities, namespaces=True)  # the hybrid references take namespace= too
STATE_TENANTS = replace(StateRequestsCache.capabilities, namespaces=True)
STREAMS = 20  # derandomized streams per mutant (each its own machine name), 15 programs each


def test_lifecycle_requests_carry_a_namespace_when_declared() -> None:
    """The reference (namespaces and request methods) passes with namespaced requests; a mutant that drops the
    namespace in its request path is caught by oracle 10 (the gate's one check; the strength run is ``deep``)."""
    run_machine(machine_for(RadixCache, RadixCache.capabilities, 4, "ns_requests_reference"), SEARCH)
    with pytest.raises(TenantIsolationViolation):
        run_machine(machine_for(RequestsDropNamespace, RadixCache.capabilities, 4, "ns_requests_drop"), SEARCH)


def _outcomes(cls: type, caps: Any, streams: int) -> list[str]:
    """The first failure's class name per stream (``"pass"`` where none was found)."""
    outcomes = []
    for i in range(streams):
        try:
            run_machine(machine_for(cls, caps, 4, f"ns_requests_{cls.__name__}_{i}"), SEARCH)
            outcomes.append("pass")
        except Exception as exc:  # noqa: BLE001 - any finding counts; its class is what is judged
            outcomes.append(type(exc).__name__)
    return outcomes


@pytest.mark.deep  # 20 streams per mutant: about a second of CPU each
@pytest.mark.parametrize(("cls", "caps", "by_oracle_10"), [
    (RequestsDropNamespace, RadixCache.capabilities, 15),  # measured 18/20 first by oracle 10 (the rest: oracle 1)
    (WindowRequestsDropNamespace, WINDOW_TENANTS, 8),  # measured 12/20 (the rest: oracles 1, 3, 23)
    (StateRequestsDropNamespace, STATE_TENANTS, 2),  # measured 4/20 (the frees, oracle 3, usually say it first)
])
def test_a_request_path_that_drops_the_namespace_is_caught_in_every_stream(cls: type, caps: Any, by_oracle_10: int) -> None:
    """Every stream catches the mutant; oracle 10 (the request matched another namespace's KV) is the
    first finding in at least ``by_oracle_10`` of them."""
    outcomes = _outcomes(cls, caps, STREAMS)
    assert "pass" not in outcomes, outcomes
    assert outcomes.count(TenantIsolationViolation.__name__) >= by_oracle_10, outcomes


@pytest.mark.deep  # the false-alarm side: seconds of CPU per cache
@pytest.mark.parametrize(("cls", "caps"), [(RadixCache, RadixCache.capabilities), (WindowRequestsCache, WINDOW_TENANTS),
                                           (StateRequestsCache, STATE_TENANTS)])
def test_correct_request_caches_pass_with_namespaced_requests(cls: type, caps: Any) -> None:
    assert _outcomes(cls, caps, 5) == ["pass"] * 5
