"""SGLang 0.5.23's radix trees with namespaces (issue 29): tenant isolation, as SGLang's scheduler keys them.

Select one with ``radixcheck audit radixcheck.properties.adapters.sglang_tenants:<factory>`` in the
audit environment. The trees and their conversion layer are ``sglang_radix.py``'s (``RadixCache``,
``UnifiedRadixCache`` FULL on the Python and the Rust tree core); this module adds only the
namespace, and takes it where SGLang's scheduler takes it:

1. The suite's namespace becomes a request's fields by the one shared mapping
   (``properties/adapters/tenant_fields.py``): a LoRA adapter, a salt.
2. SGLang's own request object is built with them, ``Req(..., lora_id=..., extra_key=...,
   cache_salt=...)``, and its key by SGLang's own ``mem_cache.common._req_radix_key(tree, req,
   token_ids)``, the function the scheduler's ``match_kv_cache`` uses:
   ``RadixKey(token_ids, extra_key=req.extra_key, cache_salt=req.cache_salt)``. ``Req`` composes
   ``extra_key = (extra_key or "") + lora_id`` (a LoRA's id appended to the caller's extra key);
   ``RadixKey`` keeps ``cache_salt`` apart, keying children by the pair ``(extra_key, cache_salt)``
   (the pair sglang #30827 introduced). Nothing here composes: the adapter hands SGLang the fields.

The LoRA part is passed as ``lora_id``: what the scheduler receives for an adapter (its registry's
id; for ``--lora-paths`` adapters a stable ``uuid5(name + "\\0" + path).hex``, which any client that
knows the adapter's name and path computes). Where the salt goes is the caller's choice, so there
are two families:

``*_salted``     the salt is SGLang's ``cache_salt`` (the field the API documents as "Cache salt
                 for request caching");
``*_extra_key``  the salt is SGLang's ``extra_key`` ("Extra key for caller-defined request
                 classification"), how sglang #10317 introduced per-tenant isolation and how the
                 report of sglang #24638 isolates a tenant.

Factories: ``radix_lru_{salted,extra_key}`` (``checks_locks=False``, as ``sglang_radix.radix_lru``),
``unified_python_lru_{salted,extra_key}`` (``checks_locks=True``, as ``unified_python_lru``) and
``unified_rust_lru_{salted,extra_key}`` (``checks_locks=False``, as ``unified_rust_lru_lenient``: the Rust
core accepts another cache's handle and is then poisoned, findings #6 and #5 of
``reports/sglang_findings.md``, which the unnamespaced rows report; sent here, they would stop the
machine before it reaches tenant isolation).
All declare ``namespaces=True`` and ``unsent_namespaces=("empty", "multimodal", "decimal", "float", "bool")``:

* ``"empty"``: SGLang's API reads an empty ``extra_key`` or ``cache_salt`` as none
  (``GenerateReqInput`` sets ``""`` to ``None``; ``Req`` does ``cache_salt or None``): by design the
  empty tenant is the base one;
* ``"multimodal"``: SGLang keys an image by the pad sentinels it writes into the token ids
  (``MultimodalDataItem.pad_values``, from the item's hash), not by a namespace part: the suite's
  token ids stand for those, and a namespace with feature hashes has no field to go to;
* ``"decimal"``, ``"float"``, ``"bool"``: the request fields are strings; the suite's mapping
  (``tenant_fields.py``) writes an int in decimal, so ``5`` and ``"5"`` are one request, and has no
  field for a float or a bool.

No SGLang tree has ``evict_prefix``: ``supports_quarantine=False``, as in ``sglang_radix.py``.
An empty match returns the contract's root sentinel: SGLang's root for that namespace
(``root_node_handle(extra_key)``; RadixCache and the Python core have one root for all).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.adapters import sglang_radix as _sr
from radixcheck.properties.adapters.sglang_radix import _factory
from radixcheck.properties.adapters.tenant_fields import request_fields
from radixcheck.properties.cache.contract import Capabilities

SALT_FIELDS = ("salted", "extra_key")
"""Where a family puts the salt: SGLang's ``cache_salt`` or its ``extra_key``."""

_rq: Any = None


