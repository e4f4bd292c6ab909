"""A wire-protocol server: any in-process radix cache, served over JSON lines on stdin/stdout.

``python -m radixcheck.reference.wire_server`` serves the reference cache; ``--cache
module:factory`` serves another (a mutant of the catalogue, say, to see the suite catch it
through the wire). The protocol is ``properties/adapters/WIRE.md``; the client that speaks it to
the suite is :mod:`radixcheck.properties.adapters.wire`. This file is also the model for a server
in another language: read a line, do one operation on one cache, write one line.

The server owns no slot pool: the suite does. What the cache frees during a request (its calls
of ``allocator.free``) is sent back with the response, in ``"freed"``, one list per call, and
the suite's allocator checks it. Handles are small integers, one per distinct handle object,
valid for the life of the server. Anything the cache raises is a refusal (code 1000), reported
with its type and message; the server itself goes on.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any, BinaryIO

import numpy as np

from radixcheck.properties.cache import policies
from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES, Request
from radixcheck.properties.tiers.contract import TierRequest, Transfer

PROTOCOL = 1
NOT_SUPPORTED = 10  # Maelstrom's codes: the operation is not offered by this cache
MALFORMED_REQUEST = 12  # the request could not be understood (not JSON, unknown op, missing arguments)
CRASH = 13  # the server failed in a way that leaves the cache's state unknown
REFUSED = 1000  # the cache refused the call (bad input, a lock the contract forbids); state unchanged

CACHE_OPS = ("match_prefix", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "evict_prefix", "total_size",
             "evictable_size", "protected_size", "reset")
TIER_OPS = ("match_prefix", "load_back", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "evict_host", "evict_prefix",
            "transfer_done", "device_size", "host_size", "reset")
"""The ops of a server that declares a host tier (WIRE.md, "A host tier"); it is sent no other."""
REQUEST_OPS = ("match_req", "lock_req", "cache_unfinished_req", "cache_finished_req")
"""A cache's own request methods (WIRE.md, "Running requests"): sent only when the server declares lifecycle 'requests'."""
REQUEST_FIELDS = ("id", "tokens", "namespace", "priority", "slots", "filled", "protected", "handle")
TIER_REQUEST_FIELDS = ("host_length", "host_handle")
SECOND_POOL_OPS = ("states", "windows")
"""A host tier's second pool (WIRE.md, "A second pool on a host tier"): sent only to a server declaring that pool."""
SECOND_POOL_FIELDS = ("state", "window")
"""What an insert and a request carry for a host tier's declared second pool (one of them)."""
"""A request as it travels (a host tier's with its host part); ``namespace`` only when namespaces are declared."""


class Refused(Exception):
    """A request the server refuses with an error code (and, for malformed requests, no cache call)."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


class FreeRecorder:
    """The allocator the served cache sees: it records each ``free`` call for the response."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def free(self, ids: Any) -> None:
        self.calls.append([int(i) for i in np.asarray(ids).reshape(-1).tolist()])

    def alloc(self, n: int) -> Any:
        raise NotImplementedError("the suite owns the slot pool: a served cache frees slots, it never allocates them")


class SuiteRefused(Exception):
    """The suite's side refused a call the cache made of it (a pool's double free, a free under a pending
    transfer): raised in the cache, as the suite's pool raises in process."""


class SuiteSide:
    """A tier cache's device pool, host pool and controller, as the cache sees them: each call is a line
    to the suite (``{"id": ID, "call": NAME, "args": {...}}``) answered on stdin, while the request is
    being answered (WIRE.md, "A host tier")."""

    def __init__(self, server: Server, cache_id: int) -> None:
        self.server, self.cache_id = server, cache_id

    def ask(self, name: str, **args: Any) -> Any:
        answer = self.server.ask(name, args)
        if "error" in answer:
            raise SuiteRefused(answer.get("text", f"the suite refused {name}"))
        return answer.get("ok")

    def transfer(self, value: Any) -> Transfer | None:
        if value is None:
            return None
        transfer = Transfer(value["kind"], np.asarray(value["device_slots"], dtype=np.int64),
                            np.asarray(value["host_slots"], dtype=np.int64), value["number"])
        self.server.transfers[(self.cache_id, transfer.number)] = transfer  # transfer_done hands back this object
        return transfer


