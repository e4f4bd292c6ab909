"""A Hypothesis state machine that routes requests across tenants that come and go, and checks a
router's tenant prefix tree (:mod:`radixcheck.properties.tenant_tree.contract`).

Tenants (replicas) join, receive the prompts routed to them, are trimmed by LRU, leave and come
back under the same name; prompts share prefixes often (a small alphabet, with a character
outside ASCII for text keys). Every call goes to the tree and to the model
(:mod:`radixcheck.oracles.tenant_tree`, oracle 11), and:

* every match is judged by the contract's four rules (never longer than the query, never more
  than any available tenant holds, never shorter than the declared granularity allows, naming
  exactly the available tenants that hold the prefix);
* every eviction takes at least the amount asked, at most the rest of the group it ends in, the
  least recently used prefixes first, and nothing of another tenant;
* sizes agree after every step, and memory (oracle 12): the node count stays within the prefixes
  the present tenants hold, however many tenants came and went.

For a tree declaring ``thread_safe``, :func:`stress_with_threads` runs bounded rounds of
``concurrent_routing``: a fixed number of threads at once, each owning one tenant, inserting,
matching and evicting; the model is checked after they are joined. It is not a rule of the
machine: Hypothesis cannot schedule threads, and a broken tree's failure under threads need not
repeat when Hypothesis replays a program (it would report a flaky test, not the bug). Its inputs
are fixed by a seed; what varies between runs is only the interleaving.
"""

from __future__ import annotations

import functools
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hypothesis import currently_in_test_context, note
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from radixcheck.oracles.tenant_tree import TenantTreeModel
from radixcheck.oracles.violations import (
    ContractViolation,
    TenantTreeEvictionViolation,
    TenantTreeMemoryViolation,
    TenantTreeViolation,
)
from radixcheck.properties.target import OperationTimeout, guarded
from radixcheck.properties.tenant_tree.contract import (
    DEFAULT_TENANT_TREE_CAPABILITIES,
    NODE_SLACK,
    Key,
    TenantTreeCapabilities,
)

TEXT_ALPHABET = "abé"  # shared prefixes are frequent; one character is two bytes in UTF-8
TOKEN_ALPHABET = (0, 1, 2**31 + 1)  # one id past 31 bits
TENANT_NAMES = ("r0", "r1", "r2", "r3", "r4", "replica-5")
MAX_KNOWN = 24  # keys re-matched by check_every_known
THREADS = 4  # the stress step's fixed number of threads
THREAD_OPS = 30  # calls per thread in the stress step
PICKS = st.integers(0, 63)


@dataclass(frozen=True)
class Prompt:
    """``length`` elements drawn from a stream seeded by ``seed`` (prompts with the same seed share a
    prefix, like chats on one system prompt). Printed instead of the key."""

    length: int
    seed: int

    def elements(self) -> list[int]:
        stream = random.Random(self.seed)
        return [stream.randrange(3) for _ in range(self.length)]


FRESH = st.builds(Prompt, length=st.integers(1, 16), seed=st.integers(0, 7))
TAILS = st.builds(Prompt, length=st.integers(0, 10), seed=st.integers(0, 31))
CUTS = st.integers(0, 20)


def _names(tenants: Any) -> frozenset[str]:
    return frozenset() if tenants is None else frozenset(tenants)


def _recorded(method: Callable[..., Any]) -> Callable[..., Any]:
    """A checked call the machine's program is made of: appended to ``self.program`` with its
    arguments, unless another recorded one is running it (a replay past a failure sends the
    program again: :mod:`radixcheck.properties.tenant_tree.replay`)."""
    @functools.wraps(method)
    def recording(self: TenantTreeMachine, *args: Any, **kwargs: Any) -> Any:
        outer, self.inside = self.inside, True
        if not outer:
            self.program.append((method.__name__, args, kwargs))
        try:
            return method(self, *args, **kwargs)
        finally:
            self.inside = outer
    return recording


