"""Choosing the cache under test, and calling it as the untrusted code it is.

The target is named ``package.module:attribute`` (see ``properties/contract.py``). Every call
into it goes through :func:`guarded`, which enforces a per-operation time limit so one hanging
target cannot hang the gate: the call is interrupted (SIGALRM, main thread) and reported as a
failure with the operation sequence that led to it.
"""

from __future__ import annotations

import importlib
import os
import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from properties.contract import DEFAULT_CAPABILITIES, Capabilities

DEFAULT_TARGET = "reference:RadixCache"
TARGET_ENV = "RADIXCHECK_TARGET"
TIMEOUT_ENV = "RADIXCHECK_OP_TIMEOUT"
DEFAULT_OP_TIMEOUT = 5.0  # seconds; generous for any tree of the sizes the suite builds

T = TypeVar("T")


class OperationTimeout(Exception):
    """A call into the target took longer than the per-operation limit."""


@dataclass(frozen=True)
class Target:
    spec: str
    factory: Callable[..., Any]
    capabilities: Capabilities

    @property
    def name(self) -> str:
        return self.spec.replace(":", ".")


def load_target(spec: str) -> Target:
    """Import ``package.module:attribute``; raise ValueError naming what is wrong."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"target {spec!r} must look like 'package.module:factory'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"target {spec!r}: cannot import module {module_name!r}: {exc}") from exc
    factory = module
    for part in attr.split("."):
        if not hasattr(factory, part):
            raise ValueError(f"target {spec!r}: module {module_name!r} has no attribute {attr!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise ValueError(f"target {spec!r}: {attr!r} is not callable")
    caps = getattr(factory, "capabilities", DEFAULT_CAPABILITIES)
    if not isinstance(caps, Capabilities):
        raise ValueError(f"target {spec!r}: 'capabilities' must be a properties.contract.Capabilities, got {caps!r}")
    return Target(spec, factory, caps)


def op_timeout() -> float:
    return float(os.environ.get(TIMEOUT_ENV, DEFAULT_OP_TIMEOUT))


@contextmanager
def _alarm(seconds: float, what: str):
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield  # signals only reach the main thread; elsewhere run unguarded
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise OperationTimeout(f"{what} did not return within {seconds:g} s (set {TIMEOUT_ENV} to change the limit)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def guarded(what: str, fn: Callable[..., T], *args: Any) -> T:
    """Call ``fn(*args)`` under the per-operation time limit."""
    with _alarm(op_timeout(), what):
        return fn(*args)
