"""A Hypothesis state machine that drives any cache through the contract and checks the oracles.

Shipped for third-party caches, like zarr's store state machine: build a machine class for your
factory with :func:`machine_for` and run it with ``run_state_machine_as_test``. After every rule
the invariants check sizes (oracle 2) and slot conservation (oracle 3); the rules themselves
check matches against the prefix-set model (oracle 1), evictions for lock safety and LRU order
(oracles 2 and 4), and quarantine against a cache that never saw the prefix (oracle 5).

Queries are derived from earlier ones (a prefix of a known sequence plus a short new tail, over
a tiny alphabet), so the machine spends its time on shared prefixes and mid-edge divergence;
uniformly random tokens would almost never share a prefix and would test nothing.

A few rules are scenarios rather than single calls (a double unlock, a lock after quarantine, an
insert followed at once by an eviction, a hit just short of the least recently used leaf,
quarantining one branch of a fork or a near miss of a cached prompt, quarantining a running
request's prompt, a reset while it runs). Each makes a known bug class's trigger one step long
instead of a lucky sequence of five;
``python -m reports.catalogue`` measures how often a random-seeded run kills each catalogued
mutant, which is how these were chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, multiple, precondition, rule

from oracles.lru import check_lru
from oracles.never_saw import expected_match_length
from oracles.prefix_set import Entry, PrefixSetModel
from oracles.refcount import check_none_locked, check_sizes
from oracles.slots import check_conservation, check_freed
from properties.contract import DEFAULT_CAPABILITIES, Capabilities, SlotAllocator
from properties.target import OperationTimeout, guarded

POOL_SIZE = 1 << 20  # far more than any run allocates
MAX_PROBES = 24  # known sequences re-matched after a quarantine
MAX_RUNNING = 3  # locks held at once: more would leave nothing evictable for the LRU oracle


@dataclass(eq=False)
class HandleRecord:
    """A handle the target returned, with the model's path for the same prefix."""

    handle: Any
    path: list[Entry]
    tokens: tuple[int, ...]

    def __repr__(self) -> str:  # shown in Hypothesis's failure program
        return f"handle<{list(self.tokens)}>"


def _as_int(x: Any, what: str) -> int:
    assert isinstance(x, (int, np.integer)) and not isinstance(x, bool), f"{what} returned {type(x).__name__} {x!r}, not an int"
    return int(x)


def _as_slot_array(x: Any, what: str) -> np.ndarray:
    assert isinstance(x, np.ndarray), f"{what} returned values of type {type(x).__name__}, not an ndarray"
    integers = x.size == 0 or np.issubdtype(x.dtype, np.integer)
    assert x.ndim == 1 and integers, f"{what} returned values {x.dtype}{x.shape}, not 1-D integers"
    return x


ALPHABET = 4  # a tiny alphabet: sequences collide and share prefixes often
TOKENS = st.integers(0, ALPHABET - 1)
FRESH = st.lists(TOKENS, min_size=1, max_size=24).map(tuple)


def _queries(sequences: Bundle, min_shared: int = 0) -> st.SearchStrategy[tuple[int, ...]]:
    """A known sequence cut anywhere, plus a short new tail: heavy sharing, mid-edge splits."""
    tail = st.lists(TOKENS, max_size=12).map(tuple)
    return st.builds(lambda s, cut, t: s[:cut] + t, sequences, st.integers(min_shared, 32), tail)


