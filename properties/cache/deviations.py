"""The known order bugs a waiver can name (``4 eviction order  known: <name>``).

``KNOWN`` maps each name to its deviation (:mod:`radixcheck.oracles.deviation`); a user's own is
named ``module:function``, where ``function()`` returns a new
:class:`~radixcheck.oracles.deviation.Deviation`. :func:`resolve` turns a name into a factory, or
raises :class:`DeviationError` with a one-line reason (a waiver file's line is then refused).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from difflib import get_close_matches

from radixcheck.oracles.deviation import Deviation, SplitParentFreshCreationTime, SuffixRefreshedOnMidEdgeUse

KNOWN: dict[str, Callable[[], Deviation]] = {
    SuffixRefreshedOnMidEdgeUse.name: SuffixRefreshedOnMidEdgeUse,  # SGLang 0.5.23 #3 (reports/sglang_findings.md)
    SplitParentFreshCreationTime.name: SplitParentFreshCreationTime,  # SGLang 0.5.23 #9 (reports/findings/sglang_trees.md)
}
"""The known deviations by name."""


class DeviationError(ValueError):
    """A name that names no known deviation: the message says why, in one line."""


def resolve(name: str) -> Callable[[], Deviation]:
    """The factory of the deviation ``name``: one of :data:`KNOWN`, or ``module:function``."""
    if name in KNOWN:
        return KNOWN[name]
    if ":" not in name:
        close = get_close_matches(name, list(KNOWN), n=1)
        hint = f"did you mean {close[0]!r}?" if close else "the known: " + ", ".join(KNOWN) + "; or a module:function of your own"
        raise DeviationError(f"unknown deviation {name!r} ({hint})")
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's line to fix
        raise DeviationError(f"deviation {name!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise DeviationError(f"deviation {name!r}: {module_name} has no function {attr!r}")
    try:
        made = factory()
    except Exception as exc:  # noqa: BLE001 - a factory that cannot make one is refused when the file is read
        raise DeviationError(f"deviation {name!r}: calling it raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(made, Deviation):
        raise DeviationError(f"deviation {name!r}: it returned {type(made).__name__}, not a radixcheck.oracles.deviation.Deviation")
    return _named(factory, name)


def _named(factory: Callable[[], Deviation], name: str) -> Callable[[], Deviation]:
    """``factory``, its deviations named as the waiver names them (so its findings match the line)."""
    def make() -> Deviation:
        deviation = factory()
        deviation.name = name
        return deviation

    make.__name__ = name
    return make