class TenantTreeMachine(RuleBasedStateMachine):
    """Override ``factory`` and ``capabilities`` (see :func:`tenant_tree_machine_for`)."""

    factory: Callable[[], Any]
    capabilities: TenantTreeCapabilities = DEFAULT_TENANT_TREE_CAPABILITIES

    keys = Bundle("keys")
    default_shrink_seconds = 5.0
    repro_replays_calls = False  # its repro file reruns radixcheck's test (no plain-call writer yet)

    def __init__(self) -> None:
        super().__init__()
        self.tree = guarded("factory", type(self).factory)
        self.model = TenantTreeModel()
        self.present: list[str] = []
        self.gone: list[str] = []  # removed tenants (a router's stale view may still name them)
        self.known: list[Key] = []
        self.clock = 0.0
        self.calls_sent = 0
        self.program: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []  # the checked calls made, in order (_recorded)
        self.inside = False  # within a recorded call

    def teardown(self) -> None:
        close = getattr(self.tree, "close", None)  # an adapter's background thread or event loop
        if callable(close):
            guarded("close", close)

    # ---- keys, calls -----------------------------------------------------------------------

    def _key(self, elements: Iterable[int]) -> Key:
        if self.capabilities.key_kind == "text":
            return "".join(TEXT_ALPHABET[e] for e in elements)
        return tuple(TOKEN_ALPHABET[e] for e in elements)

    def _elements(self, key: Key) -> list[int]:
        alphabet = TEXT_ALPHABET if self.capabilities.key_kind == "text" else TOKEN_ALPHABET
        return [alphabet.index(e) for e in key]

    def _tick(self) -> float:
        self.clock += 1.0
        return self.clock

    def _call(self, text: str, name: str, *args: Any) -> Any:
        """One call into the tree under the time limit, shown under the step that sent it."""
        self.calls_sent += 1
        try:
            result = guarded(name, getattr(self.tree, name), *args)
        except BaseException as exc:
            self._show(f"#   call {self.calls_sent}: {text} -> raised {type(exc).__name__}")
            raise
        shown = "" if result is None else f" -> {result!r}"
        self._show(f"#   call {self.calls_sent}: {text}{shown}")
        return result

    def _show(self, line: str) -> None:
        if currently_in_test_context():
            note(line)

    def _remember(self, key: Key) -> None:
        if key and key not in self.known:
            self.known = (self.known + [key])[-MAX_KNOWN:]

    def _pick(self, pick: int) -> str:
        return self.present[pick % len(self.present)]

    # ---- the calls, each checked -------------------------------------------------------------

    @_recorded
    def _add(self, tenant: str) -> None:
        self._call(f"add_tenants([{tenant!r}], {self.clock})", "add_tenants", [tenant], self.clock)
        self.model.add(tenant)
        if tenant not in self.present:
            self.present.append(tenant)
        if tenant in self.gone:
            self.gone.remove(tenant)

    def _insert(self, key: Key, tenant: str) -> None:
        self._insert_at(key, tenant, self._tick())

    @_recorded
    def _insert_at(self, key: Key, tenant: str, t: float) -> None:
        self.clock = max(self.clock, t)
        self._call(f"insert({key!r}, {tenant!r}, {t})", "insert", key, tenant, t)
        self.model.insert(key, tenant, t)
        self._remember(key)

    @_recorded
    def _match(self, key: Key, available: frozenset[str], quiet: bool = False) -> tuple[int, frozenset[str]]:
        text = f"match({key!r}, {sorted(available)})"
        result = (guarded("match", self.tree.match, key, available) if quiet else self._call(text, "match", key, available))
        try:
            length, tenants = result
            tenants = _names(tenants)
        except (TypeError, ValueError) as exc:
            raise TenantTreeViolation(f"{text} returned {result!r}, not (length, tenants)") from exc
        if isinstance(length, bool) or not isinstance(length, int):
            raise TenantTreeViolation(f"{text} returned length {length!r}, not an int")
        self._judge(text, key, available, length, tenants)
        return length, tenants

    def _judge(self, text: str, key: Key, available: frozenset[str], length: int, tenants: frozenset[str],
               exact: bool = True) -> None:
        """The contract's four rules (and, ``exact``, the truth: a concurrent match is judged by the
        rules that hold whatever ran beside it)."""
        if length > len(key):  # rule 2
            raise TenantTreeViolation(f"{text} matched {length}, longer than the query ({len(key)})")
        if length < 0:
            raise TenantTreeViolation(f"{text} matched {length}, a negative length")
        strangers = sorted(tenants - available)
        if strangers:  # rule 4
            raise TenantTreeViolation(f"{text} names {strangers}, which are not available (available: {sorted(available)})")
        if not exact:
            return
        truth = self.model.truth(key, available)
        if length > truth:
            raise TenantTreeViolation(f"{text} matched {length}, but the longest prefix any available tenant holds is {truth} "
                                      f"({self._holders_line(key, available)})")
        g = self.capabilities.match_granularity
        floor = truth - truth % g
        if length < floor:  # rule 1
            lossy = f" (rounded down to a multiple of {g}: {floor})" if g > 1 else ""
            raise TenantTreeViolation(f"{text} matched {length}, shorter than the truth {truth}{lossy}, which "
                                      f"{sorted(self.model.holders_of(key[:truth], available))} hold")
        if length:
            holding = self.model.holders_of(key[:length], available)
            wrong = sorted(tenants - holding)
            if wrong:  # rule 3
                raise TenantTreeViolation(f"{text} names {wrong}, which do not hold its first {length} element(s) "
                                          f"{key[:length]!r} (held by {sorted(holding)})")
            missing = sorted(holding - tenants)
            lossy_tail = length % self.capabilities.match_granularity != 0  # inside a chunk: some holders only (contract)
            if missing and (not lossy_tail or not tenants):
                raise TenantTreeViolation(f"{text} leaves out {missing}, available and holding its first {length} "
                                          f"element(s) {key[:length]!r}")

    def _holders_line(self, key: Key, available: frozenset[str]) -> str:
        held = {t: max((n for n in range(len(key) + 1) if n == 0 or key[:n] in self.model.times[t]), default=0)
                for t in sorted(available) if t in self.model.times}
        if not held:
            return "no available tenant is present"
        return "each available tenant holds: " + ", ".join(f"{t} {n}" for t, n in held.items())

    @_recorded
    def _evict(self, tenant: str, amount: int) -> None:
        evicted: dict[Key, float] = {}  # what the model's LRU took, with its last uses
        try:
            self._judge_evict(tenant, amount, evicted)
        except TenantTreeEvictionViolation:
            self._adopt_the_trees_evictions(tenant, evicted)
            raise

    def _adopt_the_trees_evictions(self, tenant: str, evicted: dict[Key, float]) -> None:
        """An eviction finding: the model takes the tree's word for what each present tenant now
        holds, so that a waived order or amount finding leaves no echo (a sizes or match finding
        that only repeats it). A lossy tree's matches cannot say it exactly: left as it is."""
        if self.capabilities.match_granularity > 1:
            return
        for t in self.present:
            def holds(prefix: Key, t: str = t) -> bool:
                return self._match_quiet(prefix, frozenset([t]))[0] == len(prefix)
            self.model.adopt(t, holds, evicted if t == tenant else {})

    def _judge_evict(self, tenant: str, amount: int, evicted: dict[Key, float]) -> None:
        others = {t: self.model.size(t) for t in self.present if t != tenant}
        text = f"evict({tenant!r}, {amount})"
        removed = self._call(text, "evict", tenant, amount)
        if isinstance(removed, bool) or not isinstance(removed, int):
            raise TenantTreeEvictionViolation(f"{text} returned {removed!r}, not the number of elements removed")
        least, most = self.model.eviction_bounds(tenant, amount)
        if removed < least:
            raise TenantTreeEvictionViolation(f"{text} removed {removed}, less than min(amount, size {self.model.size(tenant)}) "
                                              f"= {least}")
        if removed > most:
            raise TenantTreeEvictionViolation(f"{text} removed {removed}: more than the {amount} asked beyond the group of "
                                              f"prefixes last used with the one that reached it (at most {most})")
        gone = self.model.evict(tenant, removed, evicted)
        if self.capabilities.reports_sizes:
            sizes = self._sizes()
            if sizes.get(tenant, 0) != self.model.size(tenant):
                raise TenantTreeEvictionViolation(f"{text} returned {removed}, but {tenant!r}'s size went to "
                                                  f"{sizes.get(tenant, 0)}, not {self.model.size(tenant)}")
            crossed = {t: (n, sizes.get(t, 0)) for t, n in others.items() if sizes.get(t, 0) != n}
            if crossed:
                raise TenantTreeEvictionViolation(f"{text} changed other tenants: " + ", ".join(
                    f"{t} {a} -> {b}" for t, (a, b) in sorted(crossed.items())))
        self._check_after_eviction(text, [tenant], gone)
        if not self.capabilities.match_refreshes_recency:
            self._check_gone(text, tenant, gone)

    def _check_gone(self, text: str, tenant: str, gone: list[Key]) -> None:
        """Each prefix LRU took is gone from the tree: the known keys alone may miss a tree that
        took another branch of the same size (then the model and the tree part silently, and a later
        match fails for it). Costs a match per prefix taken."""
        for prefix in gone:
            length, tenants = self._match_quiet(prefix, frozenset([tenant]))
            self._judge(f"match({prefix!r}, [{tenant!r}])", prefix, frozenset([tenant]), length, tenants, exact=False)
            if length == len(prefix):
                raise TenantTreeEvictionViolation(f"{text} removed other prefixes than the least recently used: {tenant!r} "
                                                  f"still holds {prefix!r} (the least recently used were {gone[:6]!r})")

    def _check_after_eviction(self, text: str, evicted: list[str], gone: list[Key]) -> None:
        """After an eviction of ``evicted``: each tenant's known keys, matched against it alone,
        are what the model says it holds (the evicted tenants' by LRU; the others' untouched)."""
        g = self.capabilities.match_granularity
        gone_set = set(gone)
        others = [] if self.capabilities.reports_sizes else sorted(set(self.present) - set(evicted))  # sizes show another's loss
        for t in evicted + others:
            for key in self.known:
                length, tenants = self._match_quiet(key, frozenset([t]))
                self._judge(f"match({key!r}, [{t!r}])", key, frozenset([t]), length, tenants, exact=False)  # the rules first
                truth = self.model.truth(key, [t])
                if length > truth and key[:length] not in gone_set:  # more than the tenant held before, too: the match's
                    raise TenantTreeViolation(f"match({key!r}, [{t!r}]) matched {length}, but {t!r} holds only {truth} "
                                              f"(after {text})")
                if not truth - truth % g <= length <= truth:
                    what = ("removed other prefixes than the least recently used" if t in evicted
                            else f"removed prefixes of another tenant, {t!r}")
                    lru = "" if self.capabilities.match_refreshes_recency else f" (the least recently used were {gone[:6]!r})"
                    raise TenantTreeEvictionViolation(f"{text} {what}: match({key!r}, [{t!r}]) is now {length}, "
                                                      f"{t!r} holds {truth}{lru}")
        if self.capabilities.reports_sizes:
            sizes, want = self._sizes(), self.model.sizes()
            wrong = {t: (want.get(t, 0), sizes.get(t, 0)) for t in set(sizes) | set(want) if sizes.get(t, 0) != want.get(t, 0)}
            if wrong:
                raise TenantTreeEvictionViolation(f"{text}: sizes are not what LRU eviction leaves: " + ", ".join(
                    f"{t} {a} expected, {b} reported" for t, (a, b) in sorted(wrong.items())))

    def _match_quiet(self, key: Key, available: frozenset[str]) -> tuple[int, frozenset[str]]:
        length, tenants = guarded("match", self.tree.match, key, available)
        return length, _names(tenants)

    def _sizes(self) -> dict[str, int]:
        got = guarded("sizes", self.tree.sizes)
        return {t: n for t, n in dict(got).items() if n}

    @_recorded
    def _remove(self, tenant: str) -> None:
        self._call(f"remove_tenants([{tenant!r}])", "remove_tenants", [tenant])
        self.model.remove(tenant)
        self.present.remove(tenant)
        self.gone.append(tenant)

    # ---- rules -------------------------------------------------------------------------------

    @initialize(tenants=st.integers(2, 4))
    def start(self, tenants: int) -> None:
        """2-4 replicas join."""
        for name in TENANT_NAMES[:tenants]:
            self._add(name)

    @rule(target=keys, prompt=FRESH)
    def new_key(self, prompt: Prompt) -> Key:
        return self._key(prompt.elements())

    @rule(target=keys, tenant=PICKS, base=keys, cut=CUTS, tail=TAILS)
    def insert(self, tenant: int, base: Key, cut: int, tail: Prompt) -> Key:
        """A request routed to one tenant: a known prompt cut, plus a new tail."""
        key = base[:cut] + self._key(tail.elements())
        if key:
            self._insert(key, self._pick(tenant))
        return key

    @rule(target=keys, base=keys, cut=CUTS, tail=TAILS, stale=st.booleans(), pick=PICKS)
    def route(self, base: Key, cut: int, tail: Prompt, stale: bool, pick: int) -> Key:
        """A router's request: match against the live tenants (``stale``: its view still names a
        removed or never-added one), then insert into a tenant that matched it, or any."""
        key = base[:cut] + self._key(tail.elements())
        if not key:
            return key
        available = set(self.present)
        if stale:
            available.add((self.gone or [TENANT_NAMES[-1]])[pick % max(len(self.gone), 1)])
        length, tenants = self._match(key, frozenset(available))
        chosen = sorted(tenants & set(self.present)) if length else []
        self._insert(key, chosen[pick % len(chosen)] if chosen else self._pick(pick))
        return key

    @rule(key=keys, cut=CUTS, size=st.integers(1, 6), pick=PICKS)
    def match(self, key: Key, cut: int, size: int, pick: int) -> None:
        """A match against some of the tenants (a router whose other replicas are busy)."""
        everyone = self.present + self.gone
        available = frozenset(everyone[(pick + i) % len(everyone)] for i in range(size))
        self._match(key[:cut] if cut else key, available)

    @rule()
    def check_every_known(self) -> None:
        self._check_every_known()

    @_recorded
    def _check_every_known(self) -> None:
        for key in self.known:
            self._match(key, frozenset(self.present), quiet=True)

    @precondition(lambda self: self.capabilities.supports_eviction)
    @rule(tenant=PICKS, amount=st.integers(0, 12))
    def evict(self, tenant: int, amount: int) -> None:
        """A tenant grew too large: trim it by LRU."""
        self._evict(self._pick(tenant), amount)

    @precondition(lambda self: self.capabilities.supports_eviction)
    @rule(key=keys, cut=st.integers(1, 12), tail=TAILS, pick=PICKS)
    def split_then_evict(self, key: Key, cut: int, tail: Prompt, pick: int) -> None:
        """Recency across a split: one tenant holds ``key``, then an older-looking prompt of its own
        is refreshed, another tenant's insert splits ``key`` mid-edge, and the first is trimmed a
        little at a time: the split's upper half must keep the first tenant's own time."""
        if len(self.present) < 2 or not key:
            return
        first, other = self._pick(pick), self._pick(pick + 1)
        self._insert(key, first)
        self._insert(self._key([2] + tail.elements()), first)
        elements = self._elements(key)
        cut = min(cut, len(elements) - 1)
        branch = self._key(elements[:cut] + [(elements[cut] + 1) % 3, 0])  # leaves `key` after `cut` elements
        self._insert(branch, other)
        for _ in range(3):
            self._evict(first, 1)

    @precondition(lambda self: self.capabilities.supports_removal)
    @rule(tenant=PICKS)
    def remove_tenant(self, tenant: int) -> None:
        """A replica leaves (at least one stays)."""
        if len(self.present) > 1:
            self._remove(self._pick(tenant))

    @rule(pick=PICKS)
    def add_tenant(self, pick: int) -> None:
        """A replica joins: a removed one under its old name (it holds nothing), or a new one."""
        names = self.gone or [n for n in TENANT_NAMES if n not in self.present]
        if names:
            self._add(names[pick % len(names)])

    @precondition(lambda self: self.capabilities.supports_removal)
    @rule(prompts=st.integers(3, 12), seed=st.integers(0, 2**16))
    def churn(self, prompts: int, seed: int) -> None:
        """A replica joins, takes prompts (some shared with others'), and leaves: nothing of it stays."""
        tenant = next((n for n in TENANT_NAMES if n not in self.present), None)
        if tenant is None:
            return
        self._add(tenant)
        stream = random.Random(seed)
        for _ in range(prompts):
            base = self.known[stream.randrange(len(self.known))] if self.known and stream.random() < 0.5 else self._key([])
            self._insert(base[:stream.randrange(len(base) + 1)] + self._key(stream.randrange(3) for _ in range(stream.randint(1, 8))),
                         tenant)
        self._remove(tenant)
        self._check_memory()

    def concurrent_routing(self, seed: int, threaded: bool = True) -> None:
        """THREADS threads at once, each owning one present tenant: inserts (prompts sharing
        prefixes across threads, so splits cross tenants), matches against every tenant, and small
        evictions of its own tenant. After joining, each thread's calls are replayed on the model
        in its own order (tenants are independent there): every eviction is judged, every match by
        the rules that hold whatever ran beside it, then every known key and the sizes.
        Not ``threaded``: the same calls one thread's after another on this thread, each judged as
        the machine judges it (:meth:`_serially`)."""
        owners = [self.present[i % len(self.present)] for i in range(THREADS)]
        owners = list(dict.fromkeys(owners))
        plans = []
        for n, tenant in enumerate(owners):
            stream = random.Random(seed * 31 + n)
            plan = []
            for _ in range(THREAD_OPS):
                kind = stream.choice(("insert", "insert", "match", "evict")) if self.capabilities.supports_eviction else \
                    stream.choice(("insert", "match"))
                shared = self.known[stream.randrange(len(self.known))] if self.known else self._key([])
                key = shared[:stream.randrange(len(shared) + 1)] + self._key(stream.randrange(3) for _ in range(stream.randint(0, 6)))
                plan.append((kind, key or self._key([0]), self._tick() if kind == "insert" else stream.randint(0, 4)))
            plans.append((tenant, plan))
        if not threaded:
            self._serially(plans)
            return
        results: dict[str, list[Any]] = {}
        errors: list[BaseException] = []
        available = frozenset(self.present)
        start = threading.Barrier(len(plans))

        def work(tenant: str, plan: list[tuple[str, Key, Any]]) -> None:
            out = results.setdefault(tenant, [])
            try:
                start.wait()
                for kind, key, arg in plan:
                    if kind == "insert":
                        out.append(self.tree.insert(key, tenant, arg))
                    elif kind == "match":
                        out.append(self.tree.match(key, available))
                    else:
                        out.append(self.tree.evict(tenant, arg))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t, p), daemon=True) for t, p in plans]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        self._show(f"#   concurrent_routing: {len(threads)} threads x {THREAD_OPS} calls on tenants {[t for t, _ in plans]}")
        if any(thread.is_alive() for thread in threads):
            raise OperationTimeout("concurrent_routing: a thread did not finish within 30 s (a deadlock?)")
        if errors:
            raise errors[0]
        evicted: list[str] = []
        gone: list[Key] = []
        for tenant, plan in plans:
            for (kind, key, arg), got in zip(plan, results[tenant], strict=True):
                text = f"{kind} by {tenant!r}'s thread"
                if kind == "insert":
                    self.model.insert(key, tenant, arg)
                    self._remember(key)
                elif kind == "match":
                    length, tenants = got
                    self._judge(f"match({key!r}, {sorted(available)}) ({text})", key, available, length, _names(tenants), exact=False)
                else:
                    least, most = self.model.eviction_bounds(tenant, arg)
                    if not least <= got <= most:
                        raise TenantTreeEvictionViolation(f"evict({tenant!r}, {arg}) ({text}) removed {got}, not in [{least}, {most}]")
                    gone += self.model.evict(tenant, got)
                    evicted.append(tenant)
        if evicted:
            self._check_after_eviction(f"the threads' evictions of {sorted(set(evicted))}", sorted(set(evicted)), gone)
        self.check_every_known()

    def _serially(self, plans: list[tuple[str, list[tuple[str, Key, Any]]]]) -> None:
        """The threads' calls run one after another, each checked as the machine checks its own
        (a match by the truth, an eviction by LRU), then every known key: a legal sequential
        program, so its failure is a bug of one thread, in the machine's words."""
        available = frozenset(self.present)
        for tenant, plan in plans:
            for kind, key, arg in plan:
                if kind == "insert":
                    self._insert_at(key, tenant, arg)
                elif kind == "match":
                    self._match(key, available)
                else:
                    self._evict(tenant, arg)
        self.check_every_known()

    # ---- invariants --------------------------------------------------------------------------

    @precondition(lambda self: self.capabilities.reports_sizes)
    @invariant()
    def sizes_agree(self) -> None:
        got, want = self._sizes(), self.model.sizes()
        if got != want:
            lines = "; ".join(f"{t}: tree {got.get(t, 0)}, inserts {want.get(t, 0)}" for t in sorted(set(got) | set(want))
                              if got.get(t, 0) != want.get(t, 0))
            raise TenantTreeViolation(f"sizes() disagrees with the prefixes each tenant holds: {lines}")

    @precondition(lambda self: self.capabilities.reports_nodes)
    @invariant()
    def memory_bounded(self) -> None:
        self._check_memory()

    def _check_memory(self) -> None:
        if not self.capabilities.reports_nodes:
            return
        nodes = guarded("node_count", self.tree.node_count)
        limit = NODE_SLACK + self.model.distinct_prefixes()
        if nodes > limit:
            raise TenantTreeMemoryViolation(f"node_count() is {nodes}, but the present tenants {sorted(self.present)} hold only "
                                            f"{self.model.distinct_prefixes()} distinct prefixes (at most {limit} nodes): "
                                            f"the tree keeps nodes nobody holds (removed: {sorted(self.gone)})")


