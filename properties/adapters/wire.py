"""The wire adapter: a cache in another process (any language), spoken to in JSON lines.

Select it with ``radixcheck audit radixcheck.properties.adapters.wire:server``. It runs the
command in ``RADIXCHECK_WIRE_CMD`` (split as a shell would, run without a shell; the default is
this Python's ``-m radixcheck.reference.wire_server``, the reference cache) and speaks the
protocol of ``WIRE.md`` (beside this file) to it over its stdin and stdout: one request per line,
one reply per line. :func:`wire_factory` makes a factory for any command, e.g. in a conftest or
a module of your own: ``mine = wire_factory(["./target/release/my-cache-server"])``.

One server process serves every cache the suite builds (``new`` gives each an id), started on
the first factory call and again after it died. A cache is dropped (``drop``) when the run of a
program that made it (an example, or radixcheck's replay of one) ends, at a point the stream fixes;
outside such a run, when Python frees it. The server declares its capabilities in its
``init`` reply; the factory's ``capabilities`` attribute asks for them, starting the server.

The suite owns the slot pool: the server reports what its cache freed (``"freed"`` in a reply)
and this adapter hands those ids to the suite's :class:`SlotAllocator`, call by call, so a double
free or a free of a slot never handed out is caught as in-process. Handles are the server's
integers wrapped in :class:`WireHandle`; a handle this connection did not issue (another
server's, ``None``, any other object) is sent as ``null``, which the server must refuse as a
handle it does not know.

Failures are named, never a hang: a server that exits is :class:`WireServerDied` (with its exit
code and the end of its stderr); one that does not answer within the per-operation limit (the
server's own CPU time, read from ``/proc``, as in-process calls are judged by theirs; the
wall-clock backstop for one that blocks) is an
:class:`~radixcheck.properties.target.OperationTimeout` (the server is then killed; the next
factory call starts another); a reply that breaks the protocol (not JSON, wrong id, missing
fields, wrong types) is :class:`WireProtocolError` naming what was wrong. A refusal (error code
1000) is :class:`WireRefused`, the cache's exception with its type and message: what the suite
expects for bad input and forbidden locks, and a failure anywhere else.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import select
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from radixcheck.properties.budget_clock import count_cpu_of, forget_cpu_of
from radixcheck.properties.cache.canonical import canonical_namespace
from radixcheck.properties.cache.contract import Capabilities, SlotAllocator
from radixcheck.properties.cache.policies import NAMED
from radixcheck.properties.target import (
    OperationTimeout,
    TargetCrash,
    TransportError,
    call_limit,
    call_wall_limit,
    computed_elsewhere,
    current_run,
    op_timeout,
    outside_the_limit,
)

CMD_ENV = "RADIXCHECK_WIRE_CMD"
PROTOCOL = 1
NOT_SUPPORTED, MALFORMED_REQUEST, CRASH, REFUSED = 10, 12, 13, 1000
CPU_POLL = 0.1  # seconds between looks at the server's CPU time while a reply is awaited
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
STARTUP_TIMEOUT = 60.0  # seconds for a server to answer ``init`` (an interpreter importing NumPy on a loaded machine)


def startup_timeout() -> float:
    """The limit for ``init`` (WIRE.md): 60 s, or the per-operation limit if that is longer."""
    return max(STARTUP_TIMEOUT, op_timeout())


class WireError(Exception):
    """Something went wrong on the wire (base class)."""


class WireServerDied(WireError, TransportError):
    """The server process exited (or was killed after it hung)."""

    what_happened = "the wire server stopped"  # its finding's name (findings.failures.oracle_of)


class WireProtocolError(WireError, TransportError):
    """A reply that breaks the protocol, or an error code saying the request was not understood."""

    what_happened = "the wire server's reply broke the protocol"


class WireCrash(WireError, TargetCrash):
    """The server answered error 13 (crash): its cache's state is unknown. Where a refusal is due it
    is no refusal (error 1000 is): the crash is the finding."""

    what_happened = "the wire server answered error 13 (crash)"


class WireRefused(ValueError):
    """The cache refused the call (error 1000): bad input, or a lock the contract forbids (a
    ``ValueError``, as the contract asks of a factory refusing a page size)."""


def reference_command() -> list[str]:
    """The Python reference server, run by this interpreter."""
    return [sys.executable, "-m", "radixcheck.reference.wire_server"]


def command_from_env() -> list[str]:
    """``RADIXCHECK_WIRE_CMD`` split as a shell would, or the reference server's command."""
    text = os.environ.get(CMD_ENV, "").strip()
    return shlex.split(text) if text else reference_command()


