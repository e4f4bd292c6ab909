"""Which declared layers the machines drove together: a tally of the steps that touched each layer.

A cache under test is all its declared layers at once (:mod:`radixcheck.properties.cache.layers`);
a layer pair that no step ever meets is a coverage gap no verdict shows (the tier lifecycle's
requests never carried a tenant's namespace, and the card said nothing: reports/findings/layers_trial.md).
So each machine step notes what it actually sent, layer by layer:

* ``tenants``: a call sent with a ``namespace=`` other than the default (``None``);
* ``policy``: an eviction under a declared policy other than LRU, or a call carrying a ``priority=`` other than 0;
* ``running requests``: a lifecycle call on behalf of a running request (admit, compute, publish, end),
  save the aborts a flush or a quarantine forces on every running request (:func:`aside`), or an
  eviction while running requests hold locks (what it may take is bounded by theirs);
* ``second pool``: an insert carrying ``window=`` or ``state=``;
* ``host tier``: a transfer asked of the suite's controller (a backup or a load-back) or completed,
  or a match that answered host pages.

A step is one rule of a state machine (:func:`~radixcheck.properties.findings.verdict.naming_steps`
opens and closes it); touches outside any step (the tier production world's stories) are not counted. The
tally lives in this process; the pytest plugin resets it before each conformance test and carries
it on the test's report (``radixcheck_layers``), so pytest-xdist's workers' tallies reach the audit.
Cheap by design: a touch is one set insertion, a step's close one counter update per layer it touched.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["LAYERS", "TENANTS", "POLICY", "RUNNING", "SECOND_POOL", "HOST_TIER", "TALLY", "Tally", "touch", "sent", "request", "aside",
           "declared_layers", "pair_name", "set_name", "layers_of"]

TENANTS, POLICY, RUNNING, SECOND_POOL, HOST_TIER = "tenants", "policy", "running requests", "second pool", "host tier"
LAYERS = (TENANTS, POLICY, RUNNING, SECOND_POOL, HOST_TIER)
"""Every layer, in the order the card lists them."""

EVICTIONS = frozenset({"evict", "evict_host"})  # the calls whose victims a declared policy orders


def pair_name(a: str, b: str) -> str:
    """A pair as the card and the JSON name it, in :data:`LAYERS` order: ``"tenants × running requests"``."""
    first, second = sorted((a, b), key=LAYERS.index)
    return f"{first} × {second}"


def set_name(layers: Iterable[str]) -> str:
    """A set of layers as the tally keys it, in :data:`LAYERS` order: ``"tenants + host tier"``."""
    return " + ".join(sorted(layers, key=LAYERS.index))


def layers_of(name: str) -> frozenset[str]:
    """The layers of a :func:`set_name`."""
    return frozenset(name.split(" + "))


class Tally:
    """Steps per set of layers touched together (``steps``: each step counts once, under exactly the
    layers it touched; at most 2**5 keys). Per layer or per pair, the sums are the card's
    (:mod:`radixcheck.layer_card`)."""

    def __init__(self) -> None:
        self.touched: set[str] = set()  # the layers the open step touched so far
        self.steps: Counter[frozenset[str]] = Counter()  # named only in as_dict: a step's close stays one hash

    def reset(self) -> None:
        self.touched.clear()
        self.steps.clear()

    def begin_step(self) -> None:
        self.touched.clear()  # what came between steps (a machine's construction) belongs to none

    def end_step(self) -> None:
        if self.touched:
            self.steps[frozenset(self.touched)] += 1
            self.touched.clear()

    def as_dict(self) -> dict[str, int]:
        """What a test's report carries (a plain dict keyed by :func:`set_name`: pytest-xdist serializes it)."""
        return {set_name(layers): steps for layers, steps in self.steps.items()}


TALLY = Tally()
"""This process's tally (one test's, between the plugin's resets)."""


@contextmanager
def aside() -> Iterator[None]:
    """What runs inside touches nothing: the aborts a flush or a quarantine forces on every running
    request. They are that call's effect, whatever the requests carry; counted, any step that quarantined
    a tenant's prefix while requests ran would credit "tenants × running requests", though no request
    ever ran under a tenant (the gap of reports/findings/layers_trial.md stayed hidden so)."""
    before = set(TALLY.touched)
    try:
        yield
    finally:
        TALLY.touched.clear()
        TALLY.touched.update(before)


def touch(layer: str) -> None:
    """The open step touched ``layer``."""
    TALLY.touched.add(layer)


def sent(call: str, keywords: Mapping[str, Any], policy: Any = None, requests_running: bool = False) -> None:
    """The open step sent ``call`` with ``keywords`` (what the layers added) to a target whose declared
    policy is ``policy`` (a :class:`~radixcheck.properties.cache.policies.Policy` or None);
    ``requests_running``: running requests hold locks in the tree as it is sent."""
    touched = TALLY.touched
    if requests_running and call in EVICTIONS:
        touched.add(RUNNING)  # the running requests' locks bound what this eviction may take: a policy meets them here
    if keywords.get("namespace") is not None:
        touched.add(TENANTS)
    if "window" in keywords or "state" in keywords:
        touched.add(SECOND_POOL)
    if policy is not None and (keywords.get("priority") or (call in EVICTIONS and policy.name != "lru")):
        touched.add(POLICY)


def request(namespace: Any = None, priority: int = 0) -> None:
    """The open step acted for a running request (the lifecycle layer) filed under ``namespace`` (the
    model's key: ``None`` is the default) with ``priority``: a request method carries both inside the
    request, not as keywords, so :func:`sent` would not see them."""
    touched = TALLY.touched
    touched.add(RUNNING)
    if namespace is not None:
        touched.add(TENANTS)
    if priority:
        touched.add(POLICY)


def declared_layers(capabilities: Any, tier: bool = False) -> list[str]:
    """The layers a target's capabilities declare (a ``Capabilities`` or a ``TierCapabilities``;
    ``tier``: the target has a host tier), in :data:`LAYERS` order. A policy declared by name, or
    LRU, adds no policy layer: LRU is the base contract's order, and a named one is never judged."""
    policy = getattr(capabilities, "policy", None)
    present = {
        TENANTS: bool(getattr(capabilities, "namespaces", False)),
        POLICY: policy is not None and policy.name != "lru",
        RUNNING: getattr(capabilities, "lifecycle", "off") != "off",
        SECOND_POOL: getattr(capabilities, "second_pool", None) is not None,
        HOST_TIER: tier,
    }
    return [layer for layer in LAYERS if present[layer]]
