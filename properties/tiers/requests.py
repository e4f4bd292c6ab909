"""The request lifecycle on the tiers, run by the cache's own request methods: the world of a
target that declares ``TierCapabilities(lifecycle="requests")`` (the tier contract's "The request
lifecycle on the tiers").

The steps are those of :class:`~radixcheck.properties.tiers.lifecycle.LifecycleTierWorld` (admit,
compute, publish, end; the same rules and stories drive them, and a repro file writes the same
lines), but each one the cache does itself is one call on a
:class:`~radixcheck.properties.tiers.contract.TierRequest` the suite owns: admission is
``match_req`` then ``lock_req`` (which loads the host part back, SGLang's ``init_load_back``), a
publish is ``cache_unfinished_req``, an end is ``cache_finished_req``. The suite keeps its own
account of the request (its cached prefix, its own slots) and judges what the cache leaves in the
request against the tier model after each call:

* the match (device part, host part) and the load-back's prefix, as the ``"tree"`` admission's;
* after a publish, the request reads the tree's slots for every cached page and is protected up to
  them (never a duplicate the publish freed);
* the frees: the device pool accepts a free of the request's own slots only inside its request
  method (:attr:`~radixcheck.properties.tiers.controller.DevicePool.releasable`); every other free
  is a cached page's, judged by the tier model (oracle 14 for a slot a load fills, oracle 2 for a
  page a request holds); conservation between steps finds a duplicate kept (a leak) or an own
  slot freed that the request still holds;
* a lock left behind or missing shows in eviction (oracles 4t and 2), as on the ``"tree"`` world.

**Stories.** Beside the lifecycle rules, :class:`TierRequestRules` adds ``evict_under_a_publish``: a
request publishes chunks whose write-through backups are pending, some land, and the device is
evicted while it still runs: its lock, not a pending write, must keep the pages it reads; and
``racing_publish``: two requests on one prompt compute the same chunk, the second's publish is all
duplicates (it must read the first's pages from then on), and the first ends as a finish, a
retract or an abort while the second goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from radixcheck.oracles.tier_model import NOT_SERVING, as_ints
from radixcheck.oracles.tier_states import NONE, state_value
from radixcheck.oracles.tier_windows import sent_window
from radixcheck.oracles.violations import ReturnValueViolation, SlotViolation, TierResidencyViolation, shown
from radixcheck.properties import layer_tally
from radixcheck.properties.cache.layers import UNSAID, namespace_key
from radixcheck.properties.tiers.contract import TierCapabilities, TierRequest
from radixcheck.properties.tiers.lifecycle import ENDINGS, LifecycleTierWorld, Live, TierLifecycleRules
from radixcheck.properties.tiers.world import TierWorld, Use


@dataclass(repr=False)
class RequestLive(Live):
    """A running request of the cache's own methods: the suite's account (``values``, ``own``) beside
    the :class:`TierRequest` the cache reads and updates."""

    request: TierRequest | None = None


class RequestsTierWorld(LifecycleTierWorld):
    """The lifecycle world whose admission, publish and end are the cache's request methods."""

    def _running(self, index: int) -> tuple[RequestLive, TierRequest]:
        """Running request ``index``: the suite's account of it, and the request the cache reads."""
        live = self.lives[index]
        assert isinstance(live, RequestLive) and live.request is not None  # admit made it
        return live, live.request

    def _request_call(self, name: str, live: RequestLive, *args: Any) -> None:
        """A request method of ``live``'s, which may free the slots ``live`` holds of its own (and only
        in this call)."""
        self.device.releasable = set(live.own)
        try:
            self._call(name, live.request, *args)
        finally:
            self.device.releasable = set()

    def _prefix(self, req: TierRequest, call: str) -> list[int]:
        """What ``call`` left as the request's cached prefix: ``filled == protected``, their slots."""
        if req.filled != req.protected or len(req.slots) < req.filled:
            raise ReturnValueViolation(f"{call} left {req} with {len(req.slots)} slots: filled and protected must both be "
                                       "its cached prefix's length")
        return as_ints(np.asarray(req.slots)[: req.filled])

    def admit(self, tokens: Any, load: bool = True, namespace: Any = UNSAID) -> RequestLive:
        """``match_req`` (judged as a match), then ``lock_req``: the host part loaded back (``load``;
        else the suite zeroes ``host_length`` first) and the prefix locked."""
        tokens = tuple(int(t) for t in tokens)
        self._say(f"w.admit({list(tokens)}, load={load}{self._tenant(namespace)})")
        key = namespace_key(namespace)
        layer_tally.request(key, self.priority)  # the request carries both: no keyword says them
        req = TierRequest(tokens, key, self.priority)
        self._call("match_req", req)
        values = self._prefix(req, f"match_req({shown(tokens)})")
        if req.host_length:
            layer_tally.touch(layer_tally.HOST_TIER)  # host pages answered
        self.model.check_match(tokens, values, int(req.host_length), key)
        self.model.use(tokens, key, Use("match_req", tokens, self._tenant(namespace, short=True), self.operations),
                       answer=(len(values), len(values) + int(req.host_length)))
        reach = tokens[: len(values) + int(req.host_length)]
        loads = bool(req.host_length) and load
        if not load:
            req.host_length = 0  # the scheduler declines the load-back
        first = self._before_load(reach, key) if loads else 0
        self.model.serving = key if loads else NOT_SERVING  # a load-back under N reads only N's host copies
        try:
            self._call("lock_req", req)
        finally:
            self.model.serving = NOT_SERVING
        after = self._prefix(req, f"lock_req({req})")
        if loads:
            self._judge_load_back(reach, after, key, first)
        elif after != values:
            raise TierResidencyViolation(f"lock_req({req}) without a load-back changed the request's prefix from "
                                         f"{shown(values)} to {shown(after)}")
        self._hand_second(req, key)
        self.model.lock(tokens[: len(after)], +1, key)
        live = RequestLive(tokens, after, req.handle, namespace, self.priority, request=req)
        self.lives.append(live)
        return live

    def compute(self, index: int, tokens: int) -> None:
        live, req = self._running(index)
        before = len(live.own)
        super().compute(index, tokens)
        fresh = live.own[before:]
        if fresh:
            req.compute(fresh)
            self._hand_second(req, namespace_key(live.namespace))

    def _hand_second(self, req: TierRequest, key: Any) -> None:
        """With a second pool, what the request holds of it after its ``filled`` tokens (the contract's
        "A second pool with the request methods"): the state after them (``req.state``), or each
        one's window value, ``-1`` where it slid out of the request's window (``req.window``). The
        suite's values, as the tier calls' ``state=`` and ``window=`` carry them."""
        tokens = req.tokens[: req.filled]
        if self.states is not None or self.windows is not None:
            layer_tally.touch(layer_tally.SECOND_POOL)  # the request carries its state or window: no keyword says it
        content = self.model.content_of(tokens, key)
        if self.states is not None:
            req.state = state_value(content[-1]) if tokens else NONE
        if self.windows is not None:
            req.window = np.asarray(sent_window(content, self.windows.window), dtype=np.int64)

    def publish(self, index: int) -> None:
        """``cache_unfinished_req``: the request must then read the tree's slots of its aligned prefix."""
        self._say(f"w.publish({index})")
        live, req = self._running(index)
        layer_tally.request(namespace_key(live.namespace), live.priority)
        if live.filled < self.page_size:
            return
        key = namespace_key(live.namespace)
        tokens = live.tokens[: live.filled]
        aligned = len(tokens) // self.page_size * self.page_size
        row = live.values + live.own
        what = Use("cache_unfinished_req", tokens, self._tenant(live.namespace, short=True), self.operations)
        on_device = self.model.on_insert(tokens, row, key, what, live.priority)  # before the call: its backups start inside it
        self._second(tokens, key, on_device)  # what its insert takes of the request's state or window (the oracle's record)
        self._request_call("cache_unfinished_req", live)
        got = as_ints(np.asarray(req.slots)[: req.protected])
        cached = self.model.rematch(f"the re-match of cache_unfinished_req({req})", tokens[:aligned], got, key)
        # its re-match, checked, is used as the cache answered it (as the admission's match): the device
        # end the request reads settles the window maybes it relied on; its host part is not reported
        self.model.use(tokens[:aligned], key, what, answer=(len(got), None))
        # a window tombstoned on cached pages it covered stops the re-match short: the request resumes
        # there (it frees its slots after the cached pages and recomputes them), as the "tree" publish does
        own = row[aligned:] if len(cached) == aligned else []
        if req.protected != len(cached) or got != cached:
            freed = sorted(set(got) - set(cached) - self.device.in_use)
            raise SlotViolation(f"after cache_unfinished_req({req}) the request reads {shown(got)} (protected "
                                f"{req.protected}) where the tree holds {shown(cached)}"
                                + (f": slots {freed[:8]} were freed and it still reads them" if freed else ""))
        if req.filled != len(cached) + len(own):
            raise ReturnValueViolation(f"after cache_unfinished_req({req}) the request has {req.filled} tokens filled; it "
                                       f"resumes after {len(cached) + len(own)} (its re-match's {len(cached)}"
                                       + (", and its own tail after them)" if own else ": a window stopped it short)"))
        self.model.lock(tokens[: len(cached)], +1, key)
        self.model.lock(live.tokens[: len(live.values)], -1, key)
        live.own = own
        live.values, live.handle = cached, req.handle
        if len(cached) < aligned:
            self._hand_second(req, key)

    def end(self, index: int, outcome: str) -> None:
        """``cache_finished_req(req, insert)``: a finish (after its loads) inserts; a retract or an
        abort frees the request's own slots only, whatever is in flight."""
        if outcome not in ENDINGS:
            raise ValueError(f"outcome must be one of {ENDINGS}, got {outcome!r}")
        self._say(f"w.end({index}, {outcome!r})")
        live, _ = self._running(index)
        layer_tally.request(namespace_key(live.namespace), live.priority)
        key = namespace_key(live.namespace)
        if outcome == "finish":
            self._forward(live)
            tokens = live.tokens[: live.filled]
            on_device = self.model.on_insert(tokens, live.values + live.own, key,
                                             Use("cache_finished_req", tokens, self._tenant(live.namespace, short=True),
                                                 self.operations), live.priority)
            self._second(tokens, key, on_device)
        self._request_call("cache_finished_req", live, outcome == "finish")
        self.lives.pop(index)
        self.model.lock(live.tokens[: len(live.values)], -1, key)
        if outcome == "retract" and live.filled:
            self.requeued = (self.requeued + [(live.tokens[: live.filled], live.namespace)])[-4:]


