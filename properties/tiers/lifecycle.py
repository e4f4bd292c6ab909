"""The request lifecycle on the tiers: running requests through a tiered cache, for a target that
declares ``TierCapabilities(lifecycle="tree")`` (the lifecycle layer,
:class:`~radixcheck.properties.cache.layers.LifecycleLayer`).

The tree calls, played as SGLang's scheduler plays them over ``HiRadixCache``, while the suite
holds transfers back (:mod:`radixcheck.properties.tiers.machine`):

* **admit** (:meth:`LifecycleTierWorld.admit`): match, load back the host part, lock; the load
  may stay in flight;
* **compute**: the forward waits for the request's loads (it reads its prefix's KV), then computes
  the next tokens into device slots of the request's own;
* **publish** (``cache_unfinished_req``): insert everything computed so far, free the duplicates,
  match the inserted pages again, lock the new handle, unlock the old one; the request then reads
  the tree's slots. Write-through backups of the earlier chunks may still be in flight, and under
  write-back a page it holds may have its write-back pending;
* **end**: ``finish`` (the final insert, its duplicates and unaligned tail freed, unlock), or
  ``retract`` / ``abort`` (every slot of its own freed, unlock) without waiting for anything: its
  load-back may be in flight, the write-backs of its pages pending. A retracted request is queued
  to run again and must match what it published.

**What judges it.** The tier oracles, at every event, fed exactly what an engine frees: device
conservation counts the running requests' own slots beside the cache's
(:meth:`LifecycleTierWorld.callers_slots`), so a page both cached and freed, or held by nobody,
shows at once; a page a request still holds locked that leaves the device is oracle 2; a slot a
transfer still uses that is freed is oracle 14; a page no request holds and no transfer uses is a
candidate for eviction, so a lock the cache leaves behind shows when a newer page goes first
(oracle 4t); a publish's re-match and every match after it are judged by the tier model.

**Scenarios.** ``abort_during_load``: a prompt on host only is admitted by one request whose load
stays in flight, perhaps a second request is admitted on it too, and the first is retracted or
aborted before the load lands; then the loads complete, a fresh prompt is served, and the device
is evicted. ``publish_during_backup``: a request publishes chunk after chunk while the backups of
the earlier ones are pending (under write-back, on a prefix whose write-back is pending), then
ends before or after they land.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, precondition, rule

from radixcheck.oracles.tier_model import as_ints
from radixcheck.oracles.violations import ReturnValueViolation
from radixcheck.properties import layer_tally
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.cache.layers import UNSAID, namespace_key
from radixcheck.properties.cache.tenants import fixed_namespaces
from radixcheck.properties.tiers.world import Request, TierWorld, Use

ENDINGS = ("finish", "retract", "abort")
MAX_LIVES = 3  # lifecycle requests running at once (beside the plain requests)


@dataclass
class Live(Request):
    """A running lifecycle request: ``values`` are the cache's slots of its cached prefix (locked
    through ``handle``), ``own`` the slots it computed since, for the tokens after them."""

    own: list[int] = field(default_factory=list)

    @property
    def filled(self) -> int:
        return len(self.values) + len(self.own)

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, {len(self.own)} own)"


class LifecycleTierWorld(TierWorld):
    """The tier world plus running requests (the module docstring): ``admit``, ``compute``,
    ``publish``, ``end``; ``lives`` are the running ones, by index, as a repro file names them."""

    def __init__(self, factory: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(factory, *args, **kwargs)
        self.lives: list[Live] = []
        self.requeued: list[tuple[tuple[int, ...], Any]] = []  # what retracted requests had computed

    # ---- the steps -----------------------------------------------------------------------------

    def admit(self, tokens: Any, load: bool = True, namespace: Any = UNSAID) -> Live:
        """A request is admitted: matched, its host part loaded back (left in flight), locked."""
        tokens = tuple(int(t) for t in tokens)
        self._say(f"w.admit({list(tokens)}, load={load}{self._tenant(namespace)})")
        layer_tally.request(namespace_key(namespace), self.priority)
        request = self._admit(tokens, load, namespace)
        live = Live(request.tokens, request.values, request.handle, request.namespace, request.priority)
        self.lives.append(live)
        return live

    def compute(self, index: int, tokens: int) -> None:
        """The request's forward: it waits for its loads and reads its prefix, then computes its
        next ``tokens`` tokens into fresh device slots of its own (none if the pool has no room
        after an eviction: the engine would retract it)."""
        self._say(f"w.compute({index}, {tokens})")
        live = self.lives[index]
        layer_tally.request(namespace_key(live.namespace), live.priority)
        self._forward(live)
        n = min(tokens, len(live.tokens) - live.filled)
        if n <= 0:
            return
        if n > self.device.available():
            self.evict(n - self.device.available(), said=False)
        if n > self.device.available():
            return
        fresh = as_ints(self.device.alloc(n))
        content = self.model.content_of(live.tokens, namespace_key(live.namespace))
        for i, slot in enumerate(fresh):
            self.controller.device_kv[slot] = content[live.filled + i]
        live.own += fresh

    def _insert_computed(self, live: Live) -> tuple[tuple[int, ...], int, int]:
        """Insert everything ``live`` computed; free its duplicates. Returns the tokens, their aligned length and ``prefix_len``."""
        tokens = live.tokens[: live.filled]
        aligned = len(tokens) // self.page_size * self.page_size
        row = np.asarray(live.values + live.own, dtype=np.int64)
        key = namespace_key(live.namespace)
        expected = self.model.on_insert(tokens, as_ints(row), key, Use("insert", tokens, self._tenant(live.namespace, short=True),
                                                                       self.operations), live.priority)
        prefix_len = self._call("insert", list(tokens), row, namespace=live.namespace, priority=live.priority,
                                second=self._second(tokens, key, expected))
        if not isinstance(prefix_len, (int, np.integer)) or prefix_len < len(live.values):
            raise ReturnValueViolation(f"insert returned {prefix_len!r}; {len(live.values)} tokens were cached and locked")
        self.model.check_prefix_len(tokens, int(prefix_len), expected)
        duplicates = as_ints(row[len(live.values) : int(prefix_len)])
        if duplicates:
            SlotAllocator.free(self.device, duplicates)  # the request's own copies of cached pages
        return tokens, aligned, int(prefix_len)

    def publish(self, index: int) -> None:
        """``cache_unfinished_req``: insert what the request computed, free its duplicates, match the
        inserted pages again, lock the new handle, unlock the old one; it reads the tree's slots from now on."""
        self._say(f"w.publish({index})")
        live = self.lives[index]
        layer_tally.request(namespace_key(live.namespace), live.priority)
        if live.filled < self.page_size:
            return
        tokens, aligned, _ = self._insert_computed(live)
        match = self._match(tokens[:aligned], live.namespace)
        values = as_ints(match.device_values)  # ``aligned`` of them, or fewer with a window (the model checked the match)
        key = namespace_key(live.namespace)
        beyond = (live.values + live.own)[aligned:]  # its own slots after the cached pages
        if len(values) < aligned and beyond:  # a window tombstoned on cached pages it covered stops the match short:
            SlotAllocator.free(self.device, beyond)  # it resumes after ``values`` and recomputes the rest
            beyond = []
        self._call("inc_lock_ref", match.device_handle)
        self.model.lock(tokens[: len(values)], +1, key)
        self._call("dec_lock_ref", live.handle)
        self.model.lock(live.tokens[: len(live.values)], -1, key)
        live.own = beyond
        live.values, live.handle = values, match.device_handle

    def end(self, index: int, outcome: str) -> None:
        """``finish`` (the final insert; its duplicates and unaligned tail freed), ``retract`` or
        ``abort`` (every slot of its own freed, without waiting for its transfers); then the unlock."""
        if outcome not in ENDINGS:
            raise ValueError(f"outcome must be one of {ENDINGS}, got {outcome!r}")
        self._say(f"w.end({index}, {outcome!r})")
        live = self.lives.pop(index)
        layer_tally.request(namespace_key(live.namespace), live.priority)
        if outcome == "finish":
            self._forward(live)
            tokens, aligned, _ = self._insert_computed(live)
            tail = (live.values + live.own)[aligned:]
            if tail:
                SlotAllocator.free(self.device, tail)
        elif live.own:
            SlotAllocator.free(self.device, live.own)
        self._call("dec_lock_ref", live.handle)
        self.model.lock(live.tokens[: len(live.values)], -1, namespace_key(live.namespace))
        if outcome == "retract" and live.filled:
            self.requeued = (self.requeued + [(live.tokens[: live.filled], live.namespace)])[-4:]

    def abort_all(self) -> None:
        """A flush or an ``evict_prefix`` aborts the running requests first, as a server does."""
        with layer_tally.aside():  # the flush's or quarantine's doing: no layer the requests carry is driven here
            while self.lives:
                self.end(len(self.lives) - 1, "abort")

    def quarantine(self, tokens: Any, namespace: Any = UNSAID) -> None:
        self.abort_all()
        super().quarantine(tokens, namespace)

    def reset(self) -> None:
        """Refused while a lifecycle request runs (it holds a lock on pages a flush would take)."""
        if self.lives:
            raise ValueError("reset is sent only with no request running")
        super().reset()

    def callers_slots(self) -> set[int]:
        return {s for live in self.lives for s in live.own}


