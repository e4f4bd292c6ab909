"""A tiered cache in the suite's world: its two pools, the controller, the tier model, and the
operations a serving engine performs, each a plain call that a repro file can write out.

``TierWorld`` is what both the state machine and a repro file drive: ``serve`` (a request
arrives: match, maybe load back, lock), ``finish`` (it waits for its loads, reads its prefix's
KV, inserts, unlocks), ``complete`` (the suite delivers one pending transfer's completion),
``fail_next`` (the next allocations fail), ``evict``, ``evict_host``, ``quarantine``. Every
operation checks the oracles as it goes (the model's hooks raise on the event that breaks a
rule) and :meth:`TierWorld.check` checks conservation between operations.

A target that declares namespaces (``TierCapabilities(namespaces=True)``) is served under them:
``serve``, ``match`` and ``quarantine`` take ``namespace=``, sent through the same layer as the
plain cache machine's (:mod:`radixcheck.properties.cache.layers`); one the target does not
declare is refused, never sent. A target that declares a
:class:`~radixcheck.properties.cache.policies.Policy` (``TierCapabilities(eviction_policy=...)``)
has its device eviction judged by the policy's key; if the policy takes a priority, the requests
carry the one ``next_priority`` set, as ``priority=`` on ``match_prefix`` and ``insert``.
A target that declares a state pool (``TierCapabilities(second_pool=StatePool())``) gets
``state=`` on every insert, through the same second-pool layer as the plain machine's, and its
``states(handle)`` judged (oracle 20, :mod:`radixcheck.oracles.tier_states`) wherever a
request's forward reads its prefix. A target that declares a sliding window
(``TierCapabilities(second_pool=SlidingWindow(window=W))``) gets ``window=`` on every insert (live
values for the request's last ``W`` tokens) and its ``windows(handle)`` judged there (oracle 20w,
:mod:`radixcheck.oracles.tier_windows`): the oracle follows each write's completion and each
load-back, and a match is judged resumable (it ends where the window at its end is live).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from radixcheck.oracles.tier_amount import TierAmount
from radixcheck.oracles.tier_model import NOT_SERVING, TierModel, as_ints, check_conservation
from radixcheck.oracles.tier_states import TierStates, state_value
from radixcheck.oracles.tier_windows import TierWindows, sent_window
from radixcheck.oracles.violations import (
    FailedBackupViolation,
    HostSlotViolation,
    ReturnValueViolation,
    SlotViolation,
    TenantIsolationViolation,
    TierResidencyViolation,
    shown,
    shown_namespace,
)
from radixcheck.properties import layer_tally
from radixcheck.properties.cache.contract import SlidingWindow, SlotAllocator, StatePool
from radixcheck.properties.cache.layers import UNSAID, Tags, keywords_for, layers_for, namespace_key, with_lifecycle
from radixcheck.properties.cache.tenants import kinds_of
from radixcheck.properties.target import guarded
from radixcheck.properties.tiers.contract import HostPool, TierMatch
from radixcheck.properties.tiers.controller import DevicePool, SuiteController

DEVICE_SLOTS = 40
HOST_SLOTS = 24


@dataclass
class Request:
    tokens: tuple[int, ...]
    values: list[int]  # the cache's slots for its cached prefix
    handle: Any
    namespace: Any = UNSAID
    priority: int = 0

    def __repr__(self) -> str:
        where = "" if self.namespace is UNSAID else f", namespace={self.namespace!r}"
        return f"Request({shown(self.tokens)}{where}, {len(self.values)} cached)"


@dataclass(frozen=True)
class Use:
    """A call that used pages, as a message names it (formatted only if one does)."""

    call: str
    tokens: tuple[int, ...]
    where: str
    operation: int

    def __str__(self) -> str:
        return f"the {self.call}({shown(self.tokens)}{self.where}) of operation {self.operation}"


class TierWorld:
    def __init__(self, factory: Callable[..., Any], page_size: int = 1, write_policy: str = "write_through",
                 device_slots: int = DEVICE_SLOTS, host_slots: int = HOST_SLOTS, seed: int = 0) -> None:
        self.page_size, self.write_policy = page_size, write_policy
        # the pools' sizes and seed, as a replay must build them (a production world's are large)
        self.pools = {"device_slots": device_slots, "host_slots": host_slots, "seed": seed}
        caps = getattr(factory, "tier_capabilities", None)
        self.caps = caps
        self.unsent: tuple[str, ...] = caps.unsent_namespaces if caps is not None else ()
        pool = caps.second_pool if caps is not None else None
        second = None if pool is None else "window" if isinstance(pool, SlidingWindow) else "state"  # its insert keyword
        self.layers = with_lifecycle(layers_for(caps is not None and caps.namespaces, caps.policy if caps else None, second),
                                     caps.lifecycle if caps is not None else "off")  # what the declared parts add to each call
        self._new_model()
        self.priority = 0  # the priority= the next requests carry (a policy that takes one)
        self.device = DevicePool(device_slots, self.model, seed=seed)
        self.host = HostPool(host_slots)
        self.host.on_free = self.model.on_host_free
        self.controller = SuiteController(self.device, self.host, self.model)
        self.cache = factory(self.device, self.host, self.controller, page_size, write_policy)
        self.running: list[Request] = []
        self.log: list[str] = []
        self.operations = 0  # the operations said so far (a repro file's lines, in order)
        self.default_spellings: set[str] = set()  # how the default namespace was sent: "namespace=None", "no namespace="
        self.deviation_met: set[str] = set()  # the known deviations an eviction of this run has followed (said once)
        self.host_deviation_met: set[str] = set()  # the same on the host tier (oracle 4h: its own waiver line, said once)

    def pools_said(self) -> str:
        """The keywords a repro file's world needs to be this one's: its pools' sizes and seed where
        they are not the defaults (a replay with other pools evicts at other moments)."""
        defaults = {"device_slots": DEVICE_SLOTS, "host_slots": HOST_SLOTS, "seed": 0}
        return "".join(f", {name}={value}" for name, value in self.pools.items() if value != defaults[name])

    def _new_model(self) -> None:
        """The tier model of an empty cache, and its second pool's oracle (a state's, a window's)."""
        caps, write_policy = self.caps, self.write_policy
        leaf_first = caps is not None and caps.write_back_order == "leaf_first" and write_policy == "write_back"
        self.model = TierModel(self.page_size, write_policy, chain_checked=not leaf_first,
                               policy=caps.policy if caps is not None else None)
        pool = caps.second_pool if caps is not None else None
        target_only = caps is not None and caps.state_load_back == "target"  # a load-back restores its last page's state only
        self.states = TierStates(self.page_size, target_only) if isinstance(pool, StatePool) else None  # oracle 20 (tiers)
        self.windows = TierWindows(pool.window, self.page_size) if isinstance(pool, SlidingWindow) else None  # 20w
        if self.windows is not None:
            self.windows.clock = lambda: self.operations  # when each window went live, for a finding's message
        self.model.windows = self.windows  # a window makes matches resumable (the model's expected_match)
        self.model.parking = self.states if target_only else None  # so does a state left on host by a load-back

    # ---- plumbing ----------------------------------------------------------------------------

    def _say(self, line: str) -> None:
        self.log.append(line)
        self.operations += 1
        said = line if len(line) <= 100 else f"{line[:80]} … {line[-12:]}"  # a production story's long token lists
        self.model.saying = f"{said} (operation {self.operations})"  # a lock's message names who took it

    def _call(self, name: str, *args: Any, namespace: Any = UNSAID, priority: int = 0, second: Any = None) -> Any:
        self.controller.log = self.log  # the controller's calls appear under the call that made them
        # under the per-operation limit, as the plain machine's calls: a hung tier cache fails, it does not hang the audit
        keywords = keywords_for(self.layers, name, Tags(namespace, priority, second))
        if name in ("match_prefix", "insert", "evict_prefix") and (namespace is UNSAID or namespace is None):
            self.default_spellings.add("no namespace=" if namespace is UNSAID else "namespace=None")
        layer_tally.sent(name, keywords, self.model.policy, bool(self.running))  # the card's "Layers driven together"
        result = guarded(name, getattr(self.cache, name), *args, **keywords)
        self.model.settle()
        return result

    def _tenant(self, namespace: Any, short: bool = False) -> str:
        """How a logged call says its namespace (nothing for the default one said without the keyword);
        ``short``: as a message names it (:func:`shown_namespace`), where a repro line needs it whole.
        A namespace the target does not declare, or of a kind it declares unsent, is refused: never sent."""
        keywords_for(self.layers, "serve", Tags(namespace))  # refuses one the target does not declare
        unsent = set(self.unsent) & (kinds_of(namespace) if namespace is not UNSAID else set())
        if unsent:
            raise ValueError(f"namespace={namespace!r} is of a kind the target declares unsent ({sorted(unsent)}): "
                             "it is never sent")
        if namespace is UNSAID:
            return ""
        return f", namespace={shown_namespace(namespace) if short else repr(namespace)}"

    def pending(self) -> list[int]:
        return [t.number for t in self.controller.pending]

    # ---- the engine's operations -------------------------------------------------------------

    def next_priority(self, priority: int) -> None:
        """The requests that follow carry ``priority`` (sent only to a policy that takes one)."""
        self._say(f"w.next_priority({int(priority)})")
        self.priority = int(priority)

    def fail_next(self, plan: Sequence[bool]) -> None:
        self._say(f"w.fail_next({list(plan)})")
        self.controller.fail_plan = list(plan)

    def _match(self, tokens: tuple[int, ...], namespace: Any) -> TierMatch:
        """``match_prefix``, checked against the model, then a use of what it covered."""
        key = namespace_key(namespace)
        match: TierMatch = self._call("match_prefix", list(tokens), namespace=namespace, priority=self.priority)
        try:
            self.model.check_match(tokens, as_ints(match.device_values), int(match.host_length), key)
        except TierResidencyViolation as exc:
            raise self._default_spelled_twice(exc, key) from None
        if match.host_length:
            layer_tally.touch(layer_tally.HOST_TIER)  # host pages answered
        self.model.use(tokens, key, Use("match_prefix", tokens, self._tenant(namespace, short=True), self.operations),
                       answer=(len(match.device_values), len(match.device_values) + int(match.host_length)))
        return match

    def _default_spelled_twice(self, exc: TierResidencyViolation, key: Any) -> TierResidencyViolation:
        """``exc``, naming the likely cause when this world sent the default namespace both ways: a
        cache (a wire server: ``null`` and an absent field) that keeps ``namespace=None`` apart from a
        call without the keyword answers a match of the other spelling as if nothing were cached."""
        if key is not None or not {"namespace=None", "no namespace="} <= self.default_spellings:
            return exc
        hint = ("; this world sent the default namespace both as namespace=None and with no namespace= "
                "(over the wire: null and an absent field), which the contract makes one namespace")
        return type(exc)(f"{exc}{hint}", exc.check)

    def serve(self, tokens: Sequence[int], load: bool = True, namespace: Any = UNSAID) -> Request:
        """A request arrives (under ``namespace``): match, load back its host part (``load``), lock what it uses."""
        tokens = tuple(int(t) for t in tokens)
        self._say(f"w.serve({list(tokens)}, load={load}{self._tenant(namespace)})")
        request = self._admit(tokens, load, namespace)
        self.running.append(request)
        return request

    def _admit(self, tokens: tuple[int, ...], load: bool, namespace: Any) -> Request:
        """A request's admission: match, load back its host part (``load``), lock what it uses."""
        key = namespace_key(namespace)
        match = self._match(tokens, namespace)
        values = as_ints(match.device_values)
        handle = match.device_handle
        if match.host_length and load:
            reach = tokens[: len(values) + int(match.host_length)]
            first = self._before_load(reach, key)
            self.model.serving = key
            try:
                loaded, handle = self._call("load_back", match.host_handle)
            finally:
                self.model.serving = NOT_SERVING
            values = as_ints(loaded)
            self._judge_load_back(reach, values, key, first)
        self._call("inc_lock_ref", handle)
        self.model.lock(tokens[: len(values)], +1, key)
        return Request(tokens, values, handle, namespace, self.priority)

    def _before_load(self, reach: tuple[int, ...], key: Any) -> int:
        """With a window (or a target-only state pool) declared, the pages of the path ``reach`` on
        device before a load-back moves any (else 0)."""
        return len(self.model.expected_match(reach, key)[0]) // self.page_size if self._resumable() else 0

    def _resumable(self) -> bool:
        """Whether a match resumes short of the full KV: a window, or a state a load-back left on host."""
        return self.windows is not None or self.model.parking is not None

    def _judge_load_back(self, reach: tuple[int, ...], values: list[int], key: Any, first: int) -> None:
        """The load-back of ``reach`` returned the prefix ``values`` (``first``: :meth:`_before_load`):
        judged against the model, and with a window, the window at the loaded path's end comes back
        (a failed load that resumed short moved none)."""
        self.model.check_load_back(reach, values, key, first * self.page_size if self._resumable() else None)
        if self.model.parking is not None:  # the pages it loaded keep their state on host, but its target's
            path = self.model.pages_of(reach[: len(values)], key)
            self.states.on_load_back(path[first:], path[-1] if path and len(values) == len(reach) else None)
        if self.windows is not None and len(values) == len(self.model.expected_match(reach, key)[0]):
            path = self.model.pages_of(reach[: len(values)], key)
            self.windows.on_load_back(path, first, f"the load-back of operation {self.operations}")
            if len(values) <= first * self.page_size:  # the load moved nothing: where does the request resume?
                self.model.check_failed_load_end(reach, values, key, first * self.page_size)

    def match(self, tokens: Sequence[int], namespace: Any = UNSAID) -> None:
        """A lookup alone (a scheduler's cache-aware ordering): a use of the pages, nothing moved."""
        tokens = tuple(int(t) for t in tokens)
        self._say(f"w.match({list(tokens)}{self._tenant(namespace)})")
        self._match(tokens, namespace)

    def finish(self, index: int = -1) -> None:
        """The request's forward (after its loads completed: it reads its prefix's KV), then its insert and unlock."""
        self._say(f"w.finish({index})")
        request = self.running.pop(index)
        self._forward(request)
        self._insert(request)
        self._call("dec_lock_ref", request.handle)
        self.model.lock(request.tokens[: len(request.values)], -1, namespace_key(request.namespace))

    def _forward(self, request: Request) -> None:
        """The request's forward reads its cached prefix's KV: its loads complete first (it waits for them)."""
        waiting = set(request.values)
        for transfer in list(self.controller.pending):
            if transfer.kind == "load" and waiting & set(as_ints(transfer.device_slots)):
                self.complete(transfer.number, said=False)
        want = self.model.content_of(request.tokens, namespace_key(request.namespace))
        got = [self.controller.device_kv.get(s) for s in request.values]
        if got != want[: len(got)]:
            other = self.model.tenant_whose(request.tokens[: len(got)], got, namespace_key(request.namespace))
            if other is not None:  # the KV of another tenant's copy of these tokens: a leak (oracle 10), not a slip
                raise TenantIsolationViolation(f"{request} reads KV {got[:6]} for its cached prefix: {other}'s "
                                               f"KV of those tokens, not its own {want[:6]}")
            raise TierResidencyViolation(f"{request} reads KV {got[:6]} for its cached prefix, not its own {want[:6]}")
        if self.states is not None:  # and the states of its prefix's pages, loaded back or not
            prefix = request.tokens[: len(request.values)]
            pages = self.model.pages_of(prefix, namespace_key(request.namespace))
            self.states.check(f"{request}'s handle", prefix, pages, guarded("states", self.cache.states, request.handle))
        if self.windows is not None:  # and the window values of its prefix's tokens
            prefix = request.tokens[: len(request.values)]
            key = namespace_key(request.namespace)
            pages = self.model.pages_of(prefix, key)
            self.windows.check(f"{request}'s handle", prefix, pages, guarded("windows", self.cache.windows, request.handle),
                               lambda i, value: self.model.window_tenant(prefix, i, value, key))

    def _second(self, tokens: tuple[int, ...], key: Any, on_device: int) -> Any:
        """What an insert of ``tokens`` carries for the second pool (None: none declared): a state
        (:meth:`_state`) or its window values, which the pages after the first ``on_device`` tokens
        (those the insert puts on device; the model's on_insert has cached them) take."""
        if self.windows is None:
            return self._state(tokens, key)
        sent = sent_window(self.model.content_of(tokens, key), self.windows.window)
        pages = self.model.pages_of(tokens, key)[on_device // self.page_size :]
        self.windows.on_insert(pages, on_device // self.page_size, sent, f"the insert of operation {self.operations}")
        return np.asarray(sent, dtype=np.int64)

    def _state(self, tokens: tuple[int, ...], key: Any) -> int | None:
        """The ``state=`` an insert of ``tokens`` carries (None: no state pool declared), recorded on
        the page it ends when page-aligned (the model's on_insert has cached that page)."""
        if self.states is None or not tokens:
            return None
        value = state_value(self.model.content_of(tokens, key)[-1])
        if self.states.parked:  # the pages it covers have their state on device again
            self.states.on_cover(self.model.pages_of(tokens, key))
        if len(tokens) % self.page_size == 0:
            self.states.on_insert(self.model.pages_of(tokens, key)[-1], value)
        return value

    def _insert(self, request: Request) -> None:
        tokens, cached = request.tokens, len(request.values)
        need = len(tokens) - cached
        if need > self.device.available():
            self.evict(need - self.device.available(), said=False)
        if need > self.device.available() or need <= 0:
            return
        new = self.device.alloc(need)
        key = namespace_key(request.namespace)
        content = self.model.content_of(tokens, key)
        for i, slot in enumerate(as_ints(new)):
            self.controller.device_kv[slot] = content[cached + i]
        values = np.concatenate([np.asarray(request.values, dtype=np.int64), new])
        expected = self.model.on_insert(tokens, as_ints(values), key,
                                        Use("insert", tokens, self._tenant(request.namespace, short=True), self.operations),
                                        request.priority)
        prefix_len = self._call("insert", list(tokens), values, namespace=request.namespace, priority=request.priority,
                                second=self._second(tokens, key, expected))
        if not isinstance(prefix_len, (int, np.integer)) or prefix_len < cached:
            raise ReturnValueViolation(f"insert returned {prefix_len!r}; {cached} tokens were cached and locked")
        self.model.check_prefix_len(tokens, int(prefix_len), expected)
        aligned = len(tokens) // self.page_size * self.page_size
        duplicates = as_ints(values[cached : int(prefix_len)])
        tail = as_ints(values[aligned:])
        for slots in (duplicates, tail):
            if slots:
                SlotAllocator.free(self.device, slots)  # the caller's own copies: not the cache's

    def complete(self, number: int, *more: int, said: bool = True) -> None:
        """The suite delivers transfer ``number``'s completion (its copy happens now); ``more``: the
        next ones, in order (a repro file writes a run of completions as one call)."""
        if more:
            for each in (number, *more):
                self.complete(each, said=said)
            return
        if said:
            self._say(f"w.complete({number})")
        transfer = next((t for t in self.controller.pending if t.number == number), None)
        if transfer is None:
            raise ValueError(f"no pending transfer #{number}")
        self.controller.pending.remove(transfer)
        self.controller.copy(transfer)  # the model's on_ack: a write's host copies take their pages' live window values
        self._call("transfer_done", transfer)

    def complete_all(self) -> None:
        for number in self.pending():
            self.complete(number)

    def _raise_kept_order_violation(self, met: set[str]) -> None:
        """Raise the order violation the model kept during an eviction (judged inside the cache's call,
        raised now that it returned), unless the known deviations a waiver named (TierModel.deviations)
        explain it and were already said this run on that tier (``met``): each is said once a run."""
        violation, self.model.order_violation = self.model.order_violation, None
        if violation is None:
            return
        explained = violation.explained_by
        if not explained or not explained <= met:
            met |= explained
            raise violation

    def evict(self, num_tokens: int, said: bool = True) -> int:
        if said:
            self._say(f"w.evict({num_tokens})")
        before = len(self.device.freed_log)
        self.model.evicting = num_tokens  # its picks are judged for order (oracle 4t)
        self.model.order_violation = None
        self.model.amount = amount = TierAmount("device", num_tokens)  # and its steps for their amount
        try:
            freed = self._call("evict", num_tokens)
        finally:
            self.model.evicting = self.model.amount = None
        self._raise_kept_order_violation(self.deviation_met)
        if freed != len(self.device.freed_log) - before:
            raise ReturnValueViolation(f"evict({num_tokens}) returned {freed}, but freed "
                                       f"{len(self.device.freed_log) - before} device slots")
        self._check_amount(amount, self.model.leaves.oldest_candidate((), self.model.busy))
        return int(freed)

    def evict_host(self, num_tokens: int) -> int:
        self._say(f"w.evict_host({num_tokens})")
        before = len(self.host.freed_log)
        self.model.evicting_host = num_tokens  # its host-only picks are judged for order (oracle 4h)
        self.model.order_violation = None
        self.model.amount = amount = TierAmount("host", num_tokens)  # and its frees for their amount
        try:
            freed = self._call("evict_host", num_tokens)
        finally:
            self.model.evicting_host = self.model.amount = None
        self._raise_kept_order_violation(self.host_deviation_met)
        if freed != len(self.host.freed_log) - before:
            raise ReturnValueViolation(f"evict_host({num_tokens}) returned {freed}, but freed "
                                       f"{len(self.host.freed_log) - before} host slots")
        self._check_amount(amount, self.model.host_leaves.coldest(()))
        return int(freed)

    def _check_amount(self, amount: TierAmount, left: Any) -> None:
        """The amount of the eviction that just returned (``left``: a candidate it left). A cache that
        lost track of a page (a leak) stops short beside it: conservation names that cause first."""
        try:
            amount.check(left)
        except AssertionError:
            self.check()
            raise

    def quarantine(self, tokens: Sequence[int], namespace: Any = UNSAID) -> None:
        """A lookup, ``evict_prefix`` (no request running), then the never-saw check on both tiers."""
        tokens = tuple(int(t) for t in tokens)
        self._say(f"w.quarantine({list(tokens)}{self._tenant(namespace)})")
        self._match(tokens, namespace)  # what the operator sees first
        doomed, ghosts = self.model.quarantine(tokens, namespace_key(namespace))
        self.model.quarantining = (doomed, namespace_key(namespace))  # a free of any other page inside the call fails
        try:
            removed = self._call("evict_prefix", list(tokens), namespace=namespace)
        finally:
            self.model.quarantining = None
        if removed > len(doomed) * self.page_size and ghosts:
            raise FailedBackupViolation(f"evict_prefix({shown(tokens)}) removed {removed} tokens, {len(doomed) * self.page_size} "
                                        f"were cached: it still held {ghosts[0]}, which left the device when its backup "
                                        "had failed")
        if removed != len(doomed) * self.page_size:
            raise ReturnValueViolation(f"evict_prefix({shown(tokens)}) returned {removed}, but {len(doomed) * self.page_size} "
                                       "cached tokens were below the cut")
        self._match(tokens, namespace)

    def reset(self) -> None:
        """``reset()`` (``supports_reset``): the whole cache flushed, as an engine flushes it between
        runs. Sent with no request running; the transfers still in flight land first, in order (part
        of this operation: a reduced repro file that left out a completion still flushes). Its frees
        are not judged one by one (a flush takes every page, locked by no one); what it leaves is: no
        slot allocated on either tier (a leak, oracle 3), both sizes 0. The model then starts over
        with an empty tree (the known deviations a waiver keeps, fresh)."""
        if self.running or self.callers_slots():
            raise ValueError("reset is sent only with no request running")
        self._say("w.reset()")
        for number in self.pending():
            self.complete(number, said=False)
        self.model.flushing = True
        try:
            self._call("reset")
        finally:
            self.model.flushing = False
        deviations = [type(deviation)() for deviation in self.model.deviations]
        pages, hosts = self.model.sizes()
        self._new_model()
        self.model.deviations = deviations
        self.device.model = self.model
        self.host.on_free = self.model.on_host_free
        self.controller.model = self.model
        device, host = sorted(self.device.in_use), sorted(self.host.in_use)
        cached = f"(the tree held {pages} tokens on device and {hosts} on host)"
        if host:
            raise HostSlotViolation(f"host slots leaked: reset() left {len(host)} host slots allocated {host[:8]} {cached}; "
                                    "a flush frees both tiers (SGLang's HiRadixCache.reset clears the host pool)")
        if device:
            raise SlotViolation(f"device slots leaked: reset() left {len(device)} device slots allocated {device[:8]} {cached}")
        self.check()  # both sizes 0 now

    def callers_slots(self) -> set[int]:
        """The device slots the running requests hold of their own between operations (none: a
        request here is served and finished whole; see :mod:`radixcheck.properties.tiers.lifecycle`)."""
        return set()

    def check(self) -> None:
        """Conservation on each tier, and the sizes (between operations)."""
        check_conservation(self.model, set(self.device.in_use), self.callers_slots(), set(self.host.in_use),
                           int(self.cache.device_size()), int(self.cache.host_size()))
