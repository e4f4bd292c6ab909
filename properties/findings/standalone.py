"""The frame every standalone repro file has, whatever its contract, and the run that confirms it.

A repro file is one program (the calls that show a finding, then its check) in one frame,
written once here for every writer (:mod:`~radixcheck.properties.findings.repro` for caches,
:mod:`~radixcheck.properties.index.repro`, :mod:`~radixcheck.properties.tiers.repro`):

- it imports the user's factory **from the directory it is run in**, as ``radixcheck audit`` does;
- a cache served over the wire protocol from ``RADIXCHECK_WIRE_CMD`` needs that server: the file
  records the command that was audited and refuses (exit 2, one line) when none is given, never
  falling back to radixcheck's reference server;
- its exit code means what it says: **1** only when the finding's check fails (:func:`bug_lines`),
  **0** when the check holds, **2** when it cannot run to its check (the factory does not import,
  no server, a name error in the file, a call before the one the finding is about raised:
  :func:`runs_to_the_check`);
- it writes nothing where it runs (no ``__pycache__``, no ``.hypothesis/``).

:func:`confirm` runs each file once, as a user would (``python file.py`` in the working
directory, a fresh interpreter), when it is written: a file that does not exit 1 with the finding
is not offered (its ``text`` is dropped and ``why_not`` says what it did).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

try:
    import resource  # POSIX: a confirmed file's CPU limit
except ImportError:  # Windows: the wall-clock guard alone
    resource = None  # type: ignore[assignment]

from radixcheck.properties.budget_clock import wall_factor
from radixcheck.properties.target import (
    TIMEOUT_ENV,
    WALL_BACKSTOP_FACTOR,
    WALL_BACKSTOP_MIN,
    WALL_TIMEOUT_ENV,
    guarded,
    op_timeout,
    op_wall_timeout,
)

FOUND, FIXED, CANNOT_RUN = 1, 0, 2
BUG_MARK = "BUG (radixcheck"  # what bug() prints first: exit 1 without it is not the finding
NOT_OFFERED = "not offered"  # how a file that radixcheck ran and that did not show the finding is reported
RUN_SECONDS = 120.0  # the CPU seconds a file may spend when it is confirmed (a hang's adds the time limit)


@dataclass
class Repro:
    """A repro file's text, or why there is none, how it was made, and what it did when
    radixcheck ran it (``exit_code`` 1: it shows the bug; ``None``: not run)."""

    text: str | None
    why_not: str = ""
    calls: int = 0  # contract calls written out (requests served, for a serving repro): fewer is better
    notes: list[str] = field(default_factory=list)
    size: str = ""  # what it holds, for a person: "4 contract calls", "3 requests served", "radixcheck's test, as it is"
    exit_code: int | None = None
    output: str = ""
    shows: list[tuple[str, str]] = field(default_factory=list)  # every finding its program shows (findings.root_cause)


PASTEABLE_LINES, PASTEABLE_BYTES = 120, 16_000  # a repro file's promised size: at most this many lines and bytes


def small_repro_of(directory: Path, spec: str, oracle: str, signature: str) -> Path | None:
    """A pasteable file (:data:`PASTEABLE_LINES`, :data:`PASTEABLE_BYTES`) in ``directory`` that radixcheck
    wrote for the same finding of the same target: its header names the oracle and a message of the same
    ``signature`` (``signature_of``: the audit's grouping), and the target ``spec``. A production-scale
    finding points to it instead of being reduced for a minute into a second copy."""
    from radixcheck.properties.findings.failures import signature_of

    head = f'"""radixcheck finding ({oracle}): '
    for path in sorted(directory.glob("repro-*.py")) if directory.is_dir() else ():
        text = path.read_text(encoding="utf-8", errors="replace")
        first, _, rest = text.partition("\n")
        if (first.startswith(head) and f"Target {spec}," in rest[:400] and signature_of(oracle, first[len(head):]) == signature
                and "radixcheck's test `" not in rest[:600]  # a rerun of a test (a tier production world's) is no program
                and text.count("\n") <= PASTEABLE_LINES and len(text.encode()) <= PASTEABLE_BYTES):
            return path
    return None


def wire_command(spec: str) -> str | None:
    """The server command of a target served over the wire protocol whose command comes from
    ``RADIXCHECK_WIRE_CMD`` (``radixcheck.properties.adapters.wire:server``), as it was audited;
    ``None`` for any other target (a wire factory with a fixed command replays by itself)."""
    from radixcheck.properties.adapters.wire import WireFactory
    from radixcheck.properties.target import TargetError, load_target

    try:
        factory = load_target(spec).factory
    except TargetError:
        return None
    if isinstance(factory, WireFactory) and factory.from_environment:
        return shlex.join(factory.command)
    return None


def preamble(spec: str) -> list[str]:
    """The lines every file starts with: it writes no bytecode, imports from where it is run and,
    for a wire target, needs the server (exit 2, one line, when none is given)."""
    lines = ["sys.dont_write_bytecode = True  # this file writes nothing where it runs",
             "sys.path.append(os.getcwd())  # your factory's module, from where you run this file (as radixcheck audit does)"]
    command = wire_command(spec)
    if command is not None:
        lines += [f"AUDITED_SERVER = {command!r}  # the wire server radixcheck audited (RADIXCHECK_WIRE_CMD)",
                  "if not os.environ.get('RADIXCHECK_WIRE_CMD', '').strip():  # never another cache in its place",
                  "    print(f'radixcheck repro: no wire server: run this file with RADIXCHECK_WIRE_CMD set to the server to '",
                  "          f'check (audited: {AUDITED_SERVER})', file=sys.stderr)",
                  "    sys.exit(2)"]
    return lines


def factory_import(spec: str, name: str = "make") -> str:
    """The lines that import the factory ``spec`` as ``name``, from where the file is run (after
    :func:`preamble`); exit 2 if it cannot be (the file did not run)."""
    module, _, attr = spec.partition(":")
    get = f"import {module}\n\n    {name} = {module}.{attr}" if "." in attr else f"from {module} import {attr}" + (
        f" as {name}" if attr != name else "")
    return "\n".join([
        *preamble(spec),
        "try:",
        f"    {get}",
        "except Exception as exc:  # noqa: BLE001 - not run, so neither 1 (the bug) nor 0 (fixed)",
        f"    print(f'radixcheck repro: cannot import the factory {spec}: {{type(exc).__name__}}: {{exc}} (run this file '",
        "          'from where you ran radixcheck audit)', file=sys.stderr)",
        "    sys.exit(2)"])


def needs(imports: list[str]) -> list[str]:
    """The imports a file needs beyond Python's own (NumPy, radixcheck): one that fails is exit 2 in
    one line (another interpreter, radixcheck not installed), never Python's exit 1. The message
    names the packages these imports need, and only those (an index file needs no NumPy)."""
    return ["try:", *(f"    {line}" for line in imports),
            "except ImportError as exc:  # not run, so neither 1 (the bug) nor 0 (fixed)",
            f"    print(f'radixcheck repro: cannot import {{exc.name}}: {{exc}} (this file needs {_packages(imports)})', file=sys.stderr)",
            "    sys.exit(2)"]


def _packages(imports: list[str]) -> str:
    """The top-level packages of ``imports`` (``import numpy as np`` -> numpy), in order, joined
    for a sentence."""
    names = list(dict.fromkeys(line.split()[1].split(".")[0] for line in imports))
    return " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + " and " + names[-1]


def bug_lines(oracle: str, target: str = "the cache") -> list[str]:
    """``bug(finding, got)``: the finding's check failed; print radixcheck's sentence and exit 1."""
    label = f"radixcheck: {oracle}" if oracle.startswith(("crash", "hang")) else f"radixcheck oracle {oracle}"
    return [f"def bug(finding, got):  # the check failed: say what radixcheck found, and what {target} did this time",
            f"    print({'BUG (' + label + '): '!r} + finding)",
            "    shown = repr(got)",
            f"    print('  {target} did:', "
            "shown if len(shown) < 2000 else f'{shown[:1500]} … {shown[-200:]} ({len(shown)} characters)')",
            "    sys.exit(1)"]


CANNOT_RUN_LINES = [
    "def cannot_run(exc):  # a call before the finding's check raised: neither 1 (the bug) nor 0 (fixed)",
    "    traceback.print_exception(exc)",
    "    print(f'radixcheck repro: did not run to the check: {type(exc).__name__}: {exc}', file=sys.stderr)",
    "    sys.exit(2)"]


def runs_to_the_check(lines: list[str]) -> list[str]:
    """``lines`` (module level: their names stay global) under ``try``: an exception that escapes
    them is :data:`CANNOT_RUN_LINES`' ``cannot_run`` (exit 2), never Python's exit 1."""
    return ["try:", *(f"    {line}" if line else "" for line in lines),
            "except Exception as exc:  # noqa: BLE001 - not the finding's check: the file cannot say",
            "    cannot_run(exc)"]


def hang_limit_lines() -> list[str]:
    """``LIMIT`` (the per-operation limit, ``RADIXCHECK_OP_TIMEOUT`` as radixcheck reads it; the
    audit's by default), ``WALL`` (its wall-clock backstop) and ``within_limit(call)``: a call that
    computes for longer than LIMIT seconds of CPU time, or blocks past WALL, raises ``TimeoutError``
    (a SIGALRM timer that ticks and looks at both clocks, as radixcheck's limit), as does a wire server
    that the wire client stopped for its own CPU time (``OperationTimeout``: the server computes, not
    this process, so the file's own clock would wait for WALL and the client's error was exit 2)."""
    return [f"LIMIT = float(os.environ.get({TIMEOUT_ENV!r}) or {op_timeout():g})  # radixcheck's per-operation limit (s of CPU)",
            f"WALL = float(os.environ.get({WALL_TIMEOUT_ENV!r}) or max({WALL_BACKSTOP_MIN:g}, {WALL_BACKSTOP_FACTOR:g} * LIMIT))"
            "  # its wall-clock backstop (s)",
            "STARTED = [0.0, 0.0]  # the running call's CPU and wall clocks at its start",
            "", "",
            "def hung(signum, frame):",
            "    if time.process_time() - STARTED[0] >= LIMIT:",
            "        raise TimeoutError(f'the call did not return within {LIMIT:g} s of CPU time')",
            "    if time.monotonic() - STARTED[1] >= WALL:",
            "        raise TimeoutError(f'the call did not return within {WALL:g} s of wall-clock time')",
            "", "",
            "def within_limit(call):",
            '    """call(), interrupted if it computes for LIMIT seconds or blocks for WALL."""',
            "    previous = signal.signal(signal.SIGALRM, hung)",
            "    STARTED[:] = [time.process_time(), time.monotonic()]",
            "    signal.setitimer(signal.ITIMER_REAL, LIMIT, max(0.01, min(0.25, LIMIT / 4)))",
            "    try:",
            "        return call()",
            "    except Exception as exc:  # a wire server's hang: radixcheck's client judged its CPU time and killed it",
            "        if type(exc).__name__ == 'OperationTimeout':",
            "            raise TimeoutError(str(exc)) from exc",
            "        raise",
            "    finally:",
            "        signal.setitimer(signal.ITIMER_REAL, 0)",
            "        signal.signal(signal.SIGALRM, previous)"]


def _limit_cpu(seconds: float) -> Callable[[], None]:
    """What the child runs before the file: at most ``seconds`` of CPU time (the kernel stops it with
    SIGXCPU, then SIGKILL a second later), and no core file where it runs."""
    soft = max(1, math.ceil(seconds))  # the kernel counts whole seconds

    def limit() -> None:  # between fork and exec: a system call only, no import
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return limit


def run_file(text: str, seconds: float = RUN_SECONDS, wall_seconds: float | None = None) -> tuple[int | None, str]:
    """Run a repro file as a user does: ``python file.py`` in a fresh interpreter, in this working
    directory (the file itself lives in a temporary directory), for at most ``seconds`` of its own CPU
    time (on a loaded machine a valid file only waits longer) and, as a guard against a file that
    blocks, ``wall_seconds`` of wall clock (default: ``seconds`` times the budgets' wall factor,
    :func:`~radixcheck.properties.budget_clock.wall_factor`): its exit code (``None``: it did not
    finish) and what it printed."""
    wall = seconds * wall_factor() if wall_seconds is None else wall_seconds
    with tempfile.TemporaryDirectory(prefix="radixcheck-repro-") as where:
        path = os.path.join(where, "repro.py")
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        try:
            done = subprocess.run([sys.executable, path], cwd=os.getcwd(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, timeout=wall, check=False,
                                  preexec_fn=_limit_cpu(seconds) if resource else None)
        except subprocess.TimeoutExpired as late:
            return None, (late.stdout or b"").decode(errors="replace") + f"\n(did not finish within {wall:g} s of wall clock)"
    printed = done.stdout.decode(errors="replace")
    if resource and done.returncode == -signal.SIGXCPU:  # its CPU limit
        return None, printed + f"\n(did not finish within {max(1, math.ceil(seconds))} s of CPU time)"
    return done.returncode, printed


def last_words(text: str, most: int = 300) -> str:
    """The end of ``text`` in at most ``most`` characters, cut at a space and marked with "…" when it is
    cut (a reason that starts mid-word reads as a typo: "…: ot at or below its cut")."""
    if len(text) <= most:
        return text
    tail = text[-most:]
    return "…" + (tail.split(" ", 1)[1] if " " in tail else tail)


def confirm(repro: Repro, hang: bool = False) -> Repro:
    """Run the file once (:func:`run_file`; a hang's is given the wall-clock backstop more): it is offered
    only if it exits 1 with radixcheck's sentence. Otherwise its text is dropped and ``why_not``
    says what it did (a file that exits 0, or 1 from a traceback, would tell its reader the wrong thing)."""
    if repro.text is None:
        return repro
    repro.exit_code, repro.output = run_file(repro.text, RUN_SECONDS + (op_wall_timeout() if hang else 0.0))
    if repro.exit_code != FOUND or BUG_MARK not in repro.output:
        said = last_words(" ".join(repro.output.strip().splitlines()[-3:]))
        ran = "did not finish" if repro.exit_code is None else f"exited {repro.exit_code}"
        repro.why_not = (f"{NOT_OFFERED}: radixcheck ran the file it wrote and it {ran}"
                         + (" without the finding" if repro.exit_code == FOUND else ", not 1") + (f": {said}" if said else ""))
        repro.text = None
    return repro


def run_repro(text: str, seconds: float = 60.0) -> tuple[int, str]:
    """Run a repro file's text in this process (a reducer's many candidates: no interpreter to
    start), as ``python file.py`` would (``__main__``, at most ``seconds``): its exit code and what
    it printed. What is offered is confirmed by :func:`confirm`, in a fresh interpreter."""
    from radixcheck.properties.findings.reduce import standalone_stack  # it imports the cache machine

    printed = io.StringIO()
    code = 0
    path, bytecode = list(sys.path), sys.dont_write_bytecode  # what the file's first lines set: this process's own
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), standalone_stack():
        try:
            guarded("the repro file", exec, compile(text, "<radixcheck repro>", "exec"), {"__name__": "__main__"})
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except Exception:  # noqa: BLE001 - an uncaught exception: Python's own exit code
            traceback.print_exc()
            code = 1
        finally:
            sys.path[:], sys.dont_write_bytecode = path, bytecode
    return code, printed.getvalue()