STRESS_ROUNDS = 12  # rounds of the threaded stress test: each a fresh tree, a warm-up, THREADS threads, the model's check


ONE_THREAD_NOTE = "[stress_with_threads round {n}, seed {seed}, on one thread"
"""How a threaded round's failure that its calls also show on one thread is marked: a bug of one
thread, in the machine's words (:func:`~radixcheck.properties.findings.failures.shape_of` leaves
the mark out, so it is the machine's finding, not a second one)."""


def stress_with_threads(factory: Callable[[], Any], capabilities: TenantTreeCapabilities, rounds: int = STRESS_ROUNDS,
                        seed: int = 0) -> None:
    """``rounds`` rounds, each on a fresh tree: 2-4 tenants join, a warm-up of routed prompts and
    evictions runs on one thread, then ``concurrent_routing`` (THREADS threads, THREAD_OPS calls
    each), the model checked after joining; then sizes and memory. Raises the oracle's violation,
    its message naming the round and seed (re-run it with those).

    A failed round is run again with the same calls on one thread (``concurrent_routing(...,
    threaded=False)``). If that fails too, the bug needs no second thread: its failure there (the
    state machine's check, in its words) is raised, marked :data:`ONE_THREAD_NOTE`, so the audit
    groups it with the machine's finding of the same shape (a new user's router trial met each
    tenant-tree bug as two findings, one per test). If it passes, the threaded failure is a
    thread-safety bug, and its message says so."""
    machine = tenant_tree_machine_for(factory, capabilities, "stress")
    for n in range(rounds):
        try:
            _stress_round(machine, capabilities, seed, n, threaded=True)
        except Exception as exc:  # noqa: BLE001 - an oracle's or a crash: either is run again on one thread
            try:
                _stress_round(machine, capabilities, seed, n, threaded=False)
            except Exception as alone:  # noqa: BLE001 - any failure of one thread: the machine's kind
                if isinstance(alone, ContractViolation):  # a crash is raised as it is: its type and message are the machine's
                    alone.args = (f"{alone.args[0]} {ONE_THREAD_NOTE.format(n=n, seed=seed)}: the threads' calls fail run "
                                  "one after another, so a bug of one thread, not of thread safety]", *alone.args[1:])
                raise alone from None
            if isinstance(exc, ContractViolation):
                exc.args = (f"{exc.args[0]} [stress_with_threads round {n}, seed {seed}; the same calls on one thread "
                            "pass: a thread-safety bug]", *exc.args[1:])
            raise


