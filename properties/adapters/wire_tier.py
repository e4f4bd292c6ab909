"""A host tier over the wire: a wire server's tiered cache, presented to the suite as a tier target.

A server that declares ``tier_capabilities`` in its ``init`` reply (WIRE.md, "A host tier") is a
tier target: the wire factory builds a :class:`WireTierCache` with the tier contract's call
(``factory(allocator, host_pool, controller, page_size, write_policy)``), and the same tier worlds
and oracles drive it as drive a tiered cache in process. The pools and the transfer controller stay
the suite's: while the server answers a request, its cache calls them (a free, a backup, a load-back,
a look at the host pool's room) with a line ``{"id": ID, "call": NAME, "args": {...}}``, and
:class:`TierCalls` answers each on the server's stdin, in the order they happen, as the in-process
calls would return. A refusal of the suite's side (a double free, a host slot freed under a pending
transfer) is answered as error 1000 and raised from the request once its reply came, as the pool's
exception leaves an in-process cache's call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from radixcheck.properties.adapters.wire import (
    MALFORMED_REQUEST,
    REFUSED,
    WireCache,
    WireConnection,
    WireHandle,
    WireProtocolError,
    _jsonable,
)
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.tiers.contract import HostPool, TierMatch, Transfer

CALLS = ("free", "free_host", "device_available", "host_available", "write", "load", "refused")
"""What a tier server's cache may call of the suite's side while it answers (WIRE.md, "A host tier")."""


def transfer_on_wire(transfer: Transfer | None) -> dict[str, Any] | None:
    """A transfer as the wire carries it (``null``: the allocation failed)."""
    if transfer is None:
        return None
    return {"number": transfer.number, "kind": transfer.kind, "device_slots": _jsonable(transfer.device_slots),
            "host_slots": _jsonable(transfer.host_slots)}


class TierCalls:
    """The suite's side of one tier cache on the wire: its device pool, host pool and controller,
    answering the server's calls."""

    def __init__(self, allocator: SlotAllocator, host_pool: HostPool, controller: Any) -> None:
        self.allocator, self.host_pool, self.controller = allocator, host_pool, controller

    @staticmethod
    def _slots(args: dict[str, Any], name: str) -> np.ndarray:
        ids = args.get(name)
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise WireProtocolError(f"its call's {name!r} must be a list of slot ids, got {ids!r}")
        return np.asarray(ids, dtype=np.int64)

    def answer(self, message: dict[str, Any], op: str) -> tuple[dict[str, Any], BaseException | None]:
        """The answer to one call of the server's, and what the suite's side raised (to be raised from
        the request once its reply came; ``None`` when it returned)."""
        name, args = message["call"], message.get("args", {})
        try:
            if name not in CALLS:
                raise WireProtocolError(f"while answering {op} it called {name!r}: the suite offers {', '.join(CALLS)}")
            if name == "free":
                self.allocator.free(self._slots(args, "slots"))
                return {"ok": None}, None
            if name == "free_host":
                self.host_pool.free(self._slots(args, "slots"))
                return {"ok": None}, None
            if name == "device_available":
                return {"ok": int(self.allocator.available())}, None
            if name == "host_available":
                return {"ok": int(self.host_pool.available())}, None
            if name == "refused":
                self.controller.refused(self._slots(args, "device_slots"))
                return {"ok": None}, None
            slots = self._slots(args, "device_slots" if name == "write" else "host_slots")
            return {"ok": transfer_on_wire(getattr(self.controller, name)(slots))}, None
        except WireProtocolError as exc:
            return {"error": MALFORMED_REQUEST, "text": str(exc)}, exc
        except Exception as exc:  # noqa: BLE001 - the pool's or the controller's refusal: the cache's call ends with it
            return {"error": REFUSED, "text": f"{type(exc).__name__}: {exc}"}, exc


