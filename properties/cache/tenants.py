"""The state machine's tenants: requests under adversarial namespaces (contract: "Namespaces").

Used instead of :class:`~radixcheck.properties.cache.machine.RadixCacheMachine` for a target that
declares ``Capabilities(namespaces=True)`` (:func:`~radixcheck.properties.cache.machine.machine_for`
picks it); a target without namespaces never sees these rules and is never sent the keyword. Every
rule of the plain machine still runs, in the default namespace and without the keyword; these
add requests under namespaces drawn from :data:`PAIRS`, pairs that a naive key confuses, so a
cache that composes or truncates its key meets its collision in most runs:

* ``("X", None)`` / ``(None, "X")``: a LoRA named X and a base request salted "X", as
  ``(lora_id, cache_salt)``; untagged composition makes them one (vLLM #44701, sglang #24638);
* ``("ab", "c")`` / ``("a", "bc")``: concatenated parts (sglang #30827);
* ``None`` / ``""`` and ``""`` / ``0``: falsy keys, and ``hash("") == hash(0) == 0``;
* ``5`` / ``5 + 2**16`` and ``7`` / ``7 + 2**32``: integer ids sharing their low 16 or 32 bits;
* multimodal tuples whose feature hashes share their low 16 bits (LMCache's 16-bit hash);
* two 250-character keys that differ at the end, and "café" composed and decomposed (equal
  only to a cache that truncates or normalizes);
* and :data:`UNSAID` (no keyword) next to an explicit ``None``: the same namespace, which must share.

Beyond that fixed list, :func:`confusable_pairs` *generates* the confusions no list can hold:

* pairs that only the type tells apart: a value and its rendering (``5`` / ``"5"``, ``None`` /
  ``"None"``, ``(1, 2)`` / ``"(1, 2)"``, ``2.5`` / ``"2.5"``), alone or as one part of a
  ``(lora, salt)`` tuple whose other part they share;
* pairs the contract calls one namespace: ``1`` / ``1.0`` / ``True``, ``0`` / ``0.0`` / ``False``,
  any integer and its float, alone or as a part (``("lora", 7)`` / ``("lora", 7.0)``).

The stories on the fixed list keep their rules; two rules more (``generated_tenants_share_prompt``,
``generated_tenant_probes``) run the same stories on generated pairs. Each draws from the strategy
built for the target's capabilities: a kind the target declares in ``unsent_namespaces``
(``"decimal"``, ``"float"``, ``"bool"``, ``"empty"``, ``"multimodal"``) is never drawn, so it is never sent.

The stories start where leaks start: many tenants, and the base model, on one system prompt.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from radixcheck.properties.cache.machine import (
    CUTS,
    TAILS,
    UNSAID,
    HandleRecord,
    Length,
    RadixCacheMachine,
    Span,
    _can_admit,
    _can_quarantine,
    _validates_input,
)
from radixcheck.properties.findings.transcript import act

LONG_KEY = "tenant-" + "x" * 240
MM_HASH = 0x5EED_1234
PAIRS: tuple[tuple[Any, Any], ...] = (
    (("X", None), (None, "X")),
    (("ab", "c"), ("a", "bc")),
    (None, ""),
    ("", 0),
    (5, 5 + 2**16),
    (7, 7 + 2**32),
    (("lora-7", None, (MM_HASH,)), ("lora-7", None, (MM_HASH + 2**16,))),
    (LONG_KEY + "-1", LONG_KEY + "-2"),
    (unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")),
    (UNSAID, None),
)
"""Pairs of namespaces a naive key confuses (the last pair is one namespace, said two ways)."""

NAMESPACES: tuple[Any, ...] = tuple(dict.fromkeys(n for pair in PAIRS for n in pair if n is not UNSAID)) + (UNSAID,)
UNHASHABLE = (["lora-7"], ("lora-7", ["salt"]), {"lora": 7})
"""Bad namespaces: a list, a tuple holding a list, a dict."""


def _ordered(pair: tuple[Any, Any], swap: bool) -> tuple[Any, Any]:
    return (pair[1], pair[0]) if swap else pair


def _leaves(namespace: Any) -> list[Any]:
    return [leaf for part in namespace for leaf in _leaves(part)] if isinstance(namespace, tuple) else [namespace]


def kinds_of(namespace: Any) -> set[str]:
    """The kinds of ``Capabilities.unsent_namespaces`` that ``namespace`` is."""
    kinds = set()
    if namespace == "" and isinstance(namespace, str):
        kinds.add("empty")
    if isinstance(namespace, tuple) and len(namespace) > 2:
        kinds.add("multimodal")
    leaves = _leaves(namespace)
    if any(isinstance(leaf, float) for leaf in leaves):
        kinds.add("float")
    if any(isinstance(leaf, bool) for leaf in leaves):
        kinds.add("bool")
    return kinds


def _decimal(namespace: Any) -> Any:
    """``namespace`` with every int written in decimal: what a request field that is a string makes of it."""
    if isinstance(namespace, tuple):
        return tuple(_decimal(part) for part in namespace)
    return str(namespace) if isinstance(namespace, int) and not isinstance(namespace, bool) else namespace


def pair_kinds(pair: tuple[Any, Any]) -> set[str]:
    """The kinds of ``Capabilities.unsent_namespaces`` a pair is: its namespaces' kinds, and
    ``"decimal"`` when the two differ only by an int against its decimal string (``5`` / ``"5"``)."""
    a, b = pair
    kinds = kinds_of(a) | kinds_of(b)
    if a is not UNSAID and b is not UNSAID and a != b and _decimal(a) == _decimal(b):
        kinds.add("decimal")
    return kinds


def sendable(choices: tuple[Any, ...], drawn: Any, unsent: tuple[str, ...], kinds: Any = kinds_of) -> Any:
    """``drawn`` if the target can take it, else the next of ``choices`` (cyclically) it can: the
    draw is the same whatever the target declares, so streams stay comparable across targets."""
    if not unsent:
        return drawn
    start = choices.index(drawn)
    for choice in choices[start:] + choices[:start]:
        if not kinds(choice) & set(unsent):
            return choice
    raise ValueError(f"unsent_namespaces={unsent!r} leaves no namespace to send")


_WORDS = st.text(alphabet="abcXY-_", min_size=1, max_size=6)  # no digits: never an int's decimal string
_SAFE_INTS = st.integers(-(2**53), 2**53)  # exact as floats, and within any JSON reader's int64


def _scalars(unsent: frozenset[str], none: bool = True, words: bool = True) -> st.SearchStrategy[Any]:
    """One namespace part of each kind the target takes: None, a word, an int, a float, a bool. No
    ints when ``"decimal"`` is unsent: such a target writes ints as decimal strings, so an int drawn
    here could meet its own string drawn elsewhere in the stream."""
    ints = "decimal" not in unsent
    parts = ([st.none()] if none else []) + ([_WORDS] if words else []) + ([_SAFE_INTS] if ints else [])
    if "float" not in unsent:
        parts.append(st.floats(-(2.0**53), 2.0**53, allow_nan=False))
    if "bool" not in unsent:
        parts.append(st.booleans())
    return st.one_of(parts)


def _as_part(pair: st.SearchStrategy[tuple[Any, Any]], unsent: frozenset[str]) -> st.SearchStrategy[tuple[Any, Any]]:
    """The pair as the salt of a ``(lora, salt)`` tuple whose LoRA part both share: ``(l, a)`` / ``(l, b)``;
    or as the LoRA part, salt shared, when neither side is ``None``. (A tuple's LoRA part is never
    ``None`` here: ``(None, s)`` is the base model salted ``s``, which is how an engine's request
    would carry the namespace ``s`` itself, so the two would meet in every engine's fields.)"""
    def place(drawn: tuple[tuple[Any, Any], Any, Any, bool]) -> tuple[Any, Any]:
        (a, b), lora, salt, as_lora = drawn
        if as_lora and a is not None and b is not None:
            return (a, salt), (b, salt)
        return (lora, a), (lora, b)

    return st.tuples(pair, _scalars(unsent, none=False), _scalars(unsent), st.booleans()).map(place)


def _rendered(value: Any) -> tuple[Any, str]:
    return value, str(value)


def type_only_pairs(unsent: frozenset[str] = frozenset()) -> st.SearchStrategy[tuple[Any, Any]]:
    """Two namespaces only the type tells apart: a value and its ``str`` (``5`` / ``"5"``, ``None`` /
    ``"None"``, ``(1, 2)`` / ``"(1, 2)"``), alone or as a part of a tuple. Without ints when
    ``"decimal"`` is unsent (an int and its decimal string are what such a target cannot tell apart)."""
    scalar = _scalars(unsent, words=False)
    tuple_ = st.tuples(_scalars(unsent, none=False), _scalars(unsent))
    return st.one_of(st.one_of(scalar, tuple_).map(_rendered), _as_part(scalar.map(_rendered), unsent))


def equal_pairs(unsent: frozenset[str] = frozenset()) -> st.SearchStrategy[tuple[Any, Any]] | None:
    """Two namespaces the contract calls one, of different types: an int and its float (``1`` /
    ``1.0``), ``True`` / ``1`` / ``1.0``, ``False`` / ``0`` / ``-0.0``, alone or as a part of a
    tuple. ``None`` when the target takes neither floats nor bools (nothing is equal across types)."""
    def spellings(n: int) -> list[Any]:
        said: list[Any] = [n]
        if "float" not in unsent:
            said += [float(n), -0.0] if n == 0 else [float(n)]
        if "bool" not in unsent and n in (0, 1):
            said.append(bool(n))
        return said

    if {"float", "bool"} <= unsent:
        return None
    small = st.sampled_from((0, 1, 1, 7))  # 0 and 1 have the most spellings
    numbers = st.one_of(small, _SAFE_INTS) if "float" not in unsent else st.sampled_from((0, 1))
    pair = numbers.flatmap(lambda n: st.permutations(spellings(n)).map(lambda said: (said[0], said[1])))
    return st.one_of(pair, _as_part(pair, unsent))


@functools.cache
def fixed_pairs(unsent: tuple[str, ...] = ()) -> st.SearchStrategy[tuple[Any, Any]]:
    """The pairs of :data:`PAIRS` (each an engine's known confusion) a target that does not take the
    kinds in ``unsent`` can be sent."""
    return st.sampled_from([pair for pair in PAIRS if not pair_kinds(pair) & set(unsent)])


@functools.cache
def generated_pairs(unsent: tuple[str, ...] = ()) -> st.SearchStrategy[tuple[Any, Any]]:
    """Generated pairs (:func:`type_only_pairs`, :func:`equal_pairs`) of no kind in ``unsent``."""
    kinds = frozenset(unsent)
    generated = [s for s in (type_only_pairs(kinds), equal_pairs(kinds)) if s is not None]
    return st.one_of(generated).filter(lambda pair: not pair_kinds(pair) & kinds)


def confusable_pairs(unsent: tuple[str, ...] = ()) -> st.SearchStrategy[tuple[Any, Any]]:
    """Every pair a tenant story may run on, for a target that does not take the kinds in ``unsent``:
    the fixed list's or a generated one. No pair of an unsent kind is ever drawn."""
    return st.one_of(fixed_pairs(unsent), generated_pairs(unsent))


@functools.cache
def fixed_namespaces(unsent: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    """One namespace of :data:`NAMESPACES` of no kind in ``unsent``."""
    return st.sampled_from([n for n in NAMESPACES if not kinds_of(n) & set(unsent)])


class TenantMachine(RadixCacheMachine):
    """The conformance machine plus tenants (module docstring)."""

    def _pair(self, data: st.DataObject) -> tuple[Any, Any]:
        """A pair of the fixed list for this target (:func:`fixed_pairs` of its unsent kinds)."""
        return data.draw(fixed_pairs(self.capabilities.unsent_namespaces), label="pair")

    def _generated_pair(self, data: st.DataObject) -> tuple[Any, Any]:
        """A generated pair for this target (:func:`generated_pairs` of its unsent kinds)."""
        return data.draw(generated_pairs(self.capabilities.unsent_namespaces), label="pair")

    def _namespace(self, data: st.DataObject) -> Any:
        """A namespace for this target (:func:`fixed_namespaces` of its unsent kinds)."""
        return data.draw(fixed_namespaces(self.capabilities.unsent_namespaces), label="namespace")

    def _serve_in(self, tokens: tuple[int, ...], namespace: Any) -> None:
        """A request under ``namespace`` end to end: match, lock, compute the rest, insert, unlock
        (each an act of its own, as the plain machine's ``serve``: a repro file writes the caller's frees)."""
        record = self._match(tokens, None, namespace)
        self._lock(record)
        self._serve_insert(tokens, record)
        self._release(record)

    @rule(base=RadixCacheMachine.sequences, data=st.data(), swap=st.booleans(), tails=st.tuples(TAILS, TAILS, TAILS))
    def tenants_share_prompt(self, base: tuple[int, ...], data: st.DataObject, swap: bool, tails: tuple[Span, Span, Span]) -> None:
        """Tenants on one system prompt: a base-model request (no namespace), then two tenants whose
        namespaces a naive key confuses, each with its own tail, are served in turn; then each
        prompt is matched again under its own namespace. Each tenant must see only its own KV."""
        self._share_prompt(base, self._pair(data), swap, tails)

    @rule(base=RadixCacheMachine.sequences, data=st.data(), swap=st.booleans(), tails=st.tuples(TAILS, TAILS, TAILS))
    def generated_tenants_share_prompt(self, base: tuple[int, ...], data: st.DataObject, swap: bool,
                                       tails: tuple[Span, Span, Span]) -> None:
        """:meth:`tenants_share_prompt` on a generated pair: two namespaces only the type tells apart,
        which must not share, or two the contract calls equal, which must."""
        self._share_prompt(base, self._generated_pair(data), swap, tails)

    def _share_prompt(self, base: tuple[int, ...], pair: tuple[Any, Any], swap: bool, tails: tuple[Span, Span, Span]) -> None:
        namespaces = (UNSAID, *_ordered(pair, swap))
        requests = [(namespace, base + tail.tokens(self.block)) for namespace, tail in zip(namespaces, tails, strict=True)]
        for namespace, tokens in requests:
            self._serve_in(tokens, namespace)
        for namespace, tokens in requests:
            self._match(tokens, None, namespace)

    @rule(base=RadixCacheMachine.sequences, data=st.data(), swap=st.booleans(), cut=CUTS, tail=TAILS)
    def tenant_probes(self, base: tuple[int, ...], data: st.DataObject, swap: bool, cut: Length, tail: Span) -> None:
        """The base model caches a system prompt and one tenant the prompt and its own tail; the other
        tenant of the pair, the base model and the first tenant then match a cut of it."""
        self._probe(base, self._pair(data), swap, cut, tail)

    @rule(base=RadixCacheMachine.sequences, data=st.data(), swap=st.booleans(), cut=CUTS, tail=TAILS)
    def generated_tenant_probes(self, base: tuple[int, ...], data: st.DataObject, swap: bool, cut: Length, tail: Span) -> None:
        """:meth:`tenant_probes` on a generated pair."""
        self._probe(base, self._generated_pair(data), swap, cut, tail)

    def _probe(self, base: tuple[int, ...], pair: tuple[Any, Any], swap: bool, cut: Length, tail: Span) -> None:
        first, second = _ordered(pair, swap)
        self._insert_request(base, UNSAID)  # the base model's request came first: the commonest prompt is everyone's
        self._insert_request(base + tail.tokens(self.block), first)
        query = self._query(base, cut, tail, min_shared=1)
        self._match(query, None, second)
        self._match(query, None, UNSAID)
        self._match(query, None, first)

    @precondition(_can_admit)
    @rule(target=RadixCacheMachine.locks, base=RadixCacheMachine.sequences, data=st.data(), cut=CUTS, tail=TAILS)
    def tenant_admit(self, base: tuple[int, ...], data: st.DataObject, cut: Length, tail: Span) -> HandleRecord:
        """The base model caches a system prompt, a tenant caches it with its own tail, and that
        tenant's request is admitted on it and keeps running: its lock must protect its own pages,
        and no other namespace's (the base model's shorter copy stays evictable)."""
        tokens = self._query(base, cut, tail, min_shared=1)
        namespace = self._namespace(data)
        self._insert_request(base, UNSAID)
        self._insert_request(tokens + tail.tokens(self.block), namespace)
        return self._admit(tokens + tail.tokens(self.block), namespace)

    @precondition(_can_quarantine)
    @rule(base=RadixCacheMachine.sequences, data=st.data(), swap=st.booleans(), keep=CUTS)
    def tenant_quarantine(self, base: tuple[int, ...], data: st.DataObject, swap: bool, keep: Length) -> None:
        """The base model and both tenants of a pair cache one prompt; then one tenant's branch is
        quarantined (its adapter unloaded, its salt revoked): only its own may go."""
        doomed, other = _ordered(self._pair(data), swap)
        for namespace in (UNSAID, other, doomed):
            self._insert_request(base, namespace)
        prefix = base[: max(1, keep.tokens(self.block))]
        if prefix:
            self._quarantine(prefix, doomed)

    @precondition(_validates_input)
    @rule(base=RadixCacheMachine.sequences, call=st.sampled_from(("match_prefix", "insert", "evict_prefix")),
          namespace=st.sampled_from(UNHASHABLE))
    def unhashable_namespace(self, base: tuple[int, ...], call: str, namespace: Any) -> None:
        """An unhashable namespace is bad input: refused, changing nothing."""
        if call == "evict_prefix" and not self.capabilities.supports_quarantine:
            call = "match_prefix"
        self._refuse_namespace(base, call, namespace)

    @act
    def _refuse_namespace(self, base: tuple[int, ...], call: str, namespace: Any) -> None:
        tokens = list(base) or [0]
        slots = self.allocator.alloc(len(tokens)) if call == "insert" else None
        args: tuple = (tokens, slots.copy()) if slots is not None else (tokens,)  # the copy is lent (and overwritten)
        try:
            self._expect_refusal(f"bad input (unhashable namespace {namespace!r})", call, *args, namespace=namespace)
        finally:
            if slots is not None:  # refused: the caller frees what it brought
                self.allocator.free(slots)
