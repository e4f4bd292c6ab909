"""Hypothesis draws that depend on the test's seed only, not on what else the process has loaded.

Hypothesis's default provider, for about one integer, float, string or bytes choice in twenty,
draws a *local constant* instead: a literal from the source of any module in ``sys.modules`` that
is neither in site-packages nor in the standard library, rescanned whenever ``sys.modules`` grows
(``hypothesis/internal/conjecture/providers.py``: ``_get_local_constants``, ``HypothesisProvider
._maybe_draw_constant``). Even derandomized, a stream's operations then depend on every module
loaded before it: the entry point (``python -m radixcheck.reports.tier_catalogue`` loads other
literals than a script that replays one stream), each module an earlier stream imported lazily
(a repro imports the wire adapter), and whether radixcheck is installed editable (its own files
are local) or as a wheel (they are not). A stream of the tier catalogue failed after others in
its worker and passed alone, so a seed quoted in a report might not replay.

:func:`seed_only_draws` empties that pool while a machine runs. Hypothesis's own constants (the
edge cases it always tries: 0, -1, 2**63, ...) stay, so the search keeps them. This reaches into
Hypothesis's internals: if a version moves them, :func:`pinnable` says so (a gate test asserts it)
and the draws are left as they are.
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
