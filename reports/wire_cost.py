"""What the wire protocol costs per call: the reference cache in process, and the same cache
behind ``python -m radixcheck.reference.wire_server``, driven by one serving loop, side by side.

``python -m radixcheck.reports.wire_cost [--requests N] [--rounds R] [--server CMD] [--out reports/WIRE_COST.md]``

``--server CMD`` times another server (any command that speaks ``WIRE.md``, split as a shell
would, e.g. ``--server "./target/release/my-cache-server"``) against the same in-process
reference: the wire column is then that server's, the protocol's cost and its cache's together.
It must offer page size 1. A server that does not start is exit 2, one line.

The loop is an engine's: match a prompt (one of a few system prompts plus a user turn), lock the
handle, insert the whole prompt with fresh slots, unlock, evict when the pool runs low, and read
the three sizes (as the state machine does after every step). The two targets get the same calls
in the same order; rounds alternate (in process, wire, in process, ...) so drift on a shared
machine falls on both. Each figure is a round's mean per call: the best round (the least
disturbed by other jobs) and, in brackets, the median round. ``sizes`` rows time a
``total_size`` alone: on the wire that is the bare round trip (encode, two pipe hops, decode).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from radixcheck.properties.adapters.wire import WireError, reference_command, wire_factory
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.target import OperationTimeout
from radixcheck.reference import RadixCache
from radixcheck.reports.machine import cpu_line

POOL = 1 << 16
SYSTEM_PROMPTS, SYSTEM_LEN, TURN_LEN = 4, 256, 64
ROUND_TRIPS = 20000
TICK = 1 / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system) of this process, plus that of the server process ``pid``."""
    mine = time.process_time()
    if pid is None:
        return mine
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return mine + (int(fields[11]) + int(fields[12])) * TICK


