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

from hypothesis import configuration as hypothesis_configuration
from platformdirs import user_cache_dir

CACHE_ENV = "RADIXCHECK_CACHE"
HYPOTHESIS_STORAGE_ENV = "HYPOTHESIS_STORAGE_DIRECTORY"  # Hypothesis's own setting for its .hypothesis/ directory


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or user_cache_dir("radixcheck", appauthor=False))


_SET_HERE: list[str] = []  # the storage paths radixcheck set and has not restored yet (nested audits: a stack)


def storage_set_here() -> str | None:
    """The ``HYPOTHESIS_STORAGE_DIRECTORY`` radixcheck set for the run going on (a header then says it
    as radixcheck's, not among the user's variables), or ``None``: unset, or the user's own."""
    now = os.environ.get(HYPOTHESIS_STORAGE_ENV)
    return now if _SET_HERE and now == _SET_HERE[-1] else None


@contextmanager
def hypothesis_storage_in_cache() -> Iterator[Path]:
    """Point Hypothesis's storage (example database, constants cache) at radixcheck's cache for the
    duration (pytest-xdist workers inherit it), unless the user chose a place; restore it after.

    Hypothesis reads the variable once, at its first storage access, and keeps the directory
    (``hypothesis.configuration``): the kept directory is set too, and put back after, so storage
    read before the run does not send the run into the project's ``.hypothesis/``, and a process
    that goes on after the run (an in-process ``pytest.main``) does not keep writing into ours."""
    chosen = os.environ.get(HYPOTHESIS_STORAGE_ENV)
    where = Path(chosen) if chosen else cache_dir() / "hypothesis"
    kept = getattr(hypothesis_configuration, KEPT_HOME, None)
    os.environ[HYPOTHESIS_STORAGE_ENV] = str(where)
    hypothesis_configuration.set_hypothesis_home_dir(where)
    if chosen is None:
        _SET_HERE.append(str(where))
    try:
        yield where
    finally:
        if chosen is None:
            _SET_HERE.pop()
            os.environ.pop(HYPOTHESIS_STORAGE_ENV, None)
        hypothesis_configuration.set_hypothesis_home_dir(kept)


KEPT_HOME = "__hypothesis_home_directory"  # where hypothesis.configuration keeps the storage directory it read
