"""The standalone repro file of an index finding: the calls the index machine sent, then its check.

The index machine (:mod:`radixcheck.properties.index.machine`) keeps every call it makes into the
index when its run keeps a transcript. A finding's file makes the same calls on the user's
factory, in order, as plain Python (the events as radixcheck's event dataclasses), leaves out the
questions the machine's checks asked along the way (``find_matches`` probes, ``sizes``,
``resident``, ``dump``: they change nothing), and ends with the check that failed, written out with
its expected values (the :class:`~radixcheck.oracles.violations.Check` the oracle attached). A
legal call that raised is itself the check. The program (Hypothesis's shrunk one) is then
reduced call by call (:func:`shortest_program`): a smaller one is kept while its events are a
stream an engine could publish (the oracle takes them) and its file, with the expected values the
oracle gives for it, still fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from radixcheck.oracles.kv_index import IndexModel
from radixcheck.oracles.violations import Check, ContractViolation
from radixcheck.properties.budget_clock import BudgetWatch
from radixcheck.properties.findings.failures import message_of, oracle_of
from radixcheck.properties.findings.reduce import REDUCE_ENV
from radixcheck.properties.findings.repro_waivers import IMPORTS, header_lines, met_by, past_waived_args, waiver_lines
from radixcheck.properties.findings.standalone import CANNOT_RUN_LINES, bug_lines, factory_import, needs, runs_to_the_check
from radixcheck.properties.findings.waivers import Waiver
from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, StoredBlock
from radixcheck.properties.index.machine import SCRATCH, IndexCall, KvIndexMachine, apply_to_model, resident_limit, without_scratch
from radixcheck.properties.target import caused_by_hang


class CannotWrite(Exception):
    """The finding has no standalone form (a hang, or raised by no call into the index)."""


def event_text(event: Any) -> str:
    """An event as the Python that makes it (radixcheck's dataclasses; a malformed field as sent)."""
    if isinstance(event, BlockStored):
        blocks = event.blocks
        if isinstance(blocks, tuple) and all(isinstance(b, StoredBlock) for b in blocks):
            listed = ", ".join(f"StoredBlock({b.block_hash!r}, {b.tokens_hash!r})" for b in blocks)
            blocks_text = f"({listed},)" if len(blocks) == 1 else f"({listed})"
        else:
            blocks_text = repr(blocks)
        return f"BlockStored({event.parent_hash!r}, {blocks_text})"
    if isinstance(event, BlockRemoved):
        return f"BlockRemoved({event.block_hashes!r})"
    if isinstance(event, AllBlocksCleared):
        return "AllBlocksCleared()"
    return repr(event)


def call_text(call: IndexCall, refused: bool = False) -> str:
    """The call as Python; ``refused``: the index refused it in the run and the run went on (a
    waived finding), so the file lets it refuse again."""
    if call.name == "apply_event":
        worker, rank, event = call.args
        worker_text = "SCRATCH_WORKER" if worker == SCRATCH[0] else repr(worker)
        sent = "may_refuse" if call.may_refuse or refused else "index.apply_event"
        return f"{sent}({worker_text}, {rank!r}, {event_text(event)})"
    return f"index.{call.name}({', '.join(repr(a) for a in call.args)})"


def _comment_of(call: IndexCall) -> str:
    if call.raised is not None and not call.may_refuse:
        return "  # refused in the run (a waived finding): the file lets it refuse again"
    return f"  # {call.text}" if call.text and call.name == "apply_event" else ""


def waived_in_run(call: IndexCall) -> BaseException | None:
    """The finding the run waived at ``call`` (it raised, and the run went on: only a waived finding lets it),
    or ``None``."""
    if call.raised is None or call.may_refuse:
        return None
    return call.finding or call.raised


def _program_lines(program: list[IndexCall], waivers: list[Waiver]) -> list[str]:
    """The program's calls as lines; a call whose raise the run waived goes past it under ``past_waived``
    when a waiver of the run's meets it (:mod:`~radixcheck.properties.findings.repro_waivers`), else as
    ``may_refuse`` (a file written with no waivers)."""
    lines = []
    for call in program:
        finding = waived_in_run(call)
        if finding is not None and met_by(waivers, [finding]):
            lines += [f"with past_waived({past_waived_args(call.raised, finding)}):  # waived in the run "  # type: ignore[arg-type]
                      f"({type(call.raised).__name__})", f"    {call_text(call)}"]
        else:
            lines.append(call_text(call, refused=call.raised is not None) + _comment_of(call))
    return lines


_MAY_REFUSE = ["def may_refuse(worker_id, dp_rank, event):",
               '    """A malformed or repeated event: the index may refuse it (an exception) or take it."""',
               "    try:",
               "        index.apply_event(worker_id, dp_rank, event)",
               "    except Exception as exc:  # noqa: BLE001",
               "        print(f'refused: {type(exc).__name__}: {exc}')"]

_HELPERS = {
    "per_rank": ["def per_rank(counts):",
                 '    """Each rank\'s count (an overlap, a size), the ranks at 0 and radixcheck\'s scratch rank left out."""',
                 "    return {rank: n for rank, n in counts.items() if n and rank[0] != SCRATCH_WORKER}"],
    "listed": ["def listed(dump):",
               '    """The (rank, block hash) pairs a dump lists, radixcheck\'s scratch rank left out."""',
               "    return {((w, r), b.block_hash) for w, r, event in dump for b in event.blocks if w != SCRATCH_WORKER}"],
    "stored_under": ["def stored_under(dump, block):",
                     '    """(parent hash, tokens hash) the dump lists ``block`` (a (rank, block hash) pair) under."""',
                     "    for w, r, event in dump:",
                     "        parent = event.parent_hash",
                     "        for b in event.blocks:",
                     "            if ((w, r), b.block_hash) == block:",
                     "                return (parent, b.tokens_hash)",
                     "            parent = b.block_hash",
                     "    return None"],
    "out_of_order": ["def out_of_order(dump):",
                     '    """The first (rank, block hash) a dump lists before its parent (listed for that rank too), or None."""',
                     "    entries = [((w, r), parent, b.block_hash) for w, r, event in dump if w != SCRATCH_WORKER",
                     "               for parent, b in zip((event.parent_hash, *(x.block_hash for x in event.blocks)), event.blocks)]",
                     "    listed, seen = {(rank, h) for rank, _, h in entries}, set()",
                     "    for rank, parent, h in entries:",
                     "        if parent is not None and (rank, parent) in listed and (rank, parent) not in seen:",
                     "            return (rank, h)",
                     "        seen.add((rank, h))",
                     "    return None"],
    "well_formed": ["def well_formed(key, value):",
                    "    return (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, int) for k in key)",
                    "            and isinstance(value, int))"],
}


def _answers(machine: KvIndexMachine) -> list[str]:
    caps = machine.capabilities
    lines = ["def answers(probes):",
             '    """What the index answers: each probe\'s matches, and its sizes and dump where offered."""',
             "    out = [sorted(index.find_matches(query).items()) for query in probes]"]
    if caps.reports_sizes:
        lines.append("    out.append(sorted(index.sizes().items()))")
    if caps.offers_dump:
        lines.append("    out.append(sorted((w, r, repr(event)) for w, r, event in index.dump()))")
    names = "[f'find_matches(probes[{i}])' for i in range(len(probes))]"
    names += " + ['sizes()']" if caps.reports_sizes else ""
    names += " + ['dump()']" if caps.offers_dump else ""
    lines += ["    return out", "", "",
              "def changes(before, after):",
              '    """The answers that changed: (which, before, after), the first three."""',
              f"    names = {names}",
              "    return [(name, b, a) for name, b, a in zip(names, before, after) if b != a][:3]"]
    return lines


def _failed_at(calls: list[IndexCall], failure: BaseException) -> int:
    """The call the failure is about: the one that raised it, else the check's (the last call asked)."""
    cause = failure.__cause__
    for i in range(len(calls) - 1, -1, -1):
        if calls[i].raised is not None and calls[i].raised in (failure, cause):
            return i
    if not calls:
        raise CannotWrite("the failing run sent no call into the index")
    return len(calls) - 1


@dataclass
class IndexProgram:
    """A finding's calls: ``program`` (the events and queries before it), ``last`` (the call the
    check is about) and the check's expected values (``names``, recomputed when the program shrinks)."""

    program: list[IndexCall]
    last: IndexCall
    check: Check | None
    names: dict[str, Any]
    reduced: bool = False  # calls were left out: the run's own numbers (in its sentence) no longer apply
    cut_short: float | None = None  # its budget (s) if the reduction ran out before trying every call: it may be longer than it needs


def failing_program(machine: KvIndexMachine, failure: BaseException) -> IndexProgram:
    if caused_by_hang(failure):
        raise CannotWrite("a hang: the file would wait for the time limit (the program is in the test's output)")
    if machine.capabilities.evicts_on_its_own:
        raise CannotWrite("an index that forgets on its own is checked against bounds that depend on every lookup the "
                          "run made, checks' included: a file of the program's calls alone would not recompute them "
                          "(the program is in the test's output)")
    calls = machine.sent_calls or []
    check = failure.check if isinstance(failure, ContractViolation) else None
    failed = _failed_at(calls, failure)
    if check is not None and "after" in check.holds:  # the event that must change nothing: the last one sent
        failed = max(i for i, c in enumerate(calls[:failed + 1]) if c.shown and c.name == "apply_event")
        calls[failed].may_refuse = True
    program = [c for c in calls[:failed] if c.name in ("apply_event", "remove_worker") or c.shown]
    return IndexProgram(program, calls[failed], check, dict(check.names) if check else {})


def expected_after(found: IndexProgram, counts_copies: bool) -> dict[str, Any] | None:
    """The check's expected values after ``found.program``'s events, by the oracle (``None``: the
    program is not a legal event stream, or its check's values cannot be recomputed here)."""
    model = IndexModel(counts_copies)
    try:
        for call in [*found.program, found.last]:
            if call.name == "apply_event" and not call.may_refuse and (call is not found.last or found.check is None):
                worker, rank, event = call.args
                apply_to_model(model, (worker, rank), event)
            elif call.name == "remove_worker" and call is not found.last:
                model.remove_worker(call.args[0])
    except ContractViolation:  # EngineEventsViolation: this stream is not one an engine would publish
        return None
    names = dict(found.names)
    if "held" in names and found.last.name == "sizes":
        names["held"] = without_scratch(model.sizes())
    elif "held" in names and found.last.name == "find_matches":
        names["held"] = without_scratch(model.overlaps(found.last.args[0]))
    elif "limit" in names:
        names["limit"] = resident_limit(model.total_held)
    elif "overlap" in names and found.last.name == "find_matches":  # one rank's overlap (a refused store's, later)
        names["overlap"] = model.overlaps(found.last.args[0]).get(names["rank"], 0)
    elif "block" in names and found.check is not None:  # the dump's checks name one block: still that block's truth?
        return _dump_check_holds(model, found.check.holds, names)
    elif names.keys() - {"probes", "probe_chains"}:
        return None
    elif found.check is not None and found.check.holds == "not listed(result)":  # only while nothing is held
        return names if not any(chains for r, chains in model.held.items() if r[0] != SCRATCH[0]) else None
    return names


def _dump_check_holds(model: IndexModel, holds: str, names: dict[str, Any]) -> dict[str, Any] | None:
    """A dump check's expected values after a shorter program, or ``None`` if the oracle no longer
    says what the check assumes of its block (without this, a dump finding's file was never reduced:
    a churn test's was 6,001 calls and 1.8 MB, from the index trial)."""
    rank, h = names["block"]
    if holds == "block not in listed(result)":  # listed, but not held
        return names if not model.holds(rank, h) else None
    if holds == "block in listed(result)":  # held with every ancestor, but not listed
        return names if (rank, h) in model.reachable() else None
    if holds == "stored_under(result, block) == parent" and model.holds(rank, h):  # listed under another parent
        return {**names, "parent": (model.parent_hash(h), model.tokens_hash(h))}
    return None


def _redeliveries_follow_their_first(candidate: IndexProgram, legal: set[str]) -> bool:
    """Whether every redelivered event (sent through ``may_refuse``, the same as a legal event of
    the program) still comes after its first delivery. Without its first, a redelivery is a first
    delivery, which the oracle leaves out (``may_refuse``) and a correct index takes: the file then
    failed on the reference (the index mutants' files, once a new rule moved their streams)."""
    delivered: set[str] = set()
    for call in [*candidate.program, candidate.last]:
        if call.name != "apply_event":
            continue
        key = repr(call.args)
        if not call.may_refuse:
            delivered.add(key)
        elif key in legal and key not in delivered:
            return False
    return True


def shortest_program(found: IndexProgram, counts_copies: bool, fails: Callable[[IndexProgram], bool],
                     seconds: float) -> IndexProgram:
    """Delta debugging over the program's calls: a smaller program is kept if its stream is legal
    and its file (expected values recomputed by the oracle) still fails. At most ``seconds``; if
    they run out first, the program says so (``cut_short``)."""
    watch = BudgetWatch(seconds)  # CPU seconds, with a wall-clock backstop (budget_clock)
    best, chunk = found, max(1, len(found.program) // 2)
    legal = {repr(c.args) for c in found.program if c.name == "apply_event" and not c.may_refuse}
    while chunk >= 1 and not watch.spent():
        start, shrunk = 0, False
        while start < len(best.program) and not watch.spent():
            kept = best.program[:start] + best.program[start + chunk:]
            candidate = IndexProgram(kept, best.last, best.check, best.names, reduced=True)
            names = expected_after(candidate, counts_copies) if _redeliveries_follow_their_first(candidate, legal) else None
            if names is not None:
                candidate.names = names
                if fails(candidate):
                    best, shrunk = candidate, True
                    continue
            start += chunk
        if not shrunk:
            chunk //= 2
    if chunk >= 1 and best.program:  # the budget ran out with sizes left to try (index trial B7: 112 calls, and nothing said why)
        best = dataclasses.replace(best, cut_short=seconds)
    return best


def index_script(machine: KvIndexMachine, failure: BaseException, spec: str, test: str, found: IndexProgram,
                 waivers: list[Waiver] | None = None) -> tuple[str, int]:
    """The file's text for ``found`` and how many calls it makes; ``waivers``, the run's: the file embeds those
    its calls meet and goes on past them (:mod:`~radixcheck.properties.findings.repro_waivers`)."""
    program, last, check, names = found.program, found.last, found.check, found.names
    met = met_by(waivers or [], [f for f in map(waived_in_run, program) if f is not None])
    sentence = message_of(failure)
    if check is not None and found.reduced:  # a shorter program: the run's own numbers no longer apply
        if "held" in names:
            sentence = f"{sentence.split(':')[0]}; by their events the ranks hold {names['held']!r}"
        elif "limit" in names:
            sentence = (f"resident() is over {names['limit']}, the most the blocks the ranks hold by their events allow: "
                        f"the index keeps entries for blocks nobody holds")
    cut = (["", f"Reduction stopped at its budget ({found.cut_short:g} s) before trying every call: this file may make more calls",
            f"than it needs (a longer budget, {REDUCE_ENV}=60, may give a shorter one)."] if found.cut_short is not None else [])
    body = _program_lines(program, met)
    helpers: list[list[str]] = []  # functions the file uses, each a block of lines
    if any("may_refuse(" in line for line in body) or last.may_refuse:
        helpers.append(_MAY_REFUSE)
    if met:
        helpers.append(waiver_lines(met))
    if check is None:  # a legal call raised: that call is the check (the same exception; another is not the finding)
        raised = type(last.raised).__name__
        what = f"{last.name}({'...' if last.args else ''}) raised {raised}: {last.raised} (a legal call)"
        body += ["try:", f"    {call_text(last)}", "except Exception as exc:  # noqa: BLE001",
                 f"    if type(exc).__name__ != {raised!r}:", "        raise",
                 f"    bug({what!r}, got=f'{{type(exc).__name__}}: {{exc}}')", "print('no bug: the call returned')"]
    elif "after" in check.holds:
        helpers.append(_answers(machine))
        probes, chains = names["probes"], names.get("probe_chains") or [""] * len(names["probes"])
        body += ["probes = [  # the queries whose answers must not change (tokens hashes; as chains of token-block ids)"]
        body += [f"    {q!r},  # {c}" if c else f"    {q!r}," for q, c in zip(probes, chains, strict=True)]
        body += ["]", "before = answers(probes)",
                 f"{call_text(last)}  # must change nothing", "try:",
                 "    after = answers(probes)", "except Exception as exc:  # noqa: BLE001",
                 f"    bug({sentence!r}, got=f'{{type(exc).__name__}}: {{exc}}')",
                 f"if not ({check.holds}):", f"    bug({sentence!r}, got={check.got})", f"print({('no bug: ' + check.holds)!r})"]
    else:
        helpers += [lines for name, lines in _HELPERS.items() if name + "(" in check.holds + check.got]
        body.append(f"result = {call_text(last)}")
        body += [f"{name} = {value!r}" for name, value in names.items()]
        body += [f"if not ({check.holds}):", f"    bug({sentence!r}, got={check.got})", f"print({('no bug: ' + check.holds)!r})"]
    written = len(program) + 1
    head = [
        f'"""radixcheck finding ({oracle_of(failure)}): {sentence}',
        "",
        f"Target {spec}" + (f", in {test}" if test else "") + f": {written} calls into one index, in order (the events",
        "and queries of radixcheck's failing program that the finding needs), then the check that failed, its",
        "expected values from radixcheck's oracle for these calls.",
        f"Capabilities: {machine.capabilities}.",
        "Exits 1 while the bug is there, 0 once it is fixed, 2 if it cannot run to its check (the factory does not",
        "import, or a call before the last raised). Needs radixcheck (its event classes). Written by",
        "`radixcheck audit --repro`.",
        *cut,
        *header_lines(met),
        '"""',
        "import os",
        "import sys",
        "import traceback",
        *(IMPORTS if met else []),
        "",
        *needs(["from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, StoredBlock  # noqa: F401"]),
        factory_import(spec),
    ]
    if any("SCRATCH_WORKER" in line for line in [*body, *(x for h in helpers for x in h)]):
        head += ["", f"SCRATCH_WORKER = {SCRATCH[0]}  # radixcheck's scratch worker: malformed events come from it, and its "
                     "rank is left out of every other check"]
    for block in [bug_lines(oracle_of(failure), "the index"), CANNOT_RUN_LINES, *helpers]:
        head += ["", "", *block]
    return "\n".join([*head, "", "", *runs_to_the_check(["index = make()", *body])]) + "\n", written
