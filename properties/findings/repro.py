"""A standalone repro file per finding: plain calls on the user's factory, then the oracle's check.

What an engineer pastes into an upstream issue. It imports their factory and radixcheck's
``SlotAllocator`` (the caller's KV slot pool, which counts every slot and refuses a double
free), for a hybrid cache also its ``SecondPoolAllocator`` (the window or state pool:
:mod:`radixcheck.properties.findings.second_pool_repro`), and nothing else of radixcheck: no
Hypothesis, no state machine. It makes the contract
calls the state machine made, in order, as a serving engine would (inserting a request, the
caller frees its copies of what was cached already), and then states the check that failed, with
the expected values written out (:class:`radixcheck.oracles.violations.Check`). It exits 1 while
the bug is there, printing the oracle's sentence and what the cache did, 0 once it is fixed, and 2
when it cannot run to its check. The frame every file has (the factory imported from where it
runs, a wire target's server, the exit codes, the run that confirms it before it is offered) is
:mod:`radixcheck.properties.findings.standalone`'s, shared with the index and tier writers.

The calls come from a replay of the failing machine's transcript, reduced first
(:mod:`radixcheck.properties.findings.reduce`). Long token lists get a name (``T1 = [...]``) and later
calls refer to their prefixes (``T1[:2999]``); a run of calls that differ only by numbers in
arithmetic progression is written as a ``for`` loop, so a production-scale finding stays short.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import textwrap
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from radixcheck import profiles
from radixcheck.oracles.violations import ContractViolation, StepCostViolation, shown
from radixcheck.properties.cache import serving
from radixcheck.properties.cache.batches import ServingRun
from radixcheck.properties.cache.contract import Request
from radixcheck.properties.cache.machine import NO_ANSWER, POOL_SIZE, SCRIBBLE_TOKEN, SIZE_CALLS, RadixCacheMachine, SentCall
from radixcheck.properties.findings.failures import leaves, message_of, oracle_of, raised_at, signature_of
from radixcheck.properties.findings.reduce import REDUCE_ENV, Reduced, Replay, reduce, reduce_seconds
from radixcheck.properties.findings.repro_waivers import IMPORTS, header_lines, met_by, past_waived_args, waiver_lines
from radixcheck.properties.findings.root_cause import Signature, shown_by, shown_by_serving, signature
from radixcheck.properties.findings.second_pool_repro import KEYWORDS, POOL_NAME, SecondPool
from radixcheck.properties.findings.standalone import (
    CANNOT_RUN_LINES,
    Repro,
    bug_lines,
    confirm,
    factory_import,
    hang_limit_lines,
    needs,
    preamble,
    run_repro,
    runs_to_the_check,
)
from radixcheck.properties.findings.transcript import Act
from radixcheck.properties.index.machine import KvIndexMachine
from radixcheck.properties.index.repro import CannotWrite, IndexProgram, failing_program, index_script, shortest_program
from radixcheck.properties.target import TargetCrash, TransportError, caused_by_hang, declared_page_sizes

__all__ = ["Repro", "file_name", "finding_site", "literal", "repro_for", "run_repro"]

SHORT = 24  # token lists longer than this are named once and referred to
KEY = 8  # a list that starts as a named one does (this many tokens) is written as its prefix, if it is one
NAMED_IF_RECURRING = 12  # a shorter list that recurs is named too, if longer than this
RECENT = 64  # a list is written as a prefix (or an extension) of one of the last this many named with its first tokens
LOOP_AT = 3  # a run of this many repetitions (or more) becomes a for loop
WRAP = 110
LONGER_BUDGET = 60.0  # seconds of reduction the header advises when the budget ran out, unless it had that much
SCRIBBLED = ("\n\nThe caller overwrites every buffer it lent once a call returns, as an engine reuses its rows "
             f"(overwrite(): tokens\nand slots become {2**31 - 2}): that number in the cache's answer is an overwritten "
             "buffer the cache kept.")


def repro_for(failure: BaseException, spec: str, test: str = "", waived: Any = None, seconds: float | None = None,
              plain_test: tuple[Callable[..., Any], dict[str, Any], Any] | None = None, replays: int | None = None,
              seed: int | None = None, waivers: list[Any] | None = None) -> Repro:
    """The repro file for ``failure`` of the target ``spec`` ('module:factory'), from what it carries:
    the failing machine (:func:`~radixcheck.properties.findings.verdict.run_machine` attaches it; reduced
    for at most ``seconds``, ``waived(exc)`` naming findings to look past), or the serving run
    (the DFS-bound tests); else, for a plain test, ``plain_test`` = (its function, its parameters,
    the target's capabilities; ``seed``, the run's ``--seed``, which its file must run too). ``replays``
    also bounds the reduction by a count (tests). ``waivers``: the run's (those ``waived`` applies), which a
    file whose harness checks as it goes embeds and goes on past (:mod:`~radixcheck.properties.findings.repro_waivers`)."""
    if isinstance(failure, BaseExceptionGroup):
        if len(inner := leaves(failure)) > 1:
            return Repro(None, "several failures in one test (an ExceptionGroup): each needs its own run")
        failure = _as_its_failure(inner[0], failure)
    if isinstance(failure, StepCostViolation):  # a replay would take as long as the run, and prove nothing by its exit code
        return Repro(None, "a step's cost measured as the cache grew, not a program that fails: `radixcheck bench` "
                           "measures each operation's cost per cache size")
    run = getattr(failure, "radixcheck_serving", None)
    if isinstance(run, ServingRun):
        return _checked(Repro(_serving_script(failure, run, spec, test), calls=len(run.requests),
                              size=f"{len(run.requests)} request(s) served", shows=_shown_by_serving(failure, run, spec, waived)),
                        failure)
    machine = getattr(failure, "radixcheck_machine", None)
    from radixcheck.properties.tiers.repro import tier_repro  # it imports this module
    from radixcheck.properties.tiers.world import TierWorld

    if isinstance(getattr(machine, "world", None), TierWorld):  # the tier machine or production world: its log is the file
        return tier_repro(machine.world, failure, spec, machine.factory, seconds, replays, waived, waivers)
    if isinstance(machine, KvIndexMachine):
        return _index_repro(machine, failure, spec, test, seconds, waived, waivers)
    if (not isinstance(machine, RadixCacheMachine) or not machine.transcript) and plain_test is not None:
        return _checked(Repro(_plain_test_script(failure, *plain_test, spec, test, seed, waivers), size="radixcheck's test, as it is",
                              shows=_shown_by_tenant_tree(failure, machine, waived)
                              or _shown_by_construction_test(failure, plain_test, spec, waived)), failure)
    if not isinstance(machine, RadixCacheMachine) or not machine.transcript:
        return Repro(None, "no transcript: the failure did not come from radixcheck's cache machine or serving protocol, or "
                           "its run kept none (run_machine(..., transcript=True); --radix-repro and radixcheck audit --repro keep one)")
    reduced = reduce(machine, failure, waived, seconds, replays)
    notes = []
    if reduced is None:
        reduced = Reduced(Replay(machine, list(machine.transcript), failure), machine.options, len(machine.transcript),
                          list(machine.transcript))
        notes.append("its transcript did not fail the same way when replayed (does the cache depend on more than its calls?): "
                     "written from the run itself")
    notes += reduced.notes
    shows = [signature(failure)] if caused_by_hang(failure) else shown_by(type(machine), reduced.replay.acts, reduced.options,
                                                                                      waived, reduced.replay.trim_queries)
    for reads in (False, True):  # the reads of the sizes only if the file without them does not show the finding
        try:
            writer = _Writer(reduced, spec, test, reads, waivers or [])
            text = writer.script()
        except _CannotWrite as exc:
            return Repro(None, str(exc), notes=notes)
        repro = _checked(Repro(text, calls=writer.calls_written, notes=notes, size=f"{writer.calls_written} contract calls",
                               shows=shows), failure)
        if repro.text is not None or repro.exit_code != 0 or READ_LINE in text or not writer.reads_left_out:
            return repro
    return repro


def _as_its_failure(leaf: BaseException, group: BaseExceptionGroup) -> BaseException:
    """The one failure inside ``group``, with what the group carries (its machine or serving run).
    Hypothesis wraps a failure whose replay passed in a ``FlakyFailure`` of one: a wire server
    whose handle table all its caches share failed a stream's state machine so (``--seed``), and
    the finding got no file and nothing to join its construction test's by."""
    for carried in ("radixcheck_machine", "radixcheck_serving"):
        if not hasattr(leaf, carried) and hasattr(group, carried):
            setattr(leaf, carried, getattr(group, carried))
    return leaf