def _ids(ids: Any) -> list[int]:
    return [int(i) for i in np.asarray(ids).reshape(-1).tolist()]


class DeviceSide(SuiteSide):
    def free(self, ids: Any) -> None:
        self.ask("free", slots=_ids(ids))

    def available(self) -> int:
        return self.ask("device_available")

    def alloc(self, n: int) -> Any:
        raise NotImplementedError("the suite owns the device pool: a load-back's slots come from controller.load")


class HostSide(SuiteSide):
    def free(self, ids: Any) -> None:
        self.ask("free_host", slots=_ids(ids))

    def available(self) -> int:
        return self.ask("host_available")

    def alloc(self, n: int) -> Any:
        raise NotImplementedError("the suite owns the host pool: a backup's slots come from controller.write")


class ControllerSide(SuiteSide):
    def write(self, device_slots: Any) -> Transfer | None:
        return self.transfer(self.ask("write", device_slots=_ids(device_slots)))

    def load(self, host_slots: Any) -> Transfer | None:
        return self.transfer(self.ask("load", host_slots=_ids(host_slots)))

    def refused(self, device_slots: Any) -> None:
        self.ask("refused", device_slots=_ids(device_slots))


def policy_on_wire(policy: Any) -> Any:
    """A declared eviction policy as the wire carries it: a string as it is; one of SGLang's named
    policies as ``{"named": name, ...its arguments}``; any other ``Policy`` as its name."""
    if isinstance(policy, str):
        return policy
    key = policy.key
    for name, make in policies.NAMED.items():
        for flags in ({}, {"hits_on_match": True}) if name in ("lfu", "slru") else ({},):
            named = make(**flags)
            plain = named.key is key
            partial = getattr(named.key, "func", None) is not None and getattr(key, "func", None) is named.key.func
            if not (plain or partial) or policy.hits_on_match != named.hits_on_match \
                    or policy.takes_priority != named.takes_priority:
                continue
            args = dict(flags)
            if partial:  # slru and tlru: their thresholds are the partial's arguments
                params = {"slru": ("threshold",), "tlru": ("threshold", "next_prompt_estimate")}[name]
                args.update(zip(params, key.args, strict=True))
            return {"named": name, **args}
    return policy.name


def decode_namespace(value: Any) -> Any:
    """The wire's namespace back into a Python value: arrays are tuples, ``{"list": [...]}`` a list,
    ``{"dict": [[k, v], ...]}`` a dict (the last two are unhashable, so the cache refuses them)."""
    if isinstance(value, list):
        return tuple(decode_namespace(v) for v in value)
    if isinstance(value, dict):
        if set(value) == {"list"} and isinstance(value["list"], list):
            return [decode_namespace(v) for v in value["list"]]
        if set(value) == {"dict"} and isinstance(value["dict"], list):
            return {decode_namespace(k): decode_namespace(v) for k, v in value["dict"]}
        raise Refused(MALFORMED_REQUEST, f"namespace object must be {{'list': [...]}} or {{'dict': [...]}}, got {value!r}")
    return value


def decode_values(value: Any) -> Any:
    """Slot ids as the cache expects them: an int64 array for a list of ints; anything else as NumPy
    reads it (floats stay floats, nested lists 2-D), or as it is (``null``), for the cache to refuse."""
    if isinstance(value, list):
        if all(type(v) is int for v in value):
            return np.array(value, dtype=np.int64)
        try:
            return np.asarray(value)
        except ValueError:  # a ragged list: keep it, the cache refuses it
            return value
    return value


