"""radixcheck: a property-test-first verification suite for radix-tree KV caches.

The public API, for auditing a cache from your own code (as ``zarr.testing`` ships its store
state machine)::

    from radixcheck import Capabilities, machine_for, run_machine

    run_machine(machine_for(make, make.capabilities, page_size=16, name="mycache"))

``run_machine`` uses radixcheck's Hypothesis profile (``radixcheck.profiles.current()``) unless
given settings, and bounds the shrink (``RADIXCHECK_SHRINK_SECONDS``);
``hypothesis.stateful.run_state_machine_as_test`` runs the same machine with no shrink bound.

From the command line: ``radixcheck audit mymodule:make``. As a pytest plugin:
``pytest --pyargs radixcheck.properties.conformance --radix-target mymodule:make``.

The subpackages: ``reference`` (the reference cache), ``oracles`` (naive models of what a cache
must do), ``properties`` (one subpackage per contract: ``cache``, ``index``, ``tenant_tree``; the failure machinery
``findings``; the engines' ``adapters``; the ``conformance`` tests), ``model``
(the exact NumPy Llama) and ``reports`` (the ledger benchmark and the audits).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.2.0"

# Lazy re-exports (PEP 562): `import radixcheck.model` should not pay for Hypothesis.
_EXPORTS = {
    "Capabilities": "radixcheck.properties.cache.contract",
    "Policy": "radixcheck.properties.cache.policies",
    "LeafStats": "radixcheck.properties.cache.policies",
    "DEFAULT_CAPABILITIES": "radixcheck.properties.cache.contract",
    "SlidingWindow": "radixcheck.properties.cache.contract",
    "StatePool": "radixcheck.properties.cache.contract",
    "IndexCapabilities": "radixcheck.properties.index.contract",
    "index_machine_for": "radixcheck.properties.index.machine",
    "TenantTreeCapabilities": "radixcheck.properties.tenant_tree.contract",
    "tenant_tree_machine_for": "radixcheck.properties.tenant_tree.machine",
    "TierCapabilities": "radixcheck.properties.tiers.contract",
    "TieredCacheLike": "radixcheck.properties.tiers.contract",
    "TieredStateCacheLike": "radixcheck.properties.tiers.contract",
    "TieredWindowCacheLike": "radixcheck.properties.tiers.contract",
    "TierMatch": "radixcheck.properties.tiers.contract",
    "TierRequest": "radixcheck.properties.tiers.contract",
    "TieredRequestCacheLike": "radixcheck.properties.tiers.contract",
    "tier_machine_for": "radixcheck.properties.tiers.machine",
    "RadixCacheLike": "radixcheck.properties.cache.contract",
    "SlotAllocator": "radixcheck.properties.cache.contract",
    "SecondPoolAllocator": "radixcheck.properties.cache.contract",
    "Request": "radixcheck.properties.cache.contract",
    "RadixCacheMachine": "radixcheck.properties.cache.machine",
    "machine_for": "radixcheck.properties.cache.machine",
    "Target": "radixcheck.properties.target",
    "TargetError": "radixcheck.properties.target",
    "load_target": "radixcheck.properties.target",
    "run_machine": "radixcheck.properties.findings.verdict",
    "repro_for": "radixcheck.properties.findings.repro",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'radixcheck' has no attribute {name!r}")
