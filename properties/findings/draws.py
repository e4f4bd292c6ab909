"""Hypothesis draws that depend on the test's seed only, not on what else the process has loaded.

Hypothesis's default provider, for some integer, float, string and bytes choices (one in twenty;
floats one in seven), draws a constant instead: from its own list, or from the *local constants*,
the literals (numbers of size 100 or more, strings, bytes) in the source of every module in
``sys.modules`` outside site-packages and the standard library, rescanned whenever ``sys.modules``
grows (``hypothesis/internal/conjecture/providers.py``: ``_get_local_constants``,
``HypothesisProvider._maybe_draw_constant``). Even derandomized, a stream's operations then depend
on every module loaded before it: the entry point (``python -m radixcheck.reports.tier_catalogue``
loads other literals than a script that replays one stream), each module an earlier stream
imported lazily (a repro imports the wire adapter), and whether radixcheck is installed editable
(its own files are local) or as a wheel (they are not). A stream of the tier catalogue failed in
its worker and passed alone, so a seed quoted in a report might not replay.

:func:`seed_only_draws` empties the local pool while a machine runs. Hypothesis's own list (powers
of two and ten and their neighbours, factorials, special floats and strings) stays, so the search
keeps those. This reaches into Hypothesis's internals: if a version moves them, :func:`pinnable`
says so (a gate test asserts it) and the draws are left as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis.internal.conjecture import providers

try:
    from hypothesis.internal.constants_ast import Constants
except ImportError:  # pragma: no cover - a Hypothesis without local constants has nothing to pin
    Constants = None  # type: ignore[assignment,misc]


def pinnable() -> bool:
    """This Hypothesis has the local-constant pool :func:`seed_only_draws` empties."""
    return Constants is not None and callable(getattr(providers, "_get_local_constants", None)) \
        and hasattr(getattr(providers, "CONSTANTS_CACHE", None), "cache")


@contextmanager
def seed_only_draws() -> Iterator[None]:
    """Within this block, no Hypothesis draw takes a constant from the loaded modules' source."""
    if not pinnable():
        yield
        return
    loaded = providers._get_local_constants
    empty = Constants()

    def no_local_constants() -> Any:
        return empty

    providers._get_local_constants = no_local_constants
    providers.CONSTANTS_CACHE.cache.clear()  # the constants each choice may take, computed with the old pool
    try:
        yield
    finally:
        providers._get_local_constants = loaded
        providers.CONSTANTS_CACHE.cache.clear()
