"""Known findings: a waiver file, read like array-api-tests' xfails file.

One waiver a line::

    <target glob>  <test glob>  <finding>  # reason

- **target glob** matches the target's spec (``mymodule:make``) or its name in a several-target
  run (``newest``); ``*`` matches every target.
- **test glob** matches the test's id (``test_cache_state_machine[page_size=16]``) or its name
  without the parameters (``test_cache_state_machine``); ``*`` matches every test. Brackets in an
  id are matched literally when the glob is the whole id.
- **finding**, the rest of the line up to ``#``: an oracle's name (``4 LRU order``, as the audit
  prints it), or an exception's class name (``LRUOrderViolation``, ``RuntimeError``; any class it
  derives from counts), a glob either way (``4 *``).
- **reason**, after ``#``: required; it is printed beside every finding it waives.

Blank lines and lines that start with ``#`` are comments. A waived finding is reported as
waived, and inside a state machine the search goes on past it to the next bug in the same test
(:func:`radixcheck.properties.findings.verdict.run_machine`). Waive an oracle that judges a choice (LRU
order, eviction amount) to look past it; after a waived prefix-set or slot finding the model no
longer describes the cache, and what follows is likely its echo.

A waived finding ends the step it was raised in (the rest of that rule is not run). For the
production-scale machine, whose first step builds the whole world, a finding waived there leaves
a smaller world for the steps that follow.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from radixcheck.properties.findings.failures import leaves, message_of, oracle_of


class WaiverError(ValueError):
    """A waiver file that cannot be read: the message names the file and line."""


@dataclass(frozen=True)
class Waiver:
    target: str
    test: str
    finding: str
    reason: str
    where: str  # file:line, printed with the finding it waives

    def applies_to(self, target_names: tuple[str, ...], test_id: str) -> bool:
        test_name = test_id.partition("[")[0]
        return (any(_glob(name, self.target) for name in target_names)
                and (self.test == test_id or _glob(test_id, self.test) or _glob(test_name, self.test)))

    def waives(self, exc: BaseException) -> bool:
        names = [oracle_of(exc)] + [cls.__name__ for cls in type(exc).__mro__]
        return any(_glob(name, self.finding) for name in names)


def _glob(name: str, pattern: str) -> bool:
    return name == pattern or fnmatchcase(name, pattern)


def parse_waivers(text: str, source: str = "<waivers>") -> list[Waiver]:
    waivers = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}:{number}"
        rule, hash_, reason = line.partition("#")
        try:
            fields = shlex.split(rule)
        except ValueError as exc:
            raise WaiverError(f"{where}: {exc}") from exc
        if len(fields) < 3:
            raise WaiverError(f"{where}: expected '<target glob> <test glob> <oracle or exception>  # reason', got {line!r}")
        if not hash_ or not reason.strip():
            raise WaiverError(f"{where}: a waiver needs a reason after '#': {line!r}")
        waivers.append(Waiver(fields[0], fields[1], " ".join(fields[2:]), reason.strip(), where))
    return waivers


def read_waivers(path: str | Path) -> list[Waiver]:
    """The waivers in ``path``; :class:`WaiverError` names the file (and line) if it cannot be used."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WaiverError(f"waiver file {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from exc
    return parse_waivers(text, str(path))


@dataclass
class WaiverLog:
    """The waivers that apply to one test of one target, and what they waived: a predicate for
    :func:`~radixcheck.properties.findings.verdict.run_machine` (``waived(exc) -> bool``) that records
    each finding it waives."""

    applicable: list[Waiver]
    found: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def for_test(cls, waivers: list[Waiver], target_names: tuple[str, ...], test_id: str) -> WaiverLog:
        return cls([w for w in waivers if w.applies_to(target_names, test_id)])

    def __bool__(self) -> bool:  # no waiver applies: nothing to look past, the machine runs as it is
        return bool(self.applicable)

    def waiver_for(self, exc: BaseException) -> Waiver | None:
        """The waiver of ``exc``; a group is waived only if every exception in it is."""
        found = [next((w for w in self.applicable if w.waives(e)), None) for e in leaves(exc)]
        return found[0] if found and all(found) else None

    def __call__(self, exc: BaseException, step: str = "") -> bool:
        waiver = self.waiver_for(exc)
        if waiver is None:
            return False
        for e in leaves(exc):
            key = (oracle_of(e), type(e).__name__, waiver.where)
            entry = self.found.setdefault(key, {"oracle": key[0], "type": key[1], "message": message_of(e), "step": step,
                                                "waiver": f"{waiver.where}: {waiver.reason}", "times_met": 0})
            entry["times_met"] += 1
        return True

    def findings(self) -> list[dict[str, Any]]:
        return list(self.found.values())
