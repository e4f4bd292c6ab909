"""The waivers of a repro file's run, as the file embeds them: it replays past what its run waived.

A run with waivers looks past a waived finding to the next bug (:func:`~radixcheck.properties.findings.verdict.waiving`),
and its reduction replays past it too (:func:`~radixcheck.properties.findings.reduce.replay`). A file whose
harness checks every event as it happens (a tier finding's ``TierWorld``) would otherwise stop at the
waived finding, before its own: exit 2, "not reproduced" (after_verdict_trial.md friction 4). The file
embeds the waivers its replay met, as data, and a matcher written with Python alone
(:func:`~radixcheck.properties.findings.said.said_in`'s source), and makes its calls through
``PastWaived``: a call that raises a finding one of them waives prints it, as waived, and the file goes
on, as the run did. So it exits 1 on its own bug, whether the waived one is still there or fixed, and 0
once its own is fixed. It reads no waiver file: what it waives is written in it.

Only a line that names a finding by its oracle or class (and ``said:``) is embedded: an ``as`` or
``known:`` line waives an order finding by the order model's statistics, which a file does not keep;
a file that meets one stops there (exit 2), and is not offered.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable

from radixcheck.properties.findings.said import said_in
from radixcheck.properties.findings.waivers import Waiver


def embeddable(waivers: Iterable[Waiver]) -> list[Waiver]:
    """The lines a file can judge by itself: no ``as``, no ``known:``."""
    return [w for w in waivers if w.follows is None and w.known is None]


def met_by(waivers: Iterable[Waiver], waived: Iterable[BaseException]) -> list[Waiver]:
    """Of ``waivers`` (embeddable ones), those that waive one of the findings ``waived``, in file order."""
    found = list(waived)
    return [w for w in embeddable(waivers) if any(w.waives(e) for e in found)]


def waiver_lines(waivers: list[Waiver]) -> list[str]:
    """``WAIVED`` (each line's finding, ``said:`` text and ``FILE:LINE: reason``), ``waived(exc)`` (the
    line that waives ``exc``, or ``None``) and ``PastWaived`` (an object whose method calls go on past a
    waived finding): module-level lines of a repro file, which imports ``fnmatchcase`` and ``re``."""
    table = [(w.finding, w.said, f"{w.where}: {w.reason}") for w in waivers]
    return [
        "# the run's waivers this program meets (radixcheck audit --waive): it goes on past them, as the run did",
        "WAIVED = [",
        *(f"    {row!r}," for row in table),
        "]",
        "",
        "",
        *inspect.getsource(said_in).rstrip().splitlines(),
        "",
        "",
        "def waived(exc):",
        '    """The waiver (FILE:LINE: reason) of `exc`, or None: its oracle or a class of it, and the words its message says."""',
        "    names = [getattr(exc, 'oracle', None) or f'crash ({type(exc).__name__} raised during a legal call)']",
        "    names += [cls.__name__ for cls in type(exc).__mro__]",
        "    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__",
        "    return next((where for finding, said, where in WAIVED",
        "                 if any(n == finding or fnmatchcase(n, finding) for n in names) and (said is None or said_in(said, message))),",
        "                None)",
        "",
        "",
        "class PastWaived:",
        '    """`target`, each method call going on past a waived finding (printed), as the audit\'s run did."""',
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
        "            try:",
        "                return method(*args, **keywords)",
        "            except Exception as exc:  # noqa: BLE001 - a waived finding is looked past; any other is raised",
        "                where = waived(exc)",
        "                if where is None:",
        "                    raise",
        "                print(f'waived ({where}): {getattr(exc, \"oracle\", type(exc).__name__)}: {str(exc).splitlines()[0]}')",
        "                return None",
        "        return call",
    ]
