"""Making a failure small enough to read: replay its transcript with acts left out.

Hypothesis shrinks the *program* (the rules and their arguments); a step of it can still send
dozens of calls, and a production-scale world sends 10^4. :func:`reduce` works on the failing
machine's transcript (:mod:`radixcheck.properties.findings.transcript`) instead: it replays the acts on a
fresh machine, with every oracle, and keeps any change after which the replay still fails with
the same finding (the same oracle, and a message of the same shape):

1. every invariant check but the failing one left out at once;
2. a production world's failing step with one other story or step alone, smallest first (each a fraction
   of the world's replay), else whole steps (or stories) left out, largest first;
3. simpler tokens and callers, all at once first (one replay), else one by one: token ids renamed
   in the order they are first sent (:func:`renamed`: the first prompt becomes ``0, 1, 2, ...``,
   every prefix shared as before, so a file writes ``list(range(0, 3000))``, not 3,000 random ids);
   buffers left alone, tokens as lists only, ascending slot ids (:class:`~radixcheck.properties.cache.machine.MachineOptions`);
   and match queries cut to what they match;
4. long runs of one kind of act (a production world's 3,000 matches that deepen one path, its
   crowd of 1,025 locks) halved, again and again: a shallower chain, a smaller crowd; a run neither
   of whose halves can go is cut by bisection at each end;
5. runs of acts left out, halving the run length each round (delta debugging), a long run as one;
6. each inserted prompt cut, in one replay, to what the rest of the program shares of it plus a page
   (a deep history's 3,000-token prompt to its chain's deepest match, its next turn cut alike);
7. each inserted prompt cut to half its pages, again and again (a 161-token prompt where 2 do).

An act that needs one left out (a lock of a match that is gone) goes with it, and one that
would no longer be legal (an unlock whose lock is gone) is not sent.

Each replay is judged by the same machine and oracles as the run, so a smaller failure is as
real as the first one. It is bounded in CPU time (``RADIXCHECK_REDUCE_SECONDS``, default 5; a production world's
60: one replay of it costs seconds; a wall-clock backstop stops a target that blocks: :mod:`~radixcheck.properties.budget_clock`),
and what it has at the end is the answer. A hang is reduced the same way: a replay that does not
hang costs what any replay does, one that still hangs (the same call, in the same shape) costs the
per-operation limit, so a hang's budget is the reduction's plus ``HANG_REPLAYS`` limits (its last
replay may end one limit past it).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from radixcheck.oracles.violations import ContractViolation
from radixcheck.properties.budget_clock import BudgetWatch
from radixcheck.properties.cache.machine import HandleRecord, MachineOptions, RadixCacheMachine, namespace_key
from radixcheck.properties.findings.failures import message_of, oracle_of, raised_at, shape_of
from radixcheck.properties.findings.transcript import Act, kept
from radixcheck.properties.target import BudgetSpent, alarm_handler, caused_by_hang, forget_hangs, new_run, op_timeout, time_budget

REDUCE_ENV = "RADIXCHECK_REDUCE_SECONDS"
DEFAULT_REDUCE_SECONDS = 5.0
INVARIANTS = ("sizes_add_up", "slots_conserved")
HANG_REPLAYS = 2  # a hang's budget is the reduction's plus this many per-operation limits


def reduce_seconds(machine: type | None = None) -> float:
    """The reduction budget: ``RADIXCHECK_REDUCE_SECONDS`` if set, else the machine's own
    ``default_reduce_seconds`` if it has one (a production world's: one replay costs seconds), else 5 s."""
    default = getattr(machine, "default_reduce_seconds", DEFAULT_REDUCE_SECONDS)
    return float(os.environ.get(REDUCE_ENV, default))


def finding_of(exc: BaseException) -> tuple[str, str, str]:
    """What makes two failures the same finding: the oracle, the shape of the message, and, for a
    crash, where it was raised (not for a hang: the alarm raises it wherever the call was, and a
    run's replay of the call that hung raises it where the time limit remembers it)."""
    site = "" if isinstance(exc, ContractViolation) or caused_by_hang(exc) else raised_at(exc)
    return oracle_of(exc), shape_of(message_of(exc)), site


@dataclass
class Replay:
    """A transcript replayed: the machine (with its own new transcript), the acts that were sent
    (the originals, up to the one that failed) and the failure, if any."""

    machine: RadixCacheMachine
    acts: list[Act]
    failure: BaseException | None
    trim_queries: bool = False
    waived: list[BaseException] | None = None  # the waived findings it went on past (its file embeds their waivers); None: not replayed


def replay(machine_class: type[RadixCacheMachine], acts: list[Act], options: MachineOptions | None = None,
           waived: Callable[[BaseException], bool] | None = None, trim_queries: bool = False) -> Replay:
    """Send ``acts`` to a fresh machine (of ``machine_class``, with ``options``), stopping at the
    first failure that ``waived`` does not cover. An act whose handle record is not there (its
    match was left out), or that would not be legal now, is skipped; ``trim_queries`` cuts each
    top-level match query to the part the model says is cached."""
    machine_class = type(machine_class.__name__, (machine_class,), {"options": options or machine_class.options, "records": True})
    forget_hangs()
    new_run()  # what the target keeps for this replay (a wire server's caches) ends with it, not at a collection
    with alarm_handler(), standalone_stack():
        machine = machine_class()
        records: dict[int, HandleRecord] = {}  # id(original record) -> the replayed one
        sent: list[Act] = []
        met: list[BaseException] = []
        for original in acts:
            args = _arguments(machine, original, records, trim_queries)
            if args is None:
                continue
            machine.step, machine.story, machine.step_number = original.step, original.story, original.step_number
            sent.append(original)
            try:
                result = getattr(machine, original.name)(*args)
            except Exception as exc:  # noqa: BLE001 - a failure of the cache is what a replay looks for
                if waived is not None and waived(exc):
                    met.append(exc)
                    continue
                return Replay(machine, sent, exc, trim_queries, met)
            if isinstance(original.result, HandleRecord):
                records[id(original.result)] = result
    return Replay(machine, sent, None, trim_queries, met)


STACK_MARGIN = 64  # frames a replay is given beyond the file's stack (standalone_stack)


@contextmanager
def standalone_stack() -> Iterator[None]:
    """Give a replay the stack a repro file has when it runs on its own. Here pytest, Hypothesis
    and the machine already take some of Python's recursion limit; without this, a recursive
    walk that fails 900 frames deep in the replay would pass in the file. For the block only,
    the limit is raised by the frames below it, and put back after. A replayed call also passes
    through more frames than the file's (the machine's helper, the time limit) and a worker of
    pytest-xdist stands on more still: the limit is raised by :data:`STACK_MARGIN` frames more, so
    a walk that fails in the replay fails in the file too (a recursive leaf collection's file,
    reduced to a chain just deep enough for the replay, exited 0 on its own)."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + depth + STACK_MARGIN)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _arguments(machine: RadixCacheMachine, act: Act, records: dict[int, HandleRecord], trim_queries: bool) -> tuple | None:
    """``act``'s arguments for the replaying machine, or ``None`` if it cannot be sent now."""
    args = []
    for arg in act.args:
        if isinstance(arg, HandleRecord):
            if id(arg) not in records:
                return None  # the match that made it was left out
            arg = records[id(arg)]
        args.append(kept(arg))  # a copy: the replaying machine overwrites what it lends, as the first one did
    model = machine.model
    if act.name == "_match_along":
        args = args[:1]  # the path and slots are found again on the replaying machine's model
    elif act.name == "_match" and trim_queries:
        cached = len(model.longest_cached(args[0], namespace_key(args[2]) if len(args) > 2 else None)) * machine.page_size
        args[0] = args[0][:cached] or args[0]
    elif act.name in ("_lock", "_serve_insert") and not model.can_lock(args[-1].path):
        return None  # its prefix is no longer cached
    elif act.name == "_release" and not (args[0].held > 0 and model.can_unlock(args[0].path)):
        return None  # its lock is gone: the caller would not send this unlock
    return tuple(args)


@dataclass
class Reduced:
    """The smallest failing replay found, and what it took."""

    replay: Replay
    options: MachineOptions
    acts_before: int
    original: list[Act] = field(default_factory=list)  # the run's transcript
    replays: int = 0
    seconds: float = 0.0  # CPU seconds (this process's and a wire server's: budget_clock), as its budget counts them
    notes: list[str] = field(default_factory=list)
    budget: float = DEFAULT_REDUCE_SECONDS  # the seconds it was allowed


def reduce(machine: RadixCacheMachine, failure: BaseException, waived: Callable[[BaseException], bool] | None = None,
           seconds: float | None = None, replays: int | None = None) -> Reduced | None:
    """The failing ``machine``'s transcript, reduced (module docstring) for at most ``seconds``
    (default ``RADIXCHECK_REDUCE_SECONDS``) and, if given, at most ``replays`` replays (a budget
    that does not depend on the machine's speed, for tests). ``None`` if its replay does not fail
    the same way (a target that does not repeat itself)."""
    budget = reduce_seconds(type(machine)) if seconds is None else seconds
    if caused_by_hang(failure) and budget > 0:  # a replay that still hangs costs the time limit: room for two of them
        budget += HANG_REPLAYS * op_timeout()
    watch = BudgetWatch(budget)  # CPU seconds (and a wall-clock backstop): the same reduction on a loaded machine
    machine_class, wanted = type(machine), finding_of(failure)
    options = machine.options
    acts = list(machine.transcript)
    as_run = Reduced(Replay(machine, acts, failure), options, len(acts), acts, budget=budget)
    if budget <= 0:
        as_run.notes.append("not reduced")
        return as_run
    limit = replays
    replays, spent = 0, False

    def fails(acts: list[Act], options: MachineOptions, trim: bool) -> Replay | None:
        """The replay, if it fails the same way; a replay still running at the deadline is cut short."""
        nonlocal replays, spent
        replays += 1
        try:
            with time_budget(watch.left()):
                again = replay(machine_class, acts, options, waived, trim)
        except BudgetSpent:
            spent = True
            return None
        return again if again.failure is not None and finding_of(again.failure) == wanted else None

    def time_left() -> bool:
        return not spent and not watch.spent() and (limit is None or replays < limit)

    lean = [a for a in acts if a.name not in INVARIANTS or a is acts[-1]]  # usually enough, and a replay saved
    # Whole stories first, before any replay of the whole world: a smaller world is cheaper to replay. The first
    # goes with every simpler caller and token (3. below) at once: a scale world may allow few replays in the budget.
    simplest = dataclasses.replace(options, **{k: v for change in SIMPLER for k, v in change.items() if k in OPTIONS})
    best = _keep_one_story(renamed(lean), simplest, fails, time_left)
    if best is None:
        best = _leave_out_stories(renamed(lean), simplest, fails, time_left, trim=True, first_only=True)
    if best is None and replays == 0 and time_left():  # no story can go (a world of one story): still one replay for both
        best = fails(renamed(lean), simplest, True)
    simplified = best is not None
    if simplified:
        options = simplest
    else:
        best = _leave_out_stories(lean, options, fails, time_left)
    if best is None and time_left():
        best = (fails(lean, options, False) if len(lean) < len(acts) else None) or (fails(acts, options, False) if time_left() else None)
    if best is None and spent:
        as_run.notes.append(f"not reduced: its budget ({budget:g} s of CPU, {REDUCE_ENV}) ran out before a replay failed the same way")
        return as_run
    if best is None:
        return None
    if not simplified:
        best, options = _simpler(best, options, fails, time_left)
    best = _halve_long_runs(best, options, fails, time_left)
    best = _leave_out_runs(best, options, fails, time_left)
    best = _cut_prompts(best, options, fails, time_left, rename=simplified)  # after: its replay a prompt, once delta debugging left few
    best = _shorten_prompts(best, options, fails, time_left)
    notes = [] if time_left() else [f"reduction stopped after {replays} replays" if limit is not None and replays >= limit
                                    else f"reduction stopped at its budget ({budget:g} s of CPU, {REDUCE_ENV})"]
    return Reduced(best, options, len(acts), acts, replays, round(watch.cpu(), 2), notes, budget)


SIMPLER = ({"renamed": True}, {"churned_slots": False}, {"reuses_buffers": False}, {"tokens_as_lists": True}, {"trim": True})
OPTIONS = {f.name for f in dataclasses.fields(MachineOptions)}


def _simpler(best: Replay, options: MachineOptions, fails: Callable[..., Replay | None],
             time_left: Callable[[], bool]) -> tuple[Replay, MachineOptions]:
    """Simpler tokens and callers (module docstring, 3): every change at once (usually the finding
    stays: one replay), else each on its own, keeping those after which it still fails the same way."""

    def attempt(changes: tuple[dict, ...]) -> bool:
        nonlocal best, options
        merged = {k: v for change in changes for k, v in change.items()}
        acts = renamed(best.acts) if merged.pop("renamed", False) else best.acts
        trim = merged.pop("trim", best.trim_queries)
        if acts is best.acts and not merged and trim == best.trim_queries:
            return False  # nothing would change
        simpler = fails(acts, dataclasses.replace(options, **merged), trim) if time_left() else None
        if simpler is not None:
            best, options = simpler, dataclasses.replace(options, **merged)
        return simpler is not None

    if not attempt(SIMPLER):
        for change in SIMPLER:
            attempt((change,))
    return best, options


# which arguments of an act are tokens (or (tokens, n))
TOKEN_ARGUMENTS = {"_match": (0, 1), "_insert_request": (0,), "_serve_insert": (0,), "_quarantine": (0,),
                   "_match_along": (0,), "_refuse_foreign": (1,), "_admit_request": (0,)}


def renamed(acts: list[Act]) -> list[Act]:
    """``acts`` with every token id renamed in the order the ids are first sent, by prefix: the
    token at position j of a sequence becomes the number of the prefix ``sequence[:j + 1]`` (0 for
    the first prefix ever sent, then 1, 2, ...). Two sequences share exactly the prefixes they
    shared before, so a cache that compares tokens (as a radix tree does) does the same; the
    first prompt becomes ``0, 1, 2, ...`` and a prompt that extends it goes on where it left off.
    A cache whose bug needs the ids themselves (a 16-bit narrowing) does not fail the same way
    after it, and the reducer keeps the ids."""
    children: dict[tuple[int, int], int] = {}  # (number of a prefix, next id) -> number of the longer prefix
    last = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))  # the last sequence renamed, and its new ids

    def rename(tokens: np.ndarray) -> np.ndarray:
        nonlocal last
        seen, names = last
        if len(tokens) <= len(seen) and np.array_equal(seen[: len(tokens)], tokens):  # a prefix of the last one (a deep chain)
            return names[: len(tokens)]
        out, node = [], -1
        for token in tokens.tolist():
            node = children.setdefault((node, token), len(children))
            out.append(node)
        last = (tokens, np.asarray(out, dtype=np.int64))
        return last[1]

    def value(arg: object) -> object:
        if isinstance(arg, np.ndarray) and arg.ndim == 1 and arg.dtype.kind in "iu":
            return rename(arg).astype(arg.dtype)
        if isinstance(arg, (tuple, list)) and arg and all(type(v) is int for v in arg):
            new = rename(np.asarray(arg, dtype=np.int64)).tolist()
            return tuple(new) if isinstance(arg, tuple) else new
        if isinstance(arg, tuple) and len(arg) == 2 and isinstance(arg[0], tuple):  # (tokens, n): a query after a quarantine
            return (value(arg[0]), arg[1])
        return arg

    out = []
    for a in acts:
        at = TOKEN_ARGUMENTS.get(a.name, ())
        out.append(dataclasses.replace(a, args=tuple(value(arg) if i in at else arg for i, arg in enumerate(a.args))))
    return out