def _stress_round(machine: type[TenantTreeMachine], capabilities: TenantTreeCapabilities, seed: int, n: int,
                  threaded: bool) -> None:
    """Round ``n`` of :func:`stress_with_threads` on a fresh tree (``threaded``: its calls from THREADS threads at once)."""
    stream = random.Random(seed * 1000 + n)
    tree = machine()
    try:
        tree.start(2 + n % 3)
        for _ in range(20):
            key = tree._key(stream.randrange(3) for _ in range(stream.randint(1, 12)))
            tree._insert(key, tree.present[stream.randrange(len(tree.present))])
        tree.concurrent_routing(seed * 1000 + n, threaded)
        if capabilities.reports_sizes:
            tree.sizes_agree()
        tree._check_memory()
    except Exception as exc:
        if not threaded:  # its calls, in order, are a program a replay can send again (the audit's root cause)
            exc.radixcheck_machine = tree  # type: ignore[attr-defined]
        raise
    finally:
        tree.teardown()


def tenant_tree_machine_for(factory: Callable[[], Any], capabilities: TenantTreeCapabilities,
                            name: str) -> type[TenantTreeMachine]:
    """A machine class for one tenant-tree target."""
    cls_name = f"{name}_tenant_tree".replace(".", "_").replace(":", "_").replace("-", "_")
    return type(cls_name, (TenantTreeMachine,), {"factory": staticmethod(factory), "capabilities": capabilities})


__all__ = ["ONE_THREAD_NOTE", "STRESS_ROUNDS", "THREADS", "TenantTreeMachine", "stress_with_threads", "tenant_tree_machine_for"]
