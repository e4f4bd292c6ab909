"""The state machine's second pool: a sliding window's KV beside the KV slots (the contract's
"A second pool").

Used for a target that declares ``Capabilities(second_pool=SlidingWindow(window=W))``
(:func:`~radixcheck.properties.cache.machine.machine_for` picks it); every rule of the plain machine
still runs, each call now carrying and answering the window. The machine owns a second
:class:`~radixcheck.properties.cache.contract.SlotAllocator` (the window pool), gives it to the
factory as ``second_allocator=``, and plays the engine: each request computes a window slot per
token, and one that ran past its window already freed the window slots of the pages that slid
out of it (SGLang's ``swa_evicted_seqlen``): those go to ``insert`` as ``-1``.

**What judges it** (:mod:`radixcheck.oracles.second_pool`, beside every plain oracle):

* each call's window frees: ``evict``, ``evict_prefix``, ``reset`` and an unlock that lets a
  quarantined page go free exactly the live window slots of the tokens whose KV they free;
  ``evict_window`` frees only live window values no lock pins (3s, 22), at least as many as asked
  while any is left (4 eviction amount), and its return value is what it freed;
* between steps, the window slots in use are the live ones the cache holds (3s);
* every match: its length is the longest cached prefix whose last ``min(W, L)`` tokens are live
  (21 where a tombstone hid what lay beyond it, else 23), and its window values are exactly the
  live ones inserted there (20);
* a KV eviction never takes a page whose window a lock pins (22).

**Scenarios.** ``slid_request`` caches a long request whose window slid (its first pages have no
window); ``tombstone_then_match`` tombstones the least recently used window values and matches
every known prompt (a tombstone must hide nothing beyond it, sglang #35515);
``overlapping_locks`` has two requests lock one prompt at two depths, releases the deeper and
evicts the window (sglang #27038's over-released ancestors); ``window_then_evict`` tombstones and
then evicts the KV (a stale KV-to-window mapping frees a live slot, sglang #27586).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from radixcheck.oracles.isolation import check_match_isolated
from radixcheck.oracles.refcount import check_none_locked
from radixcheck.oracles.second_pool import NONE, StateModel, WindowModel, check_second_count, check_second_frees
from radixcheck.oracles.violations import (
    Check,
    EvictionAmountViolation,
    PinViolation,
    PrefixSetViolation,
    ReturnValueViolation,
    SecondValueViolation,
    TombstoneViolation,
    WindowMatchViolation,
    shown,
)
from radixcheck.properties.cache.contract import SecondPoolAllocator, SlotAllocator
from radixcheck.properties.cache.lifecycle import LifecycleMachine, RequestRecord
from radixcheck.properties.cache.machine import (
    AMOUNTS,
    CUTS,
    POOL_SIZE,
    TAILS,
    UNSAID,
    HandleRecord,
    Length,
    RadixCacheMachine,
    SentCall,
    Span,
    _as_int,
    _as_slot_array,
    _scribble,
    _snapshot,
    namespace_key,
)
from radixcheck.properties.findings.transcript import act
from radixcheck.properties.target import guarded


class WindowMachine(RadixCacheMachine):
    """The conformance machine with a sliding-window second pool (module docstring)."""

    def __init__(self) -> None:
        self.second_allocator = SecondPoolAllocator(POOL_SIZE, seed=1, churned=self.options.churned_slots)
        super().__init__()
        self._setup_pool(self.capabilities.second_pool)
        self.held_window: set[int] = set()  # window slots callers hold between steps (running requests)

    EVICT_SECOND = "evict_window"  # the second pool's own eviction

    def _setup_pool(self, pool: Any) -> None:
        self.window = pool.window
        self.refills = pool.refills_tombstones
        self.windows = WindowModel(self.window, self.page_size)

    def _build(self, allocator: SlotAllocator) -> Any:
        second = self.second_allocator if allocator is self.allocator else SecondPoolAllocator(POOL_SIZE)
        if allocator is not self.allocator:
            self._other_second = second
        return guarded("factory", type(self).factory, allocator, self.page_size, second_allocator=second)

    def _other_call(self, other: Any, name: str, *args: Any) -> Any:
        """The other cache of ``_refuse_foreign`` caches its sequence with a live window, so that its
        match ends at a real node (without one it would match nothing and hand over the root)."""
        if name != "insert":
            return super()._other_call(other, name, *args)
        self.calls_sent += 1
        if isinstance(self.windows, StateModel):  # a state pool: the state after the sequence
            second = {"state": int(self._other_second.alloc(1)[0])}
        else:
            second = {"window": self._other_second.alloc(len(args[0]))}
        sent = SentCall(self.calls_sent, name, tuple(_snapshot(a) for a in args), target="other",
                        kwargs={k: _snapshot(v) for k, v in second.items()})
        if self.acting is not None:
            self.acting.calls.append(sent)
        sent.result = _snapshot(result := guarded(name, other.insert, *args, **second))
        return result

    def _mark2(self) -> int:
        return len(self.second_allocator.freed_log)

    def _freed2_since(self, mark: int) -> list[int]:
        return self.second_allocator.freed_log[mark:]

    # ---- inserts carry the window -----------------------------------------------------------------

    def _window_for(self, length: int, slid: int) -> np.ndarray:
        """A request's window slots for ``length`` tokens, the first ``slid`` of which slid out of its
        window and were freed (``-1``)."""
        window = np.full(length, NONE, dtype=np.int64)
        window[slid:] = self.second_allocator.alloc(max(0, length - slid))
        return window

    def _slid(self, length: int) -> int:
        """The tokens whose window a request of ``length`` tokens freed as it ran: whole pages before its last window."""
        return max(0, length - self.window) // self.page_size * self.page_size

    def _insert(self, tokens: tuple[int, ...], values: np.ndarray, namespace: Any = UNSAID, window: np.ndarray | None = None,
                **extra: Any) -> int:
        """Insert with the window; the model caches the new tokens' window values (and, for a cache
        that refills tombstones, the caller's live ones where its cached ones were tombstoned:
        ``self.adopted`` then names those positions)."""
        window = np.full(len(tokens), NONE, dtype=np.int64) if window is None else window
        before = self.model.values_of(self.model.longest_cached(tokens, namespace_key(namespace)))
        sent, last = window.copy(), None
        if self._bigram:  # the last raw token's window slot, as its KV slot: no bigram keeps it, the caller frees it
            last = int(self.second_allocator.alloc(1)[0])
            sent = np.concatenate([sent, np.asarray([last], dtype=np.int64)])
        prefix_len = super()._insert(tokens, values, namespace, second=sent)
        if last is not None:
            self._free_second([last])
        aligned = len(tokens) // self.page_size * self.page_size
        self.windows.cache(values[prefix_len:aligned].tolist(), window[prefix_len:aligned].tolist())
        self.adopted = [i for i in range(min(prefix_len, len(before)))
                        if self.refills and window[i] != NONE and not self.windows.live(before[i])]
        self.windows.cache([before[i] for i in self.adopted], [int(window[i]) for i in self.adopted])
        return prefix_len

    def _free_callers_windows(self, window: np.ndarray, owned_from: int, prefix_len: int, length: int) -> None:
        """The caller frees the window slots it brought that the cache did not take."""
        aligned = length // self.page_size * self.page_size
        adopted = set(self.adopted)
        mine = [int(w) for i, w in enumerate(window[owned_from:prefix_len], start=owned_from) if i not in adopted]
        mine += window[max(aligned, owned_from) :].tolist()
        self._free_second([w for w in mine if w != NONE])

    def _free_second(self, slots: list[int]) -> None:
        """The caller frees second-pool slots of its own; recorded with the act, since which ones
        follow from the model (what the cache took), so a repro file frees exactly these."""
        if not slots:
            return
        self.second_allocator.free(np.asarray(slots, dtype=np.int64))
        if self.acting is not None:
            self.acting.calls.append(SentCall(self.calls_sent, "free_second", (list(slots),), target="caller"))

    @act
    def _insert_request(self, tokens: tuple[int, ...], namespace: Any = UNSAID, slid: bool = False) -> int:
        """A caller inserts a sequence it computed in fresh slots (its window slid if ``slid``), then
        frees its duplicates in both pools."""
        self._make_room(tokens)
        values = self.allocator.alloc(len(tokens))
        window = self._window_for(len(tokens), self._slid(len(tokens)) if slid else 0)
        prefix_len = self._insert(tokens, values, namespace, window)
        self._free_callers_copies(values, 0, prefix_len, len(tokens))
        self._free_callers_windows(window, 0, prefix_len, len(tokens))
        self._remember(tokens, namespace)
        return prefix_len

    @act
    def _serve_insert(self, tokens: tuple[int, ...], record: HandleRecord) -> int:
        cached = len(record.tokens)
        kv = self.model.values_of(record.path)
        self._make_room(tokens)
        values = np.concatenate([np.asarray(kv, dtype=np.int64), self.allocator.alloc(len(tokens) - cached)])
        window = np.concatenate([np.asarray(self.windows.windows(kv), dtype=np.int64), self._window_for(len(tokens) - cached, 0)])
        prefix_len = self._insert(tokens, values, record.namespace, window)
        self._free_callers_copies(values, cached, prefix_len, len(tokens))
        self._free_callers_windows(window, cached, prefix_len, len(tokens))
        self._remember(tokens, record.namespace)
        return prefix_len

    # ---- the match ---------------------------------------------------------------------------------

    @act
    def _match(self, tokens: tuple[int, ...], after_quarantine: tuple | None = None, namespace: Any = UNSAID) -> HandleRecord:
        """Match and judge the answer (oracles 1, 20, 21, 23). After a quarantine the model has
        already forgotten the prefix, so its own answer is what a cache that never saw it gives."""
        key = namespace_key(namespace)
        answer = self._call("match_prefix", self._send(tokens), namespace=namespace)
        if not isinstance(answer, tuple) or len(answer) != 3:
            raise WindowMatchViolation(f"match_prefix({shown(tokens)}) returned {type(answer).__name__}, not (values, handle, window)",
                                       Check("len(result) == 3", "type(result)"))
        values, handle, window = answer
        values = _as_slot_array(values, "match_prefix")
        window = _as_slot_array(window, "match_prefix's window")
        cached = self.model.values_of(self.model.longest_cached(tokens, key))
        length = self.windows.resumable(cached)
        path = self.model.match(tokens[:length], key)
        self.clock_calls[self.model.clock] = f"call {self.calls_sent}: match_prefix({shown(tokens)})"
        expected = cached[:length]
        expected_window = self.windows.windows(expected)
        if self.capabilities.namespaces:  # another tenant's KV is oracle 10's, named so, as in the plain machine
            check_match_isolated(self.model, key, tokens, values.tolist(), self._inserted_by)
        self._judge_match(tokens, values.tolist(), window.tolist(), cached, expected, expected_window, namespace)
        if self.options.reuses_buffers:
            _scribble(values)
            _scribble(window)
        return HandleRecord(handle, path, tokens[:length], namespace=namespace)

    def _judge_match(self, tokens: tuple[int, ...], got: list[int], got_window: list[int], cached: list[int],
                     expected: list[int], expected_window: list[int], namespace: Any = UNSAID) -> None:
        what = f"match_prefix({shown(tokens)}{'' if namespace is UNSAID else f', namespace={namespace!r}'})"  # whose match
        check = Check("(values.tolist(), window.tolist()) == (expected, expected_window)", "(values.tolist(), window.tolist())",
                      {"expected": expected, "expected_window": expected_window})
        if len(got) % self.page_size or len(got) > len(tokens) or len(got_window) != len(got):
            raise WindowMatchViolation(f"{what} returned {len(got)} values and {len(got_window)} window values: more than the query, "
                                       f"not page-aligned or not one window value per token", check)
        if got != cached[: len(got)]:
            raise PrefixSetViolation(f"{what} returned slots {shown(got)}, but {shown(cached[: len(got)])} were inserted there", check)
        for i, slot in enumerate(got_window):
            if slot != NONE and slot != self.windows.of_kv.get(got[i]):
                whose = self.windows.kv_of.get(slot)
                said = "a slot the cache freed (a freed window value cached as live)" if whose is None else f"token {whose}'s"
                raise SecondValueViolation(f"{what} returned window slot {slot} for token {i}: {said}; the cache holds "
                                           f"{self.windows.of_kv.get(got[i], NONE)} there", check)
        stop = expected[len(got) : len(got) + self.page_size]  # the page it stopped at
        if len(got) < len(expected) and any(not self.windows.live(kv) for kv in stop):
            dead = len(got) + next(i for i, kv in enumerate(stop) if not self.windows.live(kv))
            raise TombstoneViolation(f"{what} matched {len(got)} tokens, stopping at the tombstone at token {dead}; it hides "
                                     f"nothing: the last min(W, L) tokens of the {len(expected)} cached have live window values "
                                     f"(W = {self.window})", check)
        if len(got) != len(expected):
            raise WindowMatchViolation(f"{what} matched {len(got)} tokens; the longest cached prefix whose last min(W, L) tokens "
                                       f"have live window values has {len(expected)} (W = {self.window}, {len(cached)} cached)", check)
        if got_window != expected_window:
            lost = next(i for i, (a, b) in enumerate(zip(got_window, expected_window, strict=True)) if a != b)
            raise SecondValueViolation(f"{what} returned no window value for token {lost}; the cache holds {expected_window[lost]} "
                                       "there", check)

    # ---- locks pin the window ----------------------------------------------------------------------

    def _span(self, record: HandleRecord) -> list[int]:
        return self.windows.span(self.model.values_of(record.path))

    @act
    def _lock(self, record: HandleRecord) -> None:
        super()._lock(record)
        self.windows.pin(self._span(record))

    @act
    def _release(self, record: HandleRecord) -> None:
        mark, mark2 = self._mark(), self._mark2()
        span = self._span(record)
        try:
            super()._release(record)
        finally:  # a waived plain finding must not leave the window model behind the cache
            self.windows.unpin(span)
            dropped = self.windows.drop_with_kv(self._freed_since(mark))
        check_second_frees(self._freed2_since(mark2), dropped, "dec_lock_ref")

    # ---- evictions ---------------------------------------------------------------------------------

    @act
    def _evict(self, num_tokens: int) -> None:
        mark, mark2 = self._mark(), self._mark2()
        try:
            super()._evict(num_tokens)
        finally:  # a waived plain finding (an LRU order) must not leave the window model behind the cache
            dropped = self.windows.drop_with_kv(self._freed_since(mark))
        check_second_frees(self._freed2_since(mark2), dropped, f"evict({num_tokens})")

    def _judge_evict(self, num_tokens: int, evicted: int, calls: list[list[int]]) -> None:
        self._no_pinned_page([slot for call in calls for slot in call], f"evict({num_tokens})")
        super()._judge_evict(num_tokens, evicted, calls)

    def _no_pinned_page(self, freed_kv: list[int], what: str) -> None:
        """Oracle 22: no KV eviction takes a page whose window value a lock pins."""
        pinned = self.windows.pinned_in(freed_kv)
        if pinned:
            owner = self.model.slot_owner.get(pinned[0])
            where = f" (of prefix {shown(owner.prefix)})" if owner is not None else ""
            raise PinViolation(f"{what} freed the KV of a page{where} whose window value a lock pins: KV slots {pinned[:8]}",
                               Check("set(freed).isdisjoint(pinned)", "sorted(set(freed) & set(pinned))", {"pinned": pinned}))

    @act
    def _evict_window(self, num_tokens: int) -> None:
        """``evict_window``: tombstones of unpinned live values, or whole unlocked leaves."""
        mark, mark2 = self._mark(), self._mark2()
        freed = _as_int(self._call(self.EVICT_SECOND, num_tokens), self.EVICT_SECOND)
        kv = self._freed_since(mark)
        window = self._freed2_since(mark2)
        if freed != len(window):
            raise ReturnValueViolation(f"{self.EVICT_SECOND}({num_tokens}) returned {freed} but freed {len(window)} second-pool slots",
                                       Check("result == len(second_freed)", "(result, len(second_freed))"))
        if len(window) != len(set(window)):
            check_second_frees(window, set(window), f"{self.EVICT_SECOND}({num_tokens})")
        what = f"{self.EVICT_SECOND}({num_tokens})"
        if kv:  # whole leaves went too
            self._no_pinned_page(kv, what)
            check_none_locked(self.model.remove_freed(kv))
        with_kv = {self.windows.of_kv[k] for k in kv if self.windows.live(k)}
        if not with_kv <= set(window):
            check_second_frees(window, with_kv | set(window), what)
        self.windows.tombstone([w for w in window if w not in with_kv], what)
        self.windows.drop_with_kv(kv)
        whole_nodes = getattr(self.capabilities.second_pool, "pins_whole_nodes", False)  # its stop is not judged
        # (a quarantined page's value may stay)
        if freed < num_tokens and self.windows.unpinned and not self.model.detached and not whole_nodes:
            raise EvictionAmountViolation(f"{what} freed {freed} window slots and stopped while {self.windows.unpinned} live window "
                                          "values no lock pins were left",
                                          Check("result >= min(num_tokens, unpinned)", "result",
                                                {"num_tokens": num_tokens, "unpinned": freed + self.windows.unpinned}))

    @act
    def _quarantine(self, tokens: tuple[int, ...], namespace: Any = UNSAID) -> None:
        self._abort_in_flight()  # before the marks: a running request's window frees are its abort's
        mark, mark2 = self._mark(), self._mark2()
        super()._quarantine(tokens, namespace)
        check_second_frees(self._freed2_since(mark2), self.windows.drop_with_kv(self._freed_since(mark)),
                           f"evict_prefix({shown(tokens)})")

    @act
    def _reset(self) -> None:
        self._abort_in_flight()  # before the mark: a running request's window frees are its abort's
        mark2 = self._mark2()
        super()._reset()
        check_second_frees(self._freed2_since(mark2), self.windows.reset(), "reset")

    def _snapshot(self) -> tuple:
        return super()._snapshot(), len(self.second_allocator.freed_log), len(self.second_allocator.violations)

    # ---- rules -------------------------------------------------------------------------------------

    @rule(target=RadixCacheMachine.sequences, base=RadixCacheMachine.sequences, cut=CUTS, tail=TAILS, more=st.integers(1, 4))
    def slid_request(self, base: tuple[int, ...], cut: Length, tail: Span, more: int) -> tuple[int, ...]:
        """A request ran past its window: the window slots of its pages before the last window were
        freed as it went, and it is cached with those as ``-1`` (tombstones from birth)."""
        tokens = self._query(base, cut, tail) + tail.tokens(self.block) * more
        self._insert_request(tokens, UNSAID, True)
        return tokens

    @rule(amount=AMOUNTS)
    def evict_window(self, amount: Length) -> None:
        self._evict_window(amount.tokens(self.block))

    @rule(amount=AMOUNTS)
    def tombstone_then_match(self, amount: Length) -> None:
        """Window pressure tombstones the least recently used window values, then every known
        prompt is matched again: a match stops where the window it needs is gone, never before."""
        self._evict_window(max(self.page_size, amount.tokens(self.block)))
        for query in self.known:
            self._match(query)

    @rule(base=RadixCacheMachine.sequences, keep=st.integers(1, 2), seed=st.integers(0, 15))
    def overlapping_locks(self, base: tuple[int, ...], keep: int, seed: int) -> None:
        """Two requests run on one prompt (a known one and three blocks more), one on all of it and
        one on all but its last ``keep`` pages; the deeper one finishes, then window pressure evicts
        everything it may: the shorter request's window values must stay (an unlock that releases
        its ancestors' pins takes them, sglang #27038). Both locks are released within the step."""
        prompt = base + Span(3, 0, seed).tokens(self.block)
        self._insert_request(prompt)
        deep = self._match(prompt)
        short_len = len(deep.tokens) - keep * self.page_size
        if short_len <= 0:
            return
        short = self._match(prompt[:short_len])
        self._lock(short)
        self._lock(deep)
        self._release(deep)
        self._evict_window(len(prompt) + self.window)
        for query in [prompt, *self.known[-3:]]:
            self._match(query)
        self._release(short)

    @rule(base=RadixCacheMachine.sequences, amount=AMOUNTS)
    def window_then_evict(self, base: tuple[int, ...], amount: Length) -> None:
        """Window pressure tombstones, then memory pressure evicts KV leaves (and their window
        slots): only the live ones may be freed (a stale KV-to-window mapping frees a slot the
        window pool handed out again, sglang #27586)."""
        self._insert_request(base, UNSAID, True)
        self._evict_window(max(self.page_size, amount.tokens(self.block)))
        self._insert_request(base)
        self._evict(2 * self.page_size + amount.tokens(self.block))

    # ---- invariants ---------------------------------------------------------------------------------

    @invariant()
    @act
    def second_pool_conserved(self) -> None:
        """Oracle 3s: the window slots in use are the live ones the cache holds and the callers'."""
        check_second_count(self.second_allocator.in_use, self.windows.held(), self.held_window, self.second_allocator.violations)


