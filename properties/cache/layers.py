"""Layers: the parts a target declares, as what each adds to the calls a machine sends.

A cache under test is one cache with some parts declared on top of its base contract: namespaces,
a :class:`~radixcheck.properties.cache.policies.Policy` whose key reads request priorities, a
second pool (:class:`SecondPoolLayer`), the request lifecycle (:class:`LifecycleLayer`), and a host tier
(the tier world, which takes the same layers). A machine
drives one cache and one model; each declared part is a *layer* over both:

* on the cache's side, a layer says which keywords a call carries for the request it serves
  (:meth:`Layer.keywords`): ``namespace=`` for a target that declares namespaces, ``priority=``
  for a policy that takes one. A part the target does not declare has no layer, so its keyword
  is never sent;
* on the model's side, the request's :class:`Tags` (its namespace, its priority) go with every
  event the model is told of, and each oracle reads the tags it judges (the prefix-set model files
  a page under its namespace; so does the tier model, on both tiers).

The plain cache machine (:mod:`radixcheck.properties.cache.machine`) and the tier machine
(:mod:`radixcheck.properties.tiers.machine`) build their keywords from the same layers
(:func:`layers_for`, :func:`keywords_for`), so a namespace reaches a tiered cache exactly as it
reaches a plain one. A new part is one more :class:`Layer`: its keywords, its tags, and the
oracle that reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["UNSAID", "Tags", "Layer", "NamespaceLayer", "PriorityLayer", "SecondPoolLayer", "LifecycleLayer", "with_lifecycle",
           "layers_for", "keywords_for",
           "namespace_key"]


class _Unsaid:
    """The namespace of a call sent without the ``namespace=`` keyword (the default namespace, ``None``)."""

    def __repr__(self) -> str:
        return "UNSAID"


UNSAID: Any = _Unsaid()
"""A call in the default namespace, sent without the keyword (every call to a target without namespaces)."""


def namespace_key(namespace: Any) -> Any:
    """The namespace the model files a call under: the keyword's value, ``None`` when it was not sent."""
    return None if namespace is UNSAID else namespace


@dataclass(frozen=True)
class Tags:
    """What a request carries besides its tokens: the part of each call the layers fill in."""

    namespace: Any = UNSAID
    priority: int = 0
    second: Any = None  # an insert's second-pool value: its window slots (an array) or its state (an int); None: none sent


class Layer(Protocol):
    """One declared part of a target, over the one cache model."""

    name: str

    def keywords(self, call: str, tags: Tags) -> dict[str, Any]:
        """The keywords ``call`` carries for a request tagged ``tags`` (empty: none)."""
        ...


@dataclass(frozen=True)
class NamespaceLayer:
    """``namespace=``: sent on the calls the machine sends under a namespace, never for the
    default namespace said without the keyword (:data:`UNSAID`)."""

    name: str = "namespaces"

    def keywords(self, call: str, tags: Tags) -> dict[str, Any]:
        return {} if tags.namespace is UNSAID else {"namespace": tags.namespace}


@dataclass(frozen=True)
class PriorityLayer:
    """``priority=`` on a request's ``match_prefix`` and ``insert``, for a policy that takes one
    (as SGLang's requests carry ``req.priority``)."""

    name: str = "priority"
    calls: tuple[str, ...] = ("match_prefix", "insert")

    def keywords(self, call: str, tags: Tags) -> dict[str, Any]:
        return {"priority": tags.priority} if call in self.calls else {}


@dataclass(frozen=True)
class SecondPoolLayer:
    """``window=`` (a sliding window) or ``state=`` (a state pool) on an ``insert``: the request's
    second-pool value (:attr:`Tags.second`). The same whichever lifecycle or key mode sends it."""

    keyword: str
    name: str = "second pool"

    def keywords(self, call: str, tags: Tags) -> dict[str, Any]:
        return {self.keyword: tags.second} if call == "insert" and tags.second is not None else {}


def layers_for(namespaces: bool, policy: Any = None, second: str | None = None) -> tuple[Layer, ...]:
    """The layers of a target that declares ``namespaces``, ``policy`` (a Policy or None) and a
    second pool whose inserts carry the keyword ``second`` (``"window"``, ``"state"`` or None)."""
    layers: list[Layer] = []
    if namespaces:
        layers.append(NamespaceLayer())
    if policy is not None and getattr(policy, "takes_priority", False):
        layers.append(PriorityLayer())
    if second is not None:
        layers.append(SecondPoolLayer(second))
    return tuple(layers)


def keywords_for(layers: Sequence[Layer], call: str, tags: Tags) -> dict[str, Any]:
    """Every keyword the declared ``layers`` add to ``call``. A namespace other than :data:`UNSAID`
    for a target with no namespace layer is the caller's mistake, refused here: it is never sent."""
    if tags.namespace is not UNSAID and not any(isinstance(layer, NamespaceLayer) for layer in layers):
        raise ValueError(f"{call}: namespace={tags.namespace!r} for a target that declares no namespaces "
                         "(it is never sent one)")
    if tags.second is not None and not any(isinstance(layer, SecondPoolLayer) for layer in layers):
        raise ValueError(f"{call}: a second-pool value for a target that declares no second pool (it is never sent one)")
    keywords: dict[str, Any] = {}
    for layer in layers:
        keywords.update(layer.keywords(call, tags))
    return keywords


# ---- the request lifecycle: the sixth part, a layer too ----------------------------------------

__all__ += ["LifecycleLayer", "with_lifecycle"]


@dataclass(frozen=True)
class LifecycleLayer:
    """``lifecycle="tree"``: running requests, driven with the calls the other layers already fill
    (admission is a match, a load-back and a lock; a chunk is an insert, a re-match, a lock and an
    unlock; a retract or an abort is an unlock, possibly while the request's transfers are in
    flight). It adds steps, not keywords: its model side is the slots each running request holds
    of its own, which conservation counts beside the cache's (the plain machine's
    :mod:`radixcheck.properties.cache.lifecycle`, the tier world's
    :mod:`radixcheck.properties.tiers.lifecycle`)."""

    name: str = "lifecycle"
    mode: str = "tree"

    def keywords(self, call: str, tags: Tags) -> dict[str, Any]:
        return {}


def with_lifecycle(layers: Sequence[Layer], lifecycle: str) -> tuple[Layer, ...]:
    """``layers`` and, for a target that declares a lifecycle other than ``"off"``, its :class:`LifecycleLayer`."""
    return (*layers, LifecycleLayer(mode=lifecycle)) if lifecycle != "off" else tuple(layers)
