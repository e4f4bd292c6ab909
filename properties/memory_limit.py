"""A memory limit for untrusted code: the companion of the per-operation time limit in ``target.py``.

A target whose memory grows without bound (a leak per call, a runaway loop that allocates) would
otherwise run until the kernel kills the whole process, verdict lost. Within :func:`memory_limit`
a watchdog thread reads the process's resident set every few milliseconds and, once it exceeds
the limit, interrupts the main thread with :class:`MemoryLimitExceeded` (delivered as a signal,
like the time limit's SIGALRM, so it lands between two Python bytecodes of the runaway code).
The previous signal handler is restored on exit; outside the block nothing is watched.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_SIGNAL = signal.SIGUSR1
_POLL_SECONDS = 0.005


class MemoryLimitExceeded(Exception):
    """The process's resident memory passed the limit while the target was running."""


def resident_bytes() -> int:
    """The process's resident set size now (Linux ``/proc/self/statm``; 0 where it is unavailable)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class MemoryWatch:
    """One excursion above the limit is reported once: by the watchdog's signal, or by
    :meth:`check` between two calls, whichever sees it first. Re-armed once back below."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._armed = True
        self._lock = threading.Lock()

    def exceeded(self) -> MemoryLimitExceeded:
        return MemoryLimitExceeded(f"resident memory passed {self.limit_bytes / 2**20:.0f} MiB")

    def should_report(self) -> bool:
        """Whether memory is above the limit now in an excursion not reported yet (and mark it reported)."""
        above = resident_bytes() > self.limit_bytes
        with self._lock:
            report = above and self._armed
            self._armed = not above
        return report

    def check(self) -> None:
        """Raise :class:`MemoryLimitExceeded` now if the limit is passed: the watchdog polls, and a
        loaded machine may not schedule it before a short run ends."""
        if self.should_report():
            raise self.exceeded()


@contextmanager
def memory_limit(limit_bytes: int) -> Iterator[MemoryWatch]:
    """Within this block, resident memory above ``limit_bytes`` raises :class:`MemoryLimitExceeded`
    in the main thread. Only :meth:`MemoryWatch.check` works off the main thread or where
    resident memory cannot be read (there it never raises)."""
    watch = MemoryWatch(limit_bytes)
    if threading.current_thread() is not threading.main_thread() or resident_bytes() == 0:
        yield watch
        return
    stop = threading.Event()
    main_id = threading.main_thread().ident

    def on_signal(signum: int, frame: Any) -> None:
        raise watch.exceeded()

    def poll() -> None:
        while not stop.wait(_POLL_SECONDS):
            if watch.should_report():
                signal.pthread_kill(main_id, _SIGNAL)

    previous = signal.signal(_SIGNAL, on_signal)
    watcher = threading.Thread(target=poll, name="radixcheck-memory-limit", daemon=True)
    watcher.start()
    try:
        yield watch
    finally:
        stop.set()
        watcher.join()
        signal.signal(_SIGNAL, previous)
