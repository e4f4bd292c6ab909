"""The state machine's running requests: chunked prefill, retract, abort, a skipped insert and a
failed admission (the contract's "The request lifecycle").

Used instead of :class:`~radixcheck.properties.cache.machine.RadixCacheMachine` for a target that
declares ``Capabilities(lifecycle="tree")`` or ``"requests"`` (:func:`~radixcheck.properties.cache.machine.machine_for`
picks it); every rule of the plain machine still runs beside these. A request is admitted (matched,
then locked), computes its tokens chunk by chunk into slots of its own, publishes each chunk
(insert under its lock, re-match, lock the new node, unlock the old: SGLang's
``cache_unfinished_req``), and ends as a finish, a retract (back to the queue), an abort, or a
finish with the insert skipped. ``"tree"``: the machine plays the engine with the tree calls;
``"requests"``: the cache's own request methods do it, on a :class:`~radixcheck.properties.cache.contract.Request`.

**What judges it.** The same oracles as every other step, fed exactly what an engine frees:

* each step's frees are checked against the model (oracle 3's ``check_freed``): a publish frees the
  request's duplicates (``row[protected:prefix_len]``), a finish those and the unaligned tail, a
  retract, an abort or a skipped insert every slot behind the cached prefix; nothing else;
* between steps, slot conservation counts the slots the running requests hold of their own beside
  the cached ones (a page both in the tree and freed, or held by nobody, shows at once);
* after a publish the request must read the tree's slots (``row[:protected]``): a row that still
  points at a duplicate it freed reads KV another request may own (mini-sglang #142);
* the sizes judge the locks: a lock a failed admission forgot, or one a re-published chunk took
  twice, leaves ``protected_size`` above the model's;
* every match and insert is judged by the prefix-set model (oracle 1), and a retracted request,
  admitted again, must match what it published.

**Scenarios.** ``racing_prefill`` is two requests on one prompt, both admitted before either
publishes: the second's chunk is all duplicates, then the first is retracted or aborted while the
tree holds its pages (sglang #38319). ``chunked_request`` is one request's whole life in one step,
turned away once first (sglang #16067); ``publish_twice`` publishes one chunk twice (sglang #25091).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, consumes, invariant, multiple, precondition, rule

from radixcheck.oracles.isolation import check_match_isolated
from radixcheck.oracles.slots import check_conservation, check_freed
from radixcheck.oracles.violations import Check, PrefixSetViolation, SlotViolation, shown
from radixcheck.properties import layer_tally
from radixcheck.properties.cache.contract import Request
from radixcheck.properties.cache.layers import UNSAID, namespace_key
from radixcheck.properties.cache.machine import (
    CUTS,
    TAILS,
    HandleRecord,
    Length,
    RadixCacheMachine,
    SentCall,
    Span,
)
from radixcheck.properties.cache.tenants import fixed_namespaces
from radixcheck.properties.findings.transcript import act

MAX_IN_FLIGHT = 3  # lifecycle requests running at once (beside the plain machine's locks)
ENDINGS = ("finish", "retract", "abort")
SKIPS = st.sampled_from((False, False, False, True))  # one request in four skips its insert
CHUNK_BLOCKS = st.integers(0, 2)
CHUNK_EXTRA = st.integers(1, 3)  # a chunk rarely ends on a page boundary


@dataclass(eq=False)
class RequestRecord(HandleRecord):
    """A running request: its :class:`Request`, and what the model says of it. ``handle``, ``path``
    and ``tokens`` are those of the prefix it holds locked; ``row`` is what its row must hold
    (``row[:protected]`` the tree's slots, the rest its own)."""

    request: Request = field(default_factory=lambda: Request(()))
    row: list[int] = field(default_factory=list)
    protected: int = 0
    prompt: int = 0  # prompt tokens: the request is in prefill while fewer are computed
    priority: int = 0  # what its match and inserts carry, for its whole life (0 unless the policy takes one)
    skip_insert: bool = False
    done: bool = False

    @property
    def key(self) -> Any:
        """The namespace the model files the request under (``None``: the default one)."""
        return namespace_key(self.namespace)

    def own(self) -> list[int]:
        """The slots the request holds of its own (computed, not the tree's)."""
        return self.row[self.protected :]

    def __repr__(self) -> str:
        where = "" if self.namespace is UNSAID else f", namespace={self.namespace!r}"
        return f"request<{shown(self.request.tokens)}{where}>"


def _room(self: LifecycleMachine, needed: int = 1) -> bool:
    return len(self.in_flight) + needed <= MAX_IN_FLIGHT


class LifecycleMachine(RadixCacheMachine):
    """The conformance machine plus running requests (module docstring)."""

    requests = Bundle("requests")

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: list[RequestRecord] = []
        self.own_slots: set[int] = set()  # the slots running requests hold of their own
        self.requeued: list[tuple[Any, tuple[int, ...]]] = []  # (namespace, computed tokens) of retracted requests: they run again

    def _requests_running(self) -> bool:
        return bool(self.in_flight)

    @property
    def _by_cache(self) -> bool:
        return self.capabilities.lifecycle == "requests"

    # ---- the caller's own acts, shown (and written in a repro file) beside the contract calls --------

    def _caller(self, name: str, *args: Any, result: Any = None, **kwargs: Any) -> None:
        """Record something the caller did itself (made a request, computed a chunk, freed slots)."""
        self.calls_sent += 1
        sent = SentCall(self.calls_sent, name, args, target="caller", kwargs=kwargs)
        sent.result = result
        if self.acting is not None:
            self.acting.calls.append(sent)
        self._show(sent)

    def _caller_free(self, slots: list[int]) -> None:
        if slots:
            self.allocator.free(np.asarray(slots, dtype=np.int64))
            self._caller("free", list(slots))

    def _tally_request(self, key: Any, priority: int = 0) -> None:
        """This step acts for a running request under ``key`` with ``priority`` (the card's "Layers driven
        together"); under ``lifecycle="requests"`` the request carries them and its second-pool values, not a keyword."""
        layer_tally.request(key, priority)
        if self._by_cache and self.capabilities.second_pool is not None:
            layer_tally.touch(layer_tally.SECOND_POOL)

    def _priority_of_next(self) -> int:
        """The priority a request admitted now carries: the machine's current one, for a declared policy
        that takes priorities (else 0, and it is never sent)."""
        takes = self.policy is not None and self.policy.takes_priority
        return self.request_priority if takes else 0

    @contextmanager
    def _carrying(self, record: RequestRecord) -> Iterator[None]:
        """Under ``"tree"``: the calls sent for ``record`` carry its own priority (SGLang's ``req.priority``),
        not the one the requests admitted since carry."""
        later, self.request_priority = self.request_priority, record.priority
        try:
            yield
        finally:
            self.request_priority = later

    # ---- the steps ----------------------------------------------------------------------------------

    @act
    def _admit_request(self, tokens: tuple[int, ...], skip_insert: bool, admitted: bool,
                       namespace: Any = UNSAID) -> RequestRecord | None:
        """A request (under ``namespace``: its ``Request.namespace``, SGLang's ``extra_key``, vLLM's
        ``cache_salt``) is matched; if ``admitted`` it is locked and runs, else (the batch was full) it
        is turned away: no lock, no insert, nothing freed."""
        key, priority = namespace_key(namespace), self._priority_of_next()
        self._tally_request(key, priority)
        request = Request(tokens, key, priority)
        self._caller("Request", tokens, *(() if namespace is UNSAID else (namespace,)), result=request,
                     **({"priority": priority} if priority else {}))
        if self._by_cache:
            self._call("match_req", request)
            path = self._cache_match_path(tokens, key)
            self.clock_calls[self.model.clock] = f"call {self.calls_sent}: match_req({shown(tokens)})"
            expected = self.model.values_of(path)
            got = np.asarray(request.slots).tolist()[: request.filled]
            if self.capabilities.namespaces:  # oracle 10: the request's match holds no other namespace's KV
                check_match_isolated(self.model, key, tokens, got, self._inserted_by, "match_req", "req.slots[:req.filled].tolist()")
            if request.filled != len(expected) or request.protected != len(expected) or got != expected:
                raise PrefixSetViolation(
                    f"match_req({shown(tokens)}) left the request with {request.filled} tokens filled, {request.protected} "
                    f"protected and slots {shown(got)}; the longest cached prefix has {len(expected)}: {shown(expected)}",
                    Check("(req.filled, req.protected, req.slots[:req.filled].tolist()) == (n, n, expected)",
                          "(req.filled, req.protected, req.slots[:req.filled].tolist())", {"n": len(expected), "expected": expected}))
            handle = request.handle
        else:
            matched = self._match(tokens, namespace=namespace)
            path, expected, handle = matched.path, self.model.values_of(matched.path), matched.handle
            request.slots, request.filled, request.protected, request.handle = (
                np.asarray(expected, dtype=np.int64), len(expected), len(expected), handle)
        if not admitted:
            return None
        record = RequestRecord(handle, path, tokens[: len(expected)], request=request, row=list(expected), protected=len(expected),
                               prompt=len(tokens), skip_insert=skip_insert, priority=priority, namespace=namespace)
        if self._by_cache:
            self._call("lock_req", request)
            self.model.lock(path)
            record.held = 1
        else:
            self._lock(record)
        self.in_flight.append(record)
        self._second_admitted(record)
        return record

    @act
    def _compute(self, record: RequestRecord, tokens: int, seed: int) -> None:
        """The engine computes the request's next ``tokens`` tokens into fresh slots of its own
        (past the prompt, decode generates them from ``seed``)."""
        request = record.request
        if record.done or tokens <= 0:
            return
        self._tally_request(record.key, record.priority)
        beyond = request.filled + tokens - len(request.tokens)
        more = Span(0, beyond, seed).tokens(self.block) if beyond > 0 else ()
        fresh = self.allocator.alloc(tokens)
        self._caller("compute", request, fresh.tolist(), more)
        request.compute(fresh, more)
        record.row += fresh.tolist()
        self.own_slots.update(fresh.tolist())
        self._second_computed(record, tokens)

    @act
    def _publish(self, record: RequestRecord) -> None:
        """Publish every whole page the request computed (a request that skips its insert publishes nothing)."""
        if record.done or record.skip_insert or not self._can_publish(record):
            return
        self._tally_request(record.key, record.priority)
        request = record.request
        tokens = request.tokens[: request.filled]
        aligned = len(tokens) // self.page_size * self.page_size
        old_path, own_before = record.path, record.own()
        if self._by_cache:
            mark, second = self._mark(), self._second_before(record)
            self._call("cache_unfinished_req", request)
            freed = self._freed_since(mark)
            prefix_len = self.model.insert(tokens, record.row, record.key, record.priority)
            self.clock_calls[self.model.clock] = f"call {self.calls_sent}: cache_unfinished_req({record})"
            self._prompt_again(record, tokens, f"cache_unfinished_req({record})")
            new_path = self.model.match(tokens[:aligned], record.key)
            self.model.lock(new_path)
            unlocked = self.model.unlock(old_path)
            check_freed(freed, set(record.row[record.protected : prefix_len]) | unlocked, f"cache_unfinished_req({record})")
            self._second_by_cache(record, second, prefix_len, aligned, unlocked, new_path)
            handle = request.handle
        else:
            self._make_room(tokens)
            with self._carrying(record):
                prefix_len = self._insert(tokens, np.asarray(record.row, dtype=np.int64), record.namespace, **self._second_keywords(record))
            self._caller_free(record.row[record.protected : prefix_len])
            self._second_inserted(record, prefix_len, aligned)
            with self._carrying(record):
                moved = self._match(tokens[:aligned], namespace=record.namespace)
            self._lock(moved)
            self._release(record)
            new_path, handle = moved.path, moved.handle
            request.slots[:aligned] = self.model.values_of(new_path)
            request.protected, request.handle = aligned, handle
        cached = self.model.values_of(new_path)
        self._check_row(record, cached)
        self.own_slots.difference_update(own_before[: aligned - record.protected])
        record.row[:aligned] = cached
        record.protected, record.path, record.tokens, record.handle, record.held = aligned, new_path, tokens[:aligned], handle, 1

    def _prompt_again(self, record: RequestRecord, tokens: tuple[int, ...], call: str) -> None:
        """A declared ``prompt_priority_bonus``: the cache's own publish or finish, having cached pages
        past the request's prompt, inserted the prompt's whole pages again at the request's priority
        plus the bonus (SGLang's ``checkpoint``), so the model does the same."""
        bonus = self.policy.prompt_priority_bonus if self.policy is not None else 0
        prompt = min(record.prompt, len(tokens)) // self.page_size * self.page_size
        if bonus and 0 < prompt < len(tokens) // self.page_size * self.page_size:
            self.model.insert(tokens[:prompt], record.row[:prompt], record.key, record.priority + bonus)
            self.clock_calls[self.model.clock] = f"call {self.calls_sent}: {call} (its prompt again, priority +{bonus})"

    def _check_row(self, record: RequestRecord, cached: list[int]) -> None:
        """After a publish the request reads the tree's slots for every cached page (never a
        duplicate freed by the publish), and its protected length is that of the cached prefix."""
        request = record.request
        got = np.asarray(request.slots).tolist()[: len(cached)]
        if request.protected != len(cached) or got != cached:
            freed = sorted(set(got) - set(cached) - self.allocator.in_use)
            what = (f"the request's protected length is {request.protected} where the tree caches {len(cached)} of its tokens "
                    f"(slots {shown(cached)})" if got == cached else
                    f"the request's row reads {shown(got)} (protected {request.protected}) where the tree holds {shown(cached)}")
            raise SlotViolation(
                f"after cache_unfinished_req({record}) {what}"
                + (f": slots {freed[:8]} were freed and it still reads them" if freed else ""),
                Check("req.protected == protected and req.slots[:protected].tolist() == expected",
                      "(req.protected, req.slots[:protected].tolist())", {"protected": len(cached), "expected": cached}))

    @act
    def _end(self, record: RequestRecord, outcome: str) -> None:
        """The request ends: ``finish`` caches what it computed (unless it skips its insert);
        ``retract`` (back to the queue) and ``abort`` free every slot of its own."""
        if record.done:
            return
        self._tally_request(record.key, record.priority)
        request = record.request
        insert = outcome == "finish" and not record.skip_insert
        tokens = request.tokens[: request.filled]
        aligned = len(tokens) // self.page_size * self.page_size
        if self._by_cache:
            mark, second = self._mark(), self._second_before(record)
            self._call("cache_finished_req", request, insert)
            freed = self._freed_since(mark)
            expected, prefix_len = set(record.own()), None
            if insert:
                prefix_len = self.model.insert(tokens, record.row, record.key, record.priority)
                self.clock_calls[self.model.clock] = f"call {self.calls_sent}: cache_finished_req({record}, True)"
                self._prompt_again(record, tokens, f"cache_finished_req({record}, True)")
                expected = set(record.row[record.protected : prefix_len] + record.row[aligned:])
            unlocked = self.model.unlock(record.path)
            check_freed(freed, expected | unlocked, f"cache_finished_req({record}, {insert})")
            self._second_by_cache(record, second, prefix_len, aligned, unlocked, None)
        else:
            if insert:
                self._make_room(tokens)
                with self._carrying(record):
                    prefix_len = self._insert(tokens, np.asarray(record.row, dtype=np.int64), record.namespace,
                                              **self._second_keywords(record))
                self._caller_free(record.row[record.protected : prefix_len] + record.row[aligned:])
                self._second_inserted(record, prefix_len, aligned)
            else:
                self._caller_free(record.own())
            self._second_ended(record)
            self._release(record)
        record.done, record.held = True, 0
        self.own_slots.difference_update(record.own())
        self.in_flight.remove(record)
        if insert:
            self._remember(tokens, record.namespace)
        if outcome == "retract" and tokens:
            self.requeued = (self.requeued + [(record.namespace, tokens)])[-8:]

    # ---- a second pool's part of each step (a hybrid machine fills these in; see properties/cache/hybrid.py) ----

    def _second_admitted(self, record: RequestRecord) -> None:
        """The request was admitted on its matched prefix."""

    def _second_computed(self, record: RequestRecord, tokens: int) -> None:
        """The request computed its next ``tokens`` tokens."""

    def _can_publish(self, record: RequestRecord) -> bool:
        """Whether the engine publishes the request's chunk now (else it defers it)."""
        return True

    def _second_keywords(self, record: RequestRecord) -> dict[str, Any]:
        """The second-pool keyword of the request's insert."""
        return {}

    def _second_inserted(self, record: RequestRecord, prefix_len: int, aligned: int) -> None:
        """The request's insert cached ``aligned`` tokens, ``prefix_len`` of them already cached."""

    def _second_ended(self, record: RequestRecord) -> None:
        """The request ends: it frees what it still holds of the second pool."""

    def _cache_match_path(self, tokens: tuple[int, ...], key: Any) -> list[Any]:
        """The model's path of what ``match_req(tokens)`` under namespace ``key`` must match (a second pool: where a
        request can resume)."""
        return self.model.match(tokens, key)

    def _second_before(self, record: RequestRecord) -> Any:
        """What a second pool's judge of a request method (``_second_by_cache``) needs from before the call."""
        return None

    def _second_by_cache(self, record: RequestRecord, before: Any, prefix_len: int | None, aligned: int, unlocked: set[int],
                         new_path: list[Any] | None) -> None:
        """Judge the second pool after ``cache_unfinished_req`` (``new_path``: the re-matched path) or
        ``cache_finished_req`` (``new_path`` None; ``prefix_len`` None without an insert)."""

    def _abort_in_flight(self) -> None:
        """A flush aborts every running request first (a server refuses to flush under them); so does a
        quarantine (their rows would read unlinked pages). The base machine's ``_reset`` and
        ``_quarantine`` (and the window machine's, before its marks) call it first."""
        with layer_tally.aside():  # the flush's or quarantine's doing: no layer the requests carry is driven here
            for record in list(self.in_flight):
                self._end(record, "abort")

    # ---- rules --------------------------------------------------------------------------------------

    def _request_namespace(self, data: st.DataObject) -> Any:
        """The namespace a request runs under: one of the tenants' (the default among them) when the
        target declares namespaces, else the default one, never sent."""
        if not self.capabilities.namespaces:
            return UNSAID
        return data.draw(fixed_namespaces(self.capabilities.unsent_namespaces), label="request namespace")

    def _chunk(self, blocks: int, extra: int) -> int:
        return Length(blocks, extra).tokens(self.block)

    @precondition(_room)
    @rule(target=requests, base=RadixCacheMachine.sequences, cut=CUTS, tail=TAILS, skip=SKIPS, data=st.data())
    def request_arrives(self, base: tuple[int, ...], cut: Length, tail: Span, skip: bool, data: st.DataObject) -> Any:
        """A request is admitted on its prompt: matched, then locked. Under a tenant's namespace the
        prompt (mostly another namespace's) must match only what that tenant cached."""
        record = self._admit_request(self._query(base, cut, tail, min_shared=1), skip, True, self._request_namespace(data))
        return record if record is not None else multiple()

    @rule(base=RadixCacheMachine.sequences, cut=CUTS, tail=TAILS, data=st.data())
    def admission_fails(self, base: tuple[int, ...], cut: Length, tail: Span, data: st.DataObject) -> None:
        """A request is matched, then turned away (the batch is full): no lock, no insert."""
        self._admit_request(self._query(base, cut, tail, min_shared=1), False, False, self._request_namespace(data))

    @rule(record=requests, blocks=CHUNK_BLOCKS, extra=CHUNK_EXTRA, seed=st.integers(0, 15))
    def compute_chunk(self, record: RequestRecord, blocks: int, extra: int, seed: int) -> None:
        """A running request computes its next chunk (prefill, then decode)."""
        self._compute(record, self._chunk(blocks, extra), seed)

    @rule(record=requests)
    def publish_chunk(self, record: RequestRecord) -> None:
        """A running request publishes what it computed so far (cache_unfinished_req)."""
        self._publish(record)

    @rule(record=requests, blocks=CHUNK_BLOCKS, extra=CHUNK_EXTRA, seed=st.integers(0, 15))
    def publish_twice(self, record: RequestRecord, blocks: int, extra: int, seed: int) -> None:
        """A chunk is computed and published twice (a stashed request whose last chunk fits the same
        frame, sglang #25091): the second publish has nothing new."""
        self._compute(record, self._chunk(blocks, extra), seed)
        self._publish(record)
        self._publish(record)

    @rule(record=consumes(requests), outcome=st.sampled_from(ENDINGS))
    def end_request(self, record: RequestRecord, outcome: str) -> None:
        """A running request finishes, is retracted (decode out of memory) or is aborted."""
        self._end(record, outcome)

    @precondition(lambda self: bool(self.requeued) and _room(self))
    @rule(target=requests, pick=st.integers(0, 7))
    def readmit_retracted(self, pick: int) -> Any:
        """A retracted request runs again: it must match what it published before."""
        namespace, tokens = self.requeued.pop(pick % len(self.requeued))
        record = self._admit_request(tokens, False, True, namespace)
        return record if record is not None else multiple()

    @precondition(_room)
    @rule(base=RadixCacheMachine.sequences, cut=CUTS, tail=TAILS, chunks=st.lists(st.tuples(CHUNK_BLOCKS, CHUNK_EXTRA), min_size=1,
          max_size=4), outcome=st.sampled_from((*ENDINGS, "skip")), seed=st.integers(0, 15), data=st.data())
    def chunked_request(self, base: tuple[int, ...], cut: Length, tail: Span, chunks: list[tuple[int, int]], outcome: str,
                        seed: int, data: st.DataObject) -> None:
        """One request's life in one step: an earlier request of its namespace cached the start of its prompt; it is
        turned away once (matched, batch full), then admitted, prefills chunk by chunk publishing
        each, and ends as ``outcome`` ("skip": it finishes with its insert skipped, and so never
        publishes); an abort comes before the prompt is done."""
        namespace = self._request_namespace(data)
        self._insert_request(base[: max(self.page_size, cut.tokens(self.block))], namespace)
        prompt = self._query(base, cut, tail, min_shared=1) + tail.tokens(self.block)
        self._admit_request(prompt, False, False, namespace)
        record = self._admit_request(prompt, outcome == "skip", True, namespace)
        assert record is not None
        for blocks, extra in chunks:
            size = self._chunk(blocks, extra)
            if outcome == "abort":
                size = min(size, len(prompt) - 1 - record.request.filled)
            self._compute(record, size, seed)
            self._publish(record)
        self._end(record, "finish" if outcome == "skip" else outcome)

    @precondition(lambda self: _room(self, 2))
    @rule(base=RadixCacheMachine.sequences, cut=CUTS, tail=TAILS, chunk=st.tuples(CHUNK_BLOCKS, CHUNK_EXTRA),
          outcome=st.sampled_from(ENDINGS), seed=st.integers(0, 15), data=st.data())
    def racing_prefill(self, base: tuple[int, ...], cut: Length, tail: Span, chunk: tuple[int, int], outcome: str, seed: int,
                       data: st.DataObject) -> None:
        """Two requests on one prompt are admitted before either publishes (both on the cached start
        of it). The first publishes its first chunk; the second computes the same chunk and publishes
        it: all duplicates, freed, and it must read the first's pages from then on (mini-sglang #142).
        Then the first ends as ``outcome``: retracted or aborted, its published pages stay in the tree
        and are not its to free (sglang #38319). The second goes on a chunk, publishes, and finishes.
        Both run under one namespace; the start of the prompt is the base model's (a tenant's must not see it)."""
        self._insert_request(base[: max(self.page_size, cut.tokens(self.block))])
        prompt = self._query(base, cut, tail, min_shared=1) + tail.tokens(self.block)
        namespace = self._request_namespace(data)
        first = self._admit_request(prompt, False, True, namespace)
        second = self._admit_request(prompt, False, True, namespace)
        assert first is not None and second is not None
        size = self._chunk(*chunk)
        for record in (first, second):
            self._compute(record, size, seed)
            self._publish(record)
        self._end(first, outcome)
        self._compute(second, size, seed + 1)
        self._publish(second)
        self._end(second, "finish")

    # ---- invariants -------------------------------------------------------------------------------

    @invariant()
    @act
    def slots_conserved(self) -> None:
        """Oracle 3 with the running requests' own slots: in use = cached + held by a request."""
        allocator = self.allocator
        if allocator.violations or len(allocator.in_use) != len(self.model.slot_owner) + len(self.own_slots):
            check_conservation(allocator.in_use, set(self.model.slot_owner), self.own_slots, allocator.violations)
