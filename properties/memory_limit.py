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


@contextmanager
def memory_limit(limit_bytes: int) -> Iterator[None]:
    """Within this block, resident memory above ``limit_bytes`` raises :class:`MemoryLimitExceeded`
    in the main thread. A no-op off the main thread or where resident memory cannot be read."""
    if threading.current_thread() is not threading.main_thread() or resident_bytes() == 0:
        yield
        return
    stop = threading.Event()
    main_id = threading.main_thread().ident

    def on_signal(signum: int, frame: Any) -> None:
        raise MemoryLimitExceeded(f"resident memory passed {limit_bytes / 2**20:.0f} MiB")

    def watch() -> None:
        armed = True  # one interruption per excursion above the limit: re-armed once back below it
        while not stop.wait(_POLL_SECONDS):
            above = resident_bytes() > limit_bytes
            if above and armed:
                signal.pthread_kill(main_id, _SIGNAL)
            armed = not above

    previous = signal.signal(_SIGNAL, on_signal)
    watcher = threading.Thread(target=watch, name="radixcheck-memory-limit", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        signal.signal(_SIGNAL, previous)