def _load() -> Any:
    global _rq
    if _rq is None:
        import types

        _sr._load()
        from sglang.srt.managers.schedule_batch import Req
        from sglang.srt.mem_cache.common import _req_radix_key
        from sglang.srt.sampling.sampling_params import SamplingParams

        _rq = types.SimpleNamespace(Req=Req, req_radix_key=_req_radix_key, SamplingParams=SamplingParams)
    return _rq


class _Tenants:
    """The namespace keyword, through SGLang's ``Req`` and ``_req_radix_key`` (module docstring)."""

    salt_field: str = "cache_salt"
    _namespace: Any = None
    _extra_key: Any = None
    _ids = itertools.count()

    def _request(self, token_ids: Any, namespace: Any) -> Any:
        rq = _load()
        fields = request_fields(namespace)
        if fields.mm_hashes:
            raise ValueError(f"namespace {namespace!r}: SGLang keys multimodal items by their pad tokens (never sent)")
        return rq.Req(f"radixcheck-{next(self._ids)}", "", token_ids, rq.SamplingParams(), lora_id=fields.lora,
                      **{self.salt_field: fields.salt})

    def _key(self, tokens: Sequence[int]) -> Any:
        token_ids = _sr._token_array(tokens)
        req = self._request(token_ids, self._namespace)
        key = _load().req_radix_key(self.cache, req, token_ids)
        self._extra_key = key.extra_key
        return key

    def _in(self, namespace: Any, call: Callable[[], Any]) -> Any:
        request_fields(namespace)  # a namespace no request can carry is refused before anything changes
        self._namespace = namespace
        try:
            return call()
        finally:
            self._namespace = None

    def match_prefix(self, tokens: Sequence[int], namespace: Any = None) -> Any:
        return self._in(namespace, lambda: super(_Tenants, self).match_prefix(tokens))

    def insert(self, tokens: Sequence[int], values: Any, namespace: Any = None) -> int:
        return self._in(namespace, lambda: super(_Tenants, self).insert(tokens, values))

    def evict_prefix(self, tokens: Sequence[int], namespace: Any = None) -> int:
        raise NotImplementedError("SGLang's radix caches have no evict_prefix (quarantine)")


class SGLangRadixCacheTenants(_Tenants, _sr.SGLangRadixCache):
    """``RadixCache`` keyed by ``Req`` (module docstring)."""


class SGLangUnifiedRadixCacheTenants(_Tenants, _sr.SGLangUnifiedRadixCache):
    """``UnifiedRadixCache`` (FULL) keyed by ``Req`` (module docstring)."""

    def _is_root(self, node: Any) -> bool:
        return node == self.cache.root_node_handle(self._extra_key) or node == self.cache.root_node_handle()


def _caps(checks_locks: bool) -> Capabilities:
    return Capabilities(supports_quarantine=False, page_sizes=_sr.PAGE_SIZES, checks_locks=checks_locks, namespaces=True,
                        unsent_namespaces=("empty", "multimodal", "decimal", "float", "bool"))


def _with_salt(cls: type, field: str) -> type:
    return type(f"{cls.__name__}_{field}", (cls,), {"salt_field": "cache_salt" if field == "salted" else "extra_key"})


FACTORIES: dict[str, Callable] = {}
for _field in SALT_FIELDS:
    _radix = _with_salt(SGLangRadixCacheTenants, _field)
    FACTORIES[f"radix_lru_{_field}"] = _factory(f"radix_lru_{_field}", lambda a, p, c=_radix: c(a, p), _caps(False))
    _unified = _with_salt(SGLangUnifiedRadixCacheTenants, _field)
    for _b in ("python", "rust"):
        FACTORIES[f"unified_{_b}_lru_{_field}"] = _factory(
            f"unified_{_b}_lru_{_field}", lambda a, p, c=_unified, b=_b: c(a, p, backend=b), _caps(_b == "python"))
del _field, _radix, _unified, _b


__getattr__ = factory_lookup(__name__, FACTORIES)  # `module:<factory>` names a factory (PEP 562)


if os.environ.get("RADIXCHECK_SGLANG_LAZY") != "1" and importlib.util.find_spec("sglang") is not None:
    _load()

__all__ = ["FACTORIES", "SALT_FIELDS", "SGLangRadixCacheTenants", "SGLangUnifiedRadixCacheTenants", *FACTORIES]

if __name__ == "__main__":  # list the factories
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.sglang_tenants:{_name}", _f.capabilities, file=sys.stdout)
