"""A standalone repro file for a tier machine's failure: the world's operations, in order, as
plain calls, with every completion the suite delivered written as ``w.complete(n)`` where it
happened and every controller call as a comment under the operation that made it.

The file imports the user's factory and radixcheck's :class:`~radixcheck.properties.tiers.world.TierWorld`
(the two pools, the controller and the tier model: the oracles run as the calls are made), and
nothing of Hypothesis, in the frame every repro file has
(:mod:`~radixcheck.properties.findings.standalone`). It exits 1 with the oracle's sentence while the
bug is there, 0 once fixed, 2 if it cannot run to its last operation.

The operations come from the failing run (after Hypothesis's shrink, its smallest interleaving),
then reduced: each run of one repeated operation cut to one (:func:`without_repeats`), then, as the
cache machine's are (:func:`~radixcheck.properties.findings.reduce.leave_out_runs`), runs of
operations left out, halving the run each round, while a replay on a fresh world still fails with
the same finding, for at most ``RADIXCHECK_REDUCE_SECONDS``, or up to twice that while it is still
shrinking (:func:`goes_on`); last, each namespace the program says is left out (the default one)
wherever the finding does not need it (:func:`default_namespaces`). The file writes the same calls
compactly (:func:`compact`).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from radixcheck.oracles.violations import ContractViolation
from radixcheck.properties.budget_clock import BudgetWatch
from radixcheck.properties.cache.layers import UNSAID
from radixcheck.properties.findings.failures import message_of, oracle_of
from radixcheck.properties.findings.reduce import REDUCE_ENV, finding_of, leave_out_runs, reduce_seconds
from radixcheck.properties.findings.repro_waivers import IMPORTS, deviations_of, header_lines, met_by, waiver_lines
from radixcheck.properties.findings.root_cause import Signature, each_step, shown_past_failures, signature
from radixcheck.properties.findings.standalone import (
    CANNOT_RUN_LINES,
    Repro,
    bug_lines,
    confirm,
    factory_import,
    needs,
    runs_to_the_check,
)
from radixcheck.properties.findings.waivers import Waiver
from radixcheck.properties.target import caused_by_hang
from radixcheck.properties.tiers.world import TierWorld


@dataclass
class TierReplay:
    """Operations (lines of the world's log, ``w.serve(...)``) sent to a fresh world: the world, and
    the failure (``None``: every operation and the final check passed), at the last operation sent."""

    operations: list[Any]  # lines of the log; a reduction's own (:data:`Operation`) while it runs
    world: TierWorld
    failure: BaseException | None
    waived: list[BaseException] = field(default_factory=list)  # the waived findings it went on past, in order


def with_deviations(world: TierWorld, waived: Callable[[BaseException], bool] | None) -> TierWorld:
    """``world``, its model keeping the known deviations ``waived`` names (a ``WaiverLog``'s ``known:`` lines), as
    the tier machine's does (``known_deviations``): a replay then judges a known order bug as its run did."""
    known = getattr(waived, "deviations", None)
    if known is not None:
        world.model.deviations = [make() for make in known()]
    return world


def replay(factory: Callable[..., Any], page_size: int, write_policy: str, operations: list[str],
           world_class: type[TierWorld] = TierWorld, pools: dict[str, int] | None = None,
           waived: Callable[[BaseException], bool] | None = None) -> TierReplay:
    """Send ``operations`` to a fresh world (of ``world_class``: the lifecycle's has running
    requests; ``pools``, its pools' sizes and seed: :attr:`TierWorld.pools`), as the file does, then
    check conservation; stop at the first failure ``waived`` does not cover (one it covers ends its
    operation, as it ended the run's step, and the replay goes on: :mod:`~radixcheck.properties.findings.repro_waivers`)."""
    world = with_deviations(world_class(factory, page_size, write_policy, **(pools or {})), waived)
    met: list[BaseException] = []
    for i, operation in enumerate(operations):
        try:
            exec(operation, {"w": world})  # noqa: S102 - a line of the world's own log
        except Exception as exc:  # noqa: BLE001 - a failure is what a replay looks for
            if waived is not None and waived(exc):
                met.append(exc)
                continue
            return TierReplay(operations[: i + 1], world, exc, met)
    try:
        world.check()
    except Exception as exc:  # noqa: BLE001
        if not (waived is not None and waived(exc)):
            return TierReplay(operations, world, exc, met)
        met.append(exc)
    return TierReplay(operations, world, None, met)


def reduced(factory: Callable[..., Any], world: TierWorld, failure: BaseException, seconds: float | None = None,
            replays: int | None = None, waived: Callable[[BaseException], bool] | None = None) -> tuple[TierReplay | None, str]:
    """The smallest replay that fails as ``failure`` did (``None``: the run's own operations do not,
    replayed; each replay goes on past the findings ``waived`` covers, as the run did), and a sentence on
    what the reduction did."""
    budget = reduce_seconds() if seconds is None else seconds
    watch = BudgetWatch(OVERTIME * budget)  # CPU seconds (budget_clock), and the wall-clock backstop of its overtime
    wanted, count, shortest, shrunk_at = finding_of(failure), 0, len(world.log), 0.0
    starts = transfer_starts(world.log)

    def fails(operations: list[Operation]) -> TierReplay | None:
        nonlocal count, shortest, shrunk_at
        count += 1
        sent = renumbered(operations, starts)
        again = replay(factory, world.page_size, world.write_policy, [line for _, line in sent], type(world), world.pools, waived)
        if again.failure is None or finding_of(again.failure) != wanted:
            return None
        again.operations = [op for op, _ in sent[: len(again.operations)]]  # as the reduction knows them
        if len(again.operations) < shortest:
            shortest, shrunk_at = len(again.operations), watch.cpu()
        return again

    def time_left() -> bool:
        now = watch.cpu()
        return (goes_on(now, now - shrunk_at, budget) and watch.wall() < watch.wall_limit
                and (replays is None or count < replays))

    operations = [(i, line) for i, line in enumerate(world.log) if not line.startswith("#")]
    best = fails(operations)
    if best is None:
        return None, "its operations did not fail the same way when replayed: written from the run itself"
    best = without_repeats(best, fails, time_left)
    best = leave_out_runs(best, lambda replayed: replayed.operations, fails, time_left)
    best = default_namespaces(best, fails, time_left)
    best = TierReplay([line for line in best.world.log if not line.startswith("#")], best.world, best.failure, best.waived)  # as sent
    took = watch.cpu()  # the clock its budget counts (a wire server's CPU included), not the wall clock
    stopped = "" if time_left() else (f"; stopped at its budget ({budget:g} s of CPU, {REDUCE_ENV}; past it, up to "
                                       f"{OVERTIME:g} times, only while still shrinking)")
    return best, (f"Reduced from {len(operations)} operations to {len(best.operations)} ({count} replays, "
                  f"{took:.2f} s of CPU{stopped}).")


OVERTIME = 2.0  # a reduction still shrinking at its budget goes on, up to this many budgets in all
STILL_SHRINKING = 0.25  # still shrinking: its program got shorter within this part of the budget


def goes_on(elapsed: float, since_shrunk: float, budget: float) -> bool:
    """Whether a tier reduction goes on, ``elapsed`` seconds in, its program last shorter
    ``since_shrunk`` seconds ago: within its budget, or past it while it is still shrinking (up to
    :data:`OVERTIME` budgets). A 463-operation finding at a load of 10 stopped at its 5 s budget with
    159 operations still falling; given 7 s it ended by itself at 136."""
    return elapsed < budget or (elapsed < OVERTIME * budget and since_shrunk < STILL_SHRINKING * budget)


Operation = tuple[int, str]
"""An operation as a reduction knows it: its place in the failing run's log, and its line there."""

COMPLETION = re.compile(r"w\.complete\((\d+)\)")


def transfer_starts(log: list[str]) -> dict[int, int]:
    """Each transfer of the failing run (by its number) and the place in ``log`` of the operation
    that started it (the controller's calls are logged under the operation that made them)."""
    starts, at = {}, -1
    for i, line in enumerate(log):
        if not line.startswith("#"):
            at = i
        elif line.startswith(CONTROLLER) and (moved := TRANSFER.fullmatch(line[len(CONTROLLER):])):
            starts[int(moved["number"])] = at
    return starts


def renumbered(operations: list[Operation], starts: dict[int, int]) -> list[tuple[Operation, str]]:
    """``operations`` (some of the failing run's) as a replay sends them: a transfer is numbered as
    it starts, so leaving out an operation that started one renumbers every later one, and each
    ``w.complete(n)`` is rewritten to the number its transfer then gets, if its operations started
    the same transfers as in the run; a completion of a transfer no operation kept starts is left
    out. Without it a reduction could leave out nothing that started a transfer: each later
    completion then named another transfer or none, and a 472-operation finding stayed at 322
    (a hybrid trial's 526-line file). A replay still judges each candidate."""
    kept = {at for at, _ in operations}
    number = {n: k for k, n in enumerate((n for n in sorted(starts) if starts[n] in kept), start=1)}
    out: list[tuple[Operation, str]] = []
    for at, line in operations:
        done = COMPLETION.fullmatch(line)
        if done and int(done[1]) not in starts:
            out.append(((at, line), line))
        elif not done or int(done[1]) in number:
            out.append(((at, line), f"w.complete({number[int(done[1])]})" if done else line))
    return out


def without_repeats(best: TierReplay, fails: Callable[[list[Operation]], TierReplay | None],
                    time_left: Callable[[], bool]) -> TierReplay:
    """Each run of one operation repeated (a machine's rule that evicts until nothing moves writes
    ``w.evict(1000000)`` a dozen times; 287 of a 463-operation file were) cut to one: every run at
    once (one replay), else run by run. Delta debugging would get there too, but at hundreds of
    replays it did not within its budget."""
    def runs(operations: list[Operation]) -> list[tuple[int, int]]:  # (start, end) of each run of 2 or more
        found, i = [], 0
        while i < len(operations):
            j = i
            while j + 1 < len(operations) and operations[j + 1][1] == operations[i][1]:
                j += 1
            if j > i:
                found.append((i, j + 1))
            i = j + 1
        return found

    def cut(operations: list[Operation], which: list[tuple[int, int]]) -> list[Operation]:
        dropped = {k for start, end in which for k in range(start + 1, end)}
        return [op for k, op in enumerate(operations) if k not in dropped]

    every = runs(best.operations)
    if not every or not time_left():
        return best
    once = fails(cut(best.operations, every))
    if once is not None:
        return once
    for run in reversed(every):  # from the end, so the earlier runs keep their places
        if not time_left():
            break
        smaller = fails(cut(best.operations, [run]))
        if smaller is not None and len(smaller.operations) < len(best.operations):
            best = smaller
    return best


def namespace_said(line: str) -> tuple[str, int, int] | None:
    """The namespace an operation's line says (``w.serve([0], namespace=('X', None))``): its text, and
    where the keyword starts (its comma) and ends in ``line``; ``None`` if the line says none."""
    try:
        call = ast.parse(line, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    for keyword in call.keywords:
        if keyword.arg == "namespace" and keyword.end_col_offset is not None:
            start = line.rindex(",", 0, keyword.col_offset)
            return ast.get_source_segment(line, keyword.value) or "", start, keyword.end_col_offset
    return None


def without_namespace(line: str, text: str) -> str:
    """``line`` without its ``namespace=`` keyword if that says ``text`` (else as it is)."""
    n = namespace_said(line)
    return line[: n[1]] + line[n[2]:] if n is not None and n[0] == text else line


def default_namespaces(best: TierReplay, fails: Callable[[list[Operation]], TierReplay | None],
                       time_left: Callable[[], bool]) -> TierReplay:
    """Each namespace the program says, left out wherever it is said (the default namespace, which
    every target takes), kept only where the finding needs it: a new user's files kept
    ``namespace=('X', None)`` for two bugs that need no tenant (the write-through gap, the lock left
    behind), and a reader looked for a tenant bug. A tenant whose pages must stay apart (B2's
    second tenant only filled the host pool) is tried next as other tokens: its calls under the
    default namespace, each token moved past every token the program says (only where every token
    list is a serve's, an admit's, a match's or a quarantine's, whose namespace the line says).
    One or two replays per namespace; a leak between two tenants keeps one of them."""
    said = [n[0] for _, line in best.operations if (n := namespace_said(line)) is not None]
    moved = 1  # the next tenant whose tokens are moved: by one offset, the next by two
    offset = 10 ** len(str(max((max_token(line) for _, line in best.operations), default=0)))  # past every token said
    for text in dict.fromkeys(said):  # each once, in the order first said
        if not time_left():
            break
        fewer = fails([(at, without_namespace(line, text)) for at, line in best.operations])
        if fewer is None and all(line.startswith(TOKEN_CALLS) for _, line in best.operations if "[" in line):
            # it needs the tenant's pages apart from the others', not a tenant: its tokens moved past every
            # other's (a second tenant that only adds pages to fill a pool, as B2's did), each call's own namespace gone
            fewer = fails([(at, relabelled(line, text, offset * moved)) for at, line in best.operations])
            moved += fewer is not None
        if fewer is not None:
            best = fewer
    return best


TOKEN_CALLS = ("w.serve(", "w.admit(", "w.match(", "w.quarantine(")  # the calls whose first argument is a token list


def max_token(line: str) -> int:
    """The largest token ``line`` names (0 if none: a call without a token list)."""
    call = ast.parse(line, mode="eval").body
    if not (line.startswith(TOKEN_CALLS) and isinstance(call, ast.Call) and call.args):
        return 0
    return max(ast.literal_eval(call.args[0]), default=0)


def relabelled(line: str, text: str, offset: int) -> str:
    """``line`` under the default namespace, its tokens moved by ``offset``, if it says the namespace ``text``."""
    n = namespace_said(line)
    if n is None or n[0] != text:
        return line
    tokens = ast.parse(line, mode="eval").body.args[0]
    moved = repr([t + offset for t in ast.literal_eval(tokens)])
    return line[: tokens.col_offset] + moved + line[tokens.end_col_offset : n[1]] + line[n[2]:]


def compact(log: list[str]) -> list[str]:
    """``log`` as a file writes it: a run of completions as one call (``w.complete(6, 7, 8)``), and
    the controller's calls under one operation as one comment, wrapped (``#   controller: write #1
    [16] -> [0], write #2 [29] -> [1]``: transfer 1 writes device slots [16] to host slots [0]). The
    calls are the same; the file is shorter to read."""
    out: list[str] = []
    for line in log:
        done = re.fullmatch(r"w\.complete\((\d+)\)", line)
        if done and out and (joined := re.fullmatch(r"w\.complete\(([\d, ]+)\)", out[-1])):
            out[-1] = f"w.complete({joined[1]}, {done[1]})"
        elif line.startswith(CONTROLLER):
            call = line[len(CONTROLLER):]
            moved = TRANSFER.fullmatch(call)  # write([16]) -> write #1 to host [0]: write #1 [16] -> [0]
            said = f"{moved['kind']} #{moved['number']} {moved['slots']} -> {moved['to']}" if moved else call
            if out and out[-1].startswith(CONTROLLER_SAID):
                out[-1] += ", " + said
            else:
                out.append(CONTROLLER_SAID + said)
        else:
            out.append(line)
    return [wrapped for line in out for wrapped in (
        textwrap.wrap(line, WIDTH, subsequent_indent="#     ", break_on_hyphens=False)
        if line.startswith(CONTROLLER_SAID) else [line])]


CONTROLLER = "#   controller."  # how the world's log says a call the cache made to the controller
CONTROLLER_SAID = "#   controller: "  # how a file says them, one comment per operation
TRANSFER = re.compile(r"(?P<kind>write|load)\((?P<slots>\[[\d, ]*\])\) -> (?P=kind) #(?P<number>\d+) to \w+ (?P<to>\[[\d, ]*\])")
WIDTH = 110


def tier_script(world: TierWorld, failure: BaseException, spec: str, made: str = "", waivers: list[Waiver] | None = None) -> str:
    """The file: ``world``'s log (the operations that show ``failure``, the last one the failing one);
    ``waivers``, those of the run its operations meet, which the file goes on past
    (:mod:`~radixcheck.properties.findings.repro_waivers`)."""
    log = list(world.log)
    waivers = waivers or []
    built = f"{type(world).__name__}(make, page_size={world.page_size}, write_policy={world.write_policy!r}{world.pools_said()})"
    last = max(i for i, line in enumerate(log) if not line.startswith("#"))
    oracle, sentence = oracle_of(failure), message_of(failure)
    if isinstance(failure, ContractViolation):
        caught = ["except ContractViolation as exc:", f"    if exc.oracle != {oracle!r}:  # another oracle's: not this finding",
                  "        raise", f"    bug({sentence!r}, got=str(exc))"]
    else:  # the cache raised in a legal operation: the same exception is the finding
        caught = ["except Exception as exc:  # noqa: BLE001", f"    if type(exc).__name__ != {type(failure).__name__!r}:",
                  "        raise", f"    bug({sentence!r}, got=f'{{type(exc).__name__}}: {{exc}}')"]
    operations = sum(not line.startswith("#") for line in log)
    lines = [
        f'"""radixcheck finding ({oracle}): {sentence}',
        "",
        f"Target {spec}, {world.write_policy}, page size {world.page_size}: {operations} operations of a serving engine on a",
        "TierWorld (radixcheck's pools, controller and oracles, which check each event as it happens). `w.complete(n)`",
        "delivers transfer n; `# controller: write #n [2] -> [1]` says the cache's calls under an operation (transfer n",
        "copies device slots [2] to host slots [1]). " + made,
        "Exits 1 while the bug is there, 0 once it is fixed, 2 if it cannot run to its last operation. Needs radixcheck;",
        "writes nothing where it runs. Written by `radixcheck audit --repro`.",
        *header_lines(waivers),
        '"""',
        "import os",
        "import sys",
        "import traceback",
        *(IMPORTS if waivers else []),
        "",
        *needs(["from radixcheck.oracles.violations import ContractViolation",
                f"from {type(world).__module__} import {type(world).__name__}"]),
        factory_import(spec),
        "",
        "",
        *bug_lines(oracle),
        "",
        "",
        *CANNOT_RUN_LINES,
        "",
        "",
        *([*waiver_lines(waivers), "", ""] if waivers else []),
        *runs_to_the_check([
            f"w = PastWaived({built})" if waivers else f"w = {built}",
            *(["w.model.deviations = [make() for make in DEVIATIONS]  # the known order bugs' statistics, as the run kept them"]
              if deviations_of(waivers) else []),
            *compact(log[:last]),
            "",
            "# the operation that fails, and radixcheck's checks of it",
            "try:",
            *(f"    {line}" for line in compact(log[last:])),
            "    w.check()  # conservation on both tiers, and the sizes",
            *caught,
        ]),
        "print('no bug: every operation passed its oracles')",
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


PROBED = 16  # the most recent prompts matched again at the end of a replay past failures
REQUEST = re.compile(r"^w\.(?:serve|admit)\(")  # a request's prompt: served, or admitted by the lifecycle's world
EVERYTHING = 10**6  # an eviction's amount that takes everything evictable on its tier


def shown_by_tier(factory: Callable[..., Any], world: TierWorld, waived: Callable[[BaseException], bool] | None = None
                  ) -> list[Signature]:
    """Every signature ``world``'s operations show on a fresh world of the same kind, going on past
    each failure, with conservation checked after each, then probed with reads only: every pending
    transfer delivered, and each of the last :data:`PROBED` prompts served or admitted (a lifecycle
    world's requests) matched again (judged as
    a request's match is). Then the state its failing operation met, on both tiers
    (:func:`across_tiers`). In the order first met (a finding ``waived`` accepts is not counted).
    A window trial's bug (a host window copy of a dead value comes back live, B2) met one page size
    at a match too long (23) and the other at a ``windows()`` read too live (20w): each program shows
    its own page size's reading only, so they stay two (as :mod:`~radixcheck.properties.findings.root_cause`
    says of findings met at different page sizes)."""
    operations = [line for line in world.log if not line.startswith("#")]
    served = list(dict.fromkeys(re.sub(r", load=\w+", "", REQUEST.sub("", line))  # its tokens and namespace
                                for line in operations if REQUEST.match(line)))[-PROBED:]

    def run(seen: Callable[[BaseException], bool]) -> None:
        again = with_deviations(type(world)(factory, world.page_size, world.write_policy, **world.pools), waived)

        def sent(operation: str, on: TierWorld = again) -> bool:  # False: stop (a hang, or a target that answers nothing)
            done = COMPLETION.fullmatch(operation)
            if done and int(done[1]) not in on.pending() or operation.startswith("w.finish(") and not on.running:
                return True  # its transfer or request is not there: an earlier failure cut its operation short
            return each_step((lambda: exec(operation, {"w": on}), on.check), seen)  # noqa: S102 - a line of the world's own log

        for operation in operations:
            if not sent(operation):
                return
        for operation in ["w.complete_all()", *(f"w.match({request}" for request in served)]:
            if not sent(operation):
                return
        for coldest_first in (True, False):
            before = with_deviations(type(world)(factory, world.page_size, world.write_policy, **world.pools), waived)
            if not (all(sent(operation, before) for operation in operations[:-1]) and across_tiers(before, seen, coldest_first)):
                return

    return shown_past_failures(run, waived)


def across_tiers(world: TierWorld, seen: Callable[[BaseException], bool], coldest_first: bool = True) -> bool:
    """The cross-tier probes of a replay past failures, on ``world`` as its failing operation met it:
    each host-only leaf loaded back (in the model's order, coldest first, or hottest first; at the
    lowest priority any page has, so the loads raise none), then everything evicted on device and
    everything on host, each eviction's picks judged for order. A page's wrong eviction key (a
    priority an insert dropped) is met on the tier its program evicted (4 or 4h) and here on the
    other one too, so the two findings' programs each show the other's: one cause (a trial cache's
    ``publish_drops_priority`` gave two findings, one per tier). Both load orders, because a load
    stamps recency: loaded coldest first, the cache's recency agrees with the model's order and
    hides a key that falls back to recency; hottest first hides one that does not. A bug of one
    tier's eviction alone (its amount, a write) is not met on the other. Failures go to ``seen``
    as the replay's do; False once ``seen`` says stop (a hang, or a target that answers nothing)."""

    def step(call: Callable[[], object]) -> bool:
        return each_step((call, world.check), seen)

    if not step(world.complete_all):
        return False
    pages = [page for _, _, page in world.model.host_leaves.by_order][:: 1 if coldest_first else -1]
    if pages and not step(lambda: world.next_priority(min([0, *(page.priority for page in pages)]))):
        return False
    for page in pages:
        running = len(world.running)
        if not step(lambda page=page: world.serve(page.prefix, load=True, namespace=UNSAID if page.namespace is None else page.namespace)):
            return False
        if len(world.running) > running and not step(world.finish):
            return False
    return all(step(call) for call in (lambda: world.evict(EVERYTHING), world.complete_all, lambda: world.evict_host(EVERYTHING)))


def tier_repro(world: TierWorld, failure: BaseException, spec: str, factory: Callable[..., Any] | None = None,
               seconds: float | None = None, replays: int | None = None,
               waived: Callable[[BaseException], bool] | None = None, waivers: list[Waiver] | None = None) -> Repro:
    """The repro file of a tier machine's ``failure`` (its ``world``; ``factory``, the machine's, to
    reduce it and to replay it past its failure for what else it shows, ``waived`` not counted),
    run once as a user would: it is offered only if it exits 1 with radixcheck's sentence. ``waivers``:
    the run's (those ``waived`` applies); the file goes on past those its operations meet."""
    made, notes = "", []
    met = list(waivers or [])  # with no replay to say which its operations meet: every one
    if factory is not None:
        best, made = reduced(factory, world, failure, seconds, replays, waived)
        if best is not None:
            world, failure = best.world, best.failure  # type: ignore[assignment]
            met = met_by(met, best.waived)
        else:
            notes.append(made)
            made = ""
    text = tier_script(world, failure, spec, made, met)
    calls = sum(not line.startswith("#") for line in world.log)
    shows = [] if factory is None else [signature(failure)] if caused_by_hang(failure) else shown_by_tier(factory, world, waived)
    return confirm(Repro(text, calls=calls, notes=notes, size=f"{calls} operations", shows=shows))