def workload(requests: int, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    systems = [rng.integers(0, 150_000, SYSTEM_LEN).tolist() for _ in range(SYSTEM_PROMPTS)]
    return [systems[int(rng.integers(SYSTEM_PROMPTS))] + rng.integers(0, 150_000, TURN_LEN).tolist() for _ in range(requests)]


def serve(cache: Any, pool: SlotAllocator, prompts: list[list[int]]) -> dict[str, list[float]]:
    """Run the loop; return each operation's call times (seconds)."""
    times: dict[str, list[float]] = defaultdict(list)
    clock = time.perf_counter

    def timed(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        start = clock()
        result = fn(*args)
        times[name].append(clock() - start)
        return result

    for prompt in prompts:
        values, handle = timed("match_prefix", cache.match_prefix, prompt)
        timed("inc_lock_ref", cache.inc_lock_ref, handle)
        if pool.available() < len(prompt):
            timed("evict", cache.evict, 4 * len(prompt))
        fresh = pool.alloc(len(prompt) - len(values))
        prefix = timed("insert", cache.insert, prompt, np.concatenate([values, fresh]))
        if prefix > len(values):  # raced by nobody here, but the caller frees what it brought and the cache kept
            pool.free(fresh[: prefix - len(values)])
        timed("dec_lock_ref", cache.dec_lock_ref, handle)
        timed("sizes", cache.total_size)
        cache.evictable_size()
        cache.protected_size()
    return times


def measure(requests: int, rounds: int, command: list[str] | None = None) -> dict[str, dict[str, list[float]]]:
    """Each operation's mean time (us) in each round, for "in process" (the reference) and "wire"
    (the server ``command`` starts; default: the reference behind the Python wire server)."""
    prompts = workload(requests)
    served = wire_factory(command or reference_command())
    if 1 not in served.capabilities.page_sizes:  # starts the server before timing
        served.close()
        raise WireError(f"the server declares page sizes {list(served.capabilities.page_sizes)}; the loop needs page size 1")
    means: dict[str, dict[str, list[float]]] = {"in process": defaultdict(list), "wire": defaultdict(list)}
    try:
        for _ in range(rounds):
            for label, factory in (("in process", RadixCache), ("wire", served)):
                pid = served.connection().process.pid if label == "wire" else None
                pool = SlotAllocator(POOL, churned=False)
                cpu = cpu_seconds(pid)
                times = serve(factory(pool, 1), pool, prompts)
                cpu = cpu_seconds(pid) - cpu
                calls = sum(len(t) for t in times.values())
                for name, t in times.items():
                    means[label][name].append(1e6 * sum(t) / len(t))
                means[label]["all calls"].append(1e6 * sum(sum(t) for t in times.values()) / calls)
                means[label]["all calls, CPU"].append(1e6 * cpu / (calls + 2 * len(prompts)))  # + the two untimed sizes
                empty = factory(SlotAllocator(8), 1)  # the bare round trip: a call that does nothing
                start, cpu = time.perf_counter(), cpu_seconds(pid)
                for _ in range(ROUND_TRIPS):
                    empty.total_size()
                means[label]["round trip"].append(1e6 * (time.perf_counter() - start) / ROUND_TRIPS)
                means[label]["round trip, CPU"].append(1e6 * (cpu_seconds(pid) - cpu) / ROUND_TRIPS)
    finally:
        served.close()
    return {label: dict(ops) for label, ops in means.items()}


def render(result: dict[str, dict[str, list[float]]], requests: int, rounds: int, load: tuple[float, float],
           server: str | None = None) -> str:
    rows = ["| operation | in process, best (median) us/call | wire, best (median) us/call | wire - in process, best (us) |",
            "|---|---:|---:|---:|"]
    for name in ("round trip", "round trip, CPU", "all calls", "all calls, CPU", "sizes", "match_prefix", "insert",
                 "inc_lock_ref", "dec_lock_ref", "evict"):
        if name in result["wire"]:
            a, b = result["in process"][name], result["wire"][name]
            rows.append(f"| {name} | {min(a):.1f} ({statistics.median(a):.1f}) | {min(b):.1f} ({statistics.median(b):.1f}) | "
                        f"{min(b) - min(a):+.1f} |")
    command = f"python -m radixcheck.reports.wire_cost --requests {requests} --rounds {rounds}"
    behind = "`python -m radixcheck.reference.wire_server`"
    if server is not None:
        command += f" --server {shlex.quote(server)}"
        behind = f"the server `{server}` (its own cache, so the wire column is the protocol's cost and its cache's)"
    return "\n".join([
        "# The wire protocol's cost per call", "",
        f"Generated by `{command}`. CPU: {cpu_line()}; Python {sys.version.split()[0]}, {os.cpu_count()} cores shared with other "
        f"jobs (load average {load[0]:.1f} before, {load[1]:.1f} after: a round trip needs the server scheduled, so it grows "
        "with the load).", "",
        f"{requests} requests ({SYSTEM_PROMPTS} system prompts of {SYSTEM_LEN} tokens, a {TURN_LEN}-token turn each), page "
        f"size 1, the reference cache in process and behind {behind} (JSON lines "
        f"over pipes); best and median of {rounds} alternating rounds. `all calls` weighs every call the loop sent; `sizes` is "
        "`total_size` alone (the reference walks its tree for it); `round trip` is `total_size` of an empty cache, "
        f"{ROUND_TRIPS} times: the protocol's own cost. Rows without `CPU` are wall time per call; `, CPU` rows are "
        "CPU time (user + system) per call of the client and, on the wire, the server together (from /proc), which "
        "the other jobs on the machine do not inflate. Under load the wall rows are unreliable both ways: the wire "
        "run's work is split over two processes, which the scheduler gives two shares of the CPU.", "",
        *rows, "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--server", default=None, metavar="CMD",
                        help="the wire server to time, split as a shell would (default: the reference behind the Python server)")
    parser.add_argument("--out", default=None, help="write the markdown table here (default: print it)")
    options = parser.parse_args(argv)
    if options.requests < 1 or options.rounds < 1:
        parser.error("--requests and --rounds must be positive")
    try:
        command = shlex.split(options.server) if options.server is not None else None
    except ValueError as exc:
        parser.error(f"--server: {exc}")
    if command == []:
        parser.error("--server needs a command")
    before = os.getloadavg()[0]
    try:
        result = measure(options.requests, options.rounds, command)
    except (WireError, OperationTimeout) as exc:
        print(f"wire_cost: error: {exc}", file=sys.stderr)
        return 2
    text = render(result, options.requests, options.rounds, (before, os.getloadavg()[0]), options.server)
    if options.out:
        with open(options.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
