"""A Hypothesis state machine that drives any cache through the contract and checks the oracles.

Shipped for third-party caches, like zarr's store state machine: build a machine class for your
factory with :func:`machine_for` and run it with :func:`radixcheck.properties.findings.verdict.run_machine`
(radixcheck's settings, a bounded shrink; ``run_state_machine_as_test`` works too, but shrinks
without a time bound). :mod:`radixcheck.properties.cache.scale_machine` runs the same rules in a
production-sized world. After every rule
the invariants check sizes (oracle 2) and slot conservation (oracle 3); the rules themselves
check matches against the prefix-set model (oracle 1), evictions for lock safety and order (LRU, or a declared policy)
(oracles 2 and 4), and quarantine against a cache that never saw the prefix (oracle 5).

**Inputs.** Token sequences are drawn as :class:`Span` s (a length and a seed) and queries are
cuts of known sequences plus a new tail, so the machine spends its time on shared prefixes and
mid-edge divergence; lengths are counted in *blocks* of ``max(page_size, 4)`` tokens, so a run at
page size 64 builds multi-page prompts as a run at page size 1 builds multi-token ones. Token
ids are mostly from a tiny alphabet (so prefixes collide) with ids at and above 2**16, 2**17 and
2**24 mixed in; a scenario swaps one id for a neighbour a narrower integer type would confuse
with it, and another inserts prompts of hundreds to thousands of tokens.

**Callers.** The machine sends only what a caller may send. A target that trusts its callers
(``checks_locks=False``) gets only paired unlocks (each through the handle that took the lock,
once) and locks of live handles; the refusal rules are for ``checks_locks=True`` targets. What
a target does not offer (quarantine, reset, locking after a match) is never sent. Like an engine,
the machine reuses its buffers: every list or array it sent is overwritten once the call
returns, and so is every array a match returned, once checked. Its slots come from a churned
pool (recycled, scattered, out of order: :class:`~radixcheck.properties.cache.contract.SlotAllocator`).

**What a failure shows.** Each contract call a step sent is a comment line above the step in the
printed program (``#   call 7: match_prefix([1, 1]) -> (array([…]), <Node>)``), and recency is
named by the call that set it ("last used by call 7: …"), so a program reads without a replay.

**Scenarios.** A few rules are a short story rather than one call (a double unlock, a lock after
quarantine, an insert followed at once by an eviction, a hit just short of the least recently
used leaf, quarantining one branch of a fork or a near miss of a cached prompt, quarantining a
running request's prompt, a reset while it runs, a long prompt, a neighbouring id). Each makes a
known bug class's trigger one step long instead of a lucky sequence of five;
``python -m radixcheck.reports.catalogue`` measures how often a random-seeded run kills each
catalogued mutant, which is how they were chosen.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import assume, currently_in_test_context, note
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, multiple, precondition, rule

from radixcheck.oracles.amount import check_amount
from radixcheck.oracles.deviation import Deviation
from radixcheck.oracles.isolation import (
    check_insert_isolated,
    check_match_isolated,
    check_quarantine_isolated,
    check_quarantine_left_others,
)
from radixcheck.oracles.lru import check_lru
from radixcheck.oracles.never_saw import expected_match_length
from radixcheck.oracles.policy import Choice, check_order
from radixcheck.oracles.prefix_set import Entry, PrefixSetModel
from radixcheck.oracles.refcount import check_none_locked, check_sizes
from radixcheck.oracles.slots import check_freed, check_slot_count
from radixcheck.oracles.violations import (
    BadInputViolation,
    Check,
    ContractViolation,
    EvictionOrderViolation,
    LRUOrderViolation,
    NeverSawViolation,
    PrefixSetViolation,
    RefcountViolation,
    ReturnValueViolation,
    shown,
)
from radixcheck.properties import layer_tally
from radixcheck.properties.cache.contract import BIGRAM_START, DEFAULT_CAPABILITIES, Capabilities, SlotAllocator
from radixcheck.properties.cache.layers import UNSAID, Tags, keywords_for, layers_for, namespace_key
from radixcheck.properties.findings.transcript import Act, act
from radixcheck.properties.target import NOT_A_REFUSAL, OperationTimeout, TransportError, guarded, no_longer_answers

POOL_SIZE = 1 << 24  # more slots than any run allocates
NEVER_A_SLOT = POOL_SIZE + 7  # slot ids in bad input: never handed out, in case a cache accepts them
OUTSIDE_ID = 5  # token ids from here up (to 2**16) appear only in bad input
MAX_PROBES = 24  # known sequences re-matched after a quarantine
MAX_RUNNING = 3  # locks held at once: more would leave nothing evictable for the LRU oracle
SMALL_WORLD_LEAVES = 64  # scenarios that use every unlocked leaf run only in worlds this small
SCRIBBLE_TOKEN = 2**31 - 2  # what a caller writes over its buffers after a call (an id no sequence uses)
MIN_BLOCK = 4  # a block is max(page_size, MIN_BLOCK) tokens

SMALL_IDS = (0, 1, 2, 3)  # a tiny alphabet: sequences collide and share prefixes often
WIDE_IDS = (2**16, 2**17 + 1, 2**24 + 1, 2**31 - 1)  # int32-range ids that narrow types mangle
VOCABULARY = SMALL_IDS * 6 + WIDE_IDS  # about one token in seven is wide
NEIGHBOURS = ("bit16", "bit17", "float32")  # ids that a uint16 or a float32 cannot tell apart
FLOAT32_TWINS = (2**24 + 1, 2**24)  # float32(2**24 + 1) == 2**24


class _Restamped:
    """A page of the model seen with another last use (a known deviation's), for the LRU oracle."""

    __slots__ = ("entry", "last_use")

    def __init__(self, entry: Entry, last_use: int) -> None:
        self.entry, self.last_use = entry, last_use

    def __getattr__(self, name: str) -> Any:
        return getattr(self.entry, name)


@dataclass(frozen=True)
class Span:
    """``blocks`` blocks plus ``extra`` tokens, drawn from a stream seeded by ``seed``.

    Printed in a failing program instead of the tokens themselves; spans with the same seed
    share a prefix, like prompts that share a system prompt."""

    blocks: int
    extra: int
    seed: int

    def tokens(self, block: int) -> tuple[int, ...]:
        stream = random.Random(self.seed)
        return tuple(stream.choice(VOCABULARY) for _ in range(max(0, self.blocks * block + self.extra)))


@dataclass(frozen=True)
class Length:
    """``blocks`` blocks plus ``extra`` (possibly negative) tokens: a cut point or an amount."""

    blocks: int
    extra: int

    def tokens(self, block: int) -> int:
        return max(0, self.blocks * block + self.extra)


FRESH = st.builds(Span, blocks=st.integers(0, 6), extra=st.integers(1, 3), seed=st.integers(0, 15))
TAILS = st.builds(Span, blocks=st.integers(0, 3), extra=st.integers(0, 3), seed=st.integers(0, 15))
CUTS = st.builds(Length, blocks=st.integers(0, 8), extra=st.integers(-2, 3))
AMOUNTS = st.builds(Length, blocks=st.integers(0, 8), extra=st.integers(-1, 1))


@dataclass(eq=False)
class HandleRecord:
    """A handle the target returned, the model's path for the same prefix, and how many locks
    the machine took through this very handle and has not yet released."""

    handle: Any
    path: list[Entry]
    tokens: tuple[int, ...]
    held: int = 0
    namespace: Any = UNSAID  # the namespace of the match that returned it

    def __repr__(self) -> str:  # shown in Hypothesis's failure program
        where = "" if self.namespace is UNSAID else f", namespace={self.namespace!r}"
        return f"handle<{shown(self.tokens)}{where}>"


def _as_int(x: Any, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise ReturnValueViolation(f"{what} returned {type(x).__name__} {x!r}, not an int",
                                   Check("isinstance(result, (int, np.integer)) and not isinstance(result, bool)", "repr(result)"))
    return int(x)


SLOT_ARRAY = Check("isinstance(values, np.ndarray) and values.ndim == 1 and (values.size == 0 or values.dtype.kind in 'iu')",
                   "repr(values)")


def _as_slot_array(x: Any, what: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise ReturnValueViolation(f"{what} returned values of type {type(x).__name__}, not an ndarray", SLOT_ARRAY)
    if x.ndim != 1 or not (x.size == 0 or np.issubdtype(x.dtype, np.integer)):
        raise ReturnValueViolation(f"{what} returned values {x.dtype}{x.shape}, not 1-D integers", SLOT_ARRAY)
    return x


def _wrong_match(message: str, expected: list[int]) -> PrefixSetViolation:
    return PrefixSetViolation(message, Check("values.tolist() == expected", "values.tolist()", {"expected": expected}))


@dataclass(frozen=True)
class MachineOptions:
    """How the machine plays its callers. The defaults are the hardest on a cache; a repro is
    simplified (:mod:`radixcheck.properties.findings.reduce`) by turning each off where the finding stays."""

    churned_slots: bool = True  # slots come back recycled and scattered (SlotAllocator(churned=True))
    reuses_buffers: bool = True  # every buffer lent to a call, and every array a match returned, is overwritten after it
    tokens_as_lists: bool = False  # tokens go alternately as lists and int64 arrays; True: lists only


SIZE_CALLS = ("total_size", "evictable_size", "protected_size")


def _snapshot(value: Any) -> Any:
    """What was sent or returned, kept before the caller overwrites its buffers."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return list(value)
    if isinstance(value, tuple):
        return tuple(_snapshot(v) for v in value)
    return value


def _shown_value(value: Any) -> str:
    if isinstance(value, np.ndarray) and value.ndim == 1 and np.issubdtype(value.dtype, np.integer):
        return f"array({shown(value.tolist())})"
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return shown(value)
    if isinstance(value, (int, float, str, type(None), np.integer)):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(_shown_value(v) for v in value) + ")"
    return f"<{type(value).__name__}>"  # a handle, or bad input: its type is what matters


NO_ANSWER = "(no answer)"


class SentCall:
    """One contract call, as a failing program shows it (a comment line above the step that sent
    it). ``raised`` is the exception it raised, if any; ``target`` is "cache", or "other" for a
    second cache built to hand the first a foreign handle."""

    __slots__ = ("number", "name", "args", "result", "raised", "target", "kwargs")

    def __init__(self, number: int, name: str, args: tuple, target: str = "cache", kwargs: dict | None = None) -> None:
        self.number, self.name, self.args, self.result, self.raised, self.target = number, name, args, NO_ANSWER, None, target
        self.kwargs = kwargs or {}  # the namespace= keyword, when one was sent

    def __repr__(self) -> str:
        on = "" if self.target == "cache" else f"{self.target}."
        shown_args = [_shown_value(a) for a in self.args]
        shown_args += [f"{k}={_shown_value(v) if isinstance(v, np.ndarray) else repr(v)}" for k, v in self.kwargs.items()]
        return f"#   call {self.number}: {on}{self.name}({', '.join(shown_args)}) -> {_shown_value(self.result)}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how hypothesis.note formats it
        printer.text(repr(self))


class _Summary:
    """What a step that sent thousands of calls sent: how many of each kind, and the last few."""

    def __init__(self, what: str, first: int, sent: int, counts: dict[str, int], last: list[SentCall]) -> None:
        self.what, self.first, self.sent, self.counts, self.last = what, first, sent, counts, last

    def __repr__(self) -> str:
        kinds = ", ".join(f"{n} {name}" for name, n in sorted(self.counts.items(), key=lambda kv: -kv[1]))
        head = f"#   {self.what}: calls {self.first}-{self.first + self.sent - 1}: {kinds} (and the sizes); the last {len(self.last)}:"
        return "\n".join([head] + [repr(c) for c in self.last])

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _scribble(buffer: Any) -> None:
    """Overwrite a buffer the caller lent to a call, if it is a writable list or integer array."""
    if isinstance(buffer, list) and all(isinstance(x, int) for x in buffer):
        buffer[:] = [SCRIBBLE_TOKEN] * len(buffer)
    elif isinstance(buffer, np.ndarray) and buffer.flags.writeable and np.issubdtype(buffer.dtype, np.integer):
        buffer[...] = SCRIBBLE_TOKEN if buffer.dtype.itemsize >= 4 else -1


def _checks_locks(self: RadixCacheMachine) -> bool:
    return self.capabilities.checks_locks


def _can_quarantine(self: RadixCacheMachine) -> bool:
    return self.capabilities.supports_quarantine


def _can_reset(self: RadixCacheMachine) -> bool:
    return self.capabilities.supports_reset


def _can_lock_later(self: RadixCacheMachine) -> bool:
    return not self.capabilities.locks_only_after_match


def _validates_input(self: RadixCacheMachine) -> bool:
    return self.capabilities.validates_input


def _can_admit(self: RadixCacheMachine) -> bool:
    return self.running < MAX_RUNNING


def _small_world(self: RadixCacheMachine) -> bool:
    return len(self.model.unlocked_leaves) <= SMALL_WORLD_LEAVES


class RadixCacheMachine(RuleBasedStateMachine):
    """Override ``factory``, ``capabilities`` and ``page_size`` (see :func:`machine_for`)."""

    factory: Callable[..., Any]
    capabilities: Capabilities = DEFAULT_CAPABILITIES
    page_size: int = 1
    options: MachineOptions = MachineOptions()
    records = False  # keep a transcript of acts and calls (radixcheck.properties.findings.transcript), for a repro file
    known_deviations: tuple[Callable[[], Deviation], ...] = ()  # set by a waiver's ``known:`` (findings.verdict.waiving)

    sequences = Bundle("sequences")
    handles = Bundle("handles")
    locks = Bundle("locks")

    def __init__(self) -> None:
        super().__init__()
        self.allocator = SlotAllocator(POOL_SIZE, churned=self.options.churned_slots)  # slots come back recycled, out of order
        self.cache = self._build(self.allocator)
        self.transcript: list[Act] = []  # every act, with its calls (radixcheck.properties.findings.transcript)
        self.acting: Act | None = None
        self.step: str | None = None  # the rule running now (set by radixcheck.properties.findings.verdict.naming_steps)
        self.step_number = 0  # how many steps have begun
        self.story: str | None = None  # the production-world story running now (scale_machine)
        self.model = PrefixSetModel(self.page_size)
        self.model.deviations = [make() for make in self.known_deviations]  # waived known order bugs: their stamps too
        self.deviation_met: set[str] = set()  # the known deviations an eviction of this run has followed (said once)
        self.policy = self.capabilities.policy  # a declared Policy: its order is judged (oracle 4, eviction order)
        if self.policy is not None:
            self.model.order_key, self.model.hits_on_match = self.policy.key, self.policy.hits_on_match
        self.request_priority = 0  # the priority= the next requests carry (a policy that takes one)
        pool = self.capabilities.second_pool  # a second pool's inserts carry window= (a SlidingWindow) or state= (a StatePool)
        second = None if pool is None else "window" if hasattr(pool, "window") else "state"
        self.layers = layers_for(self.capabilities.namespaces, self.policy, second)  # what the declared parts add to each call
        self.block = max(self.page_size, MIN_BLOCK)
        self.known: list[tuple[int, ...]] = []  # sequences sent without a namespace
        self.known_elsewhere: list[tuple[Any, tuple[int, ...]]] = []  # (namespace, sequence) sent with one
        self.running = 0  # locks in the locks bundle, not yet released by unlock
        self.calls_sent = 0
        self.clock_calls: dict[int, str] = {}  # the model's clock -> the call that set it
        self._quiet: deque[SentCall] | None = None  # while a step sends thousands of calls: the last few
        self._quiet_counts: Counter[str] = Counter()

    # ---- helpers ---------------------------------------------------------------------------

    def _requests_running(self) -> bool:
        """Whether running requests hold locks in the tree now (the lifecycle machine's; none here)."""
        return False

    def _build(self, allocator: SlotAllocator) -> Any:
        """A cache from the factory over ``allocator`` (a hybrid machine gives it its second pool too)."""
        return guarded("factory", type(self).factory, allocator, self.page_size)

    def _query(self, base: tuple[int, ...], cut: Length, tail: Span, min_shared: int = 0) -> tuple[int, ...]:
        """A known sequence cut at ``cut`` (at least ``min_shared`` tokens), plus a new tail."""
        keep = max(min_shared, cut.tokens(self.block))
        return base[:keep] + tail.tokens(self.block)

    def _call(self, name: str, *args: Any, namespace: Any = UNSAID, **extra: Any) -> Any:
        """Send one call, and show it under the step that sent it in a failing program (sizes
        are asked after every step and not shown). Afterwards the caller reuses its buffers, as
        an engine reuses its request-to-token rows: every list or array it passed is overwritten
        (the contract says a cache must copy what it keeps)."""
        self.calls_sent += 1
        # the declared parts' keywords (radixcheck.properties.cache.layers): a target without namespaces never gets one
        second = extra.pop("second", None)  # an insert's second-pool value (window slots or a state): its layer's keyword
        keywords = keywords_for(self.layers, name, Tags(namespace, self.request_priority, second))
        keywords.update(extra)
        layer_tally.sent(name, keywords, self.policy, self._requests_running())  # the card's "Layers driven together"
        sent = SentCall(self.calls_sent, name, tuple(_snapshot(a) for a in args), kwargs={k: _snapshot(v) for k, v in keywords.items()})
        if self.acting is not None:
            self.acting.calls.append(sent)
        try:
            sent.result = _snapshot(result := guarded(name, getattr(self.cache, name), *args, **keywords))
            return result
        except BaseException as exc:
            sent.result, sent.raised = f"raised {type(exc).__name__}", exc
            raise
        finally:
            if self.options.reuses_buffers:
                for arg in (*args, *extra.values(), second):
                    _scribble(arg)
            if name not in SIZE_CALLS:
                self._show(sent)

    def _show(self, sent: SentCall) -> None:
        """Show a call under its step (Hypothesis formats it only for the example it prints); a
        step that sends thousands (``quietly``) counts them and keeps the last few instead."""
        if self._quiet is None:
            if currently_in_test_context():  # the machine also runs outside Hypothesis (benchmarks)
                note(sent)
        else:
            self._quiet.append(sent)
            self._quiet_counts[sent.name] += 1

    @contextmanager
    def quietly(self, what: str, shown_last: int = 12):
        """Send many calls without showing each: afterwards (or at a failure) one note says how
        many of each kind ``what`` sent, and shows the last ``shown_last`` of them."""
        self._quiet, self._quiet_counts = deque(maxlen=shown_last), Counter()
        first = self.calls_sent + 1
        self.story = what
        try:
            yield
        finally:
            if currently_in_test_context():
                note(_Summary(what, first, self.calls_sent - first + 1, dict(self._quiet_counts), list(self._quiet)))
            self._quiet = None
            self.story = None

    def _used_by(self, clock: int) -> str:
        """The call that last set the model's clock to ``clock`` (for recency messages)."""
        return self.clock_calls.get(clock, f"time {clock}")

    def _as_list_or_array(self, tokens: tuple[int, ...]) -> Any:
        """Alternately a list and an int64 array: the contract accepts both, so both must work."""
        self._array_next = not getattr(self, "_array_next", False) and not self.options.tokens_as_lists
        return np.asarray(tokens, dtype=np.int64) if self._array_next else list(tokens)

    @property
    def _bigram(self) -> bool:
        return self.capabilities.key_mode == "bigram"

    def _send(self, keys: tuple[int, ...]) -> Any:
        """The raw tokens whose keys are ``keys``: themselves, or for a bigram cache ``(BIGRAM_START,)
        + keys`` (the contract's "Key modes"), alternately as a list and an array."""
        return self._as_list_or_array(((BIGRAM_START,) + tuple(keys)) if self._bigram else keys)

    def _mark(self) -> int:
        return len(self.allocator.freed_log)

    def _freed_since(self, mark: int) -> list[int]:
        return self.allocator.freed_log[mark:]

    def _remember(self, tokens: tuple[int, ...], namespace: Any = UNSAID) -> None:
        if namespace is not UNSAID:
            if tokens and (namespace, tokens) not in self.known_elsewhere:
                self.known_elsewhere = (self.known_elsewhere + [(namespace, tokens)])[-MAX_PROBES:]
        elif tokens and tokens not in self.known:
            self.known = (self.known + [tokens])[-MAX_PROBES:]

    def _inserted_by(self, clock: int) -> str:
        return self.clock_calls.get(clock, f"the insert at time {clock}")

    @act
    def _match(self, tokens: tuple[int, ...], after_quarantine: tuple | None = None, namespace: Any = UNSAID) -> HandleRecord:
        """Match ``tokens`` (under ``namespace``) and check the answer against the model (oracle 1),
        and, for a target with namespaces, that no slot of it is another namespace's (oracle 10).
        After a quarantine, ``after_quarantine`` = (quarantined prefix, expected length, its
        namespace) checks oracle 5 on the raw answer (oracle 10 if the probe is in another
        namespace), after its shape (an answer longer than the query is wrong whatever came before it)."""
        key = namespace_key(namespace)
        values, handle = self._call("match_prefix", self._send(tokens), namespace=namespace)
        values = _as_slot_array(values, "match_prefix")
        path = self.model.match(tokens, key)
        where = "" if namespace is UNSAID else f", namespace={namespace!r}"
        self.clock_calls[self.model.clock] = f"call {self.calls_sent}: match_prefix({shown(tokens)}{where})"
        expected = self.model.values_of(path)
        if len(values) % self.page_size or len(values) > len(tokens):  # wrong whatever came before: said first
            raise _wrong_match(f"match_prefix({shown(tokens)}{where}) returned {len(values)} values: more than the query "
                               f"or not page-aligned", expected)
        if self.capabilities.namespaces:
            check_match_isolated(self.model, key, tokens, values.tolist(), self._inserted_by)
        if after_quarantine is not None:
            quarantined, want, quarantined_in = after_quarantine
            check_quarantine_left_others(quarantined_in, quarantined, key, tokens, len(values), want)
            if len(values) != want:
                raise NeverSawViolation(f"after evict_prefix({shown(quarantined)}), {shown(tokens)} matches {len(values)} tokens; "
                                        f"a cache that never saw the prefix matches {want}",
                                        Check("len(values) == expected_length", "len(values)", {"expected_length": want}))
        if len(values) != len(expected):
            raise _wrong_match(f"match_prefix({shown(tokens)}{where}) matched {len(values)} tokens; "
                               f"the longest cached prefix has {len(expected)}", expected)
        if values.tolist() != expected:
            raise _wrong_match(f"match_prefix({shown(tokens)}{where}) returned slots {shown(values.tolist())}, "
                               f"but {shown(expected)} were inserted there", expected)
        if self.options.reuses_buffers:
            _scribble(values)  # the caller owns what a match returns (the contract): a cache must not hand out its own storage
        return HandleRecord(handle, path, tokens[: len(expected)], namespace=namespace)

    def _make_room(self, tokens: tuple[int, ...]) -> None:
        """A target with a fixed pool (``max_cached_pages``) is never asked to hold more: before an
        insert that could overflow it, the caller evicts what it needs, as a scheduler does. Called
        before the caller allocates the request's slots (the scheduler evicts, then allocates), so a
        finding in this eviction, waived, ends the step with no slot held by nobody."""
        limit = self.capabilities.max_cached_pages
        if limit is not None:
            assume(len(tokens) // self.page_size <= limit)  # an engine refuses a request longer than its pool
            over = len(self.model.slot_owner) // self.page_size + len(tokens) // self.page_size - limit
            if over > 0:
                self._evict(over * self.page_size)

    def _insert(self, tokens: tuple[int, ...], values: np.ndarray, namespace: Any = UNSAID, **extra: Any) -> int:
        """Insert with a copy of ``values``: the copy is the caller's buffer, overwritten after the call
        (``extra``: a hybrid cache's second-pool keyword). The caller made room first (:meth:`_make_room`)."""
        if self._bigram:  # one more raw token than keys, with a slot of its own that no bigram keeps: the caller frees it
            last = self.allocator.alloc(1)
            sent = np.concatenate([values, last])
            prefix_len = _as_int(self._call("insert", self._send(tokens), sent, namespace=namespace, **extra), "insert")
            self.allocator.free(last)
        else:
            prefix_len = _as_int(self._call("insert", self._as_list_or_array(tokens), values.copy(), namespace=namespace, **extra),
                                 "insert")
        expected = self.model.insert(tokens, values.tolist(), namespace_key(namespace), self.request_priority)
        where = "" if namespace is UNSAID else f", namespace={namespace!r}"
        self.clock_calls[self.model.clock] = f"call {self.calls_sent}: insert({shown(tokens)}{where})"
        if prefix_len != expected and self.capabilities.namespaces:
            check_insert_isolated(self.model, namespace_key(namespace), tokens, prefix_len, expected, self._inserted_by)
        if prefix_len != expected:
            raise PrefixSetViolation(f"insert({shown(tokens)}{where}) returned prefix_len {prefix_len}; "
                                     f"{expected} tokens were already cached",
                                     Check("result == expected", "result", {"expected": expected}))
        return prefix_len

    def _free_callers_copies(self, values: np.ndarray, owned_from: int, prefix_len: int, length: int) -> None:
        """The caller frees the slots it brought that the cache did not take: those of the already
        cached prefix (``values[owned_from:prefix_len]``) and of the unaligned tail."""
        aligned = length // self.page_size * self.page_size
        self.allocator.free(np.concatenate([values[owned_from:prefix_len], values[max(aligned, owned_from) :]]))

    @act
    def _insert_request(self, tokens: tuple[int, ...], namespace: Any = UNSAID) -> int:
        """A caller inserts a sequence it computed in fresh slots, then frees its duplicates."""
        self._make_room(tokens)
        values = self.allocator.alloc(len(tokens))
        prefix_len = self._insert(tokens, values, namespace)
        self._free_callers_copies(values, 0, prefix_len, len(tokens))
        self._remember(tokens, namespace)
        return prefix_len

    @act
    def _serve_insert(self, tokens: tuple[int, ...], record: HandleRecord) -> int:
        """A running request (``record`` its locked match) computed the rest of ``tokens`` in fresh
        slots: the whole sequence is inserted with the matched slots in front, then the caller
        frees the fresh slots the cache did not take."""
        cached = len(record.tokens)
        self._make_room(tokens)
        values = np.concatenate([np.asarray(self.model.values_of(record.path), dtype=np.int64), self.allocator.alloc(len(tokens) - cached)])
        prefix_len = self._insert(tokens, values, record.namespace)
        self._free_callers_copies(values, cached, prefix_len, len(tokens))
        self._remember(tokens, record.namespace)
        return prefix_len

    def _legal(self, name: str, record: HandleRecord) -> None:
        """``inc_lock_ref``/``dec_lock_ref`` that the contract says must work: a refusal is a
        refcount violation (the cache's counters disagree with the locks actually taken)."""
        try:
            self._call(name, record.handle)
        except (OperationTimeout, ContractViolation, RecursionError, MemoryError, TransportError):
            raise  # a hang, a finding of its own, a crash, or a wire server that stopped or broke the protocol: not a refusal
        except Exception as exc:  # noqa: BLE001 - the target refused a legal call
            raise RefcountViolation(f"{name}({record}) raised {type(exc).__name__}: {exc}; the call was legal",
                                    Check("raised is None", "repr(raised)")) from exc

    @act
    def _lock(self, record: HandleRecord) -> None:
        self._legal("inc_lock_ref", record)
        self.model.lock(record.path)
        record.held += 1

    @act
    def _release(self, record: HandleRecord) -> None:
        """Send ``dec_lock_ref`` (a legal one) and check what it frees."""
        mark = self._mark()
        self._legal("dec_lock_ref", record)
        check_freed(self._freed_since(mark), self.model.unlock(record.path), "dec_lock_ref")
        record.held = max(0, record.held - 1)

    @act
    def _unlock_paired(self, record: HandleRecord) -> None:
        """Release a lock this record took. If that lock is gone (a reset, or an unpaired unlock
        took the counters down), only a target that checks its callers is asked."""
        if record.held > 0 and self.model.can_unlock(record.path):
            self._release(record)
        elif self.capabilities.checks_locks:
            self._unlock_unpaired(record)

    @act
    def _unlock_unpaired(self, record: HandleRecord) -> None:
        """An unlock through a handle that may hold no lock (checks_locks targets only). Through a
        handle that holds one of its own, it is a release; where a counter on the path is 0 it is
        unmatched under any rule, and must be refused. Through a handle that holds none while
        other requests hold the path, the contract leaves it to the cache (one that counts locks
        per node takes it, one that counts them per handle refuses it): it is never sent."""
        if record.held > 0 and self.model.can_unlock(record.path):
            self._release(record)
        elif not self.model.can_unlock(record.path):
            self._expect_refusal(f"unmatched unlock of {record}", "dec_lock_ref", record.handle)

    @act
    def _evict(self, num_tokens: int) -> None:
        mark = self._mark()
        evicted = _as_int(self._call("evict", num_tokens), "evict")
        self._judge_evict(num_tokens, evicted, self.allocator.frees_since(mark))

    def _judge_evict(self, num_tokens: int, evicted: int, calls: list[list[int]]) -> None:
        """``evict(num_tokens)`` returned ``evicted`` and freed ``calls`` (one list per ``free()``)."""
        freed = [slot for call in calls for slot in call]
        if evicted != len(freed):
            raise ReturnValueViolation(f"evict({num_tokens}) returned {evicted} but freed {len(freed)} slots",
                                       Check("result == len(freed)", "(result, len(freed))"))
        if self.policy is not None:
            self._judge_order(num_tokens, calls)
            return
        lru = self.capabilities.eviction_policy == "lru"
        owners = {self.model.slot_owner.get(slot) for slot in freed} - {None} if lru and self.model.deviations else set()
        before = {d: {e: self.model.deviated_stats(e, d).last_use for e in owners} for d in self.model.deviations if owners}
        removed = self.model.remove_freed(freed)
        check_none_locked(removed)
        oldest = self.model.oldest_unlocked_leaf()
        check_amount(num_tokens, [len(call) for call in calls], oldest.prefix if oldest else None)
        if lru:
            call_of = {slot: i for i, call in enumerate(calls) for slot in call}
            try:
                check_lru([(call_of[e.values[0]], e) for e in removed], oldest, num_tokens, self.page_size, at=self._used_by)
            except LRUOrderViolation as exc:
                exc.explained_by = frozenset(d.name for d, stamps in before.items()
                                             if self._lru_by(d, stamps, removed, call_of, num_tokens))
                if not exc.explained_by or not exc.explained_by <= self.deviation_met:
                    self.deviation_met |= exc.explained_by  # a known deviation is said once a run, as in _judge_order
                    raise

    def _lru_by(self, deviation: Deviation, before: dict[Entry, int], removed: list[Entry], call_of: dict[int, int],
                num_tokens: int) -> bool:
        """Whether the eviction just applied is right by the LRU oracle with ``deviation``'s last uses:
        ``before``, those of the evicted pages before it (each then hands its own to its parent, deepest
        first, as the model's ``last_use`` does), and the survivors' as the deviation keeps them now."""
        stamps = dict(before)
        for entry in sorted(removed, key=lambda e: -e.depth):
            if entry.parent in stamps:
                stamps[entry.parent] = max(stamps[entry.parent], stamps[entry])
        survivors = [(self.model.deviated_stats(e, deviation).last_use, e.serial, e) for e in self.model.unlocked_leaf_list()]
        oldest = min(survivors, default=None)
        try:
            check_lru([(call_of[e.values[0]], _Restamped(e, stamps[e])) for e in removed],
                      _Restamped(oldest[2], oldest[0]) if oldest else None, num_tokens, self.page_size, at=self._used_by)
        except LRUOrderViolation:
            return False
        return True

    def _judge_order(self, num_tokens: int, calls: list[list[int]]) -> None:
        """A declared policy's eviction, ``free()`` call by call: lock safety first, then each call's
        leaves against the coldest unlocked leaf still there (a parent left childless by an earlier
        call included), then the amount.

        The order is a choice: a wrong one is raised only once the model has applied the whole
        eviction (the cache's choice), so that a run looking past it (a waived order finding)
        goes on with a model that holds what the cache holds, and reports no echo of it.

        A call that is wrong by the contract's statistics but right by those of a waived known
        deviation (``known_deviations``) is that deviation: it is raised (for its waiver to record)
        the first time in a run, marked ``explained_by``; any other wrong call is the finding."""
        owners = [self.model.slot_owner.get(slot) for call in calls for slot in call]
        check_none_locked([e for e in dict.fromkeys(owners) if e is not None and e.state == "cached"])
        freed_in = {slot: i for i, call in enumerate(calls) for slot in call}
        wrong_order: EvictionOrderViolation | None = None
        known: EvictionOrderViolation | None = None
        for i, call in enumerate(calls):
            group = {self.model.slot_owner.get(slot) for slot in call} - {None}
            victims = [e for e in group if e.state == "cached" and not e.children and e.locks == 0]
            colder = self.model.coldest_unlocked_leaf(group)
            later = colder is not None and freed_in.get(colder.values[0], -1) > i
            if wrong_order is None:
                try:
                    check_order(victims, colder, later, num_tokens, self._policy_key, self._described, self.policy.name)
                except EvictionOrderViolation as exc:
                    left = [e for e in self.model.unlocked_leaf_list() if e not in group]
                    exc.choice = Choice(tuple(map(self.model.leaf_stats, victims)), tuple(map(self.model.leaf_stats, left)))
                    exc.explained_by = self._deviations_making(victims, left)
                    if not exc.explained_by:
                        wrong_order = exc  # the first call out of order is the finding; the model still follows the cache
                    elif known is None:
                        known = exc
            self.model.remove_freed(call)
        if wrong_order is not None:
            raise wrong_order
        coldest = self.model.coldest_unlocked_leaf(set())
        check_amount(num_tokens, [len(call) for call in calls], coldest.prefix if coldest else None)
        if known is not None and not known.explained_by <= self.deviation_met:
            self.deviation_met |= known.explained_by  # said once a run: afterwards the eviction is simply accepted
            raise known

    def _deviations_making(self, victims: list[Entry], left: list[Entry]) -> frozenset[str]:
        """The known deviations by whose statistics a cache evicting by the policy's key frees
        ``victims`` and leaves ``left`` (only on a wrong choice: it reads every unlocked leaf)."""
        return frozenset(d.name for d in self.model.deviations
                         if Choice(tuple(self.model.deviated_stats(e, d) for e in victims),
                                   tuple(self.model.deviated_stats(e, d) for e in left)).made_by(self.policy.key))

    def _policy_key(self, entry: Entry) -> Any:
        return self.policy.key(self.model.leaf_stats(entry))

    def _described(self, entry: Entry) -> str:
        """A leaf's statistics, with the calls that set its times (for an order message)."""
        s = self.model.leaf_stats(entry)
        said = f"last used by {self._used_by(s.last_use)}, cached by {self._inserted_by(s.created)}, {s.hits} hit(s)"
        if self.policy.takes_priority:
            said += f", priority {s.priority}"
        if s.start or s.history != s.depth:
            said += f", node at tokens {s.start}-{s.depth} of a branch that reached {s.history}"
        return said

    @act
    def _quarantine(self, tokens: tuple[int, ...], namespace: Any = UNSAID) -> None:
        """``evict_prefix`` (under ``namespace``), then every known query matched again: those of its
        namespace as a cache that never saw the prefix would (oracle 5), the others' as before
        (oracle 10, checked first, with the slots it freed)."""
        self._abort_in_flight()  # the hook's first: a running request's frees are its abort's, not the quarantine's
        key = namespace_key(namespace)
        probes = [(UNSAID, q) for q in self.known] + self.known_elsewhere + [(namespace, tokens)]
        matched_before = [len(self.model.longest_cached(q, namespace_key(n))) * self.page_size for n, q in probes]
        mark = self._mark()
        removed = _as_int(self._call("evict_prefix", self._send(tokens), namespace=namespace), "evict_prefix")
        freed = self._freed_since(mark)
        if self.capabilities.namespaces:
            check_quarantine_isolated([self.model.slot_owner.get(s) for s in freed], key, tokens, self._inserted_by)
        expected_removed, expected_freed = self.model.quarantine(tokens, key)
        if self.capabilities.namespaces:  # the other namespaces first: a cache that crossed over shows there
            for (probe_in, query), before in zip(probes, matched_before, strict=True):
                if namespace_key(probe_in) != key:
                    self._match(query, (tokens, before, key), probe_in)
        where = "" if namespace is UNSAID else f", namespace={namespace!r}"
        if removed != expected_removed:
            raise NeverSawViolation(f"evict_prefix({shown(tokens)}{where}) removed {removed} tokens, expected {expected_removed}",
                                    Check("result == expected", "result", {"expected": expected_removed}))
        check_freed(freed, expected_freed, f"evict_prefix({shown(tokens)}{where})")
        for (probe_in, query), before in zip(probes, matched_before, strict=True):
            if namespace_key(probe_in) == key:
                self._match(query, (tokens, expected_match_length(before, query, tokens, self.page_size), key), probe_in)

    def _snapshot(self) -> tuple:
        """What a refused call must leave as it was: the sizes, and the slots (only the cache
        frees them, and every free is logged)."""
        sizes = tuple(self._call(f) for f in ("total_size", "evictable_size", "protected_size"))
        return sizes, len(self.allocator.freed_log), len(self.allocator.violations)

    def _expect_refusal(self, what: str, name: str, *args: Any, before: tuple | None = None, namespace: Any = UNSAID) -> None:
        """``name(*args)`` must raise and leave the cache exactly as it was (``before``, if the caller
        took it already). A lock or unlock the contract forbids is a refcount violation; malformed
        arguments (``what`` starts "bad input") are bad input."""
        violation = BadInputViolation if what.startswith("bad input") else RefcountViolation
        before = before or self._snapshot()
        try:
            self._call(name, *args, namespace=namespace)
        except NOT_A_REFUSAL:  # a hang, a server that broke the protocol or said it crashed: not a refusal
            raise
        except Exception:  # noqa: BLE001 - any clear exception will do; the state must not move
            pass
        else:
            raise violation(f"{what}: {name} accepted it instead of raising", Check("raised is not None", "repr(result)"))
        try:
            after = self._snapshot()
        except (OperationTimeout, TransportError):
            raise
        except Exception as exc:  # noqa: BLE001 - it refused, and answers nothing since: the finding as it was, and a replay past failures ends here
            no_longer_answers(exc)
            raise
        if after != before:
            raise violation(f"{what}: {name} raised but changed the cache: {before[0]} -> {after[0]}",
                            Check("state() == before", "(raised, before, state())"))

    # ---- building the cache ------------------------------------------------------------------

    @initialize(target=sequences, span=FRESH)
    def seed_sequence(self, span: Span) -> tuple[int, ...]:
        return span.tokens(self.block)

    @initialize(seed=st.integers(0, 2**16))
    def churned_slot_pool(self, seed: int) -> None:
        """The KV slot pool has been serving for hours: which recycled slot comes back when is
        drawn from ``seed``."""
        self._reseed(seed)

    @act
    def _reseed(self, seed: int) -> None:
        self.allocator.reseed(seed)

    @rule(target=sequences, span=FRESH)
    def new_sequence(self, span: Span) -> tuple[int, ...]:
        return span.tokens(self.block)

    @rule(target=sequences, base=sequences, cut=CUTS, tail=TAILS)
    def insert(self, base: tuple[int, ...], cut: Length, tail: Span) -> tuple[int, ...]:
        """A caller inserts a sequence it computed in fresh slots, then frees its duplicates."""
        tokens = self._query(base, cut, tail)
        self._insert_request(tokens)
        return tokens

    @rule(target=sequences, base=sequences, cut=CUTS, tail=TAILS)
    def insert_then_evict(self, base: tuple[int, ...], cut: Length, tail: Span) -> tuple[int, ...]:
        """A request's KV is inserted and the scheduler at once needs two pages back: the pages
        just inserted (or re-inserted) are the most recently used and must go last."""
        tokens = self._query(base, cut, tail)
        self._insert_request(tokens)
        self._evict(2 * self.page_size)
        return tokens

    @rule(target=sequences, base=sequences, cut=CUTS, tail=TAILS)
    def serve(self, base: tuple[int, ...], cut: Length, tail: Span) -> tuple[int, ...]:
        """A request end to end: match, lock, compute the suffix, insert, free duplicates, unlock."""
        tokens = self._query(base, cut, tail)
        record = self._match(tokens)
        self._lock(record)
        self._serve_insert(tokens, record)
        self._release(record)
        return tokens

    @rule(target=sequences, base=sequences, blocks=st.integers(40, 64), seed=st.integers(0, 15), cut_percent=st.integers(1, 99))
    def long_prompt(self, base: tuple[int, ...], blocks: int, seed: int, cut_percent: int) -> tuple[int, ...]:
        """A long prompt (hundreds of tokens; thousands at page size 64) extends a known one, then
        a request diverges from it deep inside its single long edge."""
        tokens = base + Span(blocks, 0, seed).tokens(self.block)
        self._insert_request(tokens)
        self._match(tokens[: len(tokens) * cut_percent // 100] + Span(1, 0, seed + 1).tokens(self.block))
        return tokens

    @rule(base=sequences, position_percent=st.integers(0, 99), kind=st.sampled_from(NEIGHBOURS))
    def neighbour_id(self, base: tuple[int, ...], position_percent: int, kind: str) -> None:
        """Cache a sequence, then match it with one id swapped for a neighbour that a narrower
        type would confuse with it: the id with bit 16 or 17 flipped (equal as uint16), or, for
        an id of 2**24 + 1, 2**24 (equal as float32). The match must stop before the swap."""
        if not base:
            return
        at = len(base) * position_percent // 100
        if kind == "float32":
            cached, swapped = FLOAT32_TWINS
        else:
            cached, swapped = base[at], base[at] ^ (1 << int(kind.removeprefix("bit")))
        self._insert_request(base[:at] + (cached,) + base[at + 1 :])
        self._match(base[:at] + (swapped,) + base[at + 1 :])

    # ---- requests: match, lock, unlock -----------------------------------------------------

    @rule(target=handles, base=sequences, cut=CUTS, tail=TAILS)
    def match(self, base: tuple[int, ...], cut: Length, tail: Span) -> HandleRecord:
        return self._match(self._query(base, cut, tail, min_shared=1))

    @precondition(_can_admit)
    @rule(target=locks, base=sequences, cut=CUTS, tail=TAILS)  # sharing a prefix: locking the root tests nothing
    def admit(self, base: tuple[int, ...], cut: Length, tail: Span) -> HandleRecord:
        """A request starts running: match its prompt and lock the matched prefix at once."""
        return self._admit(self._query(base, cut, tail, min_shared=1))

    def _admit(self, tokens: tuple[int, ...], namespace: Any = UNSAID) -> HandleRecord:
        record = self._match(tokens, None, namespace)
        self._lock(record)
        self.running += 1
        return record

    @precondition(_can_lock_later)
    @rule(target=locks, record=handles)
    def lock(self, record: HandleRecord) -> Any:
        """Lock a handle from an earlier match: it must work while the handle is live, and a
        target that checks its callers must refuse a stale or quarantined one."""
        if self._lock_or_refuse(record):
            self.running += 1
            return record
        return multiple()

    @act
    def _lock_or_refuse(self, record: HandleRecord) -> bool:
        """Lock a live handle (and say so); a stale or quarantined one is refused by a target that
        checks its callers (and never sent to one that trusts them)."""
        if self.model.can_lock(record.path):
            self._lock(record)
            return True
        if self.capabilities.checks_locks:
            self._expect_refusal(f"locking the stale/quarantined {record}", "inc_lock_ref", record.handle)
        return False

    @act
    def _refuse_stale_lock(self, record: HandleRecord, what: str) -> None:
        """A checking target must refuse a lock of ``record``, whose handle went stale (``what``
        says how). Sent only while the model says the handle cannot be locked."""
        if not self.model.can_lock(record.path):
            self._expect_refusal(f"locking {what}", "inc_lock_ref", record.handle)

    @rule(record=consumes(locks))
    def unlock(self, record: HandleRecord) -> None:
        """A running request finishes and releases its lock."""
        self.running -= 1
        self._unlock_paired(record)

    @rule(base=sequences, cut=CUTS, tail=TAILS)
    def lock_then_unlock(self, base: tuple[int, ...], cut: Length, tail: Span) -> None:
        """A request is admitted and finishes at once; a target that checks its callers then gets
        the release a second time (lock counts drifting apart, sglang #24153) and must refuse it
        where it is unmatched (a counter on the path is 0); while other requests hold the whole
        path it is not sent (see ``_unlock_unpaired``)."""
        record = self._match(self._query(base, cut, tail, min_shared=1))
        self._lock(record)
        self._release(record)
        if self.capabilities.checks_locks:
            self._unlock_unpaired(record)

    @precondition(_checks_locks)
    @rule(record=handles)
    def unlock_any(self, record: HandleRecord) -> None:
        """Unlock a handle that may hold no lock (targets that check their callers only)."""
        self._unlock_unpaired(record)

    # ---- eviction ------------------------------------------------------------------------------

    @rule(amount=AMOUNTS)
    def evict(self, amount: Length) -> None:
        self._evict(amount.tokens(self.block))

    def _unlocked_leaves(self) -> list[Entry]:
        """The unlocked leaves, least recently used first; if there are fewer than two, two
        requests that fork at their first token are served first, so the recency scenarios
        below always have something to compare."""
        if len(self.model.unlocked_leaves) < 2:
            for first in SMALL_IDS[:2]:
                self._insert_request((first,) * (2 * self.page_size))
        return self.model.unlocked_leaf_list()

    @precondition(_small_world)
    @rule()
    def hit_short_of_lru_leaf(self) -> None:
        """A request reuses all but the last page of the least recently used leaf, then memory
        pressure evicts two pages. That last page was not used, so it is still the oldest and must
        go first; a cache that stamps a whole edge before splitting it evicts something newer."""
        deep = [e for e in self._unlocked_leaves() if len(e.prefix) > self.page_size]
        if deep:
            oldest = min(deep, key=lambda e: e.last_use)
            self._match(oldest.prefix[: -self.page_size])
            self._evict(2 * self.page_size)

    @precondition(_small_world)
    @rule()
    def reinsert_short_of_lru_leaf(self) -> None:
        """A request whose prompt is all but the last page of the least recently used leaf is
        computed and inserted (it was preempted before matching), then memory pressure evicts two
        pages. The insert ends inside the leaf's edge: only what it covered was used, so the last
        page is still the oldest; a cache that stamps the whole edge instead of cutting it at the
        insert's end evicts something newer (LightLLM fc72ffa, reports/findings/lightllm.md #1)."""
        deep = [e for e in self._unlocked_leaves() if len(e.prefix) > self.page_size]
        if deep:
            oldest = min(deep, key=lambda e: e.last_use)
            self._insert_request(oldest.prefix[: -self.page_size])
            self._evict(2 * self.page_size)

    @precondition(lambda self: _can_lock_later(self) and _small_world(self))
    @rule()
    def queued_admission(self) -> None:
        """A request matched the least recently used leaf and waited while every other leaf was
        used; then it is admitted, memory runs short, and it finishes. While it runs, its leaf
        must not be evicted; a lock is not a use, so once it finishes that leaf is the oldest
        again and the next eviction must take it."""
        leaves = self._unlocked_leaves()
        if len(leaves) >= 2:
            oldest = leaves[0]
            record = self._match(oldest.prefix)
            for leaf in leaves:
                if leaf is not oldest:
                    self._match(leaf.prefix)
            self._lock(record)
            self._evict(self.page_size)
            self._release(record)
            self._evict(self.page_size)

    @precondition(_small_world)
    @rule()
    def reinsert_lru_leaf(self) -> None:
        """Requests use every unlocked leaf in turn; then the first of them is recomputed and
        re-inserted (say, after a preemption). That is a use, so the next eviction must take
        the second."""
        leaves = self._unlocked_leaves()
        if len(leaves) >= 2:
            for leaf in leaves:
                self._match(leaf.prefix)
            self._insert_request(leaves[0].prefix)
            self._evict(self.page_size)

    # ---- quarantine (evict_prefix) -------------------------------------------------------------

    @precondition(_can_quarantine)
    @rule(base=sequences, cut=CUTS, tail=TAILS)
    def quarantine(self, base: tuple[int, ...], cut: Length, tail: Span) -> None:
        tokens = self._query(base, cut, tail, min_shared=1)
        if tokens:  # an empty prefix is bad input, sent only by bad_input
            self._quarantine(tokens)

    @precondition(lambda self: _can_quarantine(self) and _can_admit(self))
    @rule(target=locks, base=sequences, cut=CUTS, tail=TAILS, keep=CUTS)
    def quarantine_running(self, base: tuple[int, ...], cut: Length, tail: Span, keep: Length) -> HandleRecord:
        """A request is admitted and its own prompt prefix is then quarantined while it runs."""
        return self._quarantine_running(self._query(base, cut, tail, min_shared=1), keep)

    def _quarantine_running(self, tokens: tuple[int, ...], keep: Length) -> HandleRecord:
        self._insert_request(tokens)  # an earlier request cached this prompt, so the admission locks it
        record = self._admit(tokens)
        prefix = record.tokens[: max(1, keep.tokens(self.block))]
        if prefix:
            self._quarantine(prefix)
        return record

    @precondition(lambda self: _can_quarantine(self) and _can_reset(self) and _can_admit(self))
    @rule(target=locks, base=sequences, cut=CUTS, tail=TAILS, keep=CUTS)
    def reset_while_quarantined(self, base: tuple[int, ...], cut: Length, tail: Span, keep: Length) -> HandleRecord:
        """The server flushes its cache (say, a weight update) while a request whose prompt was
        quarantined still runs, and another request holds a handle it matched: the detached pages
        must be freed too, and both handles go stale (a checking target must refuse them)."""
        record = self._quarantine_running(self._query(base, cut, tail, min_shared=1), keep)
        still_cached = [s for s in self.known if self.model.longest_cached(s)]
        matched = self._match(still_cached[-1]) if still_cached else None
        self._reset()
        if self.capabilities.checks_locks and not self.capabilities.locks_only_after_match:  # see foreign_handle
            for stale in (record, matched):
                if stale is not None and stale.tokens:
                    self._refuse_stale_lock(stale, f"{stale}, a handle from before reset()")
        return record

    @precondition(lambda self: _can_quarantine(self) and _can_lock_later(self))
    @rule(base=sequences, cut=CUTS, keep=CUTS)
    def lock_after_quarantine(self, base: tuple[int, ...], cut: Length, keep: Length) -> None:
        """A handle outlives its prefix: a request runs on a cached prefix, part of it is
        quarantined, then the same handle is locked again (a second request sharing it). A target
        that checks its callers must refuse the lock (a stale handle walks a dead parent chain,
        sglang #29291); one that trusts them is not sent it."""
        record = self._match(base[: max(self.page_size, cut.tokens(self.block))])
        if record.tokens:
            self._lock(record)  # a request runs on it, so its nodes are unlinked but not freed
            self._quarantine(record.tokens[: max(1, keep.tokens(self.block))])
            if self.capabilities.checks_locks:
                self._refuse_stale_lock(record, f"the quarantined {record}")
            self._release(record)

    @precondition(_can_quarantine)
    @rule(base=sequences, branch=st.integers(0, 3))
    def quarantine_one_sibling(self, base: tuple[int, ...], branch: int) -> None:
        """Policy eviction of one branch where the tree forks (a colliding first page may take a
        benign sibling with it, as the design document warns): the deepest fork on the cached
        path of ``base``, its ``branch``-th child in token order. The siblings must survive untouched."""
        path = self.model.longest_cached(base)
        forks = [e for e in [self.model.root, *path] if len(e.children) > 1]
        if forks:
            kids = sorted(forks[-1].children.values(), key=lambda e: e.page)
            self._quarantine(kids[branch % len(kids)].prefix)

    @precondition(_can_quarantine)
    @rule(base=sequences, cut=CUTS)
    def quarantine_near_miss(self, base: tuple[int, ...], cut: Length) -> None:
        """Quarantine a prompt that leaves a cached one only at its last page (often inside an
        edge): unless that sibling is cached too, nothing may be removed."""
        path = self.model.longest_cached(base[: max(self.page_size, cut.tokens(self.block))])
        if path:
            prefix = path[-1].prefix
            last = prefix[-self.page_size :]
            self._quarantine(prefix[: -self.page_size] + ((last[0] + 1) % len(SMALL_IDS),) + last[1:])

    @precondition(_can_quarantine)
    @rule(record=locks, keep=CUTS)
    def quarantine_locked(self, record: HandleRecord, keep: Length) -> None:
        """Quarantine a prefix a request still holds: unlinked now, freed at its last unlock."""
        prefix = record.tokens[: max(1, keep.tokens(self.block))]
        if prefix:
            self._quarantine(prefix)

    # ---- whole-cache checks --------------------------------------------------------------------

    @rule()
    def check_every_match(self) -> None:
        """Oracle 1 over every sequence seen lately: longest prefix, first-inserted values."""
        for query in self.known:
            self._match(query)
        for namespace, query in self.known_elsewhere:  # a target with namespaces: each under its own
            self._match(query, None, namespace)

    @precondition(_can_reset)
    @rule()
    def reset(self) -> None:
        self._reset()

    def _abort_in_flight(self) -> None:
        """A flush (``_reset``) or a quarantine first aborts the running requests, as a server does;
        called first by each machine's ``_reset`` and ``_quarantine`` that takes a mark, so that an
        abort's frees are never counted as the flush's. None run here (the lifecycle machines override it)."""

    @act
    def _reset(self) -> None:
        self._abort_in_flight()
        mark = self._mark()
        self._call("reset")
        check_freed(self._freed_since(mark), self.model.reset(), "reset")

    BAD_INPUT_KINDS = (
        "float_tokens", "negative_token", "nested_tokens", "none_tokens", "string_tokens", "scalar_tokens", "float_array",
        "2d_array", "0d_array", "bool_tokens", "short_values", "long_values", "2d_values", "float_values", "none_values",
        "negative_evict", "float_evict", "none_evict", "empty_quarantine", "none_quarantine", "unknown_handle_lock",
        "unknown_handle_unlock", "none_handle_unlock",
    )

    def _bad_calls(self) -> dict[str, tuple[str, tuple, str | None]]:
        """Kind -> (method, arguments, the capability it needs) for every kind of bad input. Its
        tokens are ids no sequence uses, two pages and one long: had a call gone through, it would show."""
        n = 2 * self.page_size + 1
        ids = [OUTSIDE_ID + i for i in range(n)]
        far = np.full(n, NEVER_A_SLOT, dtype=np.int64)
        return {
            "float_tokens": ("match_prefix", ([float(t) for t in ids],), None),
            "negative_token": ("insert", (ids[:-1] + [-2], far), None),
            "nested_tokens": ("match_prefix", ([ids[:2], ids[2:]],), None),
            "none_tokens": ("match_prefix", (None,), None),
            "string_tokens": ("match_prefix", ("abc" * n,), None),
            "scalar_tokens": ("insert", (OUTSIDE_ID, far[:1]), None),
            "float_array": ("insert", (np.asarray(ids, dtype=np.float64), far), None),
            "2d_array": ("match_prefix", (np.asarray([ids, ids]),), None),
            "0d_array": ("match_prefix", (np.asarray(OUTSIDE_ID),), None),
            "bool_tokens": ("match_prefix", ([True, False] * n,), None),
            "short_values": ("insert", (ids, far[:-1]), None),
            "long_values": ("insert", (ids, np.append(far, NEVER_A_SLOT)), None),
            "2d_values": ("insert", (ids, far.reshape(1, n)), None),
            "float_values": ("insert", (ids, far.astype(np.float64)), None),
            "none_values": ("insert", (ids, None), None),
            "negative_evict": ("evict", (-1,), None),
            "float_evict": ("evict", (1.5,), None),
            "none_evict": ("evict", (None,), None),
            "empty_quarantine": ("evict_prefix", ([],), "supports_quarantine"),
            "none_quarantine": ("evict_prefix", (None,), "supports_quarantine"),
            "unknown_handle_lock": ("inc_lock_ref", (object(),), "checks_locks"),
            "unknown_handle_unlock": ("dec_lock_ref", (object(),), "checks_locks"),
            "none_handle_unlock": ("dec_lock_ref", (None,), "checks_locks"),
        }

    @precondition(_validates_input)
    @rule(kinds=st.lists(st.sampled_from(BAD_INPUT_KINDS), min_size=1, max_size=8, unique=True))
    def bad_input(self, kinds: list[str]) -> None:
        """Bad input raises a clear exception and changes nothing (up to 8 kinds a step: with 4,
        a catalogued mutant lived in 2 % of streams; all 23 cost 45 % more time per run)."""
        self._refuse_bad_input(kinds)

    @act
    def _refuse_bad_input(self, kinds: list[str]) -> None:
        before = self._snapshot()  # one snapshot for every kind: each refused call must leave it so
        calls = self._bad_calls()
        for kind in kinds:
            name, args, needs = calls[kind]
            if needs is None or getattr(self.capabilities, needs):
                self._expect_refusal(f"bad input ({kind})", name, *args, before=before)

    @precondition(_checks_locks)
    @rule(op=st.sampled_from(["inc_lock_ref", "dec_lock_ref"]), base=sequences)
    def foreign_handle(self, op: str, base: tuple[int, ...]) -> None:
        """A handle from another cache (same tokens, same slot ids) must be refused. A cache that
        locks only through a fresh match (``locks_only_after_match``) is sent only the unlock: its
        lock is a match of the handle's tokens in this cache, which no foreign handle can change."""
        if op == "inc_lock_ref" and self.capabilities.locks_only_after_match:
            op = "dec_lock_ref"
        if len(base) >= self.page_size:  # else the handle would be the other cache's root
            self._refuse_foreign(op, base)

    @act
    def _refuse_foreign(self, op: str, base: tuple[int, ...]) -> None:
        """Build another cache, cache ``base`` there and lock it (so an unlock would be legal
        there), then send ``op`` of that cache's handle to this one: it must be refused."""
        self._send_foreign(op, base, cache_it_here=False)

    @act
    def _refuse_foreign_twin(self, op: str, base: tuple[int, ...]) -> None:
        """:meth:`_refuse_foreign` in the construction test's order (``test_handle_from_another_cache_is_refused``):
        this cache caches ``base`` too, after the other cache made its handle. A cache that numbers its
        handles per cache then gives the other's handle and its own node one number, as in that test.
        Sent by replays only (:mod:`radixcheck.properties.findings.root_cause`), never by a rule."""
        self._send_foreign(op, base, cache_it_here=True)

    def _send_foreign(self, op: str, base: tuple[int, ...], cache_it_here: bool) -> None:
        other_allocator = SlotAllocator(POOL_SIZE)
        other = self._build(other_allocator)
        raw = [BIGRAM_START, *base] if self._bigram else list(base)  # a bigram cache's keys are those of the raw tokens
        self._other_call(other, "insert", raw, other_allocator.alloc(len(raw)))
        foreign = self._other_call(other, "match_prefix", list(raw))[1]  # a hybrid match also answers its second pool
        self._other_call(other, "inc_lock_ref", foreign)
        if cache_it_here:
            self._insert_request(base)
        self._expect_refusal(f"{op} of a handle from another cache", op, foreign)

    def _other_call(self, other: Any, name: str, *args: Any) -> Any:
        """A call into the second cache of ``_refuse_foreign``, recorded with this act's calls."""
        self.calls_sent += 1
        keywords = keywords_for(self.layers, name, Tags(UNSAID, self.request_priority))
        sent = SentCall(self.calls_sent, name, tuple(_snapshot(a) for a in args), target="other", kwargs=keywords)
        if self.acting is not None:
            self.acting.calls.append(sent)
        sent.result = _snapshot(result := guarded(name, getattr(other, name), *args, **keywords))
        return result

    # ---- invariants (after every step) -------------------------------------------------------

    @invariant()
    @act
    def sizes_add_up(self) -> None:
        sizes = [_as_int(self._call(f), f) for f in ("total_size", "evictable_size", "protected_size")]
        check_sizes(self.model, total=sizes[0], evictable=sizes[1], protected=sizes[2])

    @invariant()
    @act
    def slots_conserved(self) -> None:
        check_slot_count(self.allocator.in_use, self.model.slot_owner, self.allocator.violations)


def machine_for(factory: Callable[..., Any], capabilities: Capabilities, page_size: int, name: str) -> type[RadixCacheMachine]:
    """A machine class for one target and page size. Its name keys Hypothesis's example
    database and derandomized seed, so saved failures stay attributed to the right target."""
    cls_name = f"{name}_page{page_size}".replace(".", "_").replace(":", "_")
    bases: list[type[RadixCacheMachine]] = []
    if capabilities.second_pool is not None:  # imported here: the hybrid rules extend this module's machine
        from radixcheck.properties.cache.contract import StatePool
        from radixcheck.properties.cache.hybrid import StateMachine, WindowLifecycleMachine, WindowMachine
        from radixcheck.properties.cache.hybrid_lifecycle import StateLifecycleMachine, WindowRequestsMachine

        if isinstance(capabilities.second_pool, StatePool):
            bases.append(StateMachine if capabilities.lifecycle == "off" else StateLifecycleMachine)
        else:
            bases.append({"off": WindowMachine, "tree": WindowLifecycleMachine}.get(capabilities.lifecycle, WindowRequestsMachine))
    elif capabilities.lifecycle != "off":  # imported here: the running requests' rules extend this module's machine
        from radixcheck.properties.cache.lifecycle import LifecycleMachine

        bases.append(LifecycleMachine)
    if capabilities.namespaces:  # so do the tenants'
        from radixcheck.properties.cache.tenants import TenantMachine

        bases.append(TenantMachine)
    if capabilities.policy is not None:  # the policies' scenarios likewise
        from radixcheck.properties.cache.policy_rules import PolicyMachine

        bases.append(PolicyMachine)
    return type(cls_name, tuple(bases) or (RadixCacheMachine,), {
        "factory": staticmethod(factory),
        "capabilities": capabilities,
        "page_size": page_size,
    })
