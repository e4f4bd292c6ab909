"""Running requests over a second pool: the combinations the window machine alone does not drive
(the contract's "A second pool" with "The request lifecycle").

:class:`~radixcheck.properties.cache.hybrid.WindowLifecycleMachine` plays the engine's steps with
the tree calls over a sliding window (``lifecycle="tree"``). This module adds the rest, each as the
same machine with one part more, over the same models:

* :class:`WindowRequestsMachine`: a sliding window with ``lifecycle="requests"``. The cache's own
  request methods do each step; the request's ``Request.window`` holds the window slots it holds
  *of its own* (``-1`` elsewhere: slid out, or the tree's). After ``cache_unfinished_req`` the
  tree has taken the own values of the tokens it newly caches, and the request has freed its
  duplicates where the tree holds a live value; ``Request.window`` must say so (a request that
  still names a value the tree took frees it again at its end). ``cache_finished_req`` frees every
  window slot the request still holds of its own.
* :class:`StateLifecycleMachine`: a state pool with either lifecycle. A running request holds the
  state after its filled tokens (``Request.state``, its own: each chunk computes a new one and
  frees the old); a publish or a finish that ends on a page boundary brings it to the insert,
  which takes it where the prefix has no live state (the request then holds none); a finish, a
  retract or an abort frees a state the request still holds. A publish is deferred while the
  re-match would stop short of it (no live state at its end after the insert).

**What judges it**, beside every oracle of the window and lifecycle machines: each request
method's second-pool frees are exactly what the model says (3s: the request's duplicates where the
tree holds a live value, what it holds of its own at its end, the values of pages an unlock
freed); after a publish the request's own second-pool fields are the model's; the locks a request
method takes and drops pin and unpin the window (state) its prefix needs (22).

**Scenario.** ``finish_after_decode``: a request prefills a chunk, publishes it, decodes past it
and finishes, so its finish brings second-pool values the insert takes (a finish right after a
publish brings none: the publish took them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from radixcheck.oracles.second_pool import NONE, check_second_frees
from radixcheck.oracles.violations import Check, SecondSlotViolation
from radixcheck.properties.cache.hybrid import StateMachine, WindowLifecycleMachine
from radixcheck.properties.cache.lifecycle import CHUNK_BLOCKS, CHUNK_EXTRA, LifecycleMachine, RequestRecord, _room
from radixcheck.properties.cache.machine import CUTS, TAILS, Length, RadixCacheMachine, Span


class _SecondPoolRequests:
    """What both machines' request steps share: a ``match_req`` matches where a request can resume
    (the window or state model's length), and a request method is judged against what was cached
    of the request's filled tokens before the call (and the second pool's frees since then)."""

    model: Any
    windows: Any

    def _cache_match_path(self, tokens: tuple[int, ...], key: Any) -> list[Any]:
        cached = self.model.values_of(self.model.longest_cached(tokens, key))
        return self.model.match(tokens[: self.windows.resumable(cached)], key)

    def _second_before(self, record: RequestRecord) -> Any:
        request = record.request
        return self.model.values_of(self.model.longest_cached(request.tokens[: request.filled], record.key)), self._mark2()


class _FinishAfterDecode:
    """A rule of both machines: a request prefills, publishes, decodes past its publish and finishes,
    so its finish brings second-pool values (its last window slots, its final state) the insert takes."""

    @precondition(_room)
    @rule(base=RadixCacheMachine.sequences, cut=CUTS, tail=TAILS, prefill=st.tuples(CHUNK_BLOCKS, CHUNK_EXTRA),
          decode=st.tuples(CHUNK_BLOCKS, CHUNK_EXTRA), seed=st.integers(0, 15), data=st.data())
    def finish_after_decode(self, base: tuple[int, ...], cut: Length, tail: Span, prefill: tuple[int, int],
                            decode: tuple[int, int], seed: int, data: st.DataObject) -> None:
        prompt = self._query(base, cut, tail, min_shared=1) + tail.tokens(self.block)
        record = self._admit_request(prompt, False, True, self._request_namespace(data))
        assert record is not None
        self._compute(record, self._chunk(*prefill), seed)
        self._publish(record)
        self._compute(record, self._chunk(*decode), seed + 1)
        self._end(record, "finish")


class WindowRequestsMachine(_FinishAfterDecode, _SecondPoolRequests, WindowLifecycleMachine):
    """A sliding window, each step done by the cache's own request methods when the target declares
    ``lifecycle="requests"`` (module docstring); the tree steps otherwise, as its base."""

    def _set_request_window(self, record: RequestRecord) -> None:
        """The engine's ``Request.window``: what the request holds of its own, ``-1`` elsewhere (recorded)."""
        if self._by_cache:
            request, own = record.request, self._own(record)
            request.window = np.asarray([own.get(i, NONE) for i in range(request.filled)], dtype=np.int64)
            self._caller("set_window", request, request.window.tolist())

    def _second_admitted(self, record: RequestRecord) -> None:
        super()._second_admitted(record)
        if self._by_cache:  # lock_req pinned the window the matched prefix needs
            self.windows.pin(self._span(record))
            self._set_request_window(record)

    def _second_computed(self, record: RequestRecord, tokens: int) -> None:
        super()._second_computed(record, tokens)
        self._set_request_window(record)

    def _second_by_cache(self, record: RequestRecord, before: Any, prefix_len: int | None, aligned: int, unlocked: set[int],
                         new_path: list[Any] | None) -> None:
        cached, mark2 = before
        own = self._own(record)
        what = f"{'cache_unfinished_req' if new_path is not None else 'cache_finished_req'}({record})"
        expected: set[int] = set()
        if prefix_len is not None:  # the insert took the own values of the new tokens (and, refilling, of tombstones)
            new = range(prefix_len, aligned)
            self.windows.cache([record.row[i] for i in new], [own.get(i, NONE) for i in new])
            adopted = [i for i in range(min(prefix_len, len(cached))) if self.refills and i in own and not self.windows.live(cached[i])]
            self.windows.cache([cached[i] for i in adopted], [own[i] for i in adopted])
            for i in [*new, *adopted]:
                if i in own:
                    self.held_window.discard(own.pop(i))
            expected |= {own.pop(i) for i in list(own) if record.protected <= i < prefix_len and self.windows.live(cached[i])}
        if new_path is None:  # an end: the request frees every window slot it still holds
            expected |= set(own.values())
            own.clear()
        else:
            self.windows.pin(self.windows.span(self.model.values_of(new_path)))
        self.windows.unpin(self._span(record))
        expected |= self.windows.drop_with_kv(unlocked)
        self.held_window.difference_update(expected)
        check_second_frees(self._freed2_since(mark2), expected, what)
        if new_path is not None:
            self._check_own_window(record, what)

    def _check_own_window(self, record: RequestRecord, what: str) -> None:
        """After a publish, ``Request.window`` names exactly the window slots the request still holds of its own."""
        request, own = record.request, self._own(record)
        got = np.asarray(request.window, dtype=np.int64).tolist()[: request.filled]
        got += [NONE] * (request.filled - len(got))
        want = [own.get(i, NONE) for i in range(request.filled)]
        if got != want:
            i = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
            whose = "the tree's (it took it)" if self.windows.kv_of.get(got[i]) is not None else "not the request's"
            said = (f"names window slot {got[i]} at token {i}, {whose}" if got[i] != NONE
                    else f"dropped its own window slot {want[i]} at token {i}")
            raise SecondSlotViolation(f"after {what} the request {said}: Request.window must hold the window slots it still holds "
                                      "of its own (-1 elsewhere)",
                                      Check("req.window[:req.filled].tolist() == expected", "req.window[:req.filled].tolist()",
                                            {"expected": want}))