LONG_RUN = 16  # a run of at least this many repetitions is halved before acts are left out one run at a time


def _run_at(acts: list[Act], start: int) -> tuple[int, int]:
    """The run of acts at ``start`` that repeat one pattern of names (one act, or two: a match and
    its lock): its period and how many times the pattern repeats."""
    best = (1, 1)
    for period in (1, 2):
        pattern = [a.name for a in acts[start : start + period]]
        reps = 0
        while [a.name for a in acts[start + reps * period : start + (reps + 1) * period]] == pattern:
            reps += 1
        if reps * period > best[0] * best[1]:
            best = (period, reps)
    return best


def _halve_long_runs(best: Replay, options: MachineOptions, fails: Callable[..., Replay | None],
                     time_left: Callable[[], bool]) -> Replay:
    """Each run of ``LONG_RUN`` or more repetitions of one pattern of acts (a deep chain's matches,
    a crowd's match-and-lock) cut to half, its first half left out or else its second, again and
    again while the replay fails the same way: a chain 1,500 deep where 3,000 were built, if
    1,500 do."""
    start = 0
    while start < len(best.acts) and time_left():
        acts = best.acts
        period, reps = _run_at(acts, start)
        end = start + period * reps
        if reps < LONG_RUN or end >= len(acts):  # short, or the failing act's own run
            start += 1 if reps < LONG_RUN else period * reps
            continue
        half = reps // 2 * period
        for kept_acts in (acts[:start] + acts[start + half :], acts[: end - half] + acts[end:]):
            smaller = fails(kept_acts, options, best.trim_queries) if time_left() else None
            if smaller is not None and len(smaller.acts) < len(acts):
                best = smaller
                break
        else:  # neither half can go: as few of its repetitions as still fail, then the next run
            best = _trim_run(best, start, period, reps, options, fails, time_left)
            start += period * _run_at(best.acts, start)[1] if len(best.acts) > start else 1
    return best


