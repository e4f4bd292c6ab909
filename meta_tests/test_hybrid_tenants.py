"""A tenant leak through a cache with a second pool is filed under tenant isolation (oracle 10),
naming the namespaces, as it is for a plain cache: the hybrid machines judge a match's isolation
before its window or state (before, such a leak was oracle 1's "returned slots ..., but [] were
inserted there", with no namespace named; found by a new user's vLLM-shaped cache)."""

from dataclasses import replace

import pytest
from hypothesis import settings

from radixcheck import machine_for, run_machine
from radixcheck.oracles.violations import TenantIsolationViolation, WindowMatchViolation
from radixcheck.reference.hybrid_cache import WindowRadixCache
from radixcheck.reference.state_cache import StateRadixCache

SEARCH = settings(max_examples=30, stateful_step_count=20, deadline=None, derandomize=True, database=None)


def _tenants(cls: type) -> type:
    return type(f"Tenant{cls.__name__}", (cls,), {"capabilities": replace(cls.capabilities, namespaces=True)})


def _match_ignores_namespace(cls: type) -> type:
    def match_prefix(self, tokens, namespace=None, *args, **kwargs):  # every tenant matches the default one's tree
        return cls.match_prefix(self, tokens, None, *args, **kwargs)
    caps = replace(cls.capabilities, namespaces=True, validates_input=False)  # it drops an unhashable one too: not sent
    return type(f"Leaky{cls.__name__}", (cls,), {"match_prefix": match_prefix, "capabilities": caps})


@pytest.mark.parametrize("cls", [WindowRadixCache, StateRadixCache])
def test_a_leak_through_a_second_pool_cache_is_oracle_10s(cls: type) -> None:
    leaky = _match_ignores_namespace(cls)
    with pytest.raises(TenantIsolationViolation, match=r"namespace=.* returned the KV of .* cached under namespace"):
        run_machine(machine_for(leaky, leaky.capabilities, 1, name=leaky.__name__), search=SEARCH)


@pytest.mark.deep  # the false-alarm side: seconds of CPU each, so in the deep tier
@pytest.mark.parametrize("cls", [WindowRadixCache, StateRadixCache])
def test_the_correct_second_pool_cache_with_tenants_passes(cls: type) -> None:
    tenants = _tenants(cls)
    run_machine(machine_for(tenants, tenants.capabilities, 1, name=tenants.__name__), search=SEARCH)


def test_a_window_finding_names_the_namespace_of_its_match() -> None:
    """A tenant's short match is oracle 23's, and its message says whose match it was."""
    def match_prefix(self, tokens, namespace=None, *args, **kwargs):  # a tenant's match finds nothing
        found = WindowRadixCache.match_prefix(self, tokens, namespace, *args, **kwargs)
        return found if namespace is None else WindowRadixCache.match_prefix(self, [], namespace, *args, **kwargs)
    caps = replace(WindowRadixCache.capabilities, namespaces=True, validates_input=False)
    short = type("TenantMatchesNothing", (WindowRadixCache,), {"match_prefix": match_prefix, "capabilities": caps})
    with pytest.raises(WindowMatchViolation, match=r"match_prefix\(.*, namespace=.*\) matched 0 tokens"):
        run_machine(machine_for(short, caps, 1, name="short"), search=SEARCH)
