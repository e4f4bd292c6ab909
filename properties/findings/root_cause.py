"""One finding per root cause: findings grouped by replay.

The audit first groups failures by a signature read from each message
(:func:`~radixcheck.properties.findings.failures.signature_of`: the oracle and the shape of the
first differing call). One bug can still fail several oracles, each in a shape of its own: a split
that copies the wrong slots made ``evict`` return the wrong count in one test, a match return too
many values in another and the caller free a slot twice in a third. With ``--repro``, each
finding's program (the reduced one its repro file is written from) is replayed once more here,
with every oracle and both invariant checks after every act, **going on past each failure**, and
what it shows is kept: every signature any oracle reported on the way (:func:`shown_by`). A
serving run (the DFS-bound tests) is replayed as the cache machine's acts (:func:`serving_acts`:
the same match, lock, insert, unlock and evict the serving protocol sends), so its findings are
judged by the same oracles.

Two findings are **the same root cause** when each one's program shows the other's signature
(:func:`same_causes`): a bug that merely echoes another is shown by that one's program, not the
other way round, and two unrelated bugs in one cache each show only their own. Merging is
transitive (a chain of mutual pairs is one cause).

A tier world's program (its log's operations), a tenant tree's (its checked calls, recorded as
the machine or a threaded round's one-thread rerun makes them) and an index's (its repro file's
calls) are replayed the same way, each by its own replayer (:data:`Replayer`:
:func:`~radixcheck.properties.tiers.repro.shown_by_tier`,
:func:`~radixcheck.properties.tenant_tree.replay.shown_by_tenant_tree`,
:func:`~radixcheck.properties.index.replay.shown_by_index`), each with probes of its own. A program
can show nothing of the kind: a bounded index's findings (no file), a plain test's, a
hang's (a replay past a hang would cost the time limit per call), a thread-safety bug's (its
calls pass on one thread), and any finding of an audit without ``--repro``: those keep the
grouping by signature alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from radixcheck.properties.cache.batches import ServingRun
from radixcheck.properties.cache.machine import RadixCacheMachine
from radixcheck.properties.findings.failures import message_of, oracle_of, signature_of
from radixcheck.properties.findings.reduce import INVARIANTS, replay
from radixcheck.properties.findings.transcript import Act
from radixcheck.properties.target import BudgetSpent, ends_a_replay, time_budget

Signature = tuple[str, str]
"""A finding's signature as the audit groups it: its oracle and ``signature_of`` its message."""

REPLAY_SECONDS = 30.0  # the longest one program's replay may take here (it is already reduced)


def signature(exc: BaseException) -> Signature:
    """The signature the audit groups ``exc`` by."""
    oracle = oracle_of(exc)
    return oracle, signature_of(oracle, message_of(exc))


PROBED = 64  # the most recent inserted sequences matched again at the end of a program


def checked_after_every_act(acts: Iterable[Act]) -> list[Act]:
    """``acts`` judged by every oracle: without their own invariant checks, with both checks after
    every act, and at the end the probes a finding of another oracle would need to show itself:
    a match of each sequence inserted (the last :data:`PROBED`; the prefix-set oracle judges what
    it returns) and an eviction of everything evictable (what ``evict`` frees and returns)."""
    out: list[Act] = []
    inserted: dict[tuple, None] = {}
    for a in acts:
        if a.name in INVARIANTS:
            continue
        out += [a, *_invariants(a)]
        if a.name == "_refuse_foreign":  # the same handle sent as the construction test sends it: that finding's twin
            twin = Act("_refuse_foreign_twin", a.args, "probe", a.story, a.step_number)
            out += [twin, *_invariants(twin)]
            a = twin
        if a.name in ("_insert_request", "_serve_insert"):
            inserted[tuple(int(t) for t in a.args[0])] = None
        elif a.name == "_refuse_foreign_twin":  # it caches its tokens here too
            inserted[tuple(int(t) for t in a.args[1])] = None
    last = out[-1] if out else Act("", ())
    for tokens in list(inserted)[-PROBED:]:
        probe = Act("_match", (tokens,), "probe", step_number=last.step_number + 1)
        out += [probe, *_invariants(probe)]
    evict = Act("_evict_everything", (), "probe", step_number=last.step_number + 1)
    return out + [evict, *_invariants(evict)]


def _invariants(after: Act) -> list[Act]:
    return [Act(name, (), after.step, after.story, after.step_number) for name in INVARIANTS]


class _Probing:
    """What the replays here add to a cache machine: evict everything evictable, and evict down to a
    serving run's budget, as the protocol does. The amount is the model's (the expected one),
    decided when the act is replayed."""

    def _evict_everything(self: Any) -> None:
        if self.model.total() > self.model.protected():
            self._evict(self.model.total() - self.model.protected())

    def _evict_to_budget(self: Any, budget: int) -> None:
        if self.model.total() > budget:
            self._evict(self.model.total() - budget)


def shown_by(machine_class: type[RadixCacheMachine], acts: list[Act], options: Any = None,
             waived: Callable[[BaseException], bool] | None = None, trim_queries: bool = False) -> list[Signature]:
    """Every signature the program ``acts`` shows on a fresh ``machine_class`` machine: each act
    replayed with every oracle and both invariant checks after it, going on past each failure
    (a finding ``waived`` accepts is not counted; ``trim_queries`` as the reduced replay had it).
    A hang, or a call that left the cache answering nothing, ends the replay (:func:`shown_past_failures`).
    In the order they were first met."""
    probing = type(machine_class.__name__, (_Probing, machine_class), {})

    def run(seen: Callable[[BaseException], bool]) -> None:
        replay(probing, checked_after_every_act(acts), options, seen, trim_queries)
    return shown_past_failures(run, waived)