def _trim_run(best: Replay, start: int, period: int, reps: int, options: MachineOptions,
              fails: Callable[..., Replay | None], time_left: Callable[[], bool]) -> Replay:
    """The run of ``reps`` repetitions at ``start``, none of whose halves can go, cut by bisection: the
    most leading repetitions that can go, then the most trailing ones (a chain of matches 1,500 deep
    where a stack overflows at 1,000: about 12 replays to the shortest failing chain, where leaving
    out acts one run at a time took the whole budget and wrote it as three loops). Each end is probed
    with one repetition first: if that cannot go, no more can, and the bisection costs one replay."""
    for leading in (True, False):
        can, cannot = 0, reps // 2  # repetitions that can go (known), and a count that cannot
        probe = True  # one repetition first: where none can go (a chain's far end, whose length is all that counts) one replay says so
        while cannot - can > 1 and time_left():
            middle, probe = (1 if probe else (can + cannot) // 2), False
            acts = best.acts
            cut = (slice(start, start + middle * period) if leading
                   else slice(start + (reps - middle) * period, start + reps * period))
            smaller = fails(acts[: cut.start] + acts[cut.stop :], options, best.trim_queries)
            if smaller is not None and len(smaller.acts) < len(acts):
                best, reps, cannot, can = smaller, reps - middle, cannot - middle, 0
            else:
                cannot = middle
    return best


def _groups(acts: list[Act]) -> list[list[Act]]:
    """``acts`` by step (and story of a production world), in order."""
    groups: list[list[Act]] = []
    for a in acts:
        if groups and (groups[-1][-1].step, groups[-1][-1].story) == (a.step, a.story):
            groups[-1].append(a)
        else:
            groups.append([a])
    return groups


def _keep_one_story(acts: list[Act], options: MachineOptions, fails: Callable[..., Replay | None],
                    time_left: Callable[[], bool]) -> Replay | None:
    """The failing act's step alone, then with one other step (or story) before it, smallest first,
    one replay each, while the acts tried stay under half the program: the first that fails the same
    way, or ``None``. Each costs a fraction of the whole world's replay, where leaving out the largest
    story still replays the others (a reset that dies under the deep history: the history alone)."""
    if not any(a.story for a in acts):
        return None  # no world: the ordinary machine's steps are left out largest first
    *others, failing = _groups(acts)
    tried = 0
    for group in [[], *sorted(others, key=len)]:
        tried += len(group) + len(failing)
        if tried > len(acts) // 2 or not time_left():
            break
        kept_ids = {id(a) for a in group + failing}
        found = fails([a for a in acts if id(a) in kept_ids], options, True)
        if found is not None:
            return found
    return None


def _leave_out_stories(acts: list[Act], options: MachineOptions, fails: Callable[..., Replay | None],
                       time_left: Callable[[], bool], trim: bool = False, first_only: bool = False) -> Replay | None:
    """Leave out whole steps (or stories of a production world), largest first, one replay each:
    the smallest replay that still failed the same way, or ``None`` if none did (``first_only``:
    if the first did not)."""
    groups = _groups(acts)
    best: Replay | None = None
    for group in sorted(groups[:-1], key=len, reverse=True):  # never the failing act's own
        if len(group) < 2 or not time_left():
            break
        left_out = {id(a) for a in group}
        smaller = fails([a for a in (best.acts if best else acts) if id(a) not in left_out], options, trim)
        if smaller is not None:
            best = smaller
        elif first_only and best is None:
            break
    return best


def _leave_out_runs(best: Replay, options: MachineOptions, fails: Callable[..., Replay | None],
                    time_left: Callable[[], bool]) -> Replay:
    """Delta debugging over the acts (:func:`leave_out_runs`), a long run of one pattern as one item:
    :func:`_halve_long_runs` has cut it already, and one act out of a deep chain's matches is one
    replay each for every act of the chain (its budget, at production scale), to the same end."""
    trim = best.trim_queries
    return leave_out_runs(best, lambda replayed: _units(replayed.acts),
                          lambda units: fails([a for unit in units for a in unit], options, trim), time_left)


def _units(acts: list[Act]) -> list[list[Act]]:
    """``acts`` as delta debugging's items: each run of ``LONG_RUN`` or more repetitions of one pattern
    (without the failing act) one item, every other act its own."""
    units, i = [], 0
    while i < len(acts):
        period, reps = _run_at(acts, i)
        end = min(i + period * reps, len(acts) - 1)
        if reps < LONG_RUN or end - i < LONG_RUN:
            end = i + 1
        units.append(acts[i:end])
        i = end
    return units


R = TypeVar("R")
T = TypeVar("T")


def leave_out_runs(best: R, items_of: Callable[[R], list[T]], fails: Callable[[list[T]], R | None],
                   time_left: Callable[[], bool]) -> R:
    """Delta debugging over a failing program of any contract (the cache machine's acts, a tier
    world's operations): runs of ``size`` items left out, halving ``size`` each round, a smaller
    program kept whenever ``fails`` (its replay, failing the same way, or ``None``) says so."""
    size = max(1, len(items_of(best)) // 2)
    while time_left():
        i = 0
        # runs of 2 from every place: items that only go together (a tier request's serve and its
        # finish) are left out in pairs, wherever a pair starts; halving from an odd size skipped 2
        # (7, 3, 1) and a 121-operation flush finding stayed at 6 such pairs
        step = 1 if size == 2 else size
        while i < len(items_of(best)) and time_left():
            items = items_of(best)
            candidate = items[:i] + items[i + size :]
            smaller = fails(candidate) if candidate else None
            if smaller is not None and len(items_of(smaller)) < len(items):
                best = smaller
            else:
                i += step
        if size == 1:
            break
        size = size // 2 if size > 3 else size - 1
    return best


def _flat_tokens(arg: object) -> np.ndarray | None:
    """A token argument as a 1-D array, or ``None`` if it is no flat sequence of ids."""
    if isinstance(arg, np.ndarray):
        return arg if arg.ndim == 1 and arg.dtype.kind in "iu" else None
    if isinstance(arg, (tuple, list)) and all(type(v) is int for v in arg):
        return np.asarray(arg, dtype=np.int64)
    return None


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def _as_before(tokens: np.ndarray, like: object) -> object:
    """``tokens`` in the type of the argument it replaces (a tuple, a list or an array)."""
    if isinstance(like, np.ndarray):
        return tokens.astype(like.dtype)
    return type(like)(tokens.tolist())


def _cut_prompts(best: Replay, options: MachineOptions, fails: Callable[..., Replay | None],
                 time_left: Callable[[], bool], rename: bool = False) -> Replay:
    """Each inserted prompt (``_insert_request``) cut, in one replay, to what the program shares of it: the
    longest prefix any other sequence has in common with it (a deep chain's deepest match), plus one page
    (so that match still ends inside an edge: a split), every sequence that extends it (the history's next
    turn) losing the same tokens and keeping its own tail. A history of 3,000 pages matched 1,000 deep is
    cut to 1,001 pages at once, where halving it stopped at 1,500 after two replays of the chain (each ~10^6
    tokens of JSON over the wire). ``rename``: the ids were renamed already; the cut program is renamed
    again in the same replay (its kept story starts at 0, not where the world's first story left off)."""
    page = best.machine.page_size
    i = 0
    while i < len(best.acts) and time_left():
        act = best.acts[i]
        prompt = _flat_tokens(act.args[0]) if act.name == "_insert_request" and act.args else None
        i += 1
        if prompt is None or len(prompt) <= page:
            continue
        shared, extensions = 0, []
        for j, other in enumerate(best.acts):
            for k in TOKEN_ARGUMENTS.get(other.name, ()):
                if (j, k) == (i - 1, 0) or k >= len(other.args):
                    continue
                arg = other.args[k]
                pair = isinstance(arg, tuple) and bool(arg) and isinstance(arg[0], tuple)  # (tokens, n, ...): not rewritten here
                tokens = _flat_tokens(arg[0] if pair else arg)
                if tokens is None:
                    continue
                common = _common_prefix(prompt, tokens)
                if common < len(prompt):
                    shared = max(shared, common)
                elif pair:
                    shared = len(prompt)  # an extension this step cannot rewrite: the prompt stays whole
                else:
                    extensions.append((j, k))
        keep = -(-(shared + page) // page) * page  # whole pages, one past what is shared
        if keep >= len(prompt):
            continue
        acts = list(best.acts)
        for j, k in [(i - 1, 0), *extensions]:
            arg = acts[j].args[k]
            cut = np.concatenate([prompt[:keep], _flat_tokens(arg)[len(prompt):]])
            acts[j] = dataclasses.replace(acts[j], args=tuple(_as_before(cut, arg) if n == k else a for n, a in enumerate(acts[j].args)))
        again = fails(renamed(acts) if rename else acts, options, best.trim_queries)
        if again is not None:
            best = again
    return best


def _shorten_prompts(best: Replay, options: MachineOptions, fails: Callable[..., Replay | None],
                     time_left: Callable[[], bool]) -> Replay:
    """Each inserted prompt (``_insert_request``) cut to half its pages while the replay still fails
    the same way; the queries that follow are cut to what they match."""
    page = best.machine.page_size
    for act in list(best.acts):
        if act.name != "_insert_request":
            continue
        current = act
        while len(current.args[0]) > page and time_left() and any(a is current for a in best.acts):
            tokens = current.args[0]
            shorter = dataclasses.replace(current, args=(tokens[: max(page, len(tokens) // 2 // page * page)], *current.args[1:]))
            again = fails([shorter if a is current else a for a in best.acts], options, True)
            if again is None or not any(a is shorter for a in again.acts):
                break
            best, current = again, shorter
    return best