def _process_cpu(pid: int) -> float | None:
    """The CPU time (user and system, s) process ``pid`` has spent, from ``/proc``; ``None``
    where that cannot be read (not Linux, or it was reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()  # after the command name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime: fields 14 and 15 of proc(5)
    except (OSError, ValueError, IndexError):
        return None


def _process_wait(pid: int) -> float | None:
    """The time (s) process ``pid``'s threads have spent runnable but waiting for a CPU, from
    ``/proc/PID/task/*/schedstat``; ``None`` where that cannot be read."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as stat:
                total += int(stat.read().split()[1])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _stop_server(process: subprocess.Popen, stderr: Any) -> None:
    """Kill a server still running, reap it, and close its pipes and stderr file."""
    forget_cpu_of(process.pid)  # its CPU so far stays counted in the shrink and reduction budgets
    if process.poll() is None:
        process.kill()
        process.wait()
    for pipe in (process.stdin, process.stdout, stderr):
        if pipe is not None and not pipe.closed:
            try:
                pipe.close()
            except OSError:  # a write buffered for a closed pipe: nothing more to send
                pass


class ServerClock:
    """A server's CPU time (s) to the nanosecond: every thread's time on a CPU, from
    ``/proc/PID/task/*/schedstat`` (``/proc/PID/stat`` counts in ticks of 10 ms, too coarse to time
    one call). For ``radixcheck bench``, which times each call of a wire target on this clock plus
    its own. Its threads are listed again at most once a second (a read costs ~2 us a thread); a
    thread that ended keeps its time in the sum, so the clock never runs back."""

    RELIST = 1.0  # seconds between listings of the server's threads

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fds: dict[str, int] = {}
        self.last: dict[str, int] = {}  # each thread's last reading (ns)
        self.retired = 0  # the time of threads that ended (ns)
        self.listed = float("-inf")

    def _list(self) -> None:
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return
        for tid in tids:
            if tid not in self.fds:
                try:
                    self.fds[tid] = os.open(f"/proc/{self.pid}/task/{tid}/schedstat", os.O_RDONLY)
                except OSError:
                    pass

    def __call__(self) -> float | None:
        """The CPU time its threads have spent, or ``None`` where schedstat cannot be read."""
        if time.monotonic() - self.listed > self.RELIST:
            self._list()
            self.listed = time.monotonic()
        total = self.retired
        for tid, fd in list(self.fds.items()):
            try:
                total += (reading := int(os.pread(fd, 64, 0).split()[0]))
                self.last[tid] = reading
            except (OSError, ValueError, IndexError):  # the thread ended
                os.close(self.fds.pop(tid))
                self.retired += (ended := self.last.pop(tid, 0))
                total += ended
        return total / 1e9 if self.fds or self.retired else None

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


class WireConnection:
    """One server process and the request/reply loop with it (thread-safe: one request at a time)."""

    def __init__(self, command: Sequence[str]) -> None:
        self.command = list(command)
        self._stderr = tempfile.TemporaryFile()
        try:
            self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self._stderr, bufsize=0)
        except OSError as exc:
            raise WireServerDied(f"cannot start the wire server {shlex.join(self.command)}: {exc}") from None
        self.cpu_readable = self.server_cpu() is not None  # else (not Linux) its requests are judged by the wall clock
        count_cpu_of(self.process.pid, functools.partial(_process_cpu, self.process.pid))  # the budgets count its CPU
        # A connection dropped without close() (a factory never closed) still stops its server and
        # releases its pipes and stderr file when it is collected, or at exit.
        weakref.finalize(self, _stop_server, self.process, self._stderr)
        self._lock = threading.Lock()
        self._buffer = b""
        self._next_id = 1
        self.dead: str | None = None  # why the connection is unusable
        self.request_cpu_start: float | None = None  # the server's CPU time when the awaited reply was first late
        self.handles: dict[int, WireHandle] = {}
        self.pending_drops: list[int] = []  # ids of caches the suite no longer holds
        # The caches made in the current run of a program (an example or a replay: target.current_run), dropped when it
        # ends whether or not Python has freed them: a drop sent when the cyclic garbage collector ran (which depends on
        # all the process allocated before: its path, its worker, the tests before) made a server's state, and so a
        # verdict, vary from one checkout or worker to another.
        self.run = current_run()
        self.run_caches: list[int] = []
        self.dropped: set[int] = set()  # caches dropped with their run (their finalizer then sends nothing)
        self.request_ids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()  # the suite's Requests, numbered
        self.next_request = 1
        hello = self.request("init", {"protocol": PROTOCOL}, timeout=startup_timeout())
        declared = [hello.get(k) for k in ("capabilities", "tier_capabilities") if isinstance(hello, dict) and k in hello]
        if not isinstance(hello, dict) or hello.get("protocol") != PROTOCOL or len(declared) != 1 \
                or not isinstance(declared[0], dict):
            self.close(f"its init reply is not protocol {PROTOCOL} with capabilities (or tier_capabilities, not both): {hello!r}")
            raise WireProtocolError(f"{self._who()}: {self.dead}")
        self.server_name = str(hello.get("server", "?"))
        self.tier_capabilities: Any = None  # a TierCapabilities when the server declares a host tier (WIRE.md, "A host tier")
        if "tier_capabilities" in hello:
            self.tier_capabilities = self._tier_from(hello)
            return
        caps = dict(hello["capabilities"])
        known = [f.name for f in dataclasses.fields(Capabilities)]
        unknown = [k for k in caps if k not in known]
        if unknown:  # TypeError's "unexpected keyword argument" names Python, not the page
            self.close(f"its capabilities are not radixcheck's: unknown field(s) {', '.join(map(repr, unknown))} "
                       f"(the fields: {', '.join(known)}; WIRE.md, \"Operations\")")
            raise WireProtocolError(f"{self._who()}: {self.dead}")
        try:
            if "eviction_policy" in caps:
                caps["eviction_policy"] = policy_from_wire(caps["eviction_policy"])
            self.capabilities = Capabilities(**{k: tuple(v) if isinstance(v, list) else v for k, v in caps.items()})
        except (TypeError, ValueError) as exc:
            self.close(f"its capabilities are not radixcheck's: {exc}")
            raise WireProtocolError(f"{self._who()}: {self.dead}") from None

    def _tier_from(self, hello: dict[str, Any]) -> Any:
        """The declared host tier (``tier_capabilities``: TierCapabilities' fields), or the server is closed
        and the audit stops with one line: an unknown field (named, with the fields a host tier has) or a
        value TierCapabilities refuses."""
        from radixcheck.properties.tiers.contract import TierCapabilities

        caps = dict(hello["tier_capabilities"])
        why = None
        known = [f.name for f in dataclasses.fields(TierCapabilities)]
        unknown = [k for k in caps if k not in known]
        if unknown:  # TypeError's "unexpected keyword argument" names Python, not the page
            why = (f"its tier_capabilities are not radixcheck's: unknown field(s) {', '.join(map(repr, unknown))} "
                   f"(a host tier's fields: {', '.join(known)}; WIRE.md, \"A host tier\")")
        elif caps.get("second_pool") is not None:
            try:
                caps["second_pool"] = second_pool_from_wire(caps["second_pool"])
            except (TypeError, ValueError) as exc:
                why = f"its tier_capabilities are not radixcheck's: {exc}"
        if why is None:
            try:
                if caps.get("eviction_policy") == "lru":  # least recently used first: the tier contract's null
                    caps["eviction_policy"] = None
                if "eviction_policy" in caps:
                    caps["eviction_policy"] = policy_from_wire(caps["eviction_policy"])
                    if isinstance(caps["eviction_policy"], str):  # a name only: the tier contract takes a Policy or null
                        raise ValueError(f"eviction_policy {caps['eviction_policy']!r}: a host tier takes null or \"lru\" "
                                         "(least recently used first) or {\"named\": ...}")
                return TierCapabilities(**{k: tuple(v) if isinstance(v, list) else v for k, v in caps.items()})
            except (TypeError, ValueError) as exc:
                why = f"its tier_capabilities are not radixcheck's: {exc}"
        self.close(why)
        raise WireProtocolError(f"{self._who()}: {self.dead}")

    @property
    def lifecycle(self) -> str:
        """The declared ``lifecycle``: a server sent the request ops (WIRE.md, "Running requests") only with ``"requests"``."""
        return (self.tier_capabilities if self.tier_capabilities is not None else self.capabilities).lifecycle

    def request_id(self, req: Any) -> int:
        """The id of one of the suite's running requests on this server (the same each time it is sent)."""
        number = self.request_ids.get(req)
        if number is None:
            number = self.request_ids[req] = self.next_request
            self.next_request += 1
        return number

    def _who(self) -> str:
        shown = shlex.join(self.command)
        return f"wire server {shown if len(shown) <= 160 else shown[:150] + ' ...'}"

    def stderr_tail(self, limit: int = 600) -> str:
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        text = self._stderr.read().decode(errors="replace").strip()
        return f"; its stderr ends: {text!r}" if text else ""

    def close(self, why: str = "closed", kill: bool = False) -> None:
        """Stop the server: close its stdin and wait a second for it to exit, then kill it (at
        once with ``kill``: a server that hung will not read its stdin)."""
        if self.dead is None:
            self.dead = why
        forget_cpu_of(self.process.pid)  # read before it is reaped: its CPU so far stays counted
        if kill and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):  # a server that exited first leaves them open
            if pipe is not None and not pipe.closed:
                try:
                    pipe.close()
                except OSError:  # its stdin's last write may fail on a closed pipe: nothing more to send
                    pass

    def _died(self) -> WireServerDied:
        try:
            code = self.process.wait(timeout=1)  # its output closed: it is exiting
        except subprocess.TimeoutExpired:
            code = None
        self.close(f"it exited with code {code}" if code is not None else "its output closed")
        return WireServerDied(f"{self._who()} stopped: {self.dead}{self.stderr_tail()}")

    def server_cpu(self) -> float | None:
        """The CPU time (user and system, s) the server process has spent, from ``/proc``; ``None``
        where that cannot be read (not Linux)."""
        return _process_cpu(self.process.pid)

    def server_wait(self) -> float | None:
        """The server's run-queue wait (s) so far: a server starved of CPU is not one that blocks."""
        return _process_wait(self.process.pid)

    def request_cpu(self) -> float | None:
        """The server's CPU time (s) on the request it is answering, once read (a reply CPU_POLL late)."""
        start, now = self.request_cpu_start, self.server_cpu()
        return None if start is None or now is None else now - start

    def _read_line(self, deadline: float, op: str, cpu_limit: float | None = None, first: bool = True) -> bytes:
        """One line of the server's output. It is given until ``deadline`` (wall clock) and, with
        ``cpu_limit``, only that much of its own CPU time: a server that computes for longer is
        hung, however slow the machine; one that blocks is stopped by the wall-clock deadline. Its
        CPU time is first read when a reply is CPU_POLL late (a prompt reply costs no read), so a
        hang is judged after the limit plus at most that. ``first``: the request's first line (not the
        line after a call of the server's, whose request keeps the CPU time it was started with, so
        the suite's backstop quotes the server's time on the whole request)."""
        fd, sent = self.process.stdout.fileno(), time.monotonic()
        cpu_start: float | None = None
        if first:
            self.request_cpu_start = None
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            now = self.server_cpu() if cpu_limit is not None and time.monotonic() - sent >= CPU_POLL else None
            if cpu_start is None:
                cpu_start = now
                if self.request_cpu_start is None:
                    self.request_cpu_start = now
            spent = now - cpu_start if now is not None and cpu_start is not None else 0.0
            if left <= 0 or (cpu_limit is not None and spent > cpu_limit):
                self.close(f"it did not answer {op} in time and was killed", kill=True)
                if left > 0:
                    how = f"{cpu_limit:g} s of its CPU time (it computed for {spent:.1f} s)"
                elif cpu_limit is not None:
                    how = f"the wall-clock backstop, {time.monotonic() - sent:.0f} s (it computed for only {spent:.1f} s of its CPU time)"
                else:  # init, or its CPU time cannot be read here: the wall clock alone was judged
                    how = f"{time.monotonic() - sent:.0f} s of wall-clock time (its CPU time is not read here)"
                raise OperationTimeout(f"{self._who()} did not answer {op} within {how}; it was killed")
            ready, _, _ = select.select([fd], [], [], min(left, CPU_POLL))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise self._died()
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _drop_ended_run(self, timeout: float | None = None) -> None:
        """If the run that made this connection's caches has ended, drop them, in the order made (under the lock)."""
        if current_run() != self.run:
            ended, self.run_caches, self.run = self.run_caches, [], current_run()
            self.dropped.update(ended)
            for cache_id in ended:
                self._exchange("drop", {"cache": cache_id}, timeout)

    def begin_run(self) -> None:
        """Drop the caches of a run that has ended before the next run's first cache is made. A server that
        dies dropping them died of the ended run's state (a drop that frees a deep tree recursively): that
        run is over, so the next run is not charged with it; it gets a fresh server (:meth:`WireFactory.connection`)."""
        with self._lock:
            if self.dead is None:
                try:
                    self._drop_ended_run()
                except WireServerDied:
                    pass  # self.dead is set: the factory starts the next run's server

    def request(self, op: str, args: dict[str, Any], timeout: float | None = None) -> Any:
        """Send one request and return its ``ok`` value (after handing its frees to ``allocator``)."""
        return self.call(op, args, None, timeout)

    def call(self, op: str, args: dict[str, Any], allocator: SlotAllocator | None, timeout: float | None = None,
             suite: Any = None) -> Any:
        """``suite``: a tier cache's pools and controller (:class:`TierCalls`), which the server calls while it
        answers (WIRE.md, "A host tier"); without it such a call is a broken reply, as it always was."""
        with self._lock:
            if self.dead is not None:
                raise WireServerDied(f"{self._who()} is not running ({self.dead}); {op} not sent")
            self._drop_ended_run(timeout)
            while self.pending_drops:  # caches made outside a run and collected since the last call
                self._exchange("drop", {"cache": self.pending_drops.pop()}, timeout)
            rid, raw = self._exchange(op, args, timeout)
            refusal: BaseException | None = None  # what the suite's side raised in a call of the server's
            # The suite's answers to the server's calls are part of the request: a backstop that fires
            # while the suite answers one judges (and names) the server's time on it too.
            with computed_elsewhere("the wire server", self.request_cpu, self.server_wait):
                while suite is not None:
                    message = self._parse_call(raw, rid, op)
                    if message is None:
                        break
                    answer, raised = suite.answer(message, op)
                    refusal = refusal or raised
                    raw = self._answer_and_read(rid, op, answer, timeout)
        reply = self._parse(raw, rid, op)
        freed = reply.get("freed", [])
        if allocator is not None:
            for ids in freed:
                allocator.free(np.asarray(ids, dtype=np.int64))
        if refusal is not None:  # as in process: the pool's or the controller's refusal ends the cache's call
            raise refusal
        if "error" in reply:
            code, text = reply["error"], reply.get("text", "")
            if code == REFUSED:
                raise WireRefused(text)
            if code == NOT_SUPPORTED:
                raise NotImplementedError(f"{op}: the wire server does not support it ({text})")
            if code == CRASH:
                raise WireCrash(f"{op}: the wire server crashed: {text}")
            raise WireProtocolError(f"{op}: the wire server answered error {code}: {text}")
        return reply["ok"]

    def _exchange(self, op: str, args: dict[str, Any], timeout: float | None) -> tuple[int, bytes]:
        """Write one request and read one line back (the caller holds the lock)."""
        rid = self._next_id
        try:
            line = json.dumps({"id": rid, "op": op, "args": args}, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise WireRefused(f"{op}: an argument has no JSON form, so it cannot be sent ({exc})") from None
        self._next_id += 1
        # From the write on, whatever stops this call (the suite's alarm, wherever it lands, or ^C) kills
        # the server: a request left in flight would be answered to the next one (a wrong id), and a
        # server blocked in it would run on. The write is inside too: a server that does not read blocks it.
        try:
            try:
                self.process.stdin.write(line.encode() + b"\n")
            except (BrokenPipeError, OSError):
                raise self._died() from None
            if timeout is not None:  # init: a wall-clock limit of its own
                deadline, cpu_limit = time.monotonic() + timeout, None
            elif self.cpu_readable:  # the server's CPU time judged, as an in-process call's (target.py)
                deadline, cpu_limit = time.monotonic() + call_wall_limit(), call_limit()  # a shrink's share while shrinking
            else:
                deadline, cpu_limit = time.monotonic() + call_limit() + 1.0, None
            # what the suite's backstop says, and how it judges a starved server, if it fires first
            with computed_elsewhere("the wire server", self.request_cpu, self.server_wait):
                return rid, self._read_line(deadline, op, cpu_limit)
        except BaseException as exc:  # the per-operation alarm, or ^C: the reply would come late
            if not isinstance(exc, WireServerDied):
                self.close(f"it was stopped while answering {op} ({type(exc).__name__})", kill=True)
            raise

    def _parse_call(self, raw: bytes, rid: int, op: str) -> dict[str, Any] | None:
        """A line that is the server's call of the suite's side (``{"id": rid, "call": NAME, "args": {...}}``),
        or ``None`` for anything else (the reply, parsed as ever)."""
        try:
            message = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(message, dict) or "call" not in message:
            return None
        if message.get("id") != rid or not isinstance(message.get("call"), str) or not isinstance(message.get("args", {}), dict):
            self.close(f"its call while answering {op} broke the protocol")
            raise WireProtocolError(f"{self._who()}: a call while answering {op} (id {rid}) must be "
                                    f"{{'id': {rid}, 'call': NAME, 'args': {{...}}}}: {raw[:300]!r}")
        return message

    def _answer_and_read(self, rid: int, op: str, answer: dict[str, Any], timeout: float | None) -> bytes:
        """Write the suite's answer to a call of the server's and read its next line (the caller holds the lock)."""
        try:
            try:
                self.process.stdin.write(json.dumps({"id": rid, **answer}, separators=(",", ":")).encode() + b"\n")
            except (BrokenPipeError, OSError):
                raise self._died() from None
            deadline, cpu_limit = ((time.monotonic() + call_wall_limit(), call_limit()) if self.cpu_readable
                                   else (time.monotonic() + call_limit() + 1.0, None))  # as _exchange's
            if self.request_cpu_start is None and self.cpu_readable:  # one read per request that calls: its
                self.request_cpu_start = self.server_cpu()  # prompt lines would leave the backstop no CPU time to quote
            with computed_elsewhere("the wire server", self.request_cpu, self.server_wait):
                return self._read_line(deadline, op, cpu_limit, first=False)
        except BaseException as exc:  # as _exchange: a reply left in flight would answer the next request
            if not isinstance(exc, WireServerDied):
                self.close(f"it was stopped while answering {op} ({type(exc).__name__})", kill=True)
            raise

    def _parse(self, raw: bytes, rid: int, op: str) -> dict[str, Any]:
        def broken(what: str) -> WireProtocolError:
            self.close(f"its reply to {op} broke the protocol: it {what}")  # a later call's "not running" says why
            return WireProtocolError(f"{self._who()}: the reply to {op} (id {rid}) {what}: {raw[:300]!r}")

        try:
            reply = json.loads(raw)
        except ValueError:
            raise broken("is not JSON") from None
        if not isinstance(reply, dict):
            raise broken("is not a JSON object")
        if reply.get("id") != rid:
            raise broken(f"has id {reply.get('id')!r}, not {rid}")
        if ("ok" in reply) == ("error" in reply):
            raise broken("must have exactly one of 'ok' and 'error'")
        if "error" in reply and type(reply["error"]) is not int:
            raise broken("has an error code that is not an integer")
        freed = reply.get("freed", [])
        if not isinstance(freed, list) or not all(isinstance(f, list) and all(type(i) is int for i in f) for f in freed):
            raise broken("has 'freed' that is not a list of lists of slot ids")
        return reply


def _jsonable(value: Any) -> Any:
    """Tokens, values and counts as JSON: arrays by their contents (a 0-d array a scalar, 2-D
    nested), NumPy scalars as Python ones; anything else as it is (for JSON to take or refuse)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def policy_from_wire(value: Any) -> Any:
    """A declared ``eviction_policy`` as the wire carries it (WIRE.md, "Eviction policies"): a string
    stays a name (only ``"lru"`` is judged); ``{"named": "lfu", ...}`` is SGLang's policy of that
    name, built with the other fields as its arguments, so its order is judged as in process."""
    if not isinstance(value, dict):
        return value
    args = dict(value)
    name = args.pop("named", None)
    if name not in NAMED:
        raise ValueError(f"eviction_policy {value!r}: 'named' must be one of {sorted(NAMED)}")
    try:
        return NAMED[name](**args)
    except TypeError as exc:  # an argument that policy does not take
        raise ValueError(f"eviction_policy {value!r}: {exc}") from None


def second_pool_from_wire(value: Any) -> Any:
    """A host tier's declared ``second_pool`` as the wire carries it (WIRE.md, "A second pool on a host tier"):
    ``{"kind": "state", ...StatePool's fields}`` or ``{"kind": "window", "window": W, ...}``."""
    from radixcheck.properties.cache.contract import SlidingWindow, StatePool

    kinds = {"state": StatePool, "window": SlidingWindow}
    if not isinstance(value, dict) or value.get("kind") not in kinds:
        raise ValueError(f"second_pool {value!r}: a host tier takes null, {{\"kind\": \"state\", ...}} or "
                         "{\"kind\": \"window\", \"window\": W, ...}")
    args = {k: v for k, v in value.items() if k != "kind"}
    try:
        return kinds[value["kind"]](**args)
    except TypeError as exc:  # a field that pool does not have
        raise ValueError(f"second_pool {value!r}: {exc}") from None


def encode_namespace(value: Any) -> Any:
    """A namespace on the wire (WIRE.md, "Namespaces"): tuples are arrays, a list ``{"list": [...]}``,
    a dict ``{"dict": [[k, v], ...]}``; a bool or a float travels in its canonical form
    (:func:`~radixcheck.properties.cache.canonical.canonical_namespace`: ``True`` and ``1.0`` as ``1``,
    ``2.5`` as ``2.5``), so namespaces the contract calls equal are one JSON value and any other two differ."""
    if isinstance(value, tuple):
        return [encode_namespace(v) for v in value]
    if isinstance(value, list):
        return {"list": [encode_namespace(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode_namespace(k), encode_namespace(v)] for k, v in value.items()]}
    value = _jsonable(value)  # a NumPy scalar as its Python value
    return canonical_namespace(value) if isinstance(value, (bool, float)) else value


class WireHandle:
    """A handle the server issued (its integer), on one connection."""

    __slots__ = ("connection", "number", "__weakref__")

    def __init__(self, connection: WireConnection, number: int) -> None:
        self.connection = connection
        self.number = number

    def __repr__(self) -> str:
        return f"WireHandle({self.number})"


class WireCache:
    """One cache on the server, with the contract's methods."""

    suite: Any = None  # a tier cache's pools and controller, which the server calls while it answers (wire_tier.py)

    def __init__(self, connection: WireConnection, allocator: SlotAllocator, page_size: int = 1, **new: Any) -> None:
        self.connection = connection
        self.allocator = allocator
        self.cache_id = connection.call("new", {"page_size": _jsonable(page_size), **new}, allocator, suite=self.suite)
        if type(self.cache_id) is not int:
            raise WireProtocolError(f"new: the cache id must be an integer, got {self.cache_id!r}")
        self.page_size = page_size
        if connection.run is not None:  # dropped when its run ends (WireConnection.call)
            connection.run_caches.append(self.cache_id)
        weakref.finalize(self, _drop, connection, self.cache_id)

    def _call(self, op: str, namespace: Any = None, said: bool = False, **args: Any) -> Any:
        args = {"cache": self.cache_id, **{k: _jsonable(v) for k, v in args.items()}}
        if said:
            args["namespace"] = encode_namespace(namespace)
        return self.connection.call(op, args, self.allocator, suite=self.suite)

    @staticmethod
    def _tags(keywords: dict[str, Any]) -> dict[str, Any]:
        """A request's ``priority=`` (sent only to a policy that takes one) travels as ``"priority"``."""
        return {"priority": keywords["priority"]} if "priority" in keywords else {}

    def _handle(self, handle: Any) -> int | None:
        return handle.number if isinstance(handle, WireHandle) and handle.connection is self.connection else None

    def _count(self, op: str, result: Any) -> Any:
        """A count as the server sent it: the suite judges return values (a ``null`` is Python's
        ``None``, as an in-process cache's would be), the wire only carries them."""
        return result

    def match_prefix(self, tokens: Sequence[int], **namespace: Any) -> tuple[np.ndarray, WireHandle]:
        result = self._call("match_prefix", namespace.get("namespace"), "namespace" in namespace, tokens=tokens,
                            **self._tags(namespace))
        if not isinstance(result, dict) or type(result.get("handle")) is not int or not isinstance(result.get("values"), list) \
                or not all(type(v) is int for v in result["values"]):
            raise WireProtocolError(f"match_prefix: the reply must be {{'values': [ints], 'handle': int}}, got {result!r}")
        return np.asarray(result["values"], dtype=np.int64), self._wrap(result["handle"])

    def _wrap(self, number: int) -> WireHandle:
        """The one WireHandle of a handle id the server issued (the same object each time it comes back)."""
        handle = self.connection.handles.get(number)
        if handle is None:
            handle = self.connection.handles[number] = WireHandle(self.connection, number)
        return handle

    def insert(self, tokens: Sequence[int], values: np.ndarray, **namespace: Any) -> int:
        result = self._call("insert", namespace.get("namespace"), "namespace" in namespace, tokens=tokens, values=values,
                            **self._tags(namespace))
        return self._count("insert", result)

    def inc_lock_ref(self, handle: Any) -> None:
        self._call("inc_lock_ref", handle=self._handle(handle))

    def dec_lock_ref(self, handle: Any) -> None:
        self._call("dec_lock_ref", handle=self._handle(handle))

    def evict(self, num_tokens: int) -> int:
        return self._count("evict", self._call("evict", num_tokens=num_tokens))

    def evict_prefix(self, tokens: Sequence[int], **namespace: Any) -> int:
        return self._count("evict_prefix", self._call("evict_prefix", namespace.get("namespace"), "namespace" in namespace,
                                                      tokens=tokens))

    def total_size(self) -> int:
        return self._count("total_size", self._call("total_size"))

    def evictable_size(self) -> int:
        return self._count("evictable_size", self._call("evictable_size"))

    def protected_size(self) -> int:
        return self._count("protected_size", self._call("protected_size"))

    def reset(self) -> None:
        self._call("reset")

    # ---- running requests (WIRE.md, "Running requests"): sent only to a server that declares lifecycle "requests" ----

    HOST_PART: tuple[str, ...] = ()  # a tier request's host part (wire_tier.py)

    def _request_op(self, op: str, req: Any, **more: Any) -> None:
        """One of the cache's own request methods on ``req`` (the suite's ``Request``): the request travels
        whole, the server's cache works on its copy, and what it left there comes back into ``req``. A
        refusal leaves ``req`` as it was."""
        if self.connection.lifecycle != "requests":  # never sent: the server did not declare it
            raise NotImplementedError(f"{op}: the wire server does not declare lifecycle 'requests'")
        sent: dict[str, Any] = {"id": self.connection.request_id(req), "tokens": _jsonable(list(req.tokens)),
                                "priority": int(req.priority), "slots": _jsonable(np.asarray(req.slots).reshape(-1)),
                                "filled": int(req.filled), "protected": int(req.protected), "handle": self._handle(req.handle)}
        if self._namespaces():
            sent["namespace"] = encode_namespace(req.namespace)
        for name in self.HOST_PART:
            sent[name] = self._handle(req.host_handle) if name == "host_handle" else int(req.host_length)
        sent.update(self._second_of(req))
        result = self.connection.call(op, {"cache": self.cache_id, "request": sent, **more}, self.allocator, suite=self.suite)
        fields = ("slots", "filled", "protected", "handle", *self.HOST_PART)
        handles = ("handle", "host_handle")
        if not isinstance(result, dict) or set(result) != set(fields) or not isinstance(result["slots"], list) \
                or not all(type(v) is int for v in result["slots"]) \
                or not all(type(result[k]) is int for k in fields if k not in handles and k != "slots") \
                or not all(result[k] is None or type(result[k]) is int for k in fields if k in handles):
            raise WireProtocolError(f"{op}: the reply must be the request's {{{', '.join(map(repr, fields))}}} "
                                    f"(slots a list of ints, handles an int or null), got {result!r}")
        req.slots = np.asarray(result["slots"], dtype=np.int64)
        req.filled, req.protected = result["filled"], result["protected"]
        req.handle = None if result["handle"] is None else self._wrap(result["handle"])
        if self.HOST_PART:
            req.host_length = result["host_length"]
            req.host_handle = None if result["host_handle"] is None else self._wrap(result["host_handle"])

    def _namespaces(self) -> bool:
        return bool(self.connection.capabilities.namespaces)

    def _second_of(self, req: Any) -> dict[str, Any]:
        """A request's second-pool values, where they travel (a host tier's: wire_tier.py); none here."""
        return {}

    def match_req(self, req: Any) -> None:
        self._request_op("match_req", req)

    def lock_req(self, req: Any) -> None:
        self._request_op("lock_req", req)

    def cache_unfinished_req(self, req: Any) -> None:
        self._request_op("cache_unfinished_req", req)

    def cache_finished_req(self, req: Any, insert: bool = True) -> None:
        if type(insert) is not bool:
            raise WireRefused(f"cache_finished_req: insert must be a bool, got {insert!r}")
        self._request_op("cache_finished_req", req, insert=insert)


def _drop(connection: WireConnection, cache_id: int) -> None:
    """A cache is gone: the next request tells the server first (a finalizer sends nothing itself:
    it may run in the middle of another request). A cache made in a run of a program is dropped when
    the run ends instead, at a point the stream fixes."""
    if cache_id not in connection.dropped and cache_id not in connection.run_caches:
        connection.pending_drops.append(cache_id)


class WireFactory:
    """``factory(allocator, page_size) -> WireCache`` for one server command; ``capabilities`` are
    the server's own (asking for them starts the server)."""

    def __init__(self, command: Sequence[str] | None = None) -> None:
        self._command = list(command) if command is not None else None
        self._connection: WireConnection | None = None
        self._clock: tuple[WireConnection, ServerClock, float] | None = None  # cpu_time's: its connection, clock, offset
        self._clock_carried = 0.0  # the server CPU time cpu_time has counted so far

    @property
    def command(self) -> list[str]:
        return self._command if self._command is not None else command_from_env()

    @property
    def from_environment(self) -> bool:
        """Whether the command is ``RADIXCHECK_WIRE_CMD``'s (``server``), not one fixed by ``wire_factory``."""
        return self._command is None

    def connection(self) -> WireConnection:
        if self._connection is not None:
            self._connection.begin_run()
        if self._connection is None or self._connection.dead is not None or self._connection.command != self.command:
            if self._connection is not None:
                self._connection.close()
            with outside_the_limit():  # a (re)start inside a guarded call: init's limit, not the call's
                self._connection = WireConnection(self.command)
        return self._connection

    @property
    def capabilities(self) -> Capabilities:
        """The server's ``capabilities``; a server that declares a host tier has none (an AttributeError, so
        the target is a tier target: ``tier_capabilities``)."""
        connection = self.connection()
        if connection.tier_capabilities is not None:
            raise AttributeError("capabilities: the wire server declares a host tier (tier_capabilities)")
        return connection.capabilities

    @property
    def tier_capabilities(self) -> Any:
        """The server's ``tier_capabilities`` (a TierCapabilities); an AttributeError for a server without a host
        tier, which is then never sent a tier op."""
        caps = self.connection().tier_capabilities
        if caps is None:
            raise AttributeError("tier_capabilities: the wire server declares no host tier")
        return caps

    def __call__(self, allocator: SlotAllocator, *args: Any, **keywords: Any) -> Any:
        """``factory(allocator, page_size)``, or for a host tier ``factory(allocator, host_pool, controller,
        page_size, write_policy)`` (the tier contract's call)."""
        connection = self.connection()
        if connection.tier_capabilities is not None:
            from radixcheck.properties.adapters.wire_tier import WireTierCache

            return WireTierCache(connection, allocator, *args, **keywords)
        return WireCache(connection, allocator, *args, **keywords)

    def cpu_time(self) -> float:
        """This process's CPU time plus its server's (s): the clock ``radixcheck bench`` times a wire
        target on, so a call's cost counts where it is spent, in the server. It runs on across a
        restart (the new server's time is added from where the last one's stopped)."""
        connection = self.connection()
        if self._clock is None or self._clock[0] is not connection:
            if self._clock is not None:
                self._clock[1].close()
            clock = ServerClock(connection.process.pid)
            start = clock() or 0.0
            self._clock = (connection, clock, self._clock_carried - start)
        _, clock, offset = self._clock
        server = clock()
        if server is not None:
            self._clock_carried = server + offset
        return time.process_time() + self._clock_carried

    def close(self, why: str = "closed") -> None:
        if self._connection is not None:
            self._connection.close(why)

    def start_afresh(self) -> None:
        """Stop the server; the next cache starts a new one (the plugin calls it before each
        conformance test, so that no test meets what an earlier test left in the server)."""
        self.close("restarted for the next test")


def wire_factory(command: Sequence[str] | str) -> WireFactory:
    """A factory for the server that ``command`` starts (a list, or a string split as a shell would)."""
    return WireFactory(shlex.split(command) if isinstance(command, str) else command)


server = WireFactory()
"""The server named by ``RADIXCHECK_WIRE_CMD`` (default: the Python reference server)."""

reference = WireFactory(reference_command())
"""The Python reference server, whatever the setting says."""
