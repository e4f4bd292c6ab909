"""Running a state machine so that a broken cache gets its verdict in seconds.

Hypothesis normally shrinks a failure for as long as shrinking makes progress: minutes on a
slow target, and every replay of a hanging call costs the whole per-operation limit. Here a
run has three phases, all through Hypothesis's public settings:

1. **find**: the profile's search without shrinking, stopping at the first failure;
2. **shrink** that failure, for at most ``RADIXCHECK_SHRINK_SECONDS``: it is handed over as a
   *secondary* database entry (Hypothesis would take a primary one for already shrunk) and a
   guarded call into the target, or a step of the machine, after the budget raises
   :class:`~radixcheck.properties.target.BudgetSpent`, which ends the shrink; Hypothesis has by
   then saved the smallest failing program it found. (The step's check is what bounds a machine
   whose world calls its cache directly, the tier machine's: its shrink had run 19 s against 15.)
3. **replay** the smallest saved program, which is the failure reported.

With ``waived`` (a predicate on exceptions, e.g. a
:class:`~radixcheck.properties.findings.waivers.WaiverLog`), every phase runs a subclass of the machine whose
steps and invariants swallow the waived findings (:func:`waiving`): the search goes on past a
known bug to the next one in the same test.

The failure raised carries the machine instance that failed (``exc.radixcheck_machine``), with
its transcript of every act and call, each named by the step that sent it (:func:`naming_steps`):
what :mod:`radixcheck.properties.findings.repro` writes a standalone repro file from.

A hang is reported at once, unshrunk: shrinking it would cost the time limit per replay. So is a state
machine's failure after which the target answers nothing (a panic, a crash right after a refusal, no answer:
:func:`~radixcheck.properties.target.ends_a_replay`): its repro file's reduction makes it small in a fraction of
the time Hypothesis's shrink spent (:data:`NOT_SHRUNK_ANSWERS_ENDED`). A hang
that a shrink candidate meets (the failure shrunk is not one) costs a tenth of the limit and drops
that candidate (:func:`~radixcheck.properties.target.shrinking_limits`): the shrinker, which takes
any smaller failure, would otherwise report the hang instead of the failure found, at 5 s a try.
If the replay does not fail (a flaky target), the failure from the find phase is reported.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import unittest
from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import Phase, given, note, reject, settings, stateful
from hypothesis.control import currently_in_test_context
from hypothesis.database import ExampleDatabase, MultiplexedDatabase
from hypothesis.errors import Flaky, FlakyFailure
from hypothesis.stateful import RuleBasedStateMachine, multiple, run_state_machine_as_test
from hypothesis.strategies import SearchStrategy

from radixcheck.profiles import current
from radixcheck.properties.findings.draws import seed_only_draws
from radixcheck.properties.findings.failures import SHRINK_CUT_SHORT
from radixcheck.properties.layer_tally import TALLY
from radixcheck.properties.target import (
    BudgetSpent,
    alarm_handler,
    caused_by_hang,
    check_budget,
    ends_a_replay,
    forget_hangs,
    new_example,
    rejects_a_candidate,
    shrinking_limits,
    time_budget,
)

SHRINK_ENV = "RADIXCHECK_SHRINK_SECONDS"
DEFAULT_SHRINK_SECONDS = 15.0
# A panic, a crash right after a refusal, a transport error: Hypothesis's shrink spent its whole budget on such a
# failure (~15 s of CPU per page size on PanicsOnUnmatchedUnlock, ~700 programs tried) where the repro file's
# reduction, which drops the acts the failure does not need, cuts the same program to its 3 acts in 0.02 s.
NOT_SHRUNK_ANSWERS_ENDED = ("radixcheck: not shrunk (the target answers nothing after this failure: the program is "
                            "reduced instead, in its repro file, --repro DIR)")


def shrink_seconds(machine: type | None = None) -> float:
    """The shrink budget: ``RADIXCHECK_SHRINK_SECONDS`` if set, else the machine's own
    ``default_shrink_seconds`` if it has one, else 15 s."""
    default = getattr(machine, "default_shrink_seconds", DEFAULT_SHRINK_SECONDS)
    problem = shrink_setting_problem()
    if problem:
        raise ValueError(problem)
    return float(os.environ.get(SHRINK_ENV, default))


def shrink_setting_problem() -> str | None:
    """What is wrong with ``RADIXCHECK_SHRINK_SECONDS`` (None if it is unset or a number): a tool that
    counts failures checks it first, or every run would fail on it and be counted as a finding."""
    raw = os.environ.get(SHRINK_ENV)
    try:
        float(raw) if raw is not None else None
    except ValueError:
        return f"{SHRINK_ENV}={raw!r}: not a number of seconds"
    return None


class _Examples(ExampleDatabase):
    """An in-memory example database for one run (Hypothesis's public database interface)."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[bytes, set[bytes]] = {}

    def save(self, key: bytes, value: bytes) -> None:
        self.entries.setdefault(key, set()).add(value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        yield from list(self.entries.get(key, ()))

    def delete(self, key: bytes, value: bytes) -> None:
        self.entries.get(key, set()).discard(value)

    def demote_failures(self) -> None:
        """Move every saved failure to its key's secondary corpus, so it is shrunk when reused."""
        for key in [k for k in self.entries if not k.endswith((b".secondary", b".pareto"))]:
            for value in list(self.entries[key]):
                self.move(key, key + b".secondary", value)


def run_machine(machine: type[RuleBasedStateMachine], search: settings | None = None,
                waived: Callable[..., bool] | None = None, transcript: bool = False) -> None:
    """Run ``machine`` as a test under ``search`` (default: radixcheck's profile,
    :func:`radixcheck.profiles.current`, not the loaded Hypothesis profile), with a fast,
    bounded-shrink verdict. Raises the (shrunk) failure; returns when the target passes.

    Unlike ``hypothesis.stateful.run_state_machine_as_test``, which shrinks a failure for as long
    as shrinking makes progress (a minute or more on a slow target), this finds, then shrinks for
    at most ``RADIXCHECK_SHRINK_SECONDS``, then replays the smallest program (module docstring).
    A machine whose examples are costly (the production-scale one) cuts the search down itself
    (its ``settings_for``).

    ``waived(exc, step)``, if given, names the findings to look past: a step or invariant that
    raises one is recorded by the predicate and counts as passed (:func:`waiving`).
    ``transcript``: the machine keeps every act and call of its runs, so that the failing one can
    be written as a repro file (:mod:`radixcheck.properties.findings.repro`); it costs memory, and time in
    the garbage collector (~20 % at production scale), so it is off unless asked for."""
    search = search or current()
    forget_hangs()
    scaled = getattr(machine, "settings_for", None)
    if waived is not None:
        machine = waiving(machine, waived)
    machine = naming_steps(machine)
    machine.recording, machine.records = True, transcript
    with alarm_handler(), seed_only_draws():  # a stream's draws depend on its seed only
        try:
            _run_machine(machine, scaled(search) if scaled else search)
        except Exception as exc:
            exc.radixcheck_machine = machine.failing or machine.latest  # the instance that raised it, with its transcript
            raise
        finally:  # Hypothesis keeps the class (its rules, by class): it must not keep a world alive too
            machine.recording, machine.latest, machine.failing, machine.raised = False, None, None, None


def _run_machine(machine: type[RuleBasedStateMachine], search: settings) -> None:
    first_machine = None

    def found() -> None:  # the instance that failed first: reported if the shrunk program is not
        nonlocal first_machine  # (the latest made may be Hypothesis's replay of it, which passed: a FlakyFailure)
        first_machine = machine.failing = machine.raised or machine.latest

    def raising(shrunk: bool) -> None:
        machine.failing = machine.latest if shrunk else first_machine

    _find_shrink_replay(lambda phase: run_state_machine_as_test(machine, settings=phase), search, shrink_seconds(machine),
                        found, raising, reduced_instead=True)


def run_property(test: Callable[..., None], search: settings | None = None, **strategies: SearchStrategy) -> None:
    """Run ``test`` as a Hypothesis property over ``strategies`` (keyword arguments), with the verdict of
    :func:`run_machine`: find without shrinking, shrink for at most ``RADIXCHECK_SHRINK_SECONDS``, replay the smallest
    failure. For property tests that call the target (the DFS serving runs), whose shrinking Hypothesis would
    otherwise let run for minutes on a broken cache. Hypothesis keys saved examples by the function, so every phase
    runs the same ``example`` wrapper of ``test``."""
    search = search or current()
    forget_hangs()

    @functools.wraps(test)
    def example(*args: Any, **kwargs: Any) -> None:
        new_example()  # a hang is known by its call's position in the example (its replay stops there)
        try:
            test(*args, **kwargs)
        except Exception as exc:
            if rejects_a_candidate(exc):  # a hang met while shrinking: not the failure shrunk (shrinking_limits)
                reject()
            raise

    with alarm_handler(), seed_only_draws():
        _find_shrink_replay(lambda phase: settings(phase)(given(**strategies)(example))(), search, shrink_seconds())


class UnreplayableTarget(Exception):
    """The same calls behaved differently when Hypothesis ran them again (its ``Flaky``): the target
    keeps state outside the cache the suite built, which the next cache meets (a global of the
    module, or a wire server's state shared by the caches it serves)."""


def _replayable(exc: Exception) -> Exception:
    """``exc``, or, for Hypothesis's own report that a replay drew differently (which names no call
    of the target's and asks about the *test's* data generation), what that means for a target."""
    if not isinstance(exc, Flaky) or isinstance(exc, FlakyFailure):  # a FlakyFailure holds the target's own failures
        return exc
    said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    plain = UnreplayableTarget(
        "the same calls behaved differently when run again on a fresh cache: the target keeps state outside the "
        "cache it was asked for (a global, or a wire server's state shared by every cache it serves: frees, handles "
        f"or answers that reach the next cache) [Hypothesis: {type(exc).__name__}: {said}]")
    plain.__notes__ = list(getattr(exc, "__notes__", []))
    return plain


def _find_shrink_replay(run: Callable[[settings], None], search: settings, budget: float,
                        found: Callable[[], None] = lambda: None, raising: Callable[[bool], None] = lambda shrunk: None,
                        reduced_instead: bool = False) -> None:
    """The three phases (module docstring) over ``run``, one Hypothesis run under the settings it is given. ``found()``
    is called when the find phase failed; ``raising(shrunk)`` just before the failure is raised: the shrunk one
    (True), or the first (False). ``reduced_instead``: a failure after which the target answers nothing is not
    shrunk (:data:`NOT_SHRUNK_ANSWERS_ENDED`), its repro file's reduction makes it small (a state machine's)."""
    if Phase.shrink not in search.phases:
        try:
            run(search)
        except Exception as exc:  # noqa: BLE001 - Hypothesis's Flaky said as what it means for a target
            if (plain := _replayable(exc)) is not exc:
                raise plain from None
            raise
        return
    examples = _Examples()
    saved = examples if search.database is None else MultiplexedDatabase(examples, search.database)
    find = settings(search, database=saved, report_multiple_bugs=False,
                    phases=[p for p in search.phases if p not in (Phase.shrink, Phase.explain)])
    try:
        run(find)
        return
    except Exception as exc:  # noqa: BLE001 - any failure is the verdict; what follows only shrinks it
        first = _replayable(exc)
    found()
    if caused_by_hang(first):
        first.add_note("radixcheck: not shrunk (a hang: every replay would cost the time limit)")
        raise first
    if budget <= 0:
        first.add_note(f"radixcheck: not shrunk (a shrink budget of 0 s, {SHRINK_ENV} or the machine's default)")
        raise first
    if reduced_instead and ends_a_replay(first):
        first.add_note(NOT_SHRUNK_ANSWERS_ENDED)
        raise first
    examples.demote_failures()
    own = settings(find, database=examples)
    cut_short = False
    try:
        with time_budget(budget) as watch, shrinking_limits():  # the shrink's CPU seconds and wall clock (its note says them)
            run(settings(own, phases=[Phase.reuse, Phase.shrink]))
    except BudgetSpent:  # the best program so far is replayed below; the report says it may not be minimal
        cut_short = True
    except Exception:  # noqa: BLE001 - the smallest failure is replayed below, cleanly
        pass
    spent, wall = watch.cpu(), watch.wall()
    try:
        run(settings(own, phases=[Phase.reuse]))
    except unittest.SkipTest:  # nothing to replay: a forced seed (--hypothesis-seed) uses no example database
        first.add_note("radixcheck: not shrunk (with a forced seed Hypothesis keeps no examples to shrink from)")
        raising(False)
        raise first from None
    except Exception as shrunk:  # noqa: BLE001
        if isinstance(_replayable(shrunk), UnreplayableTarget) and not isinstance(first, UnreplayableTarget):
            first.add_note("radixcheck: not shrunk (its replay behaved differently: the target keeps state outside "
                           "the cache it was asked for?); this is the first failure")
            raising(False)
            raise first from None
        shrunk = _replayable(shrunk)
        shrunk.add_note(f"radixcheck: shrunk for {spent:.1f} s of CPU time, {wall:.1f} s of wall clock "
                       f"(budget {budget:g} s of CPU, {SHRINK_ENV})")
        if cut_short:
            shrunk.add_note(f"{SHRINK_CUT_SHORT} ({budget:g} s of CPU) before it had tried every smaller program: the "
                            f"failing program shown still fails as shown, but may be longer than it needs; --shrink-seconds "
                            f"(or {SHRINK_ENV}) gives the shrink longer")
        raising(True)
        raise shrunk from None
    first.add_note("radixcheck: the shrunk program did not fail again (a flaky target?); this is the first failure")
    raising(False)
    raise first


# Hypothesis's stateful module keeps each rule, initialize rule and invariant as a record on the
# decorated function (its ``function`` is what a step calls); ``waiving`` copies those records
# with the function wrapped. A meta-test (meta_tests/test_waivers.py) fails if that ever changes.
_MARKERS = ("RULE_MARKER", "INITIALIZE_RULE_MARKER", "INVARIANT_MARKER")


def _wrapping_steps(machine: type[RuleBasedStateMachine], wrap: Callable[[Callable[..., Any], bool], Callable[..., Any]],
                    namespace: dict[str, Any] | None = None) -> type[RuleBasedStateMachine]:
    """A subclass of ``machine`` (same name, so the same printed programs and database keys)
    whose every rule and invariant function is ``wrap(function, has_targets)``."""
    namespace = dict(namespace or {})
    for name, member in inspect.getmembers(machine):
        for marker in (getattr(stateful, m) for m in _MARKERS):
            record = getattr(member, marker, None)
            if record is not None:
                wrapped = wrap(record.function, bool(getattr(record, "targets", ())))
                stand_in = functools.wraps(member)(lambda self, *args, _wrapped=wrapped, **kwargs: _wrapped(self, *args, **kwargs))
                setattr(stand_in, marker, dataclasses.replace(record, function=wrapped))
                namespace[name] = stand_in  # Hypothesis calls the record's function; a direct call (a replay) the same
    return type(machine.__name__, (machine,), namespace)


def waiving(machine: type[RuleBasedStateMachine], waived: Callable[..., bool]) -> type[RuleBasedStateMachine]:
    """A subclass of ``machine`` whose every rule and invariant, when it raises an exception
    ``waived(exc, step)`` accepts, returns as if it had passed: the finding is recorded by
    ``waived``, the step adds nothing to its bundles, and the run goes on. The rest of that step
    is not run; the machine's model is updated call by call, before each check, so the state
    stays one the machine understands. A predicate that names known deviations (a
    :class:`~radixcheck.properties.findings.waivers.WaiverLog` with ``known:`` waivers) has the
    machine keep their statistics too (``known_deviations``), so that it can tell them apart."""
    known = getattr(waived, "deviations", None)
    namespace: dict[str, Any] = {"known_deviations": tuple(known())} if known is not None and known() else {}
    # its teardown too: the production world's flush (a reset) meets what its steps met
    namespace["teardown"] = _swallowing(machine.teardown, waived, False)
    return _wrapping_steps(machine, lambda function, has_targets: _swallowing(function, waived, has_targets), namespace)


def naming_steps(machine: type[RuleBasedStateMachine]) -> type[RuleBasedStateMachine]:
    """A subclass of ``machine`` whose instances know the step (rule or invariant) they are in
    (``self.step``, so each act of the transcript is named by its step), and whose class keeps
    the latest instance made while ``recording`` (``latest``: after a failed run, the one that
    failed; :func:`run_machine` records only while it runs, so a later replay keeps nothing here)."""
    def __init__(self: Any) -> None:
        new_example()  # a hang is known by its call's position in the example (its replay stops there)
        super(made, self).__init__()
        if made.recording:
            made.latest = self
            if currently_in_test_context():  # reported just before Hypothesis's `state = <class>()` line
                note(machine_note(made.__name__, getattr(made, "repro_replays_calls", True)))

    made = _wrapping_steps(machine, lambda function, has_targets: _named(function),
                           {"__init__": __init__, "latest": None, "failing": None, "raised": None, "recording": False})
    return made


def machine_note(name: str, plain_calls: bool = True) -> str:
    """The line a failing program starts with: the ``state = <name>()`` Hypothesis prints under it
    names radixcheck's machine class (named after the target, to key its examples and its stream),
    which reads like a factory of the user's module; the repro file is the program to use.
    ``plain_calls=False``: a machine whose repro file reruns radixcheck's test (a tenant tree's, a
    router pair's), not plain calls."""
    what = "is this program as plain calls on your factory" if plain_calls else "reruns radixcheck's test on your factory"
    return (f"# `{name}` is radixcheck's state machine, not a name in your code; the repro file "
            f"(radixcheck audit --repro DIR) {what}")


def _named(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def step(self: RuleBasedStateMachine, *args: Any, **arguments: Any) -> Any:
        outer, self.step = getattr(self, "step", None), function.__name__
        if outer is None:  # a step of the run (not an invariant a step called itself)
            self.step_number = getattr(self, "step_number", 0) + 1
            check_budget(f"step {function.__name__}")  # the shrink budget, for a machine whose calls are not guarded
            TALLY.begin_step()  # the layers this step drives (radixcheck.properties.layer_tally)
        try:
            return function(self, *args, **arguments)
        except Exception as exc:
            if outer is None and rejects_a_candidate(exc):  # a hang met while shrinking: not the failure shrunk
                reject()
            if type(self).recording:
                type(self).raised = self  # the latest instance that failed (naming_steps)
            raise
        finally:  # an invariant the step called itself (production_world) hands the step back
            self.step = outer
            if outer is None:
                TALLY.end_step()
    return step


def _swallowing(function: Callable[..., Any], waived: Callable[..., bool], has_targets: bool) -> Callable[..., Any]:
    @functools.wraps(function)
    def step(self: RuleBasedStateMachine, **arguments: Any) -> Any:
        try:
            return function(self, **arguments)
        except Exception as exc:
            if not waived(exc, function.__name__):
                raise
            return multiple() if has_targets else None
    return step
