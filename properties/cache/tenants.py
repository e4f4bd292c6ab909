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

The stories start where leaks start: many tenants, and the base model, on one system prompt.
"""

from __future__ import annotations

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


def kinds_of(namespace: Any) -> set[str]:
    """The kinds of ``Capabilities.unsent_namespaces`` that ``namespace`` is."""
    kinds = set()
    if namespace == "" and isinstance(namespace, str):
        kinds.add("empty")
    if isinstance(namespace, tuple) and len(namespace) > 2:
        kinds.add("multimodal")
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


class TenantMachine(RadixCacheMachine):
    """The conformance machine plus tenants (module docstring)."""

    def _pair(self, pair: tuple[Any, Any]) -> tuple[Any, Any]:
        return sendable(PAIRS, pair, self.capabilities.unsent_namespaces, lambda p: kinds_of(p[0]) | kinds_of(p[1]))

    def _namespace(self, namespace: Any) -> Any:
        return sendable(NAMESPACES, namespace, self.capabilities.unsent_namespaces)

    def _serve_in(self, tokens: tuple[int, ...], namespace: Any) -> None:
        """A request under ``namespace`` end to end: match, lock, compute the rest, insert, unlock
        (each an act of its own, as the plain machine's ``serve``: a repro file writes the caller's frees)."""
        record = self._match(tokens, None, namespace)
        self._lock(record)
        self._serve_insert(tokens, record)
        self._release(record)

    @rule(base=RadixCacheMachine.sequences, pair=st.sampled_from(PAIRS), swap=st.booleans(),
          tails=st.tuples(TAILS, TAILS, TAILS))
    def tenants_share_prompt(self, base: tuple[int, ...], pair: tuple[Any, Any], swap: bool, tails: tuple[Span, Span, Span]) -> None:
        """Tenants on one system prompt: a base-model request (no namespace), then two tenants whose
        namespaces a naive key confuses, each with its own tail, are served in turn; then each
        prompt is matched again under its own namespace. Each tenant must see only its own KV."""
        namespaces = (UNSAID, *_ordered(self._pair(pair), swap))
        requests = [(namespace, base + tail.tokens(self.block)) for namespace, tail in zip(namespaces, tails, strict=True)]
        for namespace, tokens in requests:
            self._serve_in(tokens, namespace)
        for namespace, tokens in requests:
            self._match(tokens, None, namespace)

    @rule(base=RadixCacheMachine.sequences, pair=st.sampled_from(PAIRS), swap=st.booleans(), cut=CUTS, tail=TAILS)
    def tenant_probes(self, base: tuple[int, ...], pair: tuple[Any, Any], swap: bool, cut: Length, tail: Span) -> None:
        """The base model caches a system prompt and one tenant the prompt and its own tail; the other
        tenant of the pair, the base model and the first tenant then match a cut of it."""
        first, second = _ordered(self._pair(pair), swap)
        self._insert_request(base, UNSAID)  # the base model's request came first: the commonest prompt is everyone's
        self._insert_request(base + tail.tokens(self.block), first)
        query = self._query(base, cut, tail, min_shared=1)
        self._match(query, None, second)
        self._match(query, None, UNSAID)
        self._match(query, None, first)

    @precondition(_can_admit)
    @rule(target=RadixCacheMachine.locks, base=RadixCacheMachine.sequences, namespace=st.sampled_from(NAMESPACES), cut=CUTS,
          tail=TAILS)
    def tenant_admit(self, base: tuple[int, ...], namespace: Any, cut: Length, tail: Span) -> HandleRecord:
        """The base model caches a system prompt, a tenant caches it with its own tail, and that
        tenant's request is admitted on it and keeps running: its lock must protect its own pages,
        and no other namespace's (the base model's shorter copy stays evictable)."""
        tokens = self._query(base, cut, tail, min_shared=1)
        namespace = self._namespace(namespace)
        self._insert_request(base, UNSAID)
        self._insert_request(tokens + tail.tokens(self.block), namespace)
        return self._admit(tokens + tail.tokens(self.block), namespace)

    @precondition(_can_quarantine)
    @rule(base=RadixCacheMachine.sequences, pair=st.sampled_from(PAIRS), swap=st.booleans(), keep=CUTS)
    def tenant_quarantine(self, base: tuple[int, ...], pair: tuple[Any, Any], swap: bool, keep: Length) -> None:
        """The base model and both tenants of a pair cache one prompt; then one tenant's branch is
        quarantined (its adapter unloaded, its salt revoked): only its own may go."""
        doomed, other = _ordered(self._pair(pair), swap)
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