class StateLifecycleMachine(_FinishAfterDecode, _SecondPoolRequests, StateMachine, LifecycleMachine):
    """A state pool with running requests, by the tree calls (``lifecycle="tree"``) or by the
    cache's request methods (``"requests"``): module docstring."""

    @staticmethod
    def _own_state(record: RequestRecord) -> int:
        return getattr(record, "own_state", NONE)

    def _set_own_state(self, record: RequestRecord, state: int) -> None:
        record.own_state = record.request.state = state
        if self._by_cache:
            self._caller("set_state", record.request, state)

    def _second_admitted(self, record: RequestRecord) -> None:
        if self._by_cache:  # lock_req pinned the state the matched prefix ends at
            self.windows.pin(self._span(record))
        self._set_own_state(record, NONE)

    def _free_own_state(self, record: RequestRecord) -> None:
        state = self._own_state(record)
        if state != NONE:
            self.second_allocator.free(np.asarray([state], dtype=np.int64))
            self._caller("free_window", [state])
            self.held_window.discard(state)
        self._set_own_state(record, NONE)

    def _second_computed(self, record: RequestRecord, tokens: int) -> None:
        """The request's state after its new tokens replaces the one before them."""
        fresh = int(self.second_allocator.alloc(1)[0])
        self._caller("compute_window", record.request, [fresh])
        self._free_own_state(record)
        self.held_window.add(fresh)
        self._set_own_state(record, fresh)

    def _ends_aligned(self, record: RequestRecord) -> bool:
        return record.request.filled > 0 and record.request.filled % self.page_size == 0

    def _can_publish(self, record: RequestRecord) -> bool:
        """A live state will end the published pages: the tree's already, or the request's own, on a page boundary."""
        request = record.request
        aligned = request.filled // self.page_size * self.page_size
        if not aligned:
            return False
        cached = self.model.values_of(self.model.longest_cached(request.tokens[:aligned], record.key))
        if len(cached) >= aligned and self.windows.live(cached[aligned - 1]):
            return True
        return self._ends_aligned(record) and self._own_state(record) != NONE

    def _second_keywords(self, record: RequestRecord) -> dict[str, Any]:
        return {"state": self._own_state(record) if self._ends_aligned(record) else NONE}

    def _second_inserted(self, record: RequestRecord, prefix_len: int, aligned: int) -> None:
        if self.state_taken:
            self.held_window.discard(self._own_state(record))
            self._set_own_state(record, NONE)

    def _second_ended(self, record: RequestRecord) -> None:
        self._free_own_state(record)

    def _second_by_cache(self, record: RequestRecord, before: Any, prefix_len: int | None, aligned: int, unlocked: set[int],
                         new_path: list[Any] | None) -> None:
        cached, mark2 = before
        state = self._own_state(record)
        what = f"{'cache_unfinished_req' if new_path is not None else 'cache_finished_req'}({record})"
        if prefix_len is not None and state != NONE and self._ends_aligned(record):
            last = record.row[aligned - 1] if prefix_len < aligned else cached[aligned - 1]
            if not self.windows.live(last):  # the insert took the request's state
                self.windows.cache([last], [state])
                self.held_window.discard(state)
                state = NONE
        expected = {state} if new_path is None and state != NONE else set()
        if new_path is not None:
            self.windows.pin(self.windows.span(self.model.values_of(new_path)))
        self.windows.unpin(self._span(record))
        expected |= self.windows.drop_with_kv(unlocked)
        self.held_window.difference_update(expected)
        record.own_state = NONE if new_path is None else state
        check_second_frees(self._freed2_since(mark2), expected, what)
        request = record.request
        if new_path is not None and int(request.state) != state:
            whose = "the tree's (the insert took it)" if self.windows.kv_of.get(int(request.state)) is not None else "not its own"
            said = (f"says its state is {int(request.state)}, {whose}" if request.state != NONE
                    else f"dropped its own state {state}")
            raise SecondSlotViolation(f"after {what} the request {said}: Request.state must be the state it still holds of its "
                                      f"own (-1: none), here {state}",
                                      Check("req.state == expected", "req.state", {"expected": state}))