def _shown_by_serving(failure: BaseException, run: ServingRun, spec: str, waived: Any) -> list[Signature]:
    """What a serving run shows, replayed on the target's cache machine at its page size
    (:func:`~radixcheck.properties.findings.root_cause.shown_by_serving`); a hang's only itself."""
    from radixcheck.properties.cache.machine import machine_for
    from radixcheck.properties.target import load_target

    if caused_by_hang(failure):
        return [signature(failure)]
    target = load_target(spec)
    return shown_by_serving(machine_for(target.factory, target.capabilities, run.page_size, "root_cause"), run, waived)


def _shown_by_tenant_tree(failure: BaseException, machine: Any, waived: Any) -> list[Signature]:
    """What a tenant tree's failing program shows replayed past its failures
    (:func:`~radixcheck.properties.tenant_tree.replay.shown_by_tenant_tree`); a hang's only itself, and
    a failure with no program (a plain test's, a thread-safety bug's) nothing."""
    from radixcheck.properties.tenant_tree.machine import TenantTreeMachine
    from radixcheck.properties.tenant_tree.replay import shown_by_tenant_tree

    if not isinstance(machine, TenantTreeMachine) or not machine.program:
        return []
    return [signature(failure)] if caused_by_hang(failure) else shown_by_tenant_tree(machine, waived)


def _shown_by_construction_test(failure: BaseException, plain_test: tuple[Callable[..., Any], dict[str, Any], Any], spec: str,
                                waived: Any) -> list[Signature]:
    """What a construction test's program shows, as the cache machine's acts on the target
    (:mod:`~radixcheck.properties.findings.construction_replay`); a hang's only itself, a test with
    no such program nothing."""
    from radixcheck.properties.findings.construction_replay import construction_program, shown_by_construction_test
    from radixcheck.properties.target import load_target

    function, parameters, capabilities = plain_test
    page_size = parameters.get("page_size")
    if not isinstance(page_size, int) or construction_program(function.__name__, page_size, capabilities) is None:
        return []
    if caused_by_hang(failure):
        return [signature(failure)]
    return shown_by_construction_test(function.__name__, page_size, load_target(spec).factory, capabilities, waived)


def _index_repro(machine: KvIndexMachine, failure: BaseException, spec: str, test: str, seconds: float | None,
                 waived: Any = None, waivers: list[Any] | None = None) -> Repro:
    if machine.sent_calls is None:
        return Repro(None, "no transcript: its run kept none (run_machine(..., transcript=True); --radix-repro and "
                           "radixcheck audit --repro keep one)")
    def script(found: IndexProgram) -> tuple[str, int]:
        return index_script(machine, failure, spec, test, found, waivers)

    def fails(found: IndexProgram) -> bool:
        code, printed = run_repro(script(found)[0])
        return code == 1 and "BUG (radixcheck" in printed

    try:
        found = failing_program(machine, failure)
        if not caused_by_hang(failure) and fails(found):
            found = shortest_program(found, machine.capabilities.counts_copies, fails,
                                     reduce_seconds() if seconds is None else seconds)
        text, calls = script(found)
    except CannotWrite as exc:
        return Repro(None, str(exc))
    from radixcheck.properties.index.replay import shown_by_index  # it imports the index machine's repro module

    shows = [signature(failure)] if caused_by_hang(failure) else shown_by_index(machine, found, waived)
    return _checked(Repro(text, calls=calls, size=f"{calls} index calls", shows=shows), failure)


def _checked(repro: Repro, failure: BaseException) -> Repro:
    """Run the file once, as a user would (:func:`~radixcheck.properties.findings.standalone.confirm`;
    a hang's under the time limit): it is offered only if it exits 1 with radixcheck's sentence."""
    return confirm(repro, hang=caused_by_hang(failure))


class _CannotWrite(Exception):
    """The failure has no standalone form (e.g. it was raised by radixcheck itself, not by a call)."""