class Server:
    """Many caches of one factory, each with an id; handles numbered across all of them."""

    def __init__(self, factory: Callable[..., Any], overrides: dict[str, Any] | None = None) -> None:
        self.factory = factory
        self.overrides = overrides or {}
        self.caches: dict[int, tuple[Any, FreeRecorder]] = {}
        self.handles: dict[int, tuple[int, Any]] = {}  # handle id -> (cache id, handle object)
        self.handle_ids: dict[int, int] = {}  # id(handle object) -> handle id
        self.next_cache = 1
        self.next_handle = 1
        self.freed: list[list[int]] = []  # the frees of the request being answered
        # A factory with tier_capabilities and no capabilities is a tiered cache (as radixcheck loads a target)
        self.tier = getattr(factory, "tier_capabilities", None) if not hasattr(factory, "capabilities") else None
        self.transfers: dict[tuple[int, int], Transfer] = {}  # (cache id, number) -> the transfer its controller returned
        self.io: tuple[BinaryIO, BinaryIO] | None = None  # (requests, replies): a tier cache's calls of the suite use them
        self.rid: Any = None  # the id of the request being answered
        # The cache runs requests itself only when that is declared (--capabilities '{"lifecycle": "requests"}'): by
        # default such a cache is declared 'tree' and driven through its tree calls, as before the protocol carried them.
        self.runs_requests = self.overrides.get("lifecycle") == "requests"
        self.requests: dict[tuple[int, int], Request] = {}  # (cache id, the suite's request id) -> the cache's copy
        pool = getattr(self.tier, "second_pool", None)  # a host tier's second pool: "state" or "window" (its insert keyword)
        self.second = None if pool is None else "window" if hasattr(pool, "window") else "state"
        if "second_pool" in self.overrides:  # --capabilities declares another (or none)
            declared = self.overrides["second_pool"]
            self.second = declared.get("kind") if isinstance(declared, dict) else None

    def ask(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Call the suite's side while answering a request: one line out, its answer read back."""
        if self.io is None:
            raise RuntimeError(f"{name}: no suite to call (this server is not serving a stream)")
        requests, replies = self.io
        replies.write(json.dumps({"id": self.rid, "call": name, "args": args}, separators=(",", ":")).encode() + b"\n")
        replies.flush()
        line = requests.readline()
        if not line:
            raise SystemExit(0)  # the suite closed our input: it is done with us
        answer = json.loads(line)
        if not isinstance(answer, dict) or answer.get("id") != self.rid or ("ok" in answer) == ("error" in answer):
            raise RuntimeError(f"the suite's answer to {name} is not {{'id': {self.rid}, 'ok'|'error': ...}}: {line[:200]!r}")
        return answer

    def tier_capabilities(self) -> dict[str, Any]:
        """The host tier's fields as the wire carries them: a Policy by name (or null for LRU), a
        cache that runs requests itself declared 'tree' (the suite drives its tree calls)."""
        caps = self.tier
        lifecycle = "tree" if caps.lifecycle == "requests" else caps.lifecycle
        policy = None if caps.eviction_policy is None else policy_on_wire(caps.eviction_policy)
        pool = caps.second_pool
        second = None if pool is None else {"kind": self.second, **asdict(pool)}
        fields = {**asdict(replace(caps, lifecycle=lifecycle, eviction_policy=None, second_pool=None)), "eviction_policy": policy,
                  "second_pool": second, **self.overrides}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}

    def capabilities(self) -> dict[str, Any]:
        caps = getattr(self.factory, "capabilities", DEFAULT_CAPABILITIES)
        # The protocol carries the tree's calls only: a cache that runs requests itself is driven
        # through those (the suite plays the engine). A Policy's key is code, which no line carries:
        # one of SGLang's named policies travels by its name and arguments (judged as in process),
        # any other as its name alone (its order then not exercised).
        lifecycle = "tree" if caps.lifecycle == "requests" else caps.lifecycle
        policy = policy_on_wire(caps.eviction_policy)
        fields = {**asdict(replace(caps, lifecycle=lifecycle, eviction_policy="lru")), "eviction_policy": policy, **self.overrides}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}

    def handle_id(self, cache_id: int, handle: Any) -> int:
        hid = self.handle_ids.get(id(handle))
        if hid is None:
            hid = self.handle_ids[id(handle)] = self.next_handle
            self.next_handle += 1
            self.handles[hid] = (cache_id, handle)  # kept alive, so id(handle) is never reused
        return hid

    def handle_of(self, value: Any) -> Any:
        """The handle object a wire handle names; an unknown id (or ``null``) becomes a fresh
        object the cache has never seen, for it to refuse as the contract says."""
        if type(value) is int and value in self.handles:
            return self.handles[value][1]
        return object()

    def dispatch(self, op: str, args: dict[str, Any]) -> tuple[Any, list[list[int]]]:
        if op == "init":
            declared = ({"tier_capabilities": self.tier_capabilities()} if self.tier is not None
                        else {"capabilities": self.capabilities()})
            return {"protocol": PROTOCOL, **declared, "server": "radixcheck wire_server"}, []
        if op == "new":
            recorder = FreeRecorder()
            try:
                if self.tier is not None:
                    if "write_policy" not in args:
                        raise Refused(MALFORMED_REQUEST, "new needs the argument 'write_policy' (a host tier)")
                    cache_id = self.next_cache
                    cache = self.factory(DeviceSide(self, cache_id), HostSide(self, cache_id), ControllerSide(self, cache_id),
                                         args.get("page_size"), args["write_policy"])
                else:
                    cache = self.factory(recorder, args.get("page_size"))
            except Refused:
                raise
            except Exception as exc:  # noqa: BLE001 - the factory's refusal (a bad page size)
                raise Refused(REFUSED, f"{type(exc).__name__}: {exc}") from exc
            cache_id, self.next_cache = self.next_cache, self.next_cache + 1
            self.caches[cache_id] = (cache, recorder)
            return cache_id, []
        offered = (TIER_OPS if self.tier is not None else CACHE_OPS) + REQUEST_OPS * self.runs_requests \
            + tuple(o for o in SECOND_POOL_OPS if self.second is not None and o.startswith(self.second))
        if op not in offered and op != "drop":
            raise Refused(MALFORMED_REQUEST, f"unknown op {op!r}")
        cache_id = args.get("cache")
        if cache_id not in self.caches:
            raise Refused(MALFORMED_REQUEST, f"no cache {cache_id!r} on this server")
        if op == "drop":
            del self.caches[cache_id]
            for hid in [h for h, (c, _) in self.handles.items() if c == cache_id]:
                self.handle_ids.pop(id(self.handles.pop(hid)[1]), None)
            for key in [k for k in self.transfers if k[0] == cache_id]:
                del self.transfers[key]
            for key in [k for k in self.requests if k[0] == cache_id]:
                del self.requests[key]
            return None, []
        cache, recorder = self.caches[cache_id]
        method = getattr(cache, op, None)
        if method is None:
            raise Refused(NOT_SUPPORTED, f"this cache has no {op}")
        call = self._arguments(op, args)
        recorder.calls = self.freed = []
        keywords = {"namespace": decode_namespace(args["namespace"])} if "namespace" in args else {}
        if "priority" in args and op in ("match_prefix", "insert"):  # a request's priority (a policy that takes one)
            keywords["priority"] = args["priority"]
        if op == "insert" and self.second is not None and self.second in args:  # a host tier's state or window values
            keywords[self.second] = decode_values(args[self.second]) if self.second == "window" else args[self.second]
        try:
            result = method(*call, **keywords)
        except Refused:
            raise
        except Exception as exc:  # noqa: BLE001 - the cache's refusal, reported with its type
            raise Refused(REFUSED, f"{type(exc).__name__}: {exc}") from exc
        freed = recorder.calls
        if op in REQUEST_OPS:  # what the method left in the request; an ended one is forgotten
            req = call[0]
            result = {"slots": np.asarray(req.slots).reshape(-1).tolist(), "filled": int(req.filled),
                      "protected": int(req.protected), "handle": self._handle_or_null(cache_id, req.handle)}
            if self.tier is not None:
                result.update(host_length=int(req.host_length), host_handle=self._handle_or_null(cache_id, req.host_handle))
            if op == "cache_finished_req":
                self.requests.pop((cache_id, args["request"]["id"]), None)
        elif op in SECOND_POOL_OPS:
            result = [int(v) for v in result]
        elif op == "match_prefix" and self.tier is not None:
            result = {"device_values": np.asarray(result.device_values).reshape(-1).tolist(),
                      "device_handle": self.handle_id(cache_id, result.device_handle), "host_length": int(result.host_length),
                      "host_handle": self.handle_id(cache_id, result.host_handle)}
        elif op in ("match_prefix", "load_back"):
            values, handle = result
            result = {"values": np.asarray(values).reshape(-1).tolist(), "handle": self.handle_id(cache_id, handle)}
        elif result is not None:
            result = int(result)
        return result, freed

    def _arguments(self, op: str, args: dict[str, Any]) -> tuple[Any, ...]:
        def need(name: str) -> Any:
            if name not in args:
                raise Refused(MALFORMED_REQUEST, f"{op} needs the argument {name!r}")
            return args[name]

        if op in ("match_prefix", "evict_prefix"):
            return (need("tokens"),)
        if op == "insert":
            return need("tokens"), decode_values(need("values"))
        if op in ("inc_lock_ref", "dec_lock_ref", "load_back", *SECOND_POOL_OPS):
            return (self.handle_of(need("handle")),)
        if op in ("evict", "evict_host"):
            return (need("num_tokens"),)
        if op == "transfer_done":
            return (self._transfer(args["cache"], need("transfer")),)
        if op in REQUEST_OPS:
            req = self._request(args["cache"], need("request"))
            if op != "cache_finished_req":
                return (req,)
            if type(need("insert")) is not bool:
                raise Refused(MALFORMED_REQUEST, f"cache_finished_req's 'insert' must be true or false, got {args['insert']!r}")
            return req, args["insert"]
        return ()

    def _handle_or_null(self, cache_id: int, handle: Any) -> int | None:
        return None if handle is None else self.handle_id(cache_id, handle)

    def _request(self, cache_id: int, value: Any) -> Request:
        """The cache's copy of one of the suite's running requests (the same object each time its id comes),
        with what the suite sent written into it: the suite owns the request, and may have computed more."""
        host = TIER_REQUEST_FIELDS if self.tier is not None else ()
        fields = set(REQUEST_FIELDS + host) - {"namespace"}
        ints = ("id", "priority", "filled", "protected", *host[:1])
        handles = ("handle", *host[1:])
        if not isinstance(value, dict) or not fields <= set(value) <= fields | {"namespace", *SECOND_POOL_FIELDS} \
                or not all(type(value[k]) is int for k in ints) \
                or not all(value[k] is None or type(value[k]) is int for k in handles) \
                or not all(isinstance(value[k], list) and all(type(t) is int for t in value[k]) for k in ("tokens", "slots")):
            raise Refused(MALFORMED_REQUEST, f"a request must be an object of {', '.join(sorted(fields))} (and 'namespace' "
                                             f"if namespaces are declared): ints, lists of ints, handles an int or null; "
                                             f"got {value!r}")
        if type(value.get("state", -1)) is not int or not all(type(t) is int for t in value.get("window", [])):
            raise Refused(MALFORMED_REQUEST, f"a request's 'state' must be an int and its 'window' a list of ints, got {value!r}")
        namespace = decode_namespace(value["namespace"]) if "namespace" in value else None
        req = self.requests.get((cache_id, value["id"]))
        if req is None:
            req = self.requests[(cache_id, value["id"])] = (TierRequest if self.tier is not None else Request)(
                value["tokens"], namespace, value["priority"])
        req.tokens, req.namespace, req.priority = tuple(value["tokens"]), namespace, value["priority"]
        req.slots, req.filled, req.protected = np.array(value["slots"], dtype=np.int64), value["filled"], value["protected"]
        req.handle = None if value["handle"] is None else self.handle_of(value["handle"])
        if self.tier is not None:
            req.host_length = value["host_length"]
            req.host_handle = None if value["host_handle"] is None else self.handle_of(value["host_handle"])
        if self.second == "state":
            req.state = int(value.get("state", -1))
        elif self.second == "window":
            req.window = np.array(value.get("window", []), dtype=np.int64)
        return req

    def _transfer(self, cache_id: int, value: Any) -> Transfer:
        """The transfer the suite completes: the object this cache's controller returned, or (one it never
        returned) a new one, for the cache to refuse."""
        fields = ("number", "kind", "device_slots", "host_slots")
        if not isinstance(value, dict) or set(value) != set(fields):
            raise Refused(MALFORMED_REQUEST, f"transfer_done's 'transfer' must be an object of {', '.join(fields)}, got {value!r}")
        known = self.transfers.get((cache_id, value["number"]))
        if known is not None:
            return known
        return Transfer(value["kind"], np.asarray(value["device_slots"], dtype=np.int64),
                        np.asarray(value["host_slots"], dtype=np.int64), value["number"])

    def respond(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except ValueError as exc:
            return {"id": None, "error": MALFORMED_REQUEST, "text": f"not JSON: {exc}"}
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            return {"id": request.get("id") if isinstance(request, dict) else None, "error": MALFORMED_REQUEST,
                    "text": "a request is an object with an 'op' string"}
        rid, args = request.get("id"), request.get("args", {})
        if not isinstance(args, dict):
            return {"id": rid, "error": MALFORMED_REQUEST, "text": "'args' must be an object"}
        self.freed = []
        self.rid = rid
        try:
            result, freed = self.dispatch(request["op"], args)
        except Exception as exc:  # noqa: BLE001 - a refusal, or the server's own failure (a crash)
            code, text = (exc.code, str(exc)) if isinstance(exc, Refused) else (CRASH, f"{type(exc).__name__}: {exc}")
            reply: dict[str, Any] = {"id": rid, "error": code, "text": text}
            freed = self.freed
            if freed:  # a refusal that freed something is the cache's bug: the suite must see it
                reply["freed"] = freed
            return reply
        reply = {"id": rid, "ok": result}
        if freed:
            reply["freed"] = freed
        return reply


def serve(factory: Callable[..., Any], requests: BinaryIO, replies: BinaryIO, overrides: dict[str, Any] | None = None) -> None:
    """Answer each request line with one reply line until the input ends."""
    server = Server(factory, overrides)
    server.io = (requests, replies)
    while line := requests.readline():  # readline, not iteration: a tier cache's calls read their answers mid-request
        if not line.strip():
            continue
        replies.write(json.dumps(server.respond(line), separators=(",", ":")).encode() + b"\n")
        replies.flush()


def load_factory(spec: str) -> Callable[..., Any]:
    module, _, attribute = spec.partition(":")
    if not module or not attribute:
        raise SystemExit(f"--cache must be module:factory, got {spec!r}")
    return getattr(importlib.import_module(module), attribute)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default="radixcheck.reference:RadixCache", help="module:factory of the cache to serve")
    parser.add_argument("--capabilities", default="{}", type=json.loads,
                        help='JSON object of Capabilities fields declared instead of the factory\'s, e.g. \'{"namespaces": false}\'')
    options = parser.parse_args(argv)
    if not isinstance(options.capabilities, dict):
        parser.error("--capabilities must be a JSON object")
    factory = load_factory(options.cache)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # whatever the cache prints must not corrupt the protocol
    serve(factory, sys.stdin.buffer, replies, options.capabilities)


if __name__ == "__main__":
    main()