class RadixCacheMachine(RuleBasedStateMachine):
    """Override ``factory``, ``capabilities`` and ``page_size`` (see :func:`machine_for`)."""

    factory: Callable[..., Any]
    capabilities: Capabilities = DEFAULT_CAPABILITIES
    page_size: int = 1

    sequences = Bundle("sequences")
    handles = Bundle("handles")
    locks = Bundle("locks")

    def __init__(self) -> None:
        super().__init__()
        self.allocator = SlotAllocator(POOL_SIZE)
        self.cache = guarded("factory", type(self).factory, self.allocator, self.page_size)
        self.model = PrefixSetModel(self.page_size)
        self.known: list[tuple[int, ...]] = []
        self.running = 0  # locks taken through the locks bundle and not yet released by unlock

    # ---- helpers ---------------------------------------------------------------------------

    def _tokens_arg(self, tokens: tuple[int, ...]) -> Any:
        """Alternately a list and an int64 array: the contract accepts both, so both must work."""
        self._array_next = not getattr(self, "_array_next", False)
        return np.asarray(tokens, dtype=np.int64) if self._array_next else list(tokens)

    def _call(self, name: str, *args: Any) -> Any:
        return guarded(name, getattr(self.cache, name), *args)

    def _freed_since(self, mark: int) -> list[int]:
        return self.allocator.freed_log[mark:]

    def _remember(self, tokens: tuple[int, ...]) -> None:
        if tokens and tokens not in self.known:
            self.known = (self.known + [tokens])[-MAX_PROBES:]

    def _match(self, tokens: tuple[int, ...], never_saw: tuple[tuple[int, ...], int] | None = None) -> HandleRecord:
        """Match ``tokens`` and check the answer against the model (oracle 1). After a quarantine,
        ``never_saw`` = (quarantined prefix, expected length) checks oracle 5 first, on the raw answer."""
        values, handle = self._call("match_prefix", self._tokens_arg(tokens))
        values = _as_slot_array(values, "match_prefix")
        assert len(values) % self.page_size == 0, f"match_prefix({list(tokens)}) returned {len(values)} values, not page-aligned"
        if never_saw is not None:
            quarantined, want = never_saw
            assert len(values) == want, (
                f"after evict_prefix({list(quarantined)}), {list(tokens)} matches {len(values)} tokens; "
                f"a cache that never saw the prefix matches {want}"
            )
        path = self.model.match(tokens)
        expected = self.model.values_of(path)
        assert len(values) == len(expected), (
            f"match_prefix({list(tokens)}) matched {len(values)} tokens; the longest cached prefix has {len(expected)}"
        )
        assert values.tolist() == expected, (
            f"match_prefix({list(tokens)}) returned slots {values.tolist()}, but {expected} were inserted there"
        )
        return HandleRecord(handle, path, tokens[: len(expected)])

    def _insert(self, tokens: tuple[int, ...], values: np.ndarray) -> int:
        prefix_len = _as_int(self._call("insert", self._tokens_arg(tokens), values), "insert")
        expected = self.model.insert(tokens, values.tolist())
        assert prefix_len == expected, f"insert({list(tokens)}) returned prefix_len {prefix_len}; {expected} tokens were already cached"
        return prefix_len

    def _snapshot(self) -> tuple:
        sizes = tuple(self._call(f) for f in ("total_size", "evictable_size", "protected_size"))
        return sizes, frozenset(self.allocator.in_use), len(self.allocator.freed_log)

    def _expect_refusal(self, what: str, name: str, *args: Any) -> None:
        """``name(*args)`` must raise and leave the cache exactly as it was."""
        before = self._snapshot()
        try:
            self._call(name, *args)
        except OperationTimeout:
            raise
        except Exception:  # noqa: BLE001 - any clear exception will do; the state must not move
            pass
        else:
            raise AssertionError(f"{what}: {name} accepted it instead of raising")
        after = self._snapshot()
        assert after == before, f"{what}: {name} raised but changed the cache: {before[0]} -> {after[0]}"

    # ---- rules -----------------------------------------------------------------------------

    @initialize(target=sequences, tokens=FRESH)
    def seed_sequence(self, tokens: tuple[int, ...]) -> tuple[int, ...]:
        return tokens

    @rule(target=sequences, tokens=FRESH)
    def new_sequence(self, tokens: tuple[int, ...]) -> tuple[int, ...]:
        return tokens

    @rule(target=sequences, tokens=_queries(sequences))
    def insert(self, tokens: tuple[int, ...]) -> tuple[int, ...]:
        """A caller inserts a sequence it computed in fresh slots, then frees its duplicates."""
        values = self.allocator.alloc(len(tokens))
        prefix_len = self._insert(tokens, values)
        aligned = len(tokens) // self.page_size * self.page_size
        self.allocator.free(np.concatenate([values[:prefix_len], values[aligned:]]))
        self._remember(tokens)
        return tokens

    @rule(target=sequences, tokens=_queries(sequences))
    def insert_then_evict(self, tokens: tuple[int, ...]) -> tuple[int, ...]:
        """A request's KV is inserted and the scheduler at once needs two pages back: the pages
        just inserted (or re-inserted) are the most recently used and must go last."""
        self.insert(tokens)
        self.evict(2 * self.page_size)
        return tokens

    @rule(target=sequences, tokens=_queries(sequences))
    def serve(self, tokens: tuple[int, ...]) -> tuple[int, ...]:
        """A request end to end: match, lock, compute the suffix, insert, free duplicates, unlock."""
        record = self._match(tokens)
        cached = sum(len(e.values) for e in record.path)
        self._lock(record)
        new = self.allocator.alloc(len(tokens) - cached)
        values = np.concatenate([np.asarray(self.model.values_of(record.path), dtype=np.int64), new])
        prefix_len = self._insert(tokens, values)
        aligned = len(tokens) // self.page_size * self.page_size
        self.allocator.free(np.concatenate([values[cached:prefix_len], values[max(aligned, cached) :]]))
        mark = len(self.allocator.freed_log)
        self._call("dec_lock_ref", record.handle)
        check_freed(self._freed_since(mark), self.model.unlock(record.path), "dec_lock_ref")
        self._remember(tokens)
        return tokens

    @rule(target=handles, tokens=_queries(sequences, min_shared=1))
    def match(self, tokens: tuple[int, ...]) -> HandleRecord:
        return self._match(tokens)

    def _can_admit(self) -> bool:
        return self.running < MAX_RUNNING

    @precondition(_can_admit)
    @rule(target=locks, tokens=_queries(sequences, min_shared=1))  # sharing a prefix: locking the root tests nothing
    def admit(self, tokens: tuple[int, ...]) -> HandleRecord:
        """A request starts running: match its prompt and lock the matched prefix at once."""
        record = self._match(tokens)
        self._lock(record)
        self.running += 1
        return record

    @rule(target=locks, record=handles)
    def lock(self, record: HandleRecord) -> Any:
        if self.model.can_lock(record.path):
            self._lock(record)
            self.running += 1
            return record
        if self.capabilities.checks_locks:
            self._expect_refusal(f"locking the stale/quarantined {record}", "inc_lock_ref", record.handle)
        return multiple()

    def _lock(self, record: HandleRecord) -> None:
        self._call("inc_lock_ref", record.handle)
        self.model.lock(record.path)

    def _unlock(self, record: HandleRecord) -> None:
        if self.model.can_unlock(record.path):
            mark = len(self.allocator.freed_log)
            self._call("dec_lock_ref", record.handle)
            check_freed(self._freed_since(mark), self.model.unlock(record.path), "dec_lock_ref")
        elif self.capabilities.checks_locks:
            self._expect_refusal(f"unmatched unlock of {record}", "dec_lock_ref", record.handle)

    @rule(tokens=_queries(sequences, min_shared=1))
    def double_unlock(self, tokens: tuple[int, ...]) -> None:
        """A request releases its lock twice (lock counts drifting apart, sglang #24153): the
        second release is unmatched unless other requests still hold the whole path."""
        record = self._match(tokens)
        self._lock(record)
        self._unlock(record)
        self._unlock(record)

    @rule(tokens=_queries(sequences, min_shared=1))
    def lock_after_quarantine(self, tokens: tuple[int, ...]) -> None:
        """A handle outlives its prefix: matched, then its branch quarantined, then locked. The
        lock must be refused (a stale handle walks a dead parent chain, sglang #29291)."""
        if not self.capabilities.supports_quarantine:
            return  # the lock would succeed and never be released
        record = self._match(tokens)
        if record.tokens:
            self._quarantine(record.tokens)
            self.lock(record)

    @rule(record=consumes(locks))
    def unlock(self, record: HandleRecord) -> None:
        self.running -= 1
        self._unlock(record)

    @rule(record=handles)
    def unlock_any(self, record: HandleRecord) -> None:
        """Unlock a handle that may hold no lock: legal if every counter on its path is positive."""
        self._unlock(record)

    @rule(num_tokens=st.integers(0, 32))
    def evict(self, num_tokens: int) -> None:
        mark = len(self.allocator.freed_log)
        evicted = _as_int(self._call("evict", num_tokens), "evict")
        freed = self._freed_since(mark)
        assert evicted == len(freed), f"evict({num_tokens}) returned {evicted} but freed {len(freed)} slots"
        removed = self.model.remove_freed(freed)
        check_none_locked(removed)
        if self.capabilities.eviction_policy == "lru":
            check_lru(removed, self.model.leaves(), num_tokens, self.page_size)

    @rule()
    def hit_short_of_lru_leaf(self) -> None:
        """A request reuses all but the last page of the least recently used leaf, then memory
        pressure evicts two pages. That last page was not used, so it is still the oldest and must
        go first; a cache that stamps a whole edge before splitting it evicts something newer."""
        deep = [e for e in self.model.leaves() if e.locks == 0 and len(e.prefix) > self.page_size]
        if deep:
            oldest = min(deep, key=lambda e: e.last_use)
            self._match(oldest.prefix[: -self.page_size])
            self.evict(2 * self.page_size)

    @precondition(_can_admit)
    @rule(target=locks, tokens=_queries(sequences, min_shared=1), cut=st.integers(1, 24))
    def quarantine_running(self, tokens: tuple[int, ...], cut: int) -> HandleRecord:
        """A request is admitted and its own prompt prefix is then quarantined while it runs."""
        record = self.admit(tokens)
        if record.tokens[:cut]:
            self._quarantine(record.tokens[:cut])
        return record

    @precondition(_can_admit)
    @rule(target=locks, tokens=_queries(sequences, min_shared=1), cut=st.integers(1, 24))
    def reset_while_quarantined(self, tokens: tuple[int, ...], cut: int) -> HandleRecord:
        """The server flushes its cache (say, a weight update) while a request whose prompt was
        quarantined still runs: the detached pages must be freed too, and the handle goes stale."""
        record = self.quarantine_running(tokens, cut)
        self.reset()
        return record

    @rule(tokens=_queries(sequences).filter(bool))
    def quarantine(self, tokens: tuple[int, ...]) -> None:
        self._quarantine(tokens)

    @rule(pick=st.integers(0, 63))
    def quarantine_one_sibling(self, pick: int) -> None:
        """Policy eviction of one branch where the tree forks (the seed's warning: a colliding
        first page may take a benign sibling with it). The siblings must survive untouched."""
        p = self.page_size
        children: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for prefix in self.model.cached:
            children.setdefault(prefix[:-p], []).append(prefix)
        forks = sorted(kids for kids in children.values() if len(kids) > 1)
        if forks:
            kids = sorted(forks[pick % len(forks)])
            self._quarantine(kids[pick // len(forks) % len(kids)])

    @rule(pick=st.integers(0, 63))
    def quarantine_near_miss(self, pick: int) -> None:
        """Quarantine a prompt that leaves a cached one only at its last page (often inside an
        edge): unless that sibling is cached too, nothing may be removed."""
        if self.model.cached:
            prefix = sorted(self.model.cached)[pick % len(self.model.cached)]
            last = prefix[-self.page_size :]
            self._quarantine(prefix[: -self.page_size] + ((last[0] + 1) % ALPHABET,) + last[1:])

    @rule(record=locks, cut=st.integers(1, 24))
    def quarantine_locked(self, record: HandleRecord, cut: int) -> None:
        """Quarantine a prefix a request still holds: unlinked now, freed at its last unlock."""
        if record.tokens[:cut]:
            self._quarantine(record.tokens[:cut])

    def _quarantine(self, tokens: tuple[int, ...]) -> None:
        if not self.capabilities.supports_quarantine:
            return
        cached_before = set(self.model.cached)
        mark = len(self.allocator.freed_log)
        removed = _as_int(self._call("evict_prefix", self._tokens_arg(tokens)), "evict_prefix")
        expected_removed, expected_freed = self.model.quarantine(tokens)
        assert removed == expected_removed, f"evict_prefix({list(tokens)}) removed {removed} tokens, expected {expected_removed}"
        check_freed(self._freed_since(mark), expected_freed, f"evict_prefix({list(tokens)})")
        for query in self.known + [tokens]:
            self._match(query, never_saw=(tokens, expected_match_length(cached_before, tokens, query, self.page_size)))

    @rule()
    def check_every_match(self) -> None:
        """Oracle 1 over every sequence seen lately: longest prefix, first-inserted values."""
        for query in self.known:
            self._match(query)

    @rule()
    def reset(self) -> None:
        mark = len(self.allocator.freed_log)
        self._call("reset")
        check_freed(self._freed_since(mark), self.model.reset(), "reset")

    @rule(kind=st.sampled_from(sorted(["float_tokens", "negative_token", "nested_tokens", "float_array", "2d_array",
                                        "bool_tokens", "short_values", "float_values", "negative_evict",
                                        "float_evict", "empty_quarantine", "unknown_handle_lock",
                                        "unknown_handle_unlock"])))
    def bad_input(self, kind: str) -> None:
        """Bad input raises a clear exception and changes nothing."""
        pool_far = np.full(3, POOL_SIZE + 7, dtype=np.int64)  # never real slots, in case it is accepted
        calls = {
            "float_tokens": ("match_prefix", [1.5, 2.0]),
            "negative_token": ("insert", [1, -2, 3], pool_far),
            "nested_tokens": ("match_prefix", [[1, 2], [3]]),
            "float_array": ("insert", np.array([1.0, 2.0, 3.0]), pool_far),
            "2d_array": ("match_prefix", np.array([[1, 2], [3, 4]])),
            "bool_tokens": ("match_prefix", [True, False]),
            "short_values": ("insert", [1, 2, 3], pool_far[:2]),
            "float_values": ("insert", [1, 2, 3], pool_far.astype(np.float64)),
            "negative_evict": ("evict", -1),
            "float_evict": ("evict", 1.5),
            "empty_quarantine": ("evict_prefix", []),
            "unknown_handle_lock": ("inc_lock_ref", object()),
            "unknown_handle_unlock": ("dec_lock_ref", object()),
        }
        name, *args = calls[kind]
        if kind == "empty_quarantine" and not self.capabilities.supports_quarantine:
            return
        if kind.startswith("unknown_handle") and not self.capabilities.checks_locks:
            return
        self._expect_refusal(f"bad input ({kind})", name, *args)

    # ---- invariants (after every step) -------------------------------------------------------

    steps_checked = 0  # class-wide count of checked states, for reporting how much a run covered

    @invariant()
    def sizes_add_up(self) -> None:
        RadixCacheMachine.steps_checked += 1
        sizes = [_as_int(self._call(f), f) for f in ("total_size", "evictable_size", "protected_size")]
        check_sizes(self.model, total=sizes[0], evictable=sizes[1], protected=sizes[2])

    @invariant()
    def slots_conserved(self) -> None:
        check_conservation(self.allocator.in_use, self.model.slots(), (), self.allocator.violations)


def machine_for(factory: Callable[..., Any], capabilities: Capabilities, page_size: int, name: str) -> type[RadixCacheMachine]:
    """A machine class for one target and page size. Its name keys Hypothesis's example
    database, so saved failures stay attributed to the right target."""
    cls_name = f"{name}_page{page_size}".replace(".", "_").replace(":", "_")
    return type(cls_name, (RadixCacheMachine,), {
        "factory": staticmethod(factory),
        "capabilities": capabilities,
        "page_size": page_size,
    })