Replayer = Callable[[Callable[[BaseException], bool]], None]
"""A program replayed going on past each failure: it hands each failure to its argument (``seen``)
and goes on while ``seen`` returns True. Each machine has its own (the cache machine's acts, a tier
world's operations, a tenant tree's checked calls); what they show is grouped the same way."""


def each_step(steps: Iterable[Callable[[], object] | None], seen: Callable[[BaseException], bool]) -> bool:
    """Run ``steps`` (``None``: skipped) for a replayer, each failure told to ``seen``; False once
    ``seen`` says stop (a hang, or a target that answers nothing)."""
    for step in steps:
        if step is None:
            continue
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - a failure is what the replay looks for
            if not seen(exc):
                return False
    return True


def shown_past_failures(run: Replayer, waived: Callable[[BaseException], bool] | None = None) -> list[Signature]:
    """Every signature ``run`` reports on the way (a finding ``waived`` accepts is not counted), in the
    order first met. It ends at a call that hung or left the target answering nothing
    (:func:`~radixcheck.properties.target.ends_a_replay`: each further call could cost the time
    limit again, or meet only that again), shown as itself; and at :data:`REPLAY_SECONDS`."""
    shown: dict[Signature, None] = {}
    ended = False

    def seen(exc: BaseException) -> bool:
        nonlocal ended
        ended = ended or ends_a_replay(exc)
        if not (waived is not None and waived(exc)):
            shown[signature(exc)] = None
        return not ended  # go on past it, except after a hang or once the target answers nothing

    try:
        with time_budget(REPLAY_SECONDS):
            run(seen)
    except BudgetSpent:
        pass  # what it showed so far
    except Exception:  # noqa: BLE001 - the factory itself raised: the program shows what it showed, the repro is still written
        pass
    return list(shown)


def serving_acts(run: ServingRun) -> list[Act]:
    """A serving run (:mod:`radixcheck.properties.cache.serving`) as the cache machine's acts: per
    request, match its prompt and lock the match, insert the whole request (the caller frees its
    copies), match and lock the new path, unlock the first match, evict down to the budget, unlock
    the path. Each handle is the record the match act returns (a replay maps it)."""
    from radixcheck.properties.cache.machine import HandleRecord

    acts: list[Act] = []
    for number, request in enumerate(run.requests, 1):
        tokens = tuple(request)
        first, path = HandleRecord(None, [], tokens), HandleRecord(None, [], tokens)
        acts += [Act("_match", (tokens,), "serve", step_number=number, result=first),
                 Act("_lock", (first,), "serve", step_number=number),
                 Act("_serve_insert", (tokens, first), "serve", step_number=number),
                 Act("_match", (tokens,), "serve", step_number=number, result=path),
                 Act("_lock", (path,), "serve", step_number=number),
                 Act("_release", (first,), "serve", step_number=number)]
        if run.budget is not None:
            acts.append(Act("_evict_to_budget", (run.budget,), "serve", step_number=number))
        acts.append(Act("_release", (path,), "serve", step_number=number))
    return acts


def shown_by_serving(machine_class: type[RadixCacheMachine], run: ServingRun,
                     waived: Callable[[BaseException], bool] | None = None) -> list[Signature]:
    """:func:`shown_by` for a serving run (:func:`serving_acts`), on ``machine_class`` (the target's
    machine at the run's page size)."""
    return shown_by(machine_class, serving_acts(run), None, waived)


LEGAL_CALL_REFUSED = re.compile(r"^(\w+\(.*\) raised \w+): .*(; the call was legal)$")
"""A legal lock or unlock the cache refused (``RadixCacheMachine._legal``), and the cache's own words for it."""


def event_of(s: Signature) -> Signature:
    """``s`` as the event a program shows: a legal call refused without the cache's words for the
    refusal, which say what state the bug had left (a wire server numbering handles per cache
    refused one legal lock as "unknown or stale handle 1" and another as "handle 1 belongs to
    another worker", depending on which other cache had been dropped)."""
    return s[0], LEGAL_CALL_REFUSED.sub(r"\1: …\2", s[1])


def shows_cause(shown: set[Signature], of: Signature, own: Signature) -> bool:
    """Whether a program that showed ``shown`` (its own finding ``own``) shows the finding ``of``:
    its signature (as an event: :func:`event_of`), or, when ``of`` is another oracle's, that oracle
    in any shape. One event reads differently in different harnesses (the caller's double free is
    "free() of ids not in use" in a serving run, "slots freed while still cached or held" in the
    state machine), but an oracle a program fails besides its own is a cause it shows."""
    return (event_of(of) in {event_of(s) for s in shown}
            or (of[0] != own[0] and any(oracle == of[0] for oracle, _ in shown)))


def same_causes(shows: dict[Signature, Iterable[Signature]]) -> list[list[Signature]]:
    """The findings (by signature) grouped by root cause: two are one when each one's program shows
    the other (:func:`shows_cause`), and the relation is closed transitively. Each group keeps the
    order of ``shows``; a finding with no program (an empty or missing entry) is a group of its own."""
    keys = list(shows)
    parent = {k: k for k in keys}

    def root(k: Signature) -> Signature:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    shown = {k: set(v) for k, v in shows.items()}
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if shows_cause(shown[a], b, a) and shows_cause(shown[b], a, b):
                parent[root(b)] = root(a)
    groups: dict[Signature, list[Signature]] = {}
    for k in keys:
        groups.setdefault(root(k), []).append(k)
    return list(groups.values())
