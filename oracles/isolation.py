"""Oracle 10 — tenant isolation.

A cache that takes namespaces (LoRA ids, cache salts, multimodal hashes) keeps them apart: a match
under N returns only what was inserted under N, an insert under N counts only N's prefix as
cached, and an eviction under N changes no other namespace. The prefix-set model keeps one trie
per namespace and remembers, for every cached slot, the namespace and the insert that put it
there (``Entry.namespace``, ``Entry.born``); these checks read that and nothing else.

Each check names the namespace that leaked, the namespace that saw it, and the request (the
insert call) that put the prefix there, so a report reads as "tenant B was served tenant A's KV
of [...] (cached by call 7)".
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence

from radixcheck.oracles.prefix_set import Entry, PrefixSetModel
from radixcheck.oracles.violations import Check, TenantIsolationViolation, shown, shown_namespace

InsertedBy = Callable[[int], str]
"""The model's clock at an insert -> the call that made it (for messages)."""


def _owners_elsewhere(model: PrefixSetModel, slots: Iterable[int], namespace: Hashable) -> list[Entry]:
    """The pages holding any of ``slots`` that belong to a namespace other than ``namespace``."""
    owners = {model.slot_owner.get(int(s)) for s in slots}
    return sorted((e for e in owners if e is not None and e.namespace != namespace), key=lambda e: e.serial)


def _leak(entry: Entry, inserted_by: InsertedBy) -> str:
    return f"{shown(entry.prefix)} cached under namespace {shown_namespace(entry.namespace)} by {inserted_by(entry.born)}"


def check_match_isolated(model: PrefixSetModel, namespace: Hashable, tokens: Sequence[int], values: Sequence[int],
                         inserted_by: InsertedBy, call: str = "match_prefix", answer: str = "values.tolist()") -> None:
    """A match under ``namespace`` returned ``values``: none may be a slot another namespace cached.
    ``call`` and ``answer`` name the match and its slots as a repro file reads them (a running
    request's ``match_req`` leaves them in ``req.slots``)."""
    leaked = _owners_elsewhere(model, values, namespace)
    if leaked:
        foreign = sorted(s for e in leaked for s in e.values)
        raise TenantIsolationViolation(
            f"{call}({shown(tokens)}, namespace={shown_namespace(namespace)}) returned the KV of {_leak(leaked[0], inserted_by)}",
            Check(f"set({answer}).isdisjoint(other_namespace)", f"sorted(set({answer}) & set(other_namespace))",
                  {"other_namespace": foreign}))


def check_insert_isolated(model: PrefixSetModel, namespace: Hashable, tokens: Sequence[int], prefix_len: int, own: int,
                          inserted_by: InsertedBy) -> None:
    """An insert under ``namespace`` said ``prefix_len`` tokens were cached, where the namespace had
    ``own``: if another namespace has that much of ``tokens`` cached, the cache found it there (and
    keeps that namespace's KV for these tokens).

    An insert returns a length, not slots, so which namespace the cache looked in is known only up
    to the length: a namespace whose cached prefix of ``tokens`` is exactly ``prefix_len`` long
    explains it (one with more cached would have given more), and every one that does is named,
    the latest insert first ("found [0] cached under namespace (None, 'X') by call 2, or under
    namespace None by call 1"). If none is exact (a cache that pools several namespaces' pages),
    every namespace with at least that much cached is named."""
    if prefix_len <= own:
        return
    aligned = len(tokens) // model.page_size * model.page_size
    found = [path for path in (model.longest_cached(tokens, other) for other in list(model.roots) if other != namespace)
             if len(path) * model.page_size >= prefix_len]
    exact = [path for path in found if min(len(path) * model.page_size, aligned) == prefix_len]
    leaked = sorted(exact or found, key=lambda path: -path[-1].born)  # the latest insert first
    if leaked:
        said = _leak(leaked[0][-1], inserted_by) + "".join(
            f", or under namespace {shown_namespace(path[-1].namespace)} by {inserted_by(path[-1].born)}" for path in leaked[1:])
        raise TenantIsolationViolation(
            f"insert({shown(tokens)}, namespace={shown_namespace(namespace)}) returned prefix_len {prefix_len}, but the namespace "
            f"had {own} cached: it found {said}",
            Check("result == expected", "result", {"expected": own}))


def check_quarantine_isolated(freed_owners: Iterable[Entry | None], namespace: Hashable, tokens: Sequence[int],
                              inserted_by: InsertedBy) -> None:
    """``evict_prefix(tokens, namespace=N)`` freed slots whose pages were (before the call) those of
    ``freed_owners``: none may be another namespace's."""
    leaked = sorted((e for e in freed_owners if e is not None and e.namespace != namespace), key=lambda e: e.serial)
    if leaked:
        raise TenantIsolationViolation(
            f"evict_prefix({shown(tokens)}, namespace={shown_namespace(namespace)}) freed the KV of {_leak(leaked[0], inserted_by)}",
            Check("set(freed).isdisjoint(other_namespace)", "sorted(set(freed) & set(other_namespace))",
                  {"other_namespace": sorted(s for e in leaked for s in e.values)}))


def check_quarantine_left_others(namespace: Hashable, tokens: Sequence[int], probe_namespace: Hashable,
                                 probe: Sequence[int], matched: int, before: int) -> None:
    """After ``evict_prefix(tokens, namespace=N)``, a query of another namespace must match what it
    matched before."""
    if probe_namespace != namespace and matched != before:
        raise TenantIsolationViolation(
            f"after evict_prefix({shown(tokens)}, namespace={shown_namespace(namespace)}), namespace "
            f"{shown_namespace(probe_namespace)}'s query "
            f"{shown(probe)} matches {matched} tokens; it matched {before} before",
            Check("len(values) == expected_length", "len(values)", {"expected_length": before}))
