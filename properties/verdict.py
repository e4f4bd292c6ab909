"""Running a state machine so that a broken cache gets its verdict in seconds.

Hypothesis normally shrinks a failure for as long as shrinking makes progress: minutes on a
slow target, and every replay of a hanging call costs the whole per-operation limit. Here a
run has three phases, all through Hypothesis's public settings:

1. **find**: the profile's search without shrinking, stopping at the first failure;
2. **shrink** that failure, for at most ``RADIXCHECK_SHRINK_SECONDS``: it is handed over as a
   *secondary* database entry (Hypothesis would take a primary one for already shrunk) and a
   call into the target after the budget raises
   :class:`~radixcheck.properties.target.BudgetSpent`, which ends the shrink; Hypothesis has by
   then saved the smallest failing program it found;
3. **replay** the smallest saved program, which is the failure reported.

A hang is reported at once, unshrunk: shrinking it would cost the time limit per replay. If the
replay does not fail (a flaky target), the failure from the find phase is reported.
"""

from __future__ import annotations

import os
import time
import unittest
from collections.abc import Iterable

from hypothesis import Phase, settings
from hypothesis.database import ExampleDatabase, MultiplexedDatabase
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from radixcheck.profiles import current
from radixcheck.properties.target import BudgetSpent, alarm_handler, caused_by_hang, time_budget

SHRINK_ENV = "RADIXCHECK_SHRINK_SECONDS"
DEFAULT_SHRINK_SECONDS = 15.0


def shrink_seconds() -> float:
    return float(os.environ.get(SHRINK_ENV, DEFAULT_SHRINK_SECONDS))


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


def run_machine(machine: type[RuleBasedStateMachine], search: settings | None = None) -> None:
    """Run ``machine`` as a test under ``search`` (default: radixcheck's profile,
    :func:`radixcheck.profiles.current`, not the loaded Hypothesis profile), with a fast,
    bounded-shrink verdict. Raises the (shrunk) failure; returns when the target passes.

    Unlike ``hypothesis.stateful.run_state_machine_as_test``, which shrinks a failure for as long
    as shrinking makes progress (a minute or more on a slow target), this finds, then shrinks for
    at most ``RADIXCHECK_SHRINK_SECONDS``, then replays the smallest program (module docstring).
    A machine whose examples are costly (the production-scale one) cuts the search down itself
    (its ``settings_for``)."""
    search = search or current()
    scaled = getattr(machine, "settings_for", None)
    with alarm_handler():
        _run_machine(machine, scaled(search) if scaled else search)


def _run_machine(machine: type[RuleBasedStateMachine], search: settings) -> None:
    if Phase.shrink not in search.phases:
        run_state_machine_as_test(machine, settings=search)
        return
    examples = _Examples()
    saved = examples if search.database is None else MultiplexedDatabase(examples, search.database)
    find = settings(search, database=saved, report_multiple_bugs=False,
                    phases=[p for p in search.phases if p not in (Phase.shrink, Phase.explain)])
    try:
        run_state_machine_as_test(machine, settings=find)
        return
    except Exception as exc:  # noqa: BLE001 - any failure is the verdict; what follows only shrinks it
        first = exc
    if caused_by_hang(first):
        first.add_note("radixcheck: not shrunk (a hang: every replay would cost the time limit)")
        raise first
    examples.demote_failures()
    own = settings(find, database=examples)
    started = time.monotonic()
    try:
        with time_budget(shrink_seconds()):
            run_state_machine_as_test(machine, settings=settings(own, phases=[Phase.reuse, Phase.shrink]))
    except (BudgetSpent, Exception):  # noqa: BLE001 - the smallest failure is replayed below, cleanly
        pass
    spent = time.monotonic() - started
    try:
        run_state_machine_as_test(machine, settings=settings(own, phases=[Phase.reuse]))
    except unittest.SkipTest:  # nothing to replay: a forced seed (--hypothesis-seed) uses no example database
        first.add_note("radixcheck: not shrunk (with a forced seed Hypothesis keeps no examples to shrink from)")
        raise first from None
    except Exception as shrunk:  # noqa: BLE001
        shrunk.add_note(f"radixcheck: shrunk for {spent:.1f} s (budget {shrink_seconds():g} s, {SHRINK_ENV})")
        raise shrunk from None
    first.add_note("radixcheck: the shrunk program did not fail again (a flaky target?); this is the first failure")
    raise first