def _lives(self: Any) -> bool:
    return bool(self.world.lives)


def _room(self: Any) -> bool:
    return len(self.world.lives) < MAX_LIVES


def _idle(self: Any) -> bool:
    return not self.world.running and not self.world.lives


class TierLifecycleRules:
    """The lifecycle's rules, mixed into a tier machine whose world is a :class:`LifecycleTierWorld`
    (:func:`~radixcheck.properties.tiers.machine.tier_machine_for` does it for ``lifecycle="tree"``)."""

    world: LifecycleTierWorld
    page_size: int
    sequences = Bundle("sequences")  # the tier machine's bundle, by its name

    _to_host: Callable[[tuple[int, ...]], None]  # the tier machine's: evict until the pages are on host only

    def _request_namespace(self, data: st.DataObject) -> Any:
        """The namespace a running request carries: a tenant's (the default among them) when the target
        declares namespaces, as the plain machine's lifecycle draws it; else none, never sent. Under
        ``lifecycle="requests"`` the cache's own request methods must read ``req.namespace``; under
        ``"tree"`` the suite sends ``namespace=`` on each tier call of the request itself."""
        caps = getattr(type(self).factory, "tier_capabilities", None)
        if caps is None or not caps.namespaces:
            return UNSAID
        return data.draw(fixed_namespaces(caps.unsent_namespaces), label="request namespace")

    @precondition(_room)
    @rule(base=sequences, cut=st.integers(0, 8), tail=st.lists(st.integers(0, 2), max_size=8), load=st.booleans(),
          data=st.data())
    def admit_request(self, base: tuple[int, ...], cut: int, tail: list[int], load: bool, data: st.DataObject) -> None:
        """A request is admitted on a prompt (its load-back, if any, left in flight), under a tenant's namespace
        when the target declares namespaces."""
        self.world.admit(base[: cut * self.page_size] + tuple(tail), load=load, namespace=self._request_namespace(data))

    @precondition(_lives)
    @rule(pick=st.integers(0, 7), tokens=st.integers(1, 5))
    def compute_chunk(self, pick: int, tokens: int) -> None:
        self.world.compute(pick % len(self.world.lives), tokens)

    @precondition(_lives)
    @rule(pick=st.integers(0, 7))
    def publish_chunk(self, pick: int) -> None:
        self.world.publish(pick % len(self.world.lives))

    @precondition(_lives)
    @rule(pick=st.integers(0, 7), outcome=st.sampled_from(ENDINGS))
    def end_request(self, pick: int, outcome: str) -> None:
        self.world.end(pick % len(self.world.lives), outcome)

    @precondition(lambda self: bool(self.world.requeued) and _room(self))
    @rule(pick=st.integers(0, 3))
    def readmit_retracted(self, pick: int) -> None:
        """A retracted request runs again: it must match what it published (checked in the match)."""
        tokens, namespace = self.world.requeued.pop(pick % len(self.world.requeued))
        self.world.admit(tokens, namespace=namespace)

    @precondition(_idle)
    @rule(base=sequences, tail=st.lists(st.integers(0, 2), max_size=4), second=st.booleans(),
          outcome=st.sampled_from(("retract", "abort")), filler=st.lists(st.integers(0, 2), min_size=1, max_size=3),
          data=st.data())
    def abort_during_load(self, base: tuple[int, ...], tail: list[int], second: bool, outcome: str, filler: list[int],
                          data: st.DataObject) -> None:
        """A prompt on host only; a request is admitted on it and its load-back stays in flight; a
        second request (if ``second``) is admitted on it too (the loading pages count as on device);
        the first is retracted or aborted before the load lands; the second computes (waiting for
        the load), publishes and finishes. Then every transfer lands, a fresh prompt is served, and
        the device is evicted: no page may be held by a lock nobody owns. Under namespaces the prompt
        is one tenant's (drawn), and so are both requests."""
        world, p = self.world, self.page_size
        namespace = self._request_namespace(data)
        world.serve(base, namespace=namespace)
        world.finish()
        self._to_host(base)
        world.admit(base, namespace=namespace)
        if second:
            world.admit(base + tuple(tail) * p, namespace=namespace)
        world.end(0, outcome)
        if second:
            world.compute(0, len(tail) * p + 1)
            world.publish(0)
            world.end(0, "finish")
        world.complete_all()
        world.serve((3,) * p + tuple(filler) * p)  # a prefix no other request has: the newest page
        world.finish()
        world.complete_all()
        world.evict(10**6)

    @precondition(_idle)
    @rule(base=sequences, chunks=st.lists(st.integers(1, 4), min_size=1, max_size=3), outcome=st.sampled_from(ENDINGS),
          land=st.integers(0, 3), tail=st.lists(st.integers(0, 2), min_size=1, max_size=6), early=st.booleans())
    def publish_during_backup(self, base: tuple[int, ...], chunks: list[int], outcome: str, land: int, tail: list[int],
                              early: bool) -> None:
        """A prompt cached and, under write-back, evicted so that its write-back is pending; a
        request on it plus a tail publishes chunk after chunk while those backups (and, under
        write-through, its own chunks' backups) are pending; ``land`` of them complete before it
        ends as ``outcome``, the rest after. With ``early``, the backups pending at its admission
        land before its first chunk: a write-back that completes under the admitted request's lock
        must leave its device pages where they are."""
        world, p = self.world, self.page_size
        world.serve(base)
        world.finish()
        if world.write_policy == "write_back":
            world.evict(len(base))
        world.admit(base + tuple(tail) * p)
        if early:
            world.complete_all()
        for size in chunks:
            world.compute(0, size * p)
            world.publish(0)
        for number in world.pending()[:land]:
            world.complete(number)
        world.end(0, outcome)
        world.complete_all()
        world.evict(10**6)