def literal(value: Any) -> str:
    """Python source that makes ``value`` again (for arguments, bad input included)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, np.integer):
        return repr(int(value))
    if isinstance(value, np.ndarray):
        return f"np.array({value.tolist()!r}, dtype=np.{value.dtype.name})"
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float, bool, list, tuple, type(None), str)) for v in value):
        return repr(list(value)) if isinstance(value, list) else repr(value)
    if isinstance(value, dict):  # an unhashable namespace sent as bad input
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if type(value) is object:
        return "object()"
    raise _CannotWrite(f"cannot write an argument of type {type(value).__name__} as Python")


TOKEN_CALLS = ("match_prefix", "insert", "evict_prefix")  # the calls whose first argument is tokens


def _keywords(call: SentCall, but: Collection[str] = ()) -> str:
    """The keyword arguments a call was sent with (``namespace=``, to a target with namespaces), as source
    (those named in ``but`` left out)."""
    return "".join(f", {name}={literal(value)}" for name, value in getattr(call, "kwargs", {}).items() if name not in but)


def _negated(condition: str) -> str:
    """``not (condition)``, without a double negation."""
    if simple := re.fullmatch(r"(\w+) not in (\w+)", condition):
        return f"{simple[1]} in {simple[2]}"
    inner = condition[5:-1] if condition.startswith("not (") and condition.endswith(")") else None
    if inner is not None and inner.count("(") == inner.count(")"):
        return inner
    return f"not ({condition})"


def _comment(text: str) -> list[str]:
    return ["# " + line for line in textwrap.wrap(text, WRAP - 2)]


def _token_key(value: Any) -> tuple[int, ...] | None:
    """A token argument (a list of ints, or a 1-D int64 array) as a tuple; ``None`` for anything else."""
    if isinstance(value, np.ndarray):
        return tuple(value.tolist()) if value.ndim == 1 and value.dtype == np.int64 else None
    if isinstance(value, list) and all(type(v) is int for v in value):
        return tuple(value)
    return None


def _ints(values: list[int]) -> str:
    """A list of ints as the shortest of: the list itself, ``list(range(a, b))``, or a sum of
    such ranges and short lists (``list(range(0, 16)) + list(range(20, 24))``: the slots of a
    request whose prefix was cached, a prompt that extends another)."""
    values = list(values)
    pieces: list[str] = []
    loose: list[int] = []
    i = 0
    while i < len(values):
        j = i + 1
        while j < len(values) and values[j] == values[j - 1] + 1:
            j += 1
        if j - i > 3:
            pieces += [repr(loose)] if loose else []
            pieces.append(f"list(range({values[i]}, {values[j - 1] + 1}))")
            loose = []
        else:
            loose += values[i:j]
        i = j
    pieces += [repr(loose)] if loose else []
    summed = " + ".join(pieces) or "[]"
    return summed if len(summed) < len(repr(values)) else repr(values)


def _common_length(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    return next(i for i in range(n) if a[i] != b[i])


def _assignment(name: str, value: Any, comment: str = "") -> list[str]:
    """``name = value`` as lines of Python: a long list wrapped, one indented block of items."""
    text = _ints(list(value)) if isinstance(value, (list, set)) and all(type(v) is int for v in value) else repr(value)
    head = [f"# {comment}"] if comment else []
    if len(text) + len(name) + 3 <= WRAP:
        return head + [f"{name} = {text}"]
    if isinstance(value, (list, set)) and not (text.startswith("[") and text.endswith("]") and "+" not in text):
        text = repr(list(value))  # a long sum of ranges and lists: wrapped as the plain list
    if not text.startswith("["):
        return head + [f"{name} = {text}"]
    items = textwrap.wrap(text[1:-1], WRAP - 4, break_on_hyphens=False)
    return head + [f"{name} = ["] + ["    " + line for line in items] + ["]"]


READ_LINE = "sizes()  # radixcheck read the sizes here (the finding needs this read: the cache's answer depends on it)"


class _Writer:
    def __init__(self, reduced: Reduced, spec: str, test: str, reads: bool = False, waivers: list[Any] | None = None) -> None:
        self.reads = reads  # write radixcheck's reads of the sizes too (a cache whose reads change its answers)
        self.past, self.waivers = _waived_calls(reduced, waivers or [])  # calls whose raise the run waived, and the lines it met
        self.run_waivers = waivers or []  # every line of the run's: an oracle finding it waived is said where it was met
        self.reads_left_out = False  # whether the file left out a read radixcheck made
        self.reduced = reduced
        self.machine, self.failure = reduced.replay.machine, reduced.replay.failure
        self.options = reduced.options
        self.spec, self.test = spec, test
        self.page = self.machine.page_size
        self.acts: list[Act] = self.machine.transcript
        kept = Counter(a.step_number for a in reduced.replay.acts)
        self.whole_steps = {n for n, count in Counter(a.step_number for a in reduced.original).items() if kept[n] == count}
        self.used_handles = {id(arg) for a in self.acts for c in a.calls for arg in c.args
                             if c.name in ("inc_lock_ref", "dec_lock_ref")}
        self.bound: dict[int, str] = {}  # id(handle) -> the name it was last bound to
        token_args = (_token_key(c.args[0]) for a in self.acts for c in a.calls if c.name in TOKEN_CALLS and c.args)
        self.recurring = {seq for seq, n in Counter(k for k in token_args if k is not None and len(k) >= KEY).items() if n > 1}
        self.named: dict[tuple[int, ...], list[tuple[str, tuple[int, ...]]]] = {}  # first KEY tokens -> named sequences
        self.exact: dict[tuple[int, ...], str] = {}  # a named sequence -> its name
        self.sequences = 0
        self.calls_written = 0
        self.helpers: set[str] = set()
        self.second = SecondPool.of(self.machine)  # a hybrid cache's window or state pool, else None

    # ---- values --------------------------------------------------------------------------------

    def tokens(self, value: Any, definitions: list[str]) -> str:
        """A token argument: short lists as they are, long ones by name (a new name is defined in ``definitions``)."""
        if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype == np.int64:
            return f"np.array({self.tokens(value.tolist(), definitions)})"
        if not (isinstance(value, list) and all(type(v) is int for v in value)) or len(value) < KEY:
            return literal(value)
        seq = tuple(value)
        if seq in self.exact:  # lent as a copy where the caller overwrites what it lends
            return f"list({self.exact[seq]})" if self.options.reuses_buffers else self.exact[seq]
        shared, prefix = 0, ""
        for name, known in reversed(self.named.get(seq[:KEY], [])[-RECENT:]):  # shared prompts: only the recent ones
            if len(seq) < len(known) and known[: len(seq)] == seq:
                return f"{name}[:{len(seq)}]"
            if len(seq) - len(known) <= SHORT and seq[: len(known)] == known:
                return f"{name} + {_ints(list(seq[len(known):]))}"
            common = _common_length(known, seq)
            if common > shared:
                shared, prefix = common, name if common == len(known) else f"{name}[:{common}]"
        if shared and len(rest := _ints(list(seq[shared:]))) <= WRAP // 2:  # a named prompt, then a run: T1[:2999] + list(range(...))
            return f"{prefix} + {rest}"
        compact = _ints(list(seq))
        if len(seq) <= SHORT and (seq not in self.recurring or len(seq) <= NAMED_IF_RECURRING) or (
                len(compact) <= WRAP // 2 and seq not in self.recurring):
            return compact
        self.sequences += 1
        name = f"T{self.sequences}"
        self.named.setdefault(seq[:KEY], []).append((name, seq))
        self.exact[seq] = name
        definitions += _assignment(name, list(seq), f"{len(seq)} tokens")
        return f"list({name})" if self.options.reuses_buffers else name

    def handle(self, value: Any) -> str:
        return self.bound.get(id(value)) or literal(value)

    def brought(self, call: SentCall, owned: int, pool: str = POOL_NAME) -> str:
        """A caller's insert's keywords as source: the second-pool values it brought (the first
        ``owned`` the tree's, the rest taken fresh from ``pool``), any other as it was sent."""
        second = {name: value for name, value in call.kwargs.items() if name in KEYWORDS and self.second}
        return _keywords(call, but=second) + "".join(f", {name}={self.second.brought(value, owned, _ints, pool)}"  # type: ignore[union-attr]
                                                      for name, value in second.items())

    # ---- one act -------------------------------------------------------------------------------

    def act_lines(self, act: Act, calls: list[SentCall]) -> list[str]:
        """``calls`` of ``act`` (all of them, or those before the one that failed) as lines of Python."""
        if act.name == "_refuse_foreign":
            return self.foreign(act, calls)
        return [line for call in calls for line in self.call_lines(call, act)]

    def call_lines(self, call: SentCall, act: Act) -> list[str]:
        if call.name in SIZE_CALLS:
            # A read changes nothing, and is left out; but a cache whose reads change what it answers (sizes kept until a
            # change it forgets) needs the reads radixcheck made, so a file that left them out and exited 0 is written
            # again with them (``reads``), one line for each of radixcheck's reads of the three sizes.
            if self.reads and call.name == SIZE_CALLS[0]:
                self.helpers.add("state")
                return [READ_LINE]
            self.reads_left_out = True
            return []
        definitions: list[str] = []
        if call.target == "caller":
            return definitions + [self.caller_text(call, definitions)]
        self.calls_written += 1
        line = self.call_text(call, act, definitions)
        lines = definitions + [line]
        if call.raised is not None and id(call.raised) in self.past:  # a waived finding: the file goes on past it, as the run did
            exc, finding = call.raised, self.past[id(call.raised)]
            lines = definitions + [f"with past_waived({past_waived_args(exc, finding)}):  # waived in the run ({type(exc).__name__})",
                                   "    " + line]
        elif call.raised is not None:
            self.helpers.add("suppress")
            lines = definitions + [f"with suppress(Exception):  # refused, as it must be ({type(call.raised).__name__})", "    " + line]
        return lines

    def call_text(self, call: SentCall, act: Act, definitions: list[str], bind: bool = True) -> str:
        """One call as a line of Python (its recorded answer as a comment)."""
        args, name = call.args, call.name
        reuse = self.options.reuses_buffers
        if name == "match_prefix":
            query = self.tokens(args[0], definitions)
            answered = len(call.result) if isinstance(call.result, tuple) and len(call.result) in (2, 3) else 0
            handle = call.result[1] if answered else None
            third = f", {self.second.keyword}" if answered == 3 and self.second else ""  # a hybrid match's window or state
            target = ""
            if bind and handle is not None and id(handle) in self.used_handles:
                self.bound[id(handle)] = f"h[{call.number}]"
                target = f"values, h[{call.number}]{third} = " if reuse else f"_, h[{call.number}]{', _' if third else ''} = "
            elif reuse:
                target = f"values, _{third} = "
            text = f"{target}cache.match_prefix({'q := ' if reuse else ''}{query}{_keywords(call)})"
            if reuse:
                self.helpers.add("overwrite")
                text += f"; overwrite(q, values{third})"
            return text + self.answer(call)
        if name == "insert" and act.name in ("_insert_request", "_serve_insert"):
            self.helpers.add("insert")
            slots = np.asarray(args[1]).tolist()
            owned = len(act.args[1].tokens) if act.name == "_serve_insert" else 0
            fresh = f"allocator.take({_ints(slots[owned:])})"
            if owned:
                return (f"insert({self.tokens(args[0], definitions)}, np.concatenate([np.array({_ints(slots[:owned])}), {fresh}]), "
                        f"owned_from={owned}{self.brought(call, owned)})" + self.answer(call))
            return f"insert({self.tokens(args[0], definitions)}, {fresh}{self.brought(call, 0)})" + self.answer(call)
        if call.target == "caller":
            return self.caller_text(call, definitions)
        rendered = []
        for arg in args:
            if isinstance(arg, Request):
                rendered.append(f"req := {self.bound[id(arg)]}")  # `req` names the request the check reads
            elif name in ("inc_lock_ref", "dec_lock_ref"):
                rendered.append(self.handle(arg))
            elif name in TOKEN_CALLS and not rendered:
                rendered.append(self.tokens(arg, definitions))
            else:
                rendered.append(literal(arg))
        text = f"cache.{name}({', '.join(rendered)}{_keywords(call)})"
        if reuse and name == "evict_prefix" and isinstance(args[0], (list, np.ndarray)):
            self.helpers.add("overwrite")
            text = f"cache.{name}(q := {rendered[0]}{_keywords(call)}); overwrite(q)"
        return text + self.answer(call)

    def caller_text(self, call: SentCall, definitions: list[str]) -> str:
        """What the caller did itself in a running request's lifecycle (radixcheck.properties.cache.lifecycle):
        made the request, computed a chunk into slots it took, or freed slots of its own (of either pool)."""
        second = self.second.caller_line(call, _ints) if self.second else None
        if second is not None:
            return second
        self.helpers.add("request")
        if call.name == "Request":
            name = f"r{sum(1 for key in self.bound.values() if key.startswith('r')) + 1}"
            self.bound[id(call.result)] = name
            namespace = f", namespace={literal(call.args[1])}" if len(call.args) > 1 else ""  # a tenant's request
            priority = f", priority={int(call.kwargs['priority'])}" if call.kwargs.get("priority") else ""  # a policy's
            return f"{name} = Request({self.tokens(call.args[0], definitions)}{namespace}{priority})"
        if call.name == "compute":
            request, slots, more = call.args
            generated = f", {_ints(list(more))}" if more else ""
            return f"{self.bound[id(request)]}.compute(allocator.take({_ints(slots)}){generated})"
        if call.name == "free":
            return f"allocator.free(np.array({_ints(call.args[0])}))  # the caller frees slots of its own"
        if call.name == "set_window":  # lifecycle="requests" with a second pool: what the request holds of its own
            return f"{self.bound[id(call.args[0])]}.window = np.array({_ints(call.args[1])}, dtype=np.int64)"
        if call.name == "set_state":
            return f"{self.bound[id(call.args[0])]}.state = {int(call.args[1])}"
        raise _CannotWrite(f"no Python for the caller's {call.name!r}")

    @staticmethod
    def answer(call: SentCall) -> str:
        result = call.result
        if call.raised is not None or result is NO_ANSWER:
            return ""
        if isinstance(result, tuple) and len(result) in (2, 3) and isinstance(result[0], np.ndarray):
            return f"  # -> {shown(result[0].tolist())}"
        return f"  # -> {result!r}" if isinstance(result, (int, np.integer)) and not isinstance(result, bool) else ""

    def foreign(self, act: Act, calls: list[SentCall]) -> list[str]:
        lines = ["other_allocator = SlotAllocator(POOL)"]
        lines += [self.second.setup(True, "other_second")] if self.second else []
        lines += [f"other = make(other_allocator, PAGE{', second_allocator=other_second' if self.second else ''})  "
                  "# another cache: its handle is foreign here"]
        for call in calls:
            if call.target == "other":
                definitions: list[str] = []
                if call.name == "insert":
                    line = (f"other.insert({self.tokens(call.args[0], definitions)}, other_allocator.take({_ints(call.args[1].tolist())})"
                            f"{self.brought(call, 0, 'other_second')})")
                elif call.name == "match_prefix":
                    self.bound[id(call.result[1])] = "foreign"
                    line = f"foreign = other.match_prefix({self.tokens(call.args[0], definitions)})[1]"
                else:
                    line = f"other.{call.name}({self.handle(call.args[0])})"
                lines += definitions + [line]
            else:
                lines += self.call_lines(call, act)
        return lines

    # ---- the failing act -----------------------------------------------------------------------

    def failing_lines(self, act: Act) -> list[str]:
        """The failing act: its calls up to the one that failed, that call with what the check
        needs around it, and the check."""
        failure = self.failure
        check = failure.check if isinstance(failure, ContractViolation) else None
        calls = act.calls
        self.helpers.add("bug")
        if check is None:  # the cache raised (or hung) in a legal call: that call is the check
            failed = next((i for i, c in enumerate(calls) if c.raised is failure), None)
            if failed is None and caused_by_hang(failure) and calls:
                failed = len(calls) - 1
            if failed is None:
                raise _CannotWrite(f"the failure ({type(failure).__name__}: {message_of(failure)}) was not raised by a call "
                                   f"into the cache")
            return self.act_lines(act, calls[:failed]) + self.crash_lines(calls[failed], act, failure)
        text = check.holds + " " + check.got
        third = self.second.keyword if self.second else "values"  # what a hybrid match's third answer is called
        named = ("result", "values", "freed", "free_calls", "raised", "before", "second_freed", third)
        uses = {n for n in named if re.search(rf"\b{n}\b(?!\()", text)}  # (not `state()`: the helper)
        checked = [i for i, c in enumerate(calls) if c.name not in SIZE_CALLS or ("result" in uses and i == len(calls) - 1)]
        failed = checked[-1] if checked else None
        out = self.act_lines(act, calls if failed is None else calls[:failed])
        if "before" in uses:
            self.helpers.add("state")
            out.append("before = state()")
        if uses & {"freed", "free_calls"}:
            out.append("mark = len(allocator.freed_log)")
        if "second_freed" in uses:
            out.append(f"mark2 = len({POOL_NAME}.freed_log)")
        if failed is not None:
            last = calls[failed]
            self.calls_written += 1
            definitions: list[str] = []
            expression = self.raw_call(last, act, definitions)
            out += definitions
            if "raised" in uses:
                out += ["try:", f"    result = {expression}", "    raised = None", "except Exception as exc:  # noqa: BLE001",
                        "    raised = exc"]
            elif last.name == "match_prefix" and uses & {"values", third}:
                answers, pick = (f"values, _, {third}", "") if self.second else ("values", "[0]")  # a hybrid match answers three
                kept = f"{answers} = {expression}{pick}"
                out.append(kept if "result" not in uses else f"result = {expression}\n{answers} = result{pick}")
            else:
                out.append(f"result = {expression}" if "result" in uses else expression)
        if uses & {"freed", "free_calls"}:
            out += ["free_calls = [call for call in allocator.frees_since(mark) if call]  # the slots each free() call returned",
                    "freed = [slot for call in free_calls for slot in call]"]
        if "second_freed" in uses:
            out.append(f"second_freed = {POOL_NAME}.freed_log[mark2:]  # the second pool's slots the call freed")
        if "sizes()" in text or "state()" in text:
            self.helpers.add("state")
        if "call_freeing" in text:
            self.helpers.add("call_freeing")
        for name, value in check.names.items():
            out += _assignment(name, value)
        sentence = message_of(failure)
        return out + [f"if {_negated(check.holds)}:", f"    bug({sentence!r}, got={check.got})",
                      f"print({('no bug: ' + check.holds)!r})"]

    def raw_call(self, call: SentCall, act: Act, definitions: list[str]) -> str:
        """The failing call as an expression, exactly as sent (an insert without the caller's frees
        that follow it, which come after the check)."""
        if call.name == "insert" and act.name in ("_insert_request", "_serve_insert"):
            slots = np.asarray(call.args[1]).tolist()
            owned = len(act.args[1].tokens) if act.name == "_serve_insert" else 0
            fresh = f"allocator.take({_ints(slots[owned:])})"
            values = f"np.concatenate([np.array({_ints(slots[:owned])}), {fresh}])" if owned else fresh
            return f"cache.insert({self.tokens(call.args[0], definitions)}, {values}{self.brought(call, owned)})"
        text = self.call_text(call, act, definitions, bind=False).split("  # ->")[0].split("; overwrite")[0]
        return text.split(" = ", 1)[-1] if call.name == "match_prefix" else text

    def crash_lines(self, call: SentCall, act: Act, failure: BaseException) -> list[str]:
        """The call that raised (or did not return) in the run: exit 1 if it raises the same
        exception again (or does not return within the per-operation limit); another exception is
        not the finding (it reaches ``cannot_run``: exit 2)."""
        self.calls_written += 1
        definitions: list[str] = []
        expression = self.raw_call(call, act, definitions)
        lines = definitions
        shown_call = f"{call.name}({'...' if call.args else ''})"
        self.helpers.add("raised_at")
        if caused_by_hang(failure):
            self.helpers.add("alarm")
            return lines + ["try:", f"    within_limit(lambda: {expression})", "except TimeoutError as exc:",
                            f"    bug(f'{shown_call} did not return within {{LIMIT:g}} s', got=f'{{exc}} (at {{raised_at(exc)}})')",
                            f"print('no bug: {shown_call} returned within the limit')"]
        raised = type(failure).__name__
        what = f"{shown_call} raised {raised}: {message_of(failure)} (a legal call)"
        if isinstance(failure, (TransportError, TargetCrash)):  # no answer, or a crash: any answer in the protocol fixes it
            what = f"{shown_call} raised {raised}: {message_of(failure)} ({failure.what_happened})"
            return lines + ["try:", f"    {expression}", "except Exception as exc:  # noqa: BLE001",
                            f"    if type(exc).__name__ == {raised!r}:",
                            f"        bug({what!r}, got=f'{{type(exc).__name__}}: {{exc}} (raised at {{raised_at(exc)}})')",
                            "    if type(exc).__name__ != 'WireRefused':  # a refusal (error 1000) is an answer too", "        raise",
                            "print('no bug: the server answered within the protocol')"]
        return lines + ["try:", f"    {expression}", "except Exception as exc:  # noqa: BLE001",
                        f"    if type(exc).__name__ != {raised!r}:  # another exception: not this finding", "        raise",
                        f"    bug({what!r}, got=f'{{type(exc).__name__}}: {{exc}} (raised at {{raised_at(exc)}})')",
                        "print('no bug: the call returned')"]

    # ---- the file ------------------------------------------------------------------------------

    def body(self) -> list[str]:
        groups: list[list[str]] = []
        step = story = None
        for act in self.acts[:-1]:
            lines = self.act_lines(act, act.calls)
            if not lines:
                continue
            lines += self.waived_here(act)
            if (act.step, act.story) != (step, story):
                step, story = act.step, act.story
                groups.append(["", *_comment(self.heading(act))])
            groups.append(lines)
        out = [line for group in _loops(groups) for line in group]
        final = self.acts[-1]
        heading = _comment(self.heading(final)) if (final.step, final.story) != (step, story) else []
        return out + ["", *heading, "# the call that fails, and radixcheck's check of it"] + self.failing_lines(final)

    def waived_here(self, act: Act) -> list[str]:
        """A comment after ``act``'s calls naming the oracle finding the run waived there (none: none waived, or a
        call's own exception, which ``past_waived`` names): the file checks only at its end, so without it a reader
        could not see what the run went past."""
        exc = act.raised
        if exc is None or not self.run_waivers or any(id(c.raised) in self.past for c in act.calls if c.raised is not None):
            return []
        waiver = next((w for w in self.run_waivers if w.waives(exc) or (w.follows is not None and w.waives(exc, rejudge=False))), None)
        if waiver is None:
            return []
        return [f"# waived in the run ({waiver.where}: {waiver.reason}): {oracle_of(exc)}: {message_of(exc)}",
                "# (radixcheck's check after these calls; this file checks only at its end)"]

    def heading(self, act: Act) -> str:
        step = act.step or act.name.strip("_")
        doc = getattr(getattr(type(self.machine), step, None), "__doc__", None) or ""
        first = " ".join(doc.strip().split(". ")[0].split())
        text = f"step {step}" + (f", story: {act.story}" if act.story else "")
        if act.step_number not in self.whole_steps:  # its docstring would tell of calls the file no longer makes
            return text + " (the calls of it the finding needs)"
        return text + (f": {first.rstrip('.')}." if first and not act.story else "")

    def script(self) -> str:
        body = self.body()
        factory = factory_import(self.spec)
        oracle = oracle_of(self.failure)
        made = reduction_note(self.reduced)
        caps = getattr(type(self.machine), "capabilities", None)
        header = [
            f'"""radixcheck finding ({oracle}): {message_of(self.failure)}',
            "",
            f"Target {self.spec}, page size {self.page}" + (f", in {self.test}" if self.test else "") + ".",
            f"{self.calls_written} contract calls, as a serving engine makes them. {made}".rstrip(),
            f"Capabilities: {caps}." if caps is not None else "",
            # the machine holds the run's page sizes only (--page-sizes): the declaration is the factory's
            f"Page sizes: declared {declared_page_sizes(self.spec)}, run {caps.page_sizes_tested()}."
            if hasattr(caps, "page_sizes") else None,
            "",
            "Exits 1 while the bug is there (printing radixcheck's finding and what the cache did), 0 once it is",
            "fixed, 2 if it cannot run to its check (the factory does not import, a call before the last raised).",
            "Needs numpy and radixcheck (its SlotAllocator is the caller's KV slot pool: it counts every slot and",
            "refuses a double free). Writes nothing where it runs. Written by",
            "`radixcheck audit --repro`." + (self.second.note() if self.second else "")
            + (SCRIBBLED if self.options.reuses_buffers else ""),
            *header_lines(self.waivers),
            '"""',
        ]
        imports = ["import os"] + (["import signal"] if "alarm" in self.helpers else []) + ["import sys"]
        imports += (["import time"] if "alarm" in self.helpers else []) + ["import traceback"] + (IMPORTS if self.waivers else [])
        imports += ["from contextlib import suppress"] if "suppress" in self.helpers else []
        names = ["Request"] if "request" in self.helpers else []  # a running request's lifecycle
        names += ["SecondPoolAllocator"] if self.second else []
        imports += ["", *needs(["import numpy as np", f"from radixcheck import {', '.join([*names, 'SlotAllocator'])}"]), factory]
        constants = ["", f"PAGE = {self.page}", f"POOL = 1 << {POOL_SIZE.bit_length() - 1}"]
        setup = [f"allocator = SlotAllocator(POOL, churned={self.options.churned_slots})",
                 *([self.second.setup(self.options.churned_slots)] if self.second else []),
                 f"cache = make(allocator, PAGE{f', second_allocator={POOL_NAME}' if self.second else ''})",
                 "h = {}  # the handles match_prefix returned, by the number of the call that returned them"]
        return "\n".join([line for line in header if line is not None] + imports + constants + self.helper_lines()
                         + ["", ""] + runs_to_the_check(setup + body)) + "\n"

    def helper_lines(self) -> list[str]:
        out: list[str] = []
        reuse = self.options.reuses_buffers
        if "overwrite" in self.helpers or ("insert" in self.helpers and reuse):
            out += ["", "", "def overwrite(*buffers):",
                    '    """The caller reuses its buffers once a call returns (so a cache must copy what it keeps)."""',
                    "    for buffer in buffers:",
                    "        if isinstance(buffer, list):",
                    f"            buffer[:] = [{SCRIBBLE_TOKEN}] * len(buffer)",
                    "        elif isinstance(buffer, np.ndarray) and buffer.flags.writeable and buffer.dtype.kind in 'iu':",
                    f"            buffer[...] = {SCRIBBLE_TOKEN} if buffer.dtype.itemsize >= 4 else -1"]
        if "insert" in self.helpers:
            lent = "lent := slots.copy()" if reuse else "slots"
            keywords = "keywords" if self.second else "namespace"  # a hybrid insert also brings its window or state
            out += ["", "", f"def insert(tokens, slots, owned_from=0, **{keywords}):",
                    '    """Cache a request\'s KV (computed in `slots`); the caller frees its copies of what was cached already',
                    '    and of the unaligned tail (the contract: the cache keeps only what it did not have)."""',
                    f"    prefix_len = cache.insert(tokens, {lent}, **{keywords})"]
            out += [f"    overwrite(tokens, lent{', *keywords.values()' if self.second else ''})"] if reuse else []
            out += ["    aligned = len(tokens) // PAGE * PAGE",
                    "    allocator.free(np.concatenate([slots[owned_from:prefix_len], slots[max(aligned, owned_from):]]))",
                    "    return prefix_len"]
        if "state" in self.helpers:
            out += ["", "", "def sizes():",
                    '    return {"total": cache.total_size(), "evictable": cache.evictable_size(), "protected": cache.protected_size()}',
                    "", "", "def state():",
                    '    """What a refused call must leave as it was: the sizes, the slots freed so far, the refused frees."""',
                    "    return sizes(), len(allocator.freed_log), len(allocator.violations)"
                    + (f", len({POOL_NAME}.freed_log), len({POOL_NAME}.violations)" if self.second else "")]
        if "call_freeing" in self.helpers:
            out += ["", "", "def call_freeing(slot, free_calls):",
                    '    """Which free() call of the last eviction returned `slot` (len(free_calls) if none did)."""',
                    "    return next((i for i, call in enumerate(free_calls) if slot in call), len(free_calls))"]
        if "alarm" in self.helpers:
            out += ["", ""] + hang_limit_lines()
        if "raised_at" in self.helpers:
            out += ["", ""] + _RAISED_AT
        if "bug" in self.helpers:
            out += ["", ""] + bug_lines(oracle_of(self.failure))
        if self.waivers:
            out += ["", ""] + waiver_lines(self.waivers)
        return out + ["", ""] + CANNOT_RUN_LINES


def _waived_calls(reduced: Reduced, waivers: list[Any]) -> tuple[dict[int, BaseException], list[Any]]:
    """The calls of ``reduced``'s program that raised a finding its run waived (by ``id`` of what each raised:
    the finding the run made of it, the same exception or a legal call refused), and the waivers they meet
    (:mod:`~radixcheck.properties.findings.repro_waivers`). The replay records what it went on past; a file
    written from the run itself (its replay failed otherwise) judges each call that raised by the waivers, as
    the finding the run made of it (what its act raised: a refused legal call's oracle finding), as the replay does."""
    if not waivers:
        return {}, []
    met = reduced.replay.waived
    if met is None:  # the run's own (not replayed): each finding a call's exception made that a waiver waives
        met = list(dict.fromkeys(
            finding for a in reduced.replay.machine.transcript for c in a.calls if c.raised is not None
            for finding in [_finding_made_of(c.raised, a.raised)] if any(w.waives(finding) for w in waivers)))
    past = {id(cause): finding for finding in met for cause in (finding, finding.__cause__) if cause is not None}
    raised = {id(c.raised) for a in reduced.replay.machine.transcript for c in a.calls if c.raised is not None}
    return past, met_by(waivers, [finding for key, finding in past.items() if key in raised])


def _finding_made_of(raised: BaseException, act_raised: BaseException | None) -> BaseException:
    """The finding the run made of a call's exception ``raised``: what its act raised, if that is it or was
    raised from it (a refused legal call: ``2 refcount safety``), else the exception itself (a crash)."""
    if act_raised is not None and (act_raised is raised or act_raised.__cause__ is raised):
        return act_raised
    return raised


def reduction_note(reduced: Reduced) -> str:
    """The header's sentence on the reduction: how many acts it left out, with what (replays, and CPU
    seconds: the clock its budget counts, a wire server's included; a loaded machine's wall clock is not), and the budget
    advice (said also when no act could go, so an advice never stands alone)."""
    before = reduced.acts_before
    after = len(reduced.replay.acts) if reduced.replay is not None else before
    how = f"{reduced.replays} replays, {reduced.seconds:g} s of CPU" + "".join(f"; {note}" for note in reduced.notes)
    made = (f"Reduced from {before} acts to {after} ({how})." if before != after
            else f"No act left out ({how})." if reduced.replays or reduced.notes else "")
    return made + budget_advice(reduced)


def budget_advice(reduced: Reduced) -> str:
    """The header's advice when the reduction ran out of time: a longer budget, unless it had one."""
    if any("budget" in note for note in reduced.notes) and reduced.budget < LONGER_BUDGET:
        return f" A longer budget ({REDUCE_ENV}={LONGER_BUDGET:g}) may give a shorter file."
    return ""


def _template(lines: list[str]) -> tuple[str, list[int]]:
    """A group of lines with its integers taken out (comments dropped), and the integers."""
    code = "\n".join(line.split("  # ->")[0] for line in lines)
    numbers = [int(n) for n in re.findall(r"(?<![\w.])-?\d+(?![\w.])", code)]
    return re.sub(r"(?<![\w.])-?\d+(?![\w.])", "\0", code), numbers


def _loops(groups: list[list[str]]) -> list[list[str]]:
    """Runs of ``LOOP_AT`` or more repetitions of 1-4 groups whose integers change by a constant
    step, as ``for`` loops (one pass: each repetition is compared once)."""
    shapes = [_template(g) for g in groups]
    out: list[list[str]] = []
    i = 0
    while i < len(groups):
        best: tuple[int, int, list[int], list[int]] | None = None
        for period in range(1, 5):
            if i + period * LOOP_AT > len(groups) or any(groups[i + k][0] == "" for k in range(period)):
                continue  # too few left, or a heading (never repeated)
            first, second = _numbers(shapes, i, period, 0), _numbers(shapes, i, period, 1)
            if first is None or second is None:
                continue
            steps = [b - a for a, b in zip(first, second, strict=True)]
            reps = 2
            while (more := _numbers(shapes, i, period, reps)) is not None and all(
                    m == a + reps * d for m, a, d in zip(more, first, steps, strict=True)):
                reps += 1
            if reps >= LOOP_AT and (best is None or reps * period > best[0] * best[1]):
                best = (reps, period, first, steps)
        if best is None:
            out.append(groups[i])
            i += 1
            continue
        reps, period, first, steps = best
        pieces = "\n".join(shapes[i + k][0] for k in range(period)).split("\0")
        terms = [_progression(start, step) for start, step in zip(first, steps, strict=True)]
        body = "".join(piece + term for piece, term in zip(pieces, terms + [""], strict=True))
        out.append([f"for i in range({reps}):"] + ["    " + line for line in body.splitlines()])
        i += reps * period
    return out


def _numbers(shapes: list[tuple[str, list[int]]], start: int, period: int, rep: int) -> list[int] | None:
    """The integers of repetition ``rep`` of the ``period`` groups at ``start``, if it has their shape."""
    at = start + rep * period
    if at + period > len(shapes) or any(shapes[at + k][0] != shapes[start + k][0] for k in range(period)):
        return None
    return [n for k in range(period) for n in shapes[at + k][1]]


def _progression(start: int, step: int) -> str:
    if step == 0:
        return str(start)
    term = "i" if step == 1 else ("-i" if step == -1 else f"{step} * i")
    if start == 0:
        return term
    return f"{start} - {term[1:]}" if term.startswith("-") else f"{start} + {term}"


_RAISED_AT = ["def raised_at(exc):",
              '    """Where the cache raised ``exc``: the innermost frame of its traceback outside this file and the',
              '    SlotAllocator (which refuses a double free: the cache\'s call into it is the place)."""',
              "    allocator = sys.modules['radixcheck.properties.cache.contract'].__file__",
              "    frames = traceback.extract_tb(exc.__traceback__)",
              "    frame = next((f for f in reversed(frames) if f.filename not in (allocator, __file__)), frames[-1])",
              "    return f'{frame.filename}:{frame.lineno} in {frame.name}'"]


def _plain_signature(source: str) -> list[str]:
    """A function's source with its first line as a plain ``def`` (no annotations to import)."""
    head, _, body = source.partition("\n")
    name = head[len("def "):head.index("(")]
    parameters = [p.split(":")[0].strip() + ("=" + p.split("=")[1].strip() if "=" in p else "")
                  for p in head[head.index("(") + 1:head.rindex(")")].split(",")]
    return [f"def {name}({', '.join(parameters)}):", *body.splitlines()]


_LIMITED = ["class Limited:",
            '    """The cache, every method call under the per-operation limit (as radixcheck calls it)."""',
            "",
            "    def __init__(self, cache):",
            "        self._cache, self.page_size = cache, cache.page_size",
            "",
            "    def __getattr__(self, name):",
            "        method = getattr(self._cache, name)",
            "        return lambda *args, **keywords: within_limit(lambda: method(*args, **keywords))"]


def _serving_script(failure: BaseException, run: ServingRun, spec: str, test: str) -> str:
    """A failure of the serving protocol (the DFS-bound tests): the requests served in order with
    radixcheck's protocol (its source, copied in), then the bound's check or the call that raised."""
    check = failure.check if isinstance(failure, ContractViolation) else None
    oracle, sentence = oracle_of(failure), message_of(failure)
    hang = caused_by_hang(failure)
    if hang:  # a call did not return: every call of the protocol runs under the per-operation limit
        served = ["try:", "    serve_all()", "except TimeoutError as exc:",
                  "    bug('a call of the serving protocol did not return within the limit (every call was legal)',",
                  "        got=f'{exc} (at {raised_at(exc)})')"]
    elif check is None:  # a legal call raised: the same exception is the finding, another is not
        served = ["try:", "    serve_all()", "except Exception as exc:  # noqa: BLE001 - every call the protocol makes is legal",
                  f"    if type(exc).__name__ != {type(failure).__name__!r}:  # another exception: not this finding",
                  "        raise",
                  f"    bug({sentence + ' (every call was legal)'!r},",
                  "        got=f'{type(exc).__name__}: {exc} (raised at {raised_at(exc)})')"]
    else:
        served = ["computed = serve_all()",
                  *(line for name, value in check.names.items() for line in _assignment(name, value)),
                  f"if not ({check.holds}):", f"    bug({sentence!r}, got={check.got})"]
    lines = [
        f'"""radixcheck finding ({oracle}): {sentence}',
        "",
        f"Target {spec}, page size {run.page_size}" + (f", in {test}" if test else "") + ".",
        f"{len(run.requests)} requests served in order by a scheduler that keeps at most BUDGET tokens cached between",
        "requests, each as a serving engine serves it (`serve`, radixcheck.properties.cache.serving, copied below).",
        "",
        "Exits 1 while the bug is there (printing radixcheck's finding and what the cache did), 0 once it is fixed,",
        "2 if it cannot run to its check. Needs numpy and radixcheck (its SlotAllocator is the caller's KV slot pool).",
        "Writes nothing where it runs. Written by `radixcheck audit --repro`.",
        '"""',
        "from __future__ import annotations",
        "",
        "import os",
        *(["import signal"] if hang else []),
        "import sys",
        *(["import time"] if hang else []),
        "import traceback",
        "",
        *needs(["import numpy as np", "from radixcheck import SlotAllocator"]),
        factory_import(spec),
        "",
        f"PAGE = {run.page_size}",
        f"BUDGET = {run.budget!r}  # cached tokens kept between requests (None: no limit)",
        *_assignment("REQUESTS", [list(r) for r in run.requests]),
        "",
        "",
        *_plain_signature(inspect.getsource(serving.serve).rstrip()),
        "",
        "",
        "def serve_all():",
        '    """Every request served in order: the tokens computed (not reused from the cache)."""',
        "    return sum(len(request) - serve(cache, allocator, request, BUDGET) for request in REQUESTS)",
        "",
        "",
        *_RAISED_AT,
        "",
        "",
        *(hang_limit_lines() + ["", "", *_LIMITED, "", ""] if hang else []),
        *bug_lines(oracle),
        "",
        "",
        *CANNOT_RUN_LINES,
        "",
        "",
        *runs_to_the_check(["allocator = SlotAllocator(1 << 16)",
                            "cache = Limited(make(allocator, PAGE))" if hang else "cache = make(allocator, PAGE)", *served]),
    ]
    return "\n".join(lines + [f"print({'no bug: the batch was served' + ('' if check is None else ' and ' + check.holds)!r})"]) + "\n"


def _plain_test_script(failure: BaseException, function: Callable[..., Any], parameters: dict[str, Any], capabilities: Any,
                       spec: str, test: str, seed: int | None = None, waivers: list[Any] | None = None) -> str:
    """A conformance test with no transcript writer (the construction tests, which make plain
    calls; a router pair's end-to-end machine; a tenant tree's machine) is its own repro: its
    source, run with its own module's names (private ones too) on the target as ``radixcheck
    audit`` loads it (under the run's ``--seed``: its machine's stream), with the parameters it failed
    with, under the profile it ran with. It exits 1
    only if the test fails as it did (the same exception; for an oracle, the same oracle);
    Hypothesis keeps its files in a temporary directory, not where the file runs. ``waivers``: those of
    the run that applied to the test, written into the file (a ``WaiverLog`` of them is the test's
    ``radix_waivers``, as the run's was): the test looks past what the run looked past, and the file
    reads no waiver file."""
    source = textwrap.dedent(inspect.getsource(function))
    source = source[source.index("def "):]  # without its decorators (pytest's parametrization)
    module = inspect.getmodule(function).__name__  # type: ignore[union-attr]
    module = module if module.startswith("radixcheck.") else f"radixcheck.{module}"  # as installed
    fixtures = {"radix_waivers": "radix_waivers" if waivers else "None", "radix_repro": "False"}  # the run's waivers, no transcript
    accepted = inspect.signature(function).parameters
    arguments = ", ".join(["target", *(f"{k}={literal(v)}" for k, v in parameters.items()),
                           *(f"{k}={v}" for k, v in fixtures.items() if k in accepted)])
    runs_a_machine = "machine" in source
    index = type(capabilities).__name__ == "IndexCapabilities"
    oracle, sentence = oracle_of(failure), message_of(failure)
    same = f"type(exc).__name__ == {type(failure).__name__!r}" + (
        f" and getattr(exc, 'oracle', None) == {oracle!r}" if isinstance(failure, ContractViolation) else "")
    return "\n".join([
        f'"""radixcheck finding ({oracle}): {sentence}',
        "",
        f"Target {spec}" + (f", in {test}" if test else "") + f": radixcheck's test `{function.__name__}` ({module}), as it is,",
        "on your factory.",
        *([f"It runs radixcheck's state machine (Hypothesis, profile {profiles.selected()!r}): plain calls are written for the",
           "cache and index machines' findings, not this one's; the test's output shows its program."] if runs_a_machine else []),
        "",
        "Exits 1 while the bug is there (the test fails as it did, with radixcheck's finding), 0 once it is fixed, 2 if",
        "it cannot run to its check. Needs radixcheck. Writes nothing where it runs. Written by `radixcheck audit --repro`.",
        '"""',
        "import atexit",
        *(["import dataclasses"] if seed is not None else []),
        "import os",
        "import shutil",
        "import sys",
        "import tempfile",
        "import traceback",
        "",
        "STORAGE = tempfile.mkdtemp(prefix='radixcheck-repro-')  # Hypothesis's files (.hypothesis/): not where this file runs",
        "atexit.register(shutil.rmtree, STORAGE, True)",
        "os.environ['HYPOTHESIS_STORAGE_DIRECTORY'] = STORAGE",
        f"os.environ['HYPOTHESIS_PROFILE'] = {profiles.selected()!r}  # radixcheck's profile, as the test ran",
        *preamble(spec),
        "",
        *needs([f"import {module} as _test_module", "from radixcheck.properties.target import load_target",
                *(["from radixcheck.properties.findings.waivers import Waiver, WaiverLog"] if waivers else [])]),
        "",
        "globals().update({k: v for k, v in vars(_test_module).items() if not k.startswith('__')})  # the names the test uses",
        "try:",
        f"    target = load_target({spec!r}{', index=True' if index else ''})",
        *([f"    target = dataclasses.replace(target, seed={seed!r})  # the audit's --seed {seed}: its stream"]
          if seed is not None else []),
        "except Exception as exc:  # noqa: BLE001 - not run, so neither 1 (the bug) nor 0 (fixed)",
        f"    print(f'radixcheck repro: cannot load the target {spec}: {{exc}} (run this file from where you ran radixcheck '",
        "          'audit)', file=sys.stderr)",
        "    sys.exit(2)",
        *(["", "# the run's waivers that applied to this test (radixcheck audit --waive): the test looks past what they waive",
            "radix_waivers = WaiverLog([", *(f"    {w!r}," for w in waivers), "])"] if waivers else []),
        "",
        "",
        source.rstrip(),
        "",
        "",
        *CANNOT_RUN_LINES,
        "",
        "",
        "try:",
        f"    {function.__name__}({arguments})",
        "except Exception as exc:  # noqa: BLE001 - the test failed: radixcheck's finding if it failed as it did",
        f"    if not ({same}):  # another failure: not this finding",
        "        cannot_run(exc)",
        f"    print({('BUG (radixcheck oracle ' + oracle + '): ')!r} + f'{{type(exc).__name__}}: {{exc}}')",
        "    sys.exit(1)",
        "print('no bug: the test passed')",
    ]) + "\n"


def file_name(oracle: str, message: str, spec: str = "", site: str = "") -> str:
    """The repro file of a finding: named by its oracle and its message's signature (the audit's
    grouping, ``signature_of``: the shape of the message, or nothing for an order oracle, whose
    findings on one target are one finding), so every test that meets the same finding writes the
    same file and the card cites it (a new user's LFU finding at two page sizes, two order messages
    of two shapes, wrote two files and its card cited one); the hash also
    covers the target ``spec`` and, for a crash, its ``site`` (:func:`finding_site`), so two
    findings (two caches' into one directory, two crashes of one message) never share a file."""
    shape = signature_of(oracle, message)
    words = f"{re.sub(r'^[0-9]+ ', '', oracle)} {shape}".lower().replace("…", " ")  # a bare number goes, a label such as 20w stays
    slug = "-".join(re.findall(r"[a-z0-9]+", words))[:72].strip("-")
    identity = "|".join([oracle, shape, *([spec, site] if spec or site else [])])
    return f"repro-{slug}-{hashlib.sha1(identity.encode()).hexdigest()[:8]}.py"


def finding_site(exc: BaseException) -> str:
    """Where a crash was raised, as its file name and function (no line number: an edit elsewhere
    in the file keeps its name); "" for an oracle's verdict."""
    at = raised_at(exc)
    if not at:
        return ""
    place, _, function = at.rpartition(" in ")
    return f"{os.path.basename(place.rsplit(':', 1)[0])} in {function}"
