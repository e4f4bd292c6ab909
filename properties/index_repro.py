"""The standalone repro file of an index finding: the calls the index machine sent, then its check.

The index machine (:mod:`radixcheck.properties.index_machine`) keeps every call it makes into the
index when its run keeps a transcript. A finding's file makes the same calls on the user's
factory, in order, as plain Python (the events as radixcheck's event dataclasses), leaves out the
questions the machine's checks asked along the way (``find_matches`` probes, ``sizes``,
``resident``, ``dump``: they change nothing), and ends with the check that failed, written out with
its expected values (the :class:`~radixcheck.oracles.violations.Check` the oracle attached). A
legal call that raised is itself the check. The program is Hypothesis's shrunk one: index
programs are a few steps, so no further reduction is made.
"""

from __future__ import annotations

from typing import Any

from radixcheck.oracles.violations import ContractViolation
from radixcheck.properties.failures import message_of, oracle_of
from radixcheck.properties.index_contract import AllBlocksCleared, BlockRemoved, BlockStored, StoredBlock
from radixcheck.properties.index_machine import SCRATCH, IndexCall, KvIndexMachine
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


def call_text(call: IndexCall) -> str:
    if call.name == "apply_event":
        worker, rank, event = call.args
        return f"{'may_refuse' if call.may_refuse else 'index.apply_event'}({worker!r}, {rank!r}, {event_text(event)})"
    return f"index.{call.name}({', '.join(repr(a) for a in call.args)})"


_MAY_REFUSE = ["def may_refuse(worker_id, dp_rank, event):",
               '    """A malformed or repeated event: the index may refuse it (an exception) or take it."""',
               "    try:",
               "        index.apply_event(worker_id, dp_rank, event)",
               "    except Exception as exc:  # noqa: BLE001",
               "        print(f'refused: {type(exc).__name__}: {exc}')"]

_HELPERS = {
    "per_rank": ["def per_rank(counts):",
                 '    """Each rank\'s count (an overlap, a size), the ranks at 0 and radixcheck\'s scratch rank left out."""',
                 f"    return {{rank: n for rank, n in counts.items() if n and rank[0] != {SCRATCH[0]}}}"],
    "listed": ["def listed(dump):",
               '    """The (rank, block hash) pairs a dump lists, radixcheck\'s scratch rank left out."""',
               f"    return {{((w, r), b.block_hash) for w, r, event in dump for b in event.blocks if w != {SCRATCH[0]}}}"],
    "stored_under": ["def stored_under(dump, block):",
                     '    """(parent hash, tokens hash) the dump lists ``block`` (a (rank, block hash) pair) under."""',
                     "    for w, r, event in dump:",
                     "        parent = event.parent_hash",
                     "        for b in event.blocks:",
                     "            if ((w, r), b.block_hash) == block:",
                     "                return (parent, b.tokens_hash)",
                     "            parent = b.block_hash",
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
    lines += ["    return out", "", "",
              "def changes(before, after):",
              "    return [(i, b, a) for i, (b, a) in enumerate(zip(before, after)) if b != a][:3]"]
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


def index_script(machine: KvIndexMachine, failure: BaseException, spec: str, test: str,
                 factory_import: str, bug_lines: list[str], queries: bool = True) -> tuple[str, int]:
    """The file's text and how many calls it makes (``queries``: with the program's own queries
    before the failing call, which change nothing in an index that is right; the caller keeps the
    file without them if it still fails)."""
    if caused_by_hang(failure):
        raise CannotWrite("a hang: the file would wait for the time limit (the program is in the test's output)")
    calls = machine.sent_calls or []
    check = failure.check if isinstance(failure, ContractViolation) else None
    failed = _failed_at(calls, failure)
    unchanged = check is not None and "after" in check.holds
    if unchanged:  # the event that must change nothing: the last one the program sent
        failed = max(i for i, c in enumerate(calls[:failed + 1]) if c.shown and c.name == "apply_event")
    changes_state = ("apply_event", "remove_worker")
    program = [c for c in calls[:failed] if c.name in changes_state or (queries and c.shown)]
    last = calls[failed]
    sentence = message_of(failure)
    body = [call_text(c) + (f"  # {c.text}" if c.text and c.name == "apply_event" else "") for c in program]
    helpers: list[list[str]] = []  # functions the file uses, each a block of lines
    if unchanged:
        last.may_refuse = True  # the event that must change nothing may be refused
    if any(c.may_refuse for c in [*program, last]):
        helpers.append(_MAY_REFUSE)
    if check is None:  # a legal call raised: that call is the check
        what = f"{last.name}(...) raised {type(last.raised).__name__}: {last.raised} (a legal call)"
        body += ["try:", f"    {call_text(last)}", "except Exception as exc:  # noqa: BLE001",
                 f"    bug({what!r}, got=f'{{type(exc).__name__}}: {{exc}}')", "print('no bug: the call returned')"]
    elif unchanged:
        helpers.append(_answers(machine))
        body += [f"probes = {check.names['probes']!r}", "before = answers(probes)",
                 f"{call_text(last)}  # must change nothing", "try:",
                 "    after = answers(probes)", "except Exception as exc:  # noqa: BLE001",
                 f"    bug({sentence!r}, got=f'{{type(exc).__name__}}: {{exc}}')",
                 f"if not ({check.holds}):", f"    bug({sentence!r}, got={check.got})", f"print({('no bug: ' + check.holds)!r})"]
    else:
        helpers += [lines for name, lines in _HELPERS.items() if name + "(" in check.holds + check.got]
        body.append(f"result = {call_text(last)}")
        body += [f"{name} = {value!r}" for name, value in check.names.items()]
        body += [f"if not ({check.holds}):", f"    bug({sentence!r}, got={check.got})", f"print({('no bug: ' + check.holds)!r})"]
    written = len(program) + 1
    caps = machine.capabilities
    head = [
        f'"""radixcheck finding ({oracle_of(failure)}): {sentence}',
        "",
        f"Target {spec}" + (f", in {test}" if test else "") + f": the {written} calls radixcheck sent to one index, in order,",
        "then the check that failed (the questions its checks asked on the way change nothing and are left out).",
        f"Capabilities: {caps}.",
        "Exits 1 while the bug is there, 0 once it is fixed, 2 if the factory cannot be imported.",
        "Needs radixcheck (its event classes). Written by `radixcheck audit --repro`.",
        '"""',
        "import os",
        "import sys",
        "",
        "from radixcheck.properties.index_contract import AllBlocksCleared, BlockRemoved, BlockStored, StoredBlock  # noqa: F401",
        factory_import,
    ]
    for block in [bug_lines, *helpers]:
        head += ["", "", *block]
    return "\n".join([*head, "", "", "index = make()", *body]) + "\n", written
