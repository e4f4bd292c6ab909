"""What a state machine sent, act by act: the record a standalone repro file is written from.

An *act* is one call of one of the machine's caller helpers (``_insert_request``, ``_match``,
``_lock``, ``_evict`` ...): one thing a serving engine does (cache a request, match a prompt,
take a lock, evict), with every contract call it sent and what each returned. Only top-level
helper calls are acts (a helper called by another belongs to the outer act), so a list of acts
can be replayed on a fresh machine, with any of them left out (:mod:`radixcheck.properties.findings.reduce`),
and each act re-makes its own decisions from the model (a replayed unlock that would no longer
be paired is not sent). :mod:`radixcheck.properties.findings.repro` writes the calls out as plain Python.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(eq=False)
class Act:
    """One top-level helper call of a machine: its name and arguments, the step (rule) and
    production-world story it was part of, and the contract calls it sent, in order."""

    name: str
    args: tuple
    step: str | None = None
    story: str | None = None
    step_number: int = 0  # which step of the run (1, 2, ...): the acts of one step share it
    calls: list = field(default_factory=list)  # SentCall records (radixcheck.properties.cache.machine)
    result: Any = None
    raised: BaseException | None = None  # what the act raised: the finding the run made of a call's exception (a refusal's)

    def __repr__(self) -> str:
        return f"Act({self.name}, {len(self.calls)} calls, step={self.step})"


def act(method: Callable[..., Any]) -> Callable[..., Any]:
    """Record each top-level call of a machine helper as an :class:`Act` in ``self.transcript``
    (a nested call is part of the act that made it), when the machine ``records`` (a transcript
    keeps every call of a run alive: only a run that may need a repro file pays for it)."""

    @functools.wraps(method)
    def recorded(self: Any, *args: Any, **nested: Any) -> Any:
        if self.acting is not None or not self.records:  # inside another act (only nested calls pass keywords)
            return method(self, *args, **nested)
        assert not nested, f"{method.__name__}: an act is replayed from its positional arguments"
        entry = Act(method.__name__, tuple(kept(a) for a in args), self.step, self.story, step_number=self.step_number)
        self.transcript.append(entry)
        self.acting = entry
        try:
            entry.result = method(self, *args)
            return entry.result
        except BaseException as exc:
            entry.raised = exc
            raise
        finally:
            self.acting = None

    return recorded


def kept(arg: Any) -> Any:
    """An argument as it was when the act began: the caller overwrites the buffers it lends."""
    if isinstance(arg, np.ndarray):
        return arg.copy()
    return list(arg) if isinstance(arg, list) else arg
