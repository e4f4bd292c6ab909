"""How a suite namespace becomes the fields of an engine's request (issue 29, the engines' side).

The contract's namespace is opaque (``properties/cache/contract.py``, "Namespaces"); an engine's
request carries a namespace in named fields instead: a LoRA adapter, a cache salt, multimodal
items. One mapping, shared by every namespaced adapter so that no adapter composes on its own:

* ``None`` (and no keyword): a base-model request without salt;
* a tuple ``(lora, salt)`` or ``(lora, salt, (mm_hash, ...))``: a request for LoRA adapter
  ``lora`` (``None``: the base model), with cache salt ``salt`` (``None``: none), and one
  multimodal item per feature hash, as the suite's adversarial pairs are written
  (``properties/cache/tenants.py``);
* any other value: a tenant's cache salt on a base-model request.

Text fields: a str is itself, an int is written in decimal (engines' fields are strings: a caller
with integer tenant ids writes them so; decimal tells ``5`` from ``5 + 2**16``). Each engine's
adapter then puts these fields where that engine's callers put them, and the engine composes
them into its key as it does (SGLang's ``Req``, vLLM's block hasher): that composition is what
the audit checks. A namespace no request can carry (unhashable, a part of another type) is
refused with ``TypeError`` before anything changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RequestFields:
    """The namespace of one request, as the request's own fields."""

    lora: str | None = None
    salt: str | None = None
    mm_hashes: tuple[int, ...] = ()


def _text(part: Any, namespace: Any) -> str | None:
    if part is None or isinstance(part, str):
        return part
    if isinstance(part, int) and not isinstance(part, bool):
        return str(part)
    raise TypeError(f"namespace {namespace!r}: a part {part!r} of type {type(part).__name__} is no request field "
                    "(a str, an int or None)")


def request_fields(namespace: Any) -> RequestFields:
    """The request fields that carry ``namespace`` (module docstring)."""
    try:
        hash(namespace)
    except TypeError as exc:
        raise TypeError(f"namespace must be hashable (a str, an int, None or a tuple of those), got "
                        f"{type(namespace).__name__} {namespace!r}: {exc}") from None
    if isinstance(namespace, tuple):
        if len(namespace) not in (2, 3):
            raise TypeError(f"namespace {namespace!r}: a tuple is (lora, salt) or (lora, salt, (mm_hash, ...))")
        mm: tuple[int, ...] = ()
        if len(namespace) == 3:
            if not isinstance(namespace[2], tuple) or not all(isinstance(h, int) and not isinstance(h, bool) for h in namespace[2]):
                raise TypeError(f"namespace {namespace!r}: multimodal feature hashes are a tuple of ints")
            mm = namespace[2]
        return RequestFields(_text(namespace[0], namespace), _text(namespace[1], namespace), mm)
    return RequestFields(None, _text(namespace, namespace))
