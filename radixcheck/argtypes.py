"""Command-line arguments checked at parse time, for every radixcheck entry point.

Each function here is an argparse ``type=``: it returns the parsed value or raises
``argparse.ArgumentTypeError`` saying what is wrong, and :class:`ArgumentParser` turns that into
one line naming the argument (``prog: error: argument --streams: must be an integer >= 1, not
'0'``) and exit 2, before any work starts. :func:`refuse_weaker` is the other half of "nothing
lost": a run that would replace a committed report with a weaker one stops the same way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (the argument and the problem) and exit 2;
    ``--help`` still shows the full usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def int_at_least(low: int) -> Callable[[str], int]:
    """An integer >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {text!r}")
        return value

    parse.__name__ = f"integer >= {low}"  # what argparse would name the type
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def positive_seconds(text: str) -> str:
    """A number of seconds > 0, kept as text (it is passed on through the environment)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds > 0")
    return text


def workers(text: str) -> str:
    """pytest-xdist's ``-n``: a number of workers (0: in process) or ``auto``."""
    if text == "auto" or (text.isdigit() and int(text) >= 0):
        return text
    raise argparse.ArgumentTypeError(f"takes a number of workers or 'auto', not {text!r}")


def page_sizes(text: str) -> str:
    """Comma-separated page sizes, each an integer >= 1 (kept as text; the target says which it declares)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(f"must be comma-separated integers >= 1 (e.g. 1,16), not {text!r}")
    return text


def repro_dir(text: str) -> Path:
    """A directory to write files into: it may not exist yet, but then the nearest directory
    above it that exists must be writable (nothing is created before the run needs it)."""
    problem = writable_dir_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def writable_dir_problem(text: str) -> str | None:
    """Why ``text`` cannot be a directory to write into, or ``None``."""
    if not text.strip():
        return "is empty: name a directory"
    path = Path(text).absolute()
    existing = next(p for p in [path, *path.parents] if p.exists())
    if not existing.is_dir():
        return f"{text!r} is not a directory: {existing} is a file"
    try:  # a real probe, not os.access: root passes os.access on /proc and /sys, where mkdir then fails
        tempfile.TemporaryDirectory(dir=existing).cleanup()
    except OSError as e:
        return f"{text!r} cannot be written: {existing} is not writable ({e.strerror or e})"
    return None


def python_with(module: str) -> Callable[[str], str]:
    """The path of a Python interpreter that can import ``module`` (checked once, without importing it)."""

    def parse(text: str) -> str:
        found = shutil.which(text) if os.sep not in text else (text if os.access(text, os.X_OK) and Path(text).is_file() else None)
        if found is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not an executable Python")
        try:
            probe = subprocess.run([found, "-c", f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"],
                                   capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise argparse.ArgumentTypeError(f"{text!r} does not run as a Python ({exc})") from None
        if probe.returncode != 0:
            raise argparse.ArgumentTypeError(f"{text!r} cannot import {module} (python -m radixcheck.model.llamacpp_env builds one)")
        return found

    parse.__name__ = f"Python with {module}"
    return parse


def refuse_weaker(parser: argparse.ArgumentParser, replaces: Path, weaker: list[str], force: bool,
                  elsewhere: str = "--out DIR") -> None:
    """Stop (exit 2, one line) before a run that would overwrite ``replaces`` with a weaker report,
    unless ``force``. ``weaker`` lists how this run is weaker than the report it would replace."""
    if weaker and not force:
        parser.error(f"this run would replace {replaces} with a weaker report ({'; '.join(weaker)}); "
                     f"write it elsewhere ({elsewhere}) or pass --force to replace it")
