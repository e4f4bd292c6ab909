"""vLLM's v1 prefix cache with namespaces (issue 29): ``lora_request``, ``cache_salt`` and multimodal items.

Select it with ``radixcheck audit radixcheck.properties.adapters.vllm_tenants:vllm_prefix_tenants``
in the audit environment (vllm 0.34.0). Everything but the namespace is
``vllm_prefix.VLLMPrefixCache`` (its module docstring: the scheduler's calls, the slots, the
declared differences); this module only gives each request vLLM builds its namespace, in vLLM's
own request fields, and lets vLLM's block hasher (``get_request_block_hasher``, its
``generate_block_hash_extra_keys``) fold them into the block hashes as it does:

* the suite's namespace becomes a LoRA adapter, a salt and multimodal feature hashes by the one
  shared mapping (``properties/adapters/tenant_fields.py``);
* a LoRA adapter ``name`` is ``LoRARequest(lora_name=name, lora_int_id=n, lora_path="/adapters/" +
  name)``, as the OpenAI server builds it for ``--lora-modules name=path`` (``n`` counts the adapters
  from 1, one per name, as the server numbers them);
* the salt is ``Request.cache_salt``;
* each feature hash ``h`` is one image, ``MultiModalFeatureSpec(modality="image", identifier=str(h),
  mm_hash=str(h), mm_position=PlaceholderRange(offset=i, length=1))`` for the ``i``-th hash: the
  images open the prompt, as a chat template puts them before the text, so every block of the
  request is chained to them (``identifier`` is the ``mm_hash``, as ``InputProcessor._get_mm_identifier``
  makes it without tower-connector LoRA).

vLLM 0.32.0 and 0.34.0 tag each part of a block's extra keys (``("lora", name, path)``, ``("cache_salt",
salt)``, ``("mm", identifier, offset)``), so a LoRA named X and a salt "X" hash apart in the cache
(the collision of vLLM #44701 needs the untagged keys of earlier releases; their KV
*events* still publish them untagged, ``to_event_extra_keys``: see ``reports/findings/vllm.md``).

Declared beyond ``vllm_prefix``'s capabilities: ``namespaces=True`` and
``unsent_namespaces=("empty", "decimal", "float", "bool")``: vLLM's API refuses an empty
``cache_salt`` ("must be a non-empty string if provided"), and its hasher reads one as no salt; a
LoRA name and a salt are strings, so the suite's mapping (``tenant_fields.py``) writes an int in
decimal (``5`` and ``"5"`` are one request) and has no field for a float or a bool.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.adapters import vllm_prefix as _vp
from radixcheck.properties.adapters.tenant_fields import request_fields
from radixcheck.properties.cache.contract import Capabilities, SlotAllocator

_mm: Any = None


def _load() -> Any:
    global _mm
    if _mm is None:
        import types

        _vp._load()
        from vllm.lora.request import LoRARequest
        from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange

        _mm = types.SimpleNamespace(LoRARequest=LoRARequest, MultiModalFeatureSpec=MultiModalFeatureSpec,
                                    PlaceholderRange=PlaceholderRange)
    return _mm


class TenantHandle(_vp.Handle):
    """A matched prefix and the namespace it was matched under (a lock re-runs the lookup there)."""

    __slots__ = ("namespace",)

    def __init__(self, tokens: list[int], namespace: Any) -> None:
        super().__init__(tokens)
        self.namespace = namespace


class VLLMPrefixCacheTenants(_vp.VLLMPrefixCache):
    """``VLLMPrefixCache`` whose requests carry a namespace in vLLM's own fields (module docstring)."""

    def __init__(self, allocator: SlotAllocator, page_size: int) -> None:
        super().__init__(allocator, page_size)
        self._namespace: Any = None
        self._lora_ids: dict[str, int] = {}
        self._counter = itertools.count()

    def _fields(self, namespace: Any) -> dict[str, Any]:
        mm = _load()
        fields = request_fields(namespace)
        kwargs: dict[str, Any] = {"cache_salt": fields.salt}
        if fields.lora is not None:
            number = self._lora_ids.setdefault(fields.lora, len(self._lora_ids) + 1)
            kwargs["lora_request"] = mm.LoRARequest(lora_name=fields.lora, lora_int_id=number,
                                                    lora_path=f"/adapters/{fields.lora}")
        if fields.mm_hashes:
            kwargs["mm_features"] = [
                mm.MultiModalFeatureSpec(data=None, modality="image", identifier=str(h), mm_hash=str(h),
                                         mm_position=mm.PlaceholderRange(offset=i, length=1))
                for i, h in enumerate(fields.mm_hashes)]
        return kwargs

    def _request(self, tokens: list[int]) -> Any:
        return self.v.Request(f"radixcheck-{next(self._ids)}", tokens + [_vp.GENERATED_TOKEN], self._sampling, None,
                              block_hasher=self._hasher, **self._fields(self._namespace))

    def _in(self, namespace: Any, call: Callable[[], Any]) -> Any:
        request_fields(namespace)  # a namespace no request can carry is refused before anything changes
        self._namespace = namespace
        try:
            return call()
        finally:
            self._namespace = None

    def match_prefix(self, tokens: Sequence[int], namespace: Any = None) -> tuple[np.ndarray, Any]:
        values, handle = self._in(namespace, lambda: super(VLLMPrefixCacheTenants, self).match_prefix(tokens))
        return values, (handle if handle is _vp.ROOT else TenantHandle(handle.tokens, namespace))

    def insert(self, tokens: Sequence[int], values: Any, namespace: Any = None) -> int:
        return self._in(namespace, lambda: super(VLLMPrefixCacheTenants, self).insert(tokens, values))

    def inc_lock_ref(self, handle: Any) -> None:
        self._in(getattr(handle, "namespace", None), lambda: super(VLLMPrefixCacheTenants, self).inc_lock_ref(handle))

    def dec_lock_ref(self, handle: Any) -> None:
        self._in(getattr(handle, "namespace", None), lambda: super(VLLMPrefixCacheTenants, self).dec_lock_ref(handle))

    def evict_prefix(self, tokens: Sequence[int], namespace: Any = None) -> int:
        raise NotImplementedError("vLLM has no prefix-keyed eviction (supports_quarantine=False)")


CAPABILITIES = dataclasses.replace(_vp.CAPABILITIES, namespaces=True, unsent_namespaces=("empty", "decimal", "float", "bool"))


def _factory(name: str, capabilities: Capabilities) -> Callable[[SlotAllocator, int], VLLMPrefixCacheTenants]:
    def factory(allocator: SlotAllocator, page_size: int) -> VLLMPrefixCacheTenants:
        return VLLMPrefixCacheTenants(allocator, page_size)

    factory.__name__ = factory.__qualname__ = name
    factory.capabilities = capabilities  # type: ignore[attr-defined]
    return factory


FACTORIES: dict[str, Callable] = {"vllm_prefix_tenants": _factory("vllm_prefix_tenants", CAPABILITIES)}


__getattr__ = factory_lookup(__name__, FACTORIES)  # `module:<factory>` names a factory (PEP 562)


if os.environ.get("RADIXCHECK_VLLM_LAZY") != "1" and importlib.util.find_spec("vllm") is not None:
    _load()

__all__ = ["CAPABILITIES", "FACTORIES", "VLLMPrefixCacheTenants", *FACTORIES]

if __name__ == "__main__":  # list the factories
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.vllm_tenants:{_name}", _f.capabilities, file=sys.stdout)
