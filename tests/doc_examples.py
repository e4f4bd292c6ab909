"""Every example in the docs runs: the collector of README.md's and docs/'s code blocks (Sybil).

* ``python`` blocks run, in order, one namespace per page (a page's later blocks use what its
  earlier ones defined); a block whose first line names a file (``# mycache_adapter.py``) is that
  module, so a later block imports it as a reader would (``from mycache_adapter import make``);
* ``waivers`` blocks go through radixcheck's own waiver loader (``parse_waivers``), which refuses
  a line the audit would refuse;
* ``bash`` blocks, and the ``run:`` lines of ``yaml`` blocks: each ``radixcheck ...`` command is
  parsed by the real argument parser (``radixcheck.cli``), and each ``python -m radixcheck...``
  names a module that exists. Nothing is started: no subprocess, no audit (the fast tier).

Blocks in other languages (``text``, ``json``) are shown, not run. The root ``conftest.py`` hands
this collector to pytest in this checkout only: it is not shipped, so the installed plugin never
collects anyone's markdown.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import sys
import types
from pathlib import Path

import pytest
from sybil import Example, Sybil
from sybil.evaluators.python import PythonEvaluator
from sybil.integration.pytest import SybilItem
from sybil.parsers.markdown import CodeBlockParser

ROOT = Path(__file__).resolve().parent.parent
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
MODULE_FILE = re.compile(r"^# (\w+)\.py\s*$")


def evaluate_python(example: Example) -> None:
    """Sybil's Python evaluator; a block that opens with ``# name.py`` also becomes the module ``name``."""
    PythonEvaluator()(example)
    named = MODULE_FILE.match(str(example.parsed).lstrip().splitlines()[0]) if str(example.parsed).strip() else None
    if named:
        module = types.ModuleType(named.group(1))
        module.__dict__.update({k: v for k, v in example.namespace.items() if not k.startswith("__")})
        sys.modules[named.group(1)] = module  # this process is radixcheck's docs test run, never a user's


def _commands(text: str) -> list[list[str]]:
    """The command lines of a shell block, each split into words: continuations joined, comments,
    leading ``VAR=value`` settings and ``$ `` prompts dropped, ``&&`` / ``;`` / ``|`` chains split."""
    joined = re.sub(r"\\\n\s*", " ", text)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line.removeprefix("$ "), comments=True)
        command: list[str] = []
        for word in [*words, "&&"]:
            if word in ("&&", ";", "|", "||"):
                if command:
                    commands.append(command)
                command = []
            elif command or not ENV_ASSIGNMENT.match(word):
                command.append(word)
    return commands


def check_command(argv: list[str]) -> None:
    """Parse one command as its program would, or check the module it runs exists; raise
    ``AssertionError`` naming the problem."""
    program = Path(argv[0]).name
    if program == "radixcheck":
        from radixcheck.cli import parse_args
        from radixcheck.reports.__main__ import parse_args as reports_args

        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parse_args(argv[1:])
                if args.command == "reports":
                    reports_args(args.args)
        except SystemExit as exc:
            if exc.code:
                raise AssertionError(f"`{shlex.join(argv)}` is refused by radixcheck's parser: "
                                     f"{err.getvalue().strip().splitlines()[-1]}") from None
    elif program.startswith("python") and argv[1:2] == ["-m"] and argv[2].startswith("radixcheck"):
        if importlib.util.find_spec(argv[2]) is None:
            raise AssertionError(f"`{shlex.join(argv)}`: no module {argv[2]}")


def evaluate_shell(example: Example) -> None:
    for argv in _commands(example.parsed):
        check_command(argv)


def evaluate_yaml(example: Example) -> None:
    for match in re.finditer(r"^\s*-?\s*run:\s*(.+)$", example.parsed, re.MULTILINE):
        for argv in _commands(match.group(1)):
            check_command(argv)


def evaluate_waivers(example: Example) -> None:
    from radixcheck.properties.findings.waivers import parse_waivers

    parse_waivers(example.parsed, source=f"{example.path}:{example.line}")


def keep_pages_whole(items: list[pytest.Item]) -> None:
    """One page's examples on one pytest-xdist worker, in order (``--dist loadgroup``): a later
    block uses what an earlier one defined, in the page's one namespace."""
    for item in items:
        if isinstance(item, SybilItem):
            item.add_marker(pytest.mark.xdist_group(f"docs:{Path(str(item.path)).relative_to(ROOT)}"))


DOCS = Sybil(
    parsers=[CodeBlockParser("python", evaluate_python), CodeBlockParser("waivers", evaluate_waivers),
             CodeBlockParser("bash", evaluate_shell),
             CodeBlockParser("yaml", evaluate_yaml)],
    path=str(ROOT),
    patterns=["docs/*.md", "docs/*/*.md"],
    filenames=["README.md"],
)