class WireTierCache(WireCache):
    """One tiered cache on the server, with the tier contract's methods (``TieredCacheLike``)."""

    def __init__(self, connection: WireConnection, allocator: SlotAllocator, host_pool: HostPool, controller: Any,
                 page_size: int = 1, write_policy: str = "write_through") -> None:
        self.suite = TierCalls(allocator, host_pool, controller)
        self.host_pool, self.controller, self.write_policy = host_pool, controller, write_policy
        super().__init__(connection, allocator, page_size, write_policy=_jsonable(write_policy))

    def _values_and_handle(self, op: str, result: Any) -> tuple[np.ndarray, WireHandle]:
        if not isinstance(result, dict) or type(result.get("handle")) is not int or not isinstance(result.get("values"), list) \
                or not all(type(v) is int for v in result["values"]):
            raise WireProtocolError(f"{op}: the reply must be {{'values': [ints], 'handle': int}}, got {result!r}")
        return np.asarray(result["values"], dtype=np.int64), self._wrap(result["handle"])

    def match_prefix(self, tokens: Sequence[int], **namespace: Any) -> TierMatch:  # type: ignore[override]
        result = self._call("match_prefix", namespace.get("namespace"), "namespace" in namespace, tokens=tokens,
                            **self._tags(namespace))
        fields = ("device_values", "device_handle", "host_length", "host_handle")
        if not isinstance(result, dict) or set(result) != set(fields) or not isinstance(result["device_values"], list) \
                or not all(type(v) is int for v in result["device_values"]) \
                or not all(type(result[k]) is int for k in fields[1:]):
            raise WireProtocolError(f"match_prefix: the reply must be {{'device_values': [ints], 'device_handle': int, "
                                    f"'host_length': int, 'host_handle': int}}, got {result!r}")
        return TierMatch(np.asarray(result["device_values"], dtype=np.int64), self._wrap(result["device_handle"]),
                         result["host_length"], self._wrap(result["host_handle"]))

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, WireHandle]:
        return self._values_and_handle("load_back", self._call("load_back", handle=self._handle(host_handle)))

    def evict_host(self, num_tokens: int) -> int:
        return self._count("evict_host", self._call("evict_host", num_tokens=num_tokens))

    def transfer_done(self, transfer: Transfer) -> None:
        self._call("transfer_done", transfer=transfer_on_wire(transfer))

    def device_size(self) -> int:
        return self._count("device_size", self._call("device_size"))

    def host_size(self) -> int:
        return self._count("host_size", self._call("host_size"))

    HOST_PART = ("host_length", "host_handle")  # a TierRequest's host part travels with it

    def _second_pool(self) -> str | None:
        """``"state"`` or ``"window"``: the declared second pool's keyword (None: none declared)."""
        from radixcheck.properties.cache.contract import SlidingWindow

        pool = self.connection.tier_capabilities.second_pool
        return None if pool is None else "window" if isinstance(pool, SlidingWindow) else "state"

    def _second_of(self, req: Any) -> dict[str, Any]:
        """A request's state or window values (WIRE.md, "A second pool on a host tier"): the suite's, the cache reads them."""
        second = self._second_pool()
        if second == "state":
            return {"state": int(req.state)}
        if second == "window":
            return {"window": _jsonable(np.asarray(req.window).reshape(-1))}
        return {}

    def insert(self, tokens: Sequence[int], values: np.ndarray, **keywords: Any) -> int:
        """``state=`` or ``window=`` (a declared second pool's) travel as ``"state"`` or ``"window"``."""
        second = self._second_pool()
        extra = {second: keywords[second]} if second is not None and keywords.get(second) is not None else {}
        result = self._call("insert", keywords.get("namespace"), "namespace" in keywords, tokens=tokens, values=values,
                            **self._tags(keywords), **extra)
        return self._count("insert", result)

    def _per_page(self, op: str, handle: Any) -> list[int]:
        if self._second_pool() != {"states": "state", "windows": "window"}[op]:  # never sent: not declared
            raise NotImplementedError(f"{op}: the wire server does not declare that second pool")
        result = self._call(op, handle=self._handle(handle))
        if not isinstance(result, list) or not all(type(v) is int for v in result):
            raise WireProtocolError(f"{op}: the reply must be a list of ints, got {result!r}")
        return result

    def states(self, handle: Any) -> list[int]:
        return self._per_page("states", handle)

    def windows(self, handle: Any) -> list[int]:
        return self._per_page("windows", handle)

    def _namespaces(self) -> bool:
        return bool(self.connection.tier_capabilities.namespaces)

    def __repr__(self) -> str:
        return f"WireTierCache({self.write_policy}, page_size={self.page_size})"
