"""The waivers of a repro file's run, as the file embeds them: it replays past what its run waived.

A run with waivers looks past a waived finding to the next bug (:func:`~radixcheck.properties.findings.verdict.waiving`),
and its reduction replays past it too (:func:`~radixcheck.properties.findings.reduce.replay`). A file
that makes the same calls would otherwise stop at the waived finding, before its own: exit 2, "not
reproduced" (after_verdict_trial.md friction 4), or, a crash written under a "refused, as it must be"
``suppress``, go on past it mislabelled. Every writer embeds the waivers its replay met, as data, and a
matcher written with Python alone (:func:`~radixcheck.properties.findings.said.said_in`'s source), by
:func:`waiver_lines`: a tier file (its world checks every event) makes its calls through ``PastWaived``;
a cache or index file (plain calls, one check at the end) writes each call that raised a waived finding
in the run under ``with past_waived(...)``. A waived finding is printed, as waived, and the file goes on,
as the run did: it exits 1 on its own bug, whether the waived one is still there or fixed, and 0 once its
own is fixed. Another exception there is not the waived finding: the file cannot run (exit 2). It reads
no waiver file: what it waives is written in it.

A ``known:`` line is judged as the run judged it: the file's world keeps the deviation's statistics
(``DEVIATIONS``, set on its model as the machine sets them), and an order finding is waived only if
that deviation explains it (``explained_by``). An ``as`` line is judged as the run judged it too: an
order finding carries its ``choice`` (the cache and tier models set it), and it is waived only if the
line's policy makes that choice (``followed``); a finding without one is matched by its finding alone, as
:meth:`~radixcheck.properties.findings.waivers.WaiverLog.at_scale` matches it.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable

from radixcheck.properties.findings.failures import message_of, oracle_of
from radixcheck.properties.findings.said import said_in
from radixcheck.properties.findings.waivers import Waiver

IMPORTS = ["import re", "from fnmatch import fnmatchcase"]  # what the lines of waiver_lines use, beside the file's own


def met_by(waivers: Iterable[Waiver], waived: Iterable[BaseException]) -> list[Waiver]:
    """Of ``waivers``, those that waive one of the findings ``waived`` (an ``as`` line by its finding alone,
    as the file judges it), in file order."""
    found = list(waived)
    return [w for w in waivers if any(w.waives(e) or (w.follows is not None and w.waives(e, rejudge=False)) for e in found)]


def deviations_of(waivers: Iterable[Waiver]) -> list[str]:
    """The known deviations (``known:`` names) ``waivers`` name, once each, in file order."""
    return list(dict.fromkeys(w.known for w in waivers if w.known is not None))


def header_lines(waivers: list[Waiver]) -> list[str]:
    """The file's docstring sentences on its run's waivers (none without them)."""
    if not waivers:
        return []
    return ["", f"Its run had waivers (radixcheck audit --waive) that these calls meet: {len(waivers)} line(s), in WAIVED below.",
            "The file goes on past the findings they waive, as the run did, whether those are still there or fixed."]


def past_waived_args(exc: BaseException, finding: BaseException) -> str:
    """The arguments of ``with past_waived(...)`` for a call that raised ``exc`` in the run, which the run
    judged as ``finding`` (the same exception, or an oracle's finding made from it: a legal call refused)."""
    if finding is exc:
        return ""
    return f"{oracle_of(finding)!r}, {message_of(finding)!r}"


def waiver_lines(waivers: list[Waiver]) -> list[str]:
    """``WAIVED`` (each line's finding, ``said:`` text, ``known:`` deviation, ``as`` policy and ``FILE:LINE: reason``),
    ``waived(exc)`` (the line that waives ``exc``, or ``None``), ``past_waived`` (a block that goes on past
    a waived finding, printed) and ``PastWaived`` (an object whose method calls do): module-level lines of
    a repro file, which imports :data:`IMPORTS`; with ``known:`` lines, ``DEVIATIONS`` too (their
    factories, for the file's world)."""
    table = [(w.finding, w.said, w.known, w.follows, f"{w.where}: {w.reason}") for w in waivers]
    known = deviations_of(waivers)
    return [
        "# the run's waivers this program meets (radixcheck audit --waive): it goes on past them, as the run did",
        "WAIVED = [  # (finding, said: words, known: deviation, as: policy, where: reason)",
        *(f"    {row!r}," for row in table),
        "]",
        *(["from radixcheck.properties.cache.deviations import resolve  # noqa: E402 - the known order bugs WAIVED names",
           "",
           "DEVIATIONS = [resolve(name) for name in " + repr(known) + "]  # kept beside the model's statistics, as the run kept them"]
          if known else []),
        "",
        "",
        *inspect.getsource(said_in).rstrip().splitlines(),
        "",
        "",
        "def followed(exc, policy):",
        '    """An `as <policy>` line: the choice an order finding carries (what it took, what it left) is one `policy` makes."""',
        "    choice = getattr(exc, 'choice', None)",
        "    if choice is None:  # no choice to judge: matched by its finding alone, as the run matched it",
        "        return True",
        "    from radixcheck.properties.cache.policies import NAMED  # a finding with a choice was raised by radixcheck's model",
        "",
        "    return choice.made_by(NAMED[policy]().key)",
        "",
        "",
        "def waived(exc, oracle=None, message=None):",
        '    """The waiver (FILE:LINE: reason) of `exc`, or None: its oracle or a class of it, and the words its message says;',
        "    `oracle` and `message`: the finding the run made of `exc` (a legal call it refused), if not `exc` itself.\"\"\"",
        "    names = [oracle or getattr(exc, 'oracle', None) or f'crash ({type(exc).__name__} raised during a legal call)']",
        "    names += [cls.__name__ for cls in type(exc).__mro__]",
        "    message = message or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)",
        "    return next((where for finding, said, known, follows, where in WAIVED",
        "                 if any(n == finding or fnmatchcase(n, finding) for n in names) and (said is None or said_in(said, message))",
        "                 and (known is None or known in getattr(exc, 'explained_by', ()))",
        "                 and (follows is None or followed(exc, follows))),",
        "                None)",
        "",
        "",
        "class past_waived:",
        '    """A block that goes on past a waived finding (printed), as the audit run did; any other exception is raised."""',
        "",
        "    def __init__(self, oracle=None, message=None):",
        "        self.oracle, self.message = oracle, message",
        "",
        "    def __enter__(self):",
        "        return self",
        "",
        "    def __exit__(self, kind, exc, traceback):",
        "        where = None if exc is None or not isinstance(exc, Exception) else waived(exc, self.oracle, self.message)",
        "        if where is not None:",
        "            said = self.message or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)",
        "            print(f'waived ({where}): {self.oracle or getattr(exc, \"oracle\", type(exc).__name__)}: {said}')",
        "        return where is not None",
        "",
        "",
        "class PastWaived:",
        '    """`target`, each method call going on past a waived finding (printed), as the audit run did."""',
        "",
        "    def __init__(self, target):",
        "        self._target = target",
        "",
        "    def __getattr__(self, name):",
        "        method = getattr(self._target, name)",
        "        if not callable(method):",
        "            return method",
        "",
        "        def call(*args, **keywords):",
        "            with past_waived():",
        "                return method(*args, **keywords)",
        "            return None",
        "        return call",
    ]
