"""A construction test's program as the cache machine's acts, so that its finding joins the grouping
by root cause (:mod:`radixcheck.properties.findings.root_cause`).

The construction tests (``radixcheck.properties.conformance.test_construction``) make plain calls
outside the state machine, so their failure has no transcript to replay. The foreign-handle test
(``test_handle_from_another_cache_is_refused``) has a twin among the machine's acts: the machine's
``foreign_handle`` rule, sent in the test's order (``RadixCacheMachine._refuse_foreign_twin``: the
other cache makes its handle, then this one caches the same tokens). Its program is that act per
op the test sends, then a request's match and lock of the cached prefix (the cache must still serve
its own prefix), replayed past each failure with every oracle and the usual probes.

Why: a wire server that numbers handles per cache failed this test ("accepted a handle from
another cache") and, in the state machine, refused a legal lock (the other cache's drop took the
shared number): two findings of one cause (reports/findings/wire_trial.md). The other tests
(bad page sizes, reset) have no program here: each stays a finding of its own unless its signature
is another's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from radixcheck.properties.cache.machine import HandleRecord, machine_for
from radixcheck.properties.findings.root_cause import Signature, shown_by
from radixcheck.properties.findings.transcript import Act

FOREIGN_HANDLE_TEST = "test_handle_from_another_cache_is_refused"


def foreign_handle_tokens(page_size: int) -> list[int]:
    """The tokens the foreign-handle test caches in both caches (two pages)."""
    return list(range(1, 2 * page_size + 1))


def foreign_handle_ops(capabilities: Any) -> list[str]:
    """The lock calls the foreign-handle test sends another cache's handle to. A cache that locks only
    through a fresh match locks by the handle's tokens, in itself: only its unlock can mistake another
    cache's node for its own (contract, "Adapting a match-and-lock API")."""
    return ["dec_lock_ref"] if capabilities.locks_only_after_match else ["inc_lock_ref", "dec_lock_ref"]


def construction_program(test: str, page_size: int, capabilities: Any) -> list[Act] | None:
    """The construction test ``test``'s calls as the cache machine's acts at ``page_size``, or
    ``None`` if it has no twin there. The tokens and ops are the test's own (it reads them here)."""
    if test != FOREIGN_HANDLE_TEST or not capabilities.checks_locks or capabilities.key_mode != "tokens":
        return None  # the test skips such a cache (its own skips): it never fails there
    tokens = tuple(foreign_handle_tokens(page_size))
    ops = foreign_handle_ops(capabilities)
    record = HandleRecord(None, [], tokens)  # the request's match (a replay maps it to the one it makes)
    return [*(Act("_refuse_foreign_twin", (op, tokens), "construction", step_number=1) for op in ops),
            Act("_match", (tokens,), "construction", step_number=2, result=record),
            Act("_lock", (record,), "construction", step_number=2),
            Act("_release", (record,), "construction", step_number=2)]


def shown_by_construction_test(test: str, page_size: int, factory: Callable[..., Any], capabilities: Any,
                               waived: Callable[[BaseException], bool] | None = None) -> list[Signature]:
    """Every signature the construction test ``test``'s program shows on ``factory``'s cache machine
    (:func:`~radixcheck.properties.findings.root_cause.shown_by`); nothing for a test with no program."""
    acts = construction_program(test, page_size, capabilities)
    if acts is None:
        return []
    return shown_by(machine_for(factory, capabilities, page_size, "root_cause"), acts, None, waived)