class StateMachine(WindowMachine):
    """The conformance machine with a state pool (``second_pool=StatePool()``): every insert brings
    the state after its tokens (a ``slid`` request brings none), which the cache takes where the
    prefix has none and the caller frees otherwise; a match must end at the deepest live state of
    the cached path and answer its slot; a lock pins it; ``evict_states`` frees unpinned ones. The
    window machine's rules and oracles run on states (a state is a second-pool value filed under
    the KV slot of its prefix's last token: :class:`~radixcheck.oracles.second_pool.StateModel`)."""

    EVICT_SECOND = "evict_states"

    def _setup_pool(self, pool: Any) -> None:
        self.window, self.refills = 1, False
        self.windows = StateModel(self.page_size)

    def _insert(self, tokens: tuple[int, ...], values: np.ndarray, namespace: Any = UNSAID, state: int = NONE,
                **extra: Any) -> int:
        """Insert with ``state``; ``self.state_taken`` says whether the cache must have kept it."""
        before = self.model.values_of(self.model.longest_cached(tokens, namespace_key(namespace)))
        prefix_len = RadixCacheMachine._insert(self, tokens, values, namespace, second=int(state))
        aligned = len(tokens) // self.page_size * self.page_size
        last = (int(values[aligned - 1]) if prefix_len < aligned else before[aligned - 1]) if aligned else None
        self.state_taken = state != NONE and aligned == len(tokens) and aligned > 0 and not self.windows.live(last)
        if self.state_taken:
            self.windows.cache([last], [state])
        self.adopted = []
        return prefix_len

    def _brought_state(self, slid: bool) -> int:
        """A slid request brings no state, unless the cache caches KV only with a state (``stateless_inserts=False``)."""
        if slid and self.capabilities.second_pool.stateless_inserts:
            return NONE
        return int(self.second_allocator.alloc(1)[0])

    def _free_state_unless_taken(self, state: int) -> None:
        if state != NONE and not self.state_taken:
            self._free_second([state])

    @act
    def _insert_request(self, tokens: tuple[int, ...], namespace: Any = UNSAID, slid: bool = False) -> int:
        """A request computed ``tokens`` in fresh slots and ends with a state (none if ``slid``)."""
        self._make_room(tokens)
        values = self.allocator.alloc(len(tokens))
        state = self._brought_state(slid)
        prefix_len = self._insert(tokens, values, namespace, state)
        self._free_callers_copies(values, 0, prefix_len, len(tokens))
        self._free_state_unless_taken(state)
        self._remember(tokens, namespace)
        return prefix_len

    @act
    def _serve_insert(self, tokens: tuple[int, ...], record: HandleRecord) -> int:
        cached = len(record.tokens)
        self._make_room(tokens)
        values = np.concatenate([np.asarray(self.model.values_of(record.path), dtype=np.int64), self.allocator.alloc(len(tokens) - cached)])
        state = self._brought_state(False)
        prefix_len = self._insert(tokens, values, record.namespace, state)
        self._free_callers_copies(values, cached, prefix_len, len(tokens))
        self._free_state_unless_taken(state)
        self._remember(tokens, record.namespace)
        return prefix_len

    @act
    def _match(self, tokens: tuple[int, ...], after_quarantine: tuple | None = None, namespace: Any = UNSAID) -> HandleRecord:
        key = namespace_key(namespace)
        answer = self._call("match_prefix", self._send(tokens), namespace=namespace)
        if not isinstance(answer, tuple) or len(answer) != 3 or isinstance(answer[2], bool) or not isinstance(answer[2], (int, np.integer)):
            raise WindowMatchViolation(f"match_prefix({shown(tokens)}) returned {type(answer).__name__}, not (values, handle, state slot)",
                                       Check("len(result) == 3 and isinstance(result[2], int)", "result"))
        values, handle, state = _as_slot_array(answer[0], "match_prefix").tolist(), answer[1], int(answer[2])
        if self.capabilities.namespaces:  # another tenant's KV is oracle 10's, named so, as in the plain machine
            check_match_isolated(self.model, key, tokens, values, self._inserted_by)
        cached = self.model.values_of(self.model.longest_cached(tokens, key))
        length = self.windows.resumable(cached)
        path = self.model.match(tokens[:length], key)
        self.clock_calls[self.model.clock] = f"call {self.calls_sent}: match_prefix({shown(tokens)})"
        expected = cached[:length]
        expected_state = self.windows.of_kv[expected[-1]] if expected else NONE
        what = f"match_prefix({shown(tokens)}{'' if namespace is UNSAID else f', namespace={namespace!r}'})"  # whose match
        check = Check("(values.tolist(), state) == (expected, expected_state)", "(values.tolist(), state)",
                      {"expected": expected, "expected_state": expected_state})
        if len(values) % self.page_size or len(values) > len(tokens):
            raise WindowMatchViolation(f"{what} returned {len(values)} values: more than the query or not page-aligned", check)
        if values != cached[: len(values)]:
            raise PrefixSetViolation(f"{what} returned slots {shown(values)}, but {shown(cached[: len(values)])} were inserted there",
                                     check)
        if state != NONE and state != expected_state and (not values or state != self.windows.of_kv.get(values[-1])):
            said = "a state the cache freed (a freed state cached as live)" if state not in self.windows.kv_of else "another prefix's state"
            raise SecondValueViolation(f"{what} returned state {state}: {said}", check)
        if len(values) != len(expected):
            raise WindowMatchViolation(f"{what} matched {len(values)} tokens; the longest cached prefix that ends at a live state "
                                       f"has {len(expected)} ({len(cached)} cached)", check)
        if state != expected_state:
            raise SecondValueViolation(f"{what} returned state {state}; the cache holds {expected_state} there", check)
        if self.options.reuses_buffers:
            _scribble(answer[0])
        return HandleRecord(handle, path, tokens[:length], namespace=namespace)


