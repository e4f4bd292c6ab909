"""Where radixcheck keeps what it must keep between runs: never in the user's project.

``$RADIXCHECK_CACHE`` if set, else the user's cache directory as the platform defines it
(platformdirs: ``~/.cache/radixcheck`` on Linux or ``$XDG_CACHE_HOME/radixcheck``,
``~/Library/Caches/radixcheck`` on macOS, ``%LOCALAPPDATA%\\radixcheck\\Cache`` on Windows).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from platformdirs import user_cache_dir

CACHE_ENV = "RADIXCHECK_CACHE"
HYPOTHESIS_STORAGE_ENV = "HYPOTHESIS_STORAGE_DIRECTORY"  # Hypothesis's own setting for its .hypothesis/ directory


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or user_cache_dir("radixcheck", appauthor=False))


@contextmanager
def hypothesis_storage_in_cache() -> Iterator[Path]:
    """Point Hypothesis's storage (example database, constants cache) at radixcheck's cache for the
    duration (pytest-xdist workers inherit it), unless the user chose a place; restore it after."""
    chosen = os.environ.get(HYPOTHESIS_STORAGE_ENV)
    where = Path(chosen) if chosen else cache_dir() / "hypothesis"
    os.environ[HYPOTHESIS_STORAGE_ENV] = str(where)
    try:
        yield where
    finally:
        if chosen is None:
            os.environ.pop(HYPOTHESIS_STORAGE_ENV, None)
