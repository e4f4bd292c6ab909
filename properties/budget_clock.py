"""The clock that shrink and reduction budgets are counted on: CPU seconds, not wall-clock seconds.

On a loaded machine (a shared CI runner, a box at a load of 30) a wall-clock budget gives the same
finding a different shrink or reduction: a reduction that needed 4.4 s of CPU was cut off after
85 s of wall clock (session 57). CPU time only stretches with the work done, so a budget counts it:
this process's (``time.process_time``: all its threads) plus that of the processes it waits on for
the target's answers (a wire server, registered by :func:`count_cpu_of`). A target that sleeps or
blocks spends no CPU, so each budget also has a wall-clock backstop, :data:`WALL_FACTOR` times the
budget (``RADIXCHECK_BUDGET_WALL_FACTOR``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

WALL_FACTOR_ENV = "RADIXCHECK_BUDGET_WALL_FACTOR"
WALL_FACTOR = 20.0  # a budget's wall-clock backstop, in budgets: above a load of ~10 per core a correct run still ends on CPU
OTHERS_EVERY = 0.05  # seconds of wall clock between reads of the other processes' CPU (a read of /proc costs ~20 us)

_others: dict[object, tuple[Callable[[], float | None], float | None]] = {}  # key -> its CPU reader, its last reading
_others_spent = 0.0  # the other processes' CPU counted so far: only grows, so a server that stops takes nothing back
_others_read = float("-inf")  # when they were last read (monotonic)


def wall_factor() -> float:
    factor = os.environ.get(WALL_FACTOR_ENV)
    return float(factor) if factor else WALL_FACTOR


def _read_others() -> None:
    global _others_spent, _others_read
    _others_read = time.monotonic()
    for key, (reader, last) in list(_others.items()):
        now = reader()
        if now is None:
            continue
        if last is not None and now > last:
            _others_spent += now - last
        _others[key] = (reader, now)


def count_cpu_of(key: object, reader: Callable[[], float | None]) -> None:
    """Count, from now on, the CPU time ``reader()`` gives (seconds; ``None`` if unreadable) in every
    budget: another process that computes the target's answers (a wire server, ``key`` its connection)."""
    _others[key] = (reader, reader())


def forget_cpu_of(key: object) -> None:
    """The process ``key`` stops (its CPU up to now is counted, then no more)."""
    if key in _others:
        _read_others()
        del _others[key]


def budget_cpu() -> float:
    """CPU seconds spent so far on the run: this process's and its registered servers' (read at most
    every :data:`OTHERS_EVERY` s, so a budget check stays cheap)."""
    if _others and time.monotonic() - _others_read >= OTHERS_EVERY:
        _read_others()
    return time.process_time() + _others_spent


class BudgetWatch:
    """A budget's clocks, from when it starts: CPU seconds spent (what the budget counts) and wall seconds (its backstop)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.wall_limit = seconds * wall_factor()
        self.cpu_start, self.wall_start = budget_cpu(), time.monotonic()

    def cpu(self) -> float:
        return budget_cpu() - self.cpu_start

    def wall(self) -> float:
        return time.monotonic() - self.wall_start

    def left(self) -> float:
        """CPU seconds left (never below 0): 0 once either clock is past its limit."""
        if self.seconds <= 0 or self.wall() >= self.wall_limit:
            return 0.0
        return max(0.0, self.seconds - self.cpu())

    def spent(self) -> bool:
        """Whether the budget has run out: its CPU seconds, or its wall-clock backstop. A budget of 0 or less is spent at once."""
        return self.left() <= 0


class WallWatch(BudgetWatch):
    """A budget of wall-clock seconds (``radixcheck bench --max-seconds``: how long the user waits)."""

    def cpu(self) -> float:
        return self.wall()