class WindowLifecycleMachine(WindowMachine, LifecycleMachine):
    """Running requests with a sliding window (``lifecycle="tree"``): the suite plays the engine's
    steps with the tree calls, and each request holds a window slot per token it computed
    (``Request.window``) beside its KV.

    * compute: a window slot per new token; then the request frees its own window slots of the
      whole pages that slid out of its window (SGLang's ``free_swa_out_of_window_slots``);
    * publish and finish: the insert carries the request's window (``-1`` where it slid); the
      request frees its window duplicates where the tree holds a live value (and reads the
      tree's), keeps its own where the tree's is tombstoned (it may still need it), and the tree
      takes the rest; a publish is deferred while the re-match would stop short of it (the last
      ``W`` tokens of it not all live in the tree after the insert: the engine keeps computing);
    * an end (finish, retract, abort, skipped insert) frees every window slot the request still
      holds of its own.

    Oracle 3s counts the window slots the running requests hold (``held_window``) beside the tree's.
    What a request holds of its own is kept by position (``own``: position -> slot), never inferred
    from its row: the row also shows the tree's values, which a window eviction may free and the
    pool hand back to the same request at another position."""

    @staticmethod
    def _own(record: RequestRecord) -> dict[int, int]:
        if not hasattr(record, "own_window"):
            record.own_window = {}
        return record.own_window

    def _second_admitted(self, record: RequestRecord) -> None:
        request = record.request
        request.window = np.asarray(self.windows.windows(record.row[: request.filled]), dtype=np.int64)
        self._own(record)

    def _second_computed(self, record: RequestRecord, tokens: int) -> None:
        request, own = record.request, self._own(record)
        fresh = self.second_allocator.alloc(tokens)
        first = request.filled - tokens
        request.window = np.concatenate([request.window[:first], fresh])
        own.update(zip(range(first, request.filled), fresh.tolist(), strict=True))
        self.held_window.update(fresh.tolist())
        self._caller("compute_window", request, fresh.tolist())
        slid = self._slid(request.filled)
        self._free_window(record, [i for i in own if i < slid])

    def _free_window(self, record: RequestRecord, positions: list[int]) -> None:
        """The request frees its own window slots at ``positions``."""
        own = self._own(record)
        slots = [own.pop(i) for i in sorted(positions)]
        if slots:
            self.second_allocator.free(np.asarray(slots, dtype=np.int64))
            self._caller("free_window", slots)
            self.held_window.difference_update(slots)
            record.request.window[sorted(positions)] = NONE

    def _can_publish(self, record: RequestRecord) -> bool:
        request, own = record.request, self._own(record)
        aligned = request.filled // self.page_size * self.page_size
        cached = self.model.values_of(self.model.longest_cached(request.tokens[:aligned], record.key))
        for i in range(max(0, aligned - self.window), aligned):
            if not (i in own if i >= len(cached) else self.windows.live(cached[i]) or (self.refills and i in own)):
                return False
        return True

    def _second_keywords(self, record: RequestRecord) -> dict[str, Any]:
        """The request's own window slots; ``-1`` where it has none of its own (slid, or the tree's)."""
        own = self._own(record)
        return {"window": np.asarray([own.get(i, NONE) for i in range(record.request.filled)], dtype=np.int64)}

    def _second_inserted(self, record: RequestRecord, prefix_len: int, aligned: int) -> None:
        """After the request's insert: the tree took its own window values of the new tokens (and
        the adopted ones); of its duplicates it frees those the tree holds live and reads the tree's."""
        request, own = record.request, self._own(record)
        for i in [*range(prefix_len, aligned), *self.adopted]:
            if i in own:
                self.held_window.discard(own.pop(i))
        cached = self.model.values_of(self.model.longest_cached(request.tokens[:aligned], record.key))
        self._free_window(record, [i for i in own if record.protected <= i < prefix_len and self.windows.live(cached[i])])
        for i in range(aligned):
            if i not in own:
                request.window[i] = self.windows.of_kv.get(cached[i], NONE)

    def _second_ended(self, record: RequestRecord) -> None:
        self._free_window(record, list(self._own(record)))