def _idle(self: TierRequestRules) -> bool:
    return not self.world.running and not self.world.lives


class TierRequestRules(TierLifecycleRules):
    """The lifecycle rules plus a story for a cache that runs its own request methods (module docstring)."""

    world: RequestsTierWorld

    @precondition(_idle)
    @rule(base=TierLifecycleRules.sequences, tail=st.lists(st.integers(0, 2), min_size=1, max_size=6),
          chunks=st.lists(st.integers(1, 4), min_size=1, max_size=3), land=st.integers(0, 3),
          outcome=st.sampled_from(ENDINGS))
    def evict_under_a_publish(self, base: tuple[int, ...], tail: list[int], chunks: list[int], land: int,
                              outcome: str) -> None:
        """A request on a prompt plus a tail publishes chunk after chunk (their backups pending);
        ``land`` backups complete; the device is evicted while it runs; it ends as ``outcome``."""
        world, p = self.world, self.page_size
        world.admit(base + tuple(tail) * p)
        for size in chunks:
            world.compute(0, size * p)
            world.publish(0)
        for number in world.pending()[:land]:
            world.complete(number)
        world.evict(10**6)
        world.end(0, outcome)
        world.complete_all()

    @precondition(lambda self: len(self.world.lives) <= 1)
    @rule(base=TierLifecycleRules.sequences, tail=st.lists(st.integers(0, 2), min_size=1, max_size=6),
          size=st.integers(1, 4), outcome=st.sampled_from(ENDINGS), load=st.booleans())
    def racing_publish(self, base: tuple[int, ...], tail: list[int], size: int, outcome: str, load: bool) -> None:
        """Two requests on one prompt plus a tail compute the same chunk and publish it in turn; the
        first ends as ``outcome``; the second computes one more token, publishes and finishes."""
        world, p = self.world, self.page_size
        prompt = base + tuple(tail) * p
        first, second = len(world.lives), len(world.lives) + 1
        world.admit(prompt, load=load)
        world.admit(prompt, load=load)
        for index in (first, second):
            world.compute(index, size * p)
            world.publish(index)
        world.end(first, outcome)
        world.compute(first, 1)  # the second, now at the first's index
        world.publish(first)
        world.end(first, "finish")

    @precondition(lambda self: _idle(self) and (self.world.states is not None or self.world.windows is not None))
    @rule(base=TierLifecycleRules.sequences, tail=st.lists(st.integers(0, 2), min_size=1, max_size=3),
          cut=st.integers(1, 6), chunks=st.lists(st.integers(1, 5), min_size=1, max_size=3),
          outcome=st.sampled_from(ENDINGS), publish=st.booleans())
    def chunks_beside_a_second_pool(self, base: tuple[int, ...], tail: list[int], cut: int, chunks: list[int],
                                    outcome: str, publish: bool) -> None:
        """With a second pool: a prompt at least a window longer than ``base`` is cached (its window
        live at its end only); a request on its first ``cut`` pages and fresh tokens computes chunks
        of any length (ending inside a page too), publishing each if ``publish`` (a re-match may stop
        short at a tombstoned window of the pages the tree had), and ends as ``outcome``; the prompt
        is served again and reads its pages' states or windows."""
        world, p = self.world, self.page_size
        window = world.windows.window if world.windows is not None else 1
        extension = tuple(tail) * p
        extension *= -(-window // len(extension))
        prompt = base + extension
        world.serve(prompt)
        world.finish()
        world.complete_all()
        world.admit(prompt[: min(cut, len(prompt) // p) * p] + (3,) * (2 * p + 1))
        for size in chunks:
            world.compute(0, size)
            if publish:
                world.publish(0)
        world.compute(0, 1)
        world.end(0, outcome)
        world.serve(prompt)
        world.finish()


def world_class_for(caps: TierCapabilities | None) -> type[TierWorld]:
    """The tier world a target's declared lifecycle calls for (``"tree"``, ``"requests"``, or none)."""
    lifecycle = caps.lifecycle if caps is not None else "off"
    return RequestsTierWorld if lifecycle == "requests" else LifecycleTierWorld if lifecycle == "tree" else TierWorld
