"""The wire adapter (properties/adapters/wire.py) and the Python wire server (reference/wire_server.py).

The reference over the wire passes the state machine, a catalogued mutant over the wire fails
for its own reason, and a server that dies, hangs or breaks the protocol is a named error within
the per-operation limit, never a hang of the suite."""

from __future__ import annotations

import gc
import json
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.properties.adapters.wire import (
    WireCrash,
    WireFactory,
    WireProtocolError,
    WireRefused,
    WireServerDied,
    reference_command,
    wire_factory,
)
from radixcheck.properties.cache.contract import Request, SlotAllocator
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import MostRecentFirst, UnmatchedUnlockAccepted
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import TIMEOUT_ENV, WALL_TIMEOUT_ENV, OperationTimeout

# A server that answers init and new as a real one does, then misbehaves on the next request as
# its argument says: "die" exits 3 after a line on stderr, "hang" never answers (blocked), "spin" never
# answers (computing), "slow" answers after 1 s blocked, "busy" after 0.05 s of CPU time, the rest answer wrongly.
FAULTY = r"""
import json, sys, time
mode = sys.argv[1]
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "init":
        out = {"id": req["id"], "ok": {"protocol": 1, "capabilities": {}, "server": "faulty"}}
    elif req["op"] == "new":
        out = {"id": req["id"], "ok": 1}
    elif mode == "slow":
        time.sleep(1); out = {"id": req["id"], "ok": 0}
    elif mode == "busy":
        spent = time.process_time() + 0.05
        while time.process_time() < spent: pass
        out = {"id": req["id"], "ok": 0}
    elif mode == "die":
        print("boom: segfault in the tree", file=sys.stderr, flush=True)
        sys.exit(3)
    elif mode == "hang":
        time.sleep(600)
    elif mode == "spin":
        while True: pass
    elif mode == "not_json":
        sys.stdout.write("Traceback (most recent call last):\n"); sys.stdout.flush(); continue
    elif mode == "wrong_id":
        out = {"id": req["id"] + 5, "ok": 0}
    elif mode == "both":
        out = {"id": req["id"], "ok": 0, "error": 1000}
    elif mode == "bad_freed":
        out = {"id": req["id"], "ok": 0, "freed": [3, 4]}
    elif mode == "bad_match":
        out = {"id": req["id"], "ok": {"values": "seven", "handle": 1}}
    print(json.dumps(out), flush=True)
"""


def faulty(mode: str) -> WireFactory:
    return wire_factory([sys.executable, "-c", FAULTY, mode])


@pytest.fixture(scope="module")
def served():
    factory = wire_factory(reference_command())
    yield factory
    factory.close()


def test_a_server_not_declaring_requests_is_sent_no_request_op(served) -> None:
    """The reference runs requests itself; its server declares "tree" unless told (WIRE.md, "Running requests")."""
    assert served.capabilities.lifecycle == "tree"
    cache = served(SlotAllocator(16), 1)
    sent = cache.connection._next_id
    for call in (cache.match_req, cache.lock_req, cache.cache_unfinished_req, cache.cache_finished_req):
        with pytest.raises(NotImplementedError, match="does not declare lifecycle 'requests'"):
            call(Request([1, 2]))
    assert cache.connection._next_id == sent  # nothing went over the wire


@pytest.mark.deep  # a server process through a whole state machine
def test_reference_over_the_wire_passes_the_state_machine(served) -> None:
    search = settings(profiles.SETTINGS["mutation"], max_examples=8)
    run_machine(machine_for(served, served.capabilities, 4, "wire_reference"), search)


@pytest.mark.sampled  # a catalogue that grows with each contract (conftest.FAST_SAMPLE)
@pytest.mark.parametrize("mutant", [MostRecentFirst, UnmatchedUnlockAccepted], ids=lambda m: m.bug_class)
def test_mutant_over_the_wire_fails_for_its_own_reason(mutant) -> None:
    factory = wire_factory([*reference_command(), "--cache", f"radixcheck.properties.cache.mutants:{mutant.__name__}"])
    try:
        with pytest.raises(mutant.caught_by):
            run_machine(machine_for(factory, factory.capabilities, 1, f"wire_{mutant.__name__}"), profiles.SETTINGS["mutation"])
    finally:
        factory.close()


def test_frees_reach_the_suites_pool_and_refusals_change_nothing(served) -> None:
    pool = SlotAllocator(64)
    cache = served(pool, 1)
    slots = pool.alloc(4)
    assert cache.insert([1, 2, 3, 4], slots) == 0
    values, handle = cache.match_prefix(np.asarray([1, 2, 3, 9]))
    assert np.array_equal(values, slots[:3])
    state = lambda: (cache.total_size(), cache.evictable_size(), cache.protected_size(), set(pool.in_use))  # noqa: E731
    before = state()
    for bad in (lambda: cache.match_prefix([1.0, 2.0]), lambda: cache.evict(1.5), lambda: cache.dec_lock_ref(object()),
                lambda: cache.dec_lock_ref(handle), lambda: cache.insert([5, 6], slots[:1]),
                lambda: cache.insert([5], slots[:1], namespace=["x"])):
        with pytest.raises(WireRefused):
            bad()
    assert state() == before and pool.freed_log == []
    assert cache.evict(10) == 4 and sorted(pool.freed_log) == sorted(slots.tolist())
    with pytest.raises(ValueError):  # a refused page size is a ValueError, as the contract asks
        served(SlotAllocator(8), 0)


def test_a_server_that_dies_is_named_with_its_stderr() -> None:
    cache = faulty("die")(SlotAllocator(8), 1)
    with pytest.raises(WireServerDied, match=r"exited with code 3.*boom: segfault"):
        cache.total_size()
    with pytest.raises(WireServerDied, match="not running"):
        cache.evict(1)


@pytest.mark.deep  # waits out an operation limit
@pytest.mark.parametrize(("mode", "named"), [("spin", "0.3 s of its CPU time"), ("hang", "within the wall-clock backstop")])
def test_a_hanging_server_is_a_timeout_and_is_killed(monkeypatch, mode: str, named: str) -> None:
    """A server that computes is stopped by its own CPU time; one that blocks, by the wall-clock backstop."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "2" if mode == "hang" else "600")
    factory = faulty(mode)
    cache = factory(SlotAllocator(8), 1)
    with pytest.raises(OperationTimeout, match=named):
        cache.total_size()
    assert factory._connection.process.poll() is not None  # killed, not left running


@pytest.mark.deep  # starts a server
def test_a_server_that_spins_while_shrinking_is_stopped_at_the_shrinks_share_of_the_limit(monkeypatch) -> None:
    """A shrink candidate that meets a hang costs a tenth of the limit (target.shrinking_limits): over
    the wire too, where the client judges the server's own CPU time (it used the whole limit)."""
    from radixcheck.properties.target import SHRINK_LIMIT_FRACTION, shrinking_limits

    monkeypatch.setenv(TIMEOUT_ENV, "3")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "600")
    factory = faulty("spin")
    cache = factory(SlotAllocator(8), 1)
    with shrinking_limits(), pytest.raises(OperationTimeout, match=f"within {3 * SHRINK_LIMIT_FRACTION:g} s of its CPU time"):
        cache.total_size()
    assert factory._connection.process.poll() is not None


@pytest.mark.deep  # a server that answers slowly
def test_a_server_slow_on_the_wall_clock_but_not_computing_is_not_a_hang(monkeypatch) -> None:
    """The loaded machine, simulated: the server waits 1 s (spending no CPU time) against a 0.3 s limit, and answers."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "600")
    cache = faulty("slow")(SlotAllocator(8), 1)
    assert cache.total_size() == 0


@pytest.mark.parametrize(("mode", "named"), [("not_json", "is not JSON"), ("wrong_id", "has id"),
                                             ("both", "exactly one of 'ok' and 'error'"), ("bad_freed", "'freed'"),
                                             ("bad_match", "'values': \\[ints\\]")])
def test_bad_replies_are_named(mode: str, named: str) -> None:
    cache = faulty(mode)(SlotAllocator(8), 1)
    with pytest.raises(WireProtocolError, match=named):
        cache.match_prefix([1, 2])


def test_a_namespace_travels_in_one_form_per_value() -> None:
    """Over the wire, two namespaces are one JSON value exactly when the contract calls them equal:
    ``5``/``"5"``, ``None``/``"None"``, a tuple and its rendering stay apart; ``1``/``1.0``/``True`` meet."""
    import json

    from hypothesis import given

    from radixcheck.properties.adapters.wire import encode_namespace
    from radixcheck.properties.cache.machine import UNSAID
    from radixcheck.properties.cache.tenants import confusable_pairs

    @settings(database=None, max_examples=60, deadline=None)
    @given(confusable_pairs(()))
    def one_form(pair) -> None:  # noqa: ANN001
        a, b = (None if n is UNSAID else n for n in pair)
        assert (json.dumps(encode_namespace(a)) == json.dumps(encode_namespace(b))) == (a == b), pair

    one_form()
    assert [encode_namespace(n) for n in (True, 1.0, -0.0, 2.5, (1, "a"), (True, 1.0))] == [1, 1, 0, 2.5, [1, "a"], [1, 1]]
    with pytest.raises(TypeError, match="finite"):
        encode_namespace(float("nan"))


@pytest.mark.deep
def test_a_cache_keyed_by_str_is_caught_over_the_wire() -> None:
    """The catalogue's NamespaceKeyedByStr, served by the Python server: the generated pairs reach it
    as an integer and a string (or a float and a string) and collide in its tree."""
    from radixcheck.oracles.violations import TenantIsolationViolation
    from radixcheck.properties.cache.mutants import NamespaceKeyedByStr

    factory = wire_factory([*reference_command(), "--cache", f"radixcheck.properties.cache.mutants:{NamespaceKeyedByStr.__name__}"])
    try:
        with pytest.raises(TenantIsolationViolation):
            run_machine(machine_for(factory, factory.capabilities, 1, "wire_NamespaceKeyedByStr"), profiles.SETTINGS["mutation"])
    finally:
        factory.close()


def test_the_card_names_the_wire_server_audited() -> None:
    """Every server is audited through one target, `...adapters.wire:server`: the card (and the
    terminal, through the same line) names the command run and the server's own name, so a bug's
    card and its fix's differ; an in-process target has no such line."""
    from radixcheck.audit import AuditResult, report_card, server_line
    from radixcheck.properties.target import Target
    from radixcheck.reference import RadixCache

    factory = faulty("slow")
    try:
        line = server_line(Target("radixcheck.properties.adapters.wire:server", factory, factory.capabilities))
    finally:
        factory.close()
    assert "-c" in line and "slow" in line and "'faulty'" in line
    # and what no wire server can declare, so "conforms" is not read as covering a host tier
    assert ("(no host tier declared, so none audited; no request methods declared, so none audited; "
            "a second pool without a host tier: not audited over the wire)") in line
    card = report_card(AuditResult("radixcheck.properties.adapters.wire:server", "Capabilities()", [], "ci", server=line))
    assert f"Wire server: {line}" in card
    assert server_line(Target("radixcheck.reference:RadixCache", RadixCache, RadixCache.capabilities)) == ""


# The reference server behind a relay whose refusals (error 1000) lose their request id, as a server
# whose error path forgets the request does (a wire trial's planted bug, reports/findings/wire_trial.md).
NO_ID_ON_REFUSAL = r"""
import json, subprocess, sys
inner = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
for line in sys.stdin:
    inner.stdin.write(line); inner.stdin.flush()
    reply = json.loads(inner.stdout.readline())
    if reply.get("error") == 1000:
        reply["id"] = None
    print(json.dumps(reply), flush=True)
"""


def refusals_without_id() -> WireFactory:
    return wire_factory([sys.executable, "-c", NO_ID_ON_REFUSAL, *reference_command()])


def test_a_broken_reply_where_a_refusal_is_due_is_the_finding_not_its_echo() -> None:
    """A refusal whose reply breaks the protocol is no refusal: the foreign-handle test fails with the
    protocol error itself. It took the error for the refusal, and its next call failed with "not
    running (its reply to inc_lock_ref broke the protocol)", which did not say what broke."""
    from radixcheck.properties.conformance.test_construction import test_handle_from_another_cache_is_refused
    from radixcheck.properties.target import Target

    factory = refusals_without_id()
    try:
        with pytest.raises(WireProtocolError, match=r"the reply to inc_lock_ref \(id \d+\) has id None"):
            test_handle_from_another_cache_is_refused(Target("wire:no_id", factory, factory.capabilities), 1)
    finally:
        factory.close()


@pytest.mark.deep  # a server process through a state machine
def test_the_machine_names_a_broken_refusal_reply() -> None:
    """The state machine's expected refusals (bad input, forbidden locks) let a protocol error through too."""
    factory = refusals_without_id()
    try:
        with pytest.raises(WireProtocolError, match="has id None"):
            run_machine(machine_for(factory, factory.capabilities, 1, "wire_no_id"), profiles.SETTINGS["mutation"])
    finally:
        factory.close()


def test_a_broken_reply_is_one_shape_whichever_op_and_text_met_it() -> None:
    """The envelope is one code path in a server: a reply without its id is one finding, whether a
    refused `new` or a refused `match_prefix` met it, whatever the server's text; another fault of
    the envelope, or another id, is another."""
    from radixcheck.properties.findings.failures import shape_of

    who = "wire server ./router --bug x"
    new = f"""{who}: the reply to new (id 2) has id None, not 2: b'{{"id":null,"error":1000,"text":"got 1.5"}}'"""
    match = f"""{who}: the reply to match_prefix (id 93) has id None, not 93: b'{{"id":null,"error":1000,"text":"unhashable [1]"}}'"""
    assert shape_of(new) == shape_of(match)
    assert shape_of(new) != shape_of(f"{who}: the reply to new (id 2) has id 7, not 2: b'{{}}'")
    assert shape_of(new) != shape_of(f"{who}: the reply to new (id 2) is not JSON: b'Traceback'")


class FreesIntoTheNextCache:
    """The reference whose evictions hand their slots back on a later call, through one log shared by
    every instance: the in-process twin of a wire server with one global free log (a trial's
    planted bug), whose frees reach whichever cache the suite builds next."""

    late: list = []

    def __new__(cls, allocator: SlotAllocator, page_size: int = 1):
        from radixcheck.reference import RadixCache

        class Deferred:
            def free(self, ids) -> None:
                FreesIntoTheNextCache.late.append(np.array(ids, copy=True))

        class Cache(RadixCache):
            def evict(self, n: int) -> int:
                self.allocator = Deferred()
                try:
                    return super().evict(n)
                finally:
                    self.allocator = allocator

            def total_size(self) -> int:
                while FreesIntoTheNextCache.late:
                    allocator.free(FreesIntoTheNextCache.late.pop(0))  # into this cache's pool, whoever evicted them
                return super().total_size()

        return Cache(allocator, page_size=page_size)


def test_a_target_whose_state_outlives_its_cache_is_named_so() -> None:
    """Hypothesis replays a failing program on a fresh cache; a target whose state outlives the cache
    (here, frees that reach the next one) answers differently, and Hypothesis reports a *test* whose
    data generation depends on external state. The finding says what that means for the target."""
    from radixcheck.properties.findings.verdict import UnreplayableTarget
    from radixcheck.reference import RadixCache

    FreesIntoTheNextCache.late.clear()
    with pytest.raises(UnreplayableTarget, match="keeps state outside the cache it was asked for"):
        run_machine(machine_for(FreesIntoTheNextCache, RadixCache.capabilities, 1, "frees_into_next"), profiles.SETTINGS["mutation"])
    FreesIntoTheNextCache.late.clear()


def test_a_hang_files_limit_takes_the_wire_clients_verdict() -> None:
    """A wire server that computes forever is stopped by the wire client (its CPU time, not this
    process's): a hang's repro file must read that as the hang (exit 1), where it exited 2 ("did not
    run to the check: OperationTimeout") and the audit offered no file for a server's hang."""
    import os
    import signal
    import time

    from radixcheck.properties.findings.standalone import hang_limit_lines

    helpers: dict = {"os": os, "signal": signal, "time": time}
    exec("\n".join(hang_limit_lines()), helpers)  # noqa: S102 - the file's own helper, as the file runs it

    def served() -> None:
        raise OperationTimeout("wire server ./router did not answer evict within 5 s of its CPU time; it was killed")

    with pytest.raises(TimeoutError, match="did not answer evict"):
        helpers["within_limit"](served)
    with pytest.raises(ValueError):  # any other exception is not the hang
        helpers["within_limit"](lambda: int("x"))


def test_a_servers_hang_is_one_finding_whichever_clock_stopped_it() -> None:
    """On a loaded machine a spinning server meets the wire client's limit (its CPU time) in one test
    and the suite's wall-clock backstop in another: one hang of evict, one finding; a hang of another
    call is another."""
    from radixcheck.properties.findings.failures import HANG, signature_of

    by_client = ("wire server ./router did not answer evict within 5 s of its CPU time (it computed for 5.0 s); "
                 "it was killed")
    by_backstop = ("evict did not return within 60 s of wall-clock time, the backstop for a call that blocks (it computed "
                   "for only 0.1 s; set RADIXCHECK_OP_WALL_TIMEOUT to change it)")
    assert signature_of(HANG, by_client) == signature_of(HANG, by_backstop)
    assert signature_of(HANG, by_client) != signature_of(HANG, by_client.replace("evict", "match_prefix"))


@pytest.mark.deep  # a state machine, its reduction and two runs of the file
def test_a_broken_refusal_reply_s_repro_exits_0_once_the_server_refuses(monkeypatch) -> None:
    """The file of a broken reply where a refusal is due exits 1 on the server that broke it and 0 on
    one that refuses within the protocol (it exited 2 there: the refusal was "another exception")."""
    import shlex

    from radixcheck.properties.adapters.wire import CMD_ENV, server
    from radixcheck.properties.findings.repro import repro_for, run_repro

    broken = [sys.executable, "-c", NO_ID_ON_REFUSAL, *reference_command()]
    monkeypatch.setenv(CMD_ENV, shlex.join(broken))
    try:
        with pytest.raises(WireProtocolError) as caught:
            run_machine(machine_for(server, server.capabilities, 1, "wire_no_id_repro"), profiles.SETTINGS["mutation"],
                        transcript=True)
        repro = repro_for(caught.value, "radixcheck.properties.adapters.wire:server")
        assert repro.exit_code == 1, repro.output
        monkeypatch.setenv(CMD_ENV, shlex.join(reference_command()))
        assert run_repro(repro.text)[0] == 0
    finally:
        server.close()
def test_start_afresh_stops_the_server_and_the_next_cache_starts_another() -> None:
    """What the plugin calls before each conformance test: nothing an earlier test left in a
    long-lived server reaches the next one."""
    factory = wire_factory(reference_command())
    try:
        cache = factory(SlotAllocator(8), 1)
        cache.insert([1, 2], np.array([3, 4]))
        first = factory.connection().process
        factory.start_afresh()
        assert first.poll() is not None  # stopped
        again = factory(SlotAllocator(8), 1)
        assert factory.connection().process.pid != first.pid and again.total_size() == 0
    finally:
        factory.close()


@pytest.mark.parametrize(("spent", "said"), [(1.5, "the wire server computed for only 1.5 s of its CPU time on it"),
                                             (None, "the wire server's CPU time cannot be read here, so only the wall clock")])
def test_the_backstop_says_whose_cpu_time_it_quotes(spent, said: str) -> None:  # noqa: ANN001
    """A call that waits for another process (a wire server) and meets the suite's wall-clock backstop
    quotes that process's CPU time, or says it cannot: it quoted radixcheck's own, which only waited
    ("it computed for only 0.1 s", a trial's spinning server). The message's part, without a clock to wait on."""
    from radixcheck.properties.target import _backstop_computed, _Call, computed_elsewhere

    call = _Call("evict", 5.0)
    assert _backstop_computed(call, 0.1) == "it computed for only 0.1 s"  # an in-process call's own CPU time, as before
    with computed_elsewhere("the wire server", lambda: spent):  # no guarded call runs: nothing to mark
        pass
    call.elsewhere = ("the wire server", lambda: spent)
    assert said in _backstop_computed(call, 0.1)


@pytest.mark.deep  # waits out a wall-clock backstop of 3 s
def test_a_blocked_servers_backstop_quotes_the_servers_cpu_time(monkeypatch) -> None:
    """The wire client hands the suite's backstop the server's clock: a server blocked on a request
    is stopped there with its own CPU time quoted (the client's own deadline set far off here)."""
    from radixcheck.properties.adapters import wire
    from radixcheck.properties.target import guarded

    monkeypatch.setenv(TIMEOUT_ENV, "0.05")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "3")  # the request is sent long before it, however loaded the machine
    monkeypatch.setattr(wire, "call_wall_limit", lambda: 600.0)
    factory = faulty("hang")
    try:
        cache = factory(SlotAllocator(8), 1)
        with pytest.raises(OperationTimeout, match=r"the wire server computed for only 0\.\d s of its CPU time on it"):
            guarded("total_size", cache.total_size)
        assert factory._connection.process.poll() is not None  # killed, not left running
    finally:
        factory.close()


@pytest.mark.deep  # starts a server process
def test_an_alarm_between_a_requests_write_and_its_read_kills_the_server(monkeypatch) -> None:
    """Whatever stops a call once its request is written kills the server: the suite's alarm could
    land after the write and before the code that handles it (here at the read's deadline, where
    ``call_wall_limit`` is read), and left the server blocked in the request, running, with its reply
    due to the next request. Injected at that point, not waited for."""
    from radixcheck.properties.adapters import wire

    factory = faulty("hang")
    try:
        cache = factory(SlotAllocator(8), 1)

        def alarm() -> float:
            raise OperationTimeout("total_size did not return within 3 s of wall-clock time (injected)")

        monkeypatch.setattr(wire, "call_wall_limit", alarm)
        with pytest.raises(OperationTimeout, match="injected"):
            cache.total_size()
        assert factory._connection.process.poll() is not None  # killed, not left blocked in the request
        assert "stopped while answering total_size" in factory._connection.dead
    finally:
        factory.close()


@pytest.mark.deep  # waits out a wall-clock backstop of 1 s
def test_a_blocked_servers_kill_is_not_cut_short_by_the_next_tick(monkeypatch) -> None:
    """Once the backstop stops a call, its timer ticks on until the call is left, every 0.0125 s here.
    A tick that landed in the adapter's cleanup raised again there, before the kill (or in the
    reap), and a loaded machine left the blocked server running (s59: 1 run in 3 at load 24).
    Injected: a cleanup that stalls past several ticks, as a loaded machine stalls it."""
    import time

    from radixcheck.properties.adapters import wire
    from radixcheck.properties.target import guarded

    monkeypatch.setenv(TIMEOUT_ENV, "0.05")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "1")  # the request is sent well before it
    monkeypatch.setattr(wire, "call_wall_limit", lambda: 600.0)  # the client's own deadline far off
    forget = wire.forget_cpu_of
    monkeypatch.setattr(wire, "forget_cpu_of", lambda pid: (time.sleep(0.1), forget(pid)))  # the cleanup's first step
    factory = faulty("hang")
    try:
        cache = factory(SlotAllocator(8), 1)
        with pytest.raises(OperationTimeout, match="wall-clock"):
            guarded("total_size", cache.total_size)
        assert factory._connection.process.poll() is not None  # killed and reaped, not left running
    finally:
        factory.close()


def test_a_wire_crash_says_what_happened_not_that_the_call_was_legal() -> None:
    """A refusal whose reply lost its id met ``new(page_size=-1)``, bad input, and the finding was
    headed "crash (WireProtocolError raised during a legal call)" (a wire trial). A wire server's
    failure says what happened; an in-process crash, met only in legal calls, keeps its name."""
    from radixcheck.properties.conformance.test_construction import test_bad_page_size_is_refused
    from radixcheck.properties.findings.failures import oracle_of
    from radixcheck.properties.findings.waivers import _finding_problem
    from radixcheck.properties.target import Target

    factory = refusals_without_id()
    try:
        with pytest.raises(WireProtocolError, match="has id None") as caught:
            test_bad_page_size_is_refused(Target("wire:no_id", factory, factory.capabilities), -1)
    finally:
        factory.close()
    assert oracle_of(caught.value) == "crash (WireProtocolError: the wire server's reply broke the protocol)"
    assert oracle_of(WireServerDied("exited with code 134")) == "crash (WireServerDied: the wire server stopped)"
    assert oracle_of(ValueError("stale handle")) == "crash (ValueError raised during a legal call)"
    assert _finding_problem("crash (WireServerDied: *)") is None  # a waiver may name them


def test_the_bench_times_a_wire_server_on_the_servers_cpu_time_too() -> None:
    """``radixcheck bench`` timed a wire target on its own CPU time, which only encodes and waits: a
    trial's O(n) ``evictable_size`` showed there as 95 us against 34 (the server spent 450). A wire
    target's clock adds the server's CPU time; an in-process target's is this process's, as before."""
    import time

    from radixcheck.bench_cli import server_counted
    from radixcheck.properties.target import Target
    from radixcheck.reference import RadixCache

    factory = faulty("busy")
    try:
        cache = factory(SlotAllocator(8), 1)
        start, mine = factory.cpu_time(), time.process_time()
        cache.total_size()  # 0.05 s of the server's CPU time
        assert factory.cpu_time() - start >= 0.04 and time.process_time() - mine < 0.02
        assert server_counted(Target("wire:busy", factory, factory.capabilities)) == factory.cpu_time
    finally:
        factory.close()
    assert server_counted(Target("radixcheck.reference:RadixCache", RadixCache, RadixCache.capabilities)) is time.process_time


# The reference server behind a relay that exits when asked for a lock, as a server that crashes there.
DIES_ON_LOCK = r"""
import json, subprocess, sys
inner = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
for line in sys.stdin:
    if json.loads(line)["op"] == "inc_lock_ref":
        print("segfault in inc_lock_ref", file=sys.stderr, flush=True)
        sys.exit(139)
    inner.stdin.write(line); inner.stdin.flush()
    print(inner.stdout.readline(), end="", flush=True)
"""


@pytest.mark.deep  # a server process through a state machine
def test_a_server_that_dies_in_a_legal_lock_is_its_death_not_a_refusal() -> None:
    """A legal lock whose server died was read as the cache refusing it: "2 refcount safety ...
    raised WireServerDied ...; the call was legal". The finding is the server's death."""
    from radixcheck.properties.findings.failures import oracle_of

    factory = wire_factory([sys.executable, "-c", DIES_ON_LOCK, *reference_command()])
    try:
        with pytest.raises(WireServerDied, match="exited with code 139.*segfault in inc_lock_ref") as caught:
            run_machine(machine_for(factory, factory.capabilities, 1, "wire_dies_on_lock"), profiles.SETTINGS["mutation"])
    finally:
        factory.close()
    assert oracle_of(caught.value) == "crash (WireServerDied: the wire server stopped)"


# The reference server behind a relay that answers every refusal (error 1000) with a crash (error 13),
# as a server whose error path fails where it should refuse.
CRASH_FOR_REFUSAL = r"""
import json, subprocess, sys
inner = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
for line in sys.stdin:
    inner.stdin.write(line); inner.stdin.flush()
    reply = json.loads(inner.stdout.readline())
    if reply.get("error") == 1000:
        reply["error"], reply["text"] = 13, "panic in the refusal path"
    print(json.dumps(reply), flush=True)
"""


def crashes_for_refusals() -> WireFactory:
    return wire_factory([sys.executable, "-c", CRASH_FOR_REFUSAL, *reference_command()])


def test_a_crash_where_a_refusal_is_due_is_the_finding_not_a_refusal() -> None:
    """Error 13 says the server failed and its state is unknown; error 1000 is the refusal. The
    foreign-handle test and the machine's expected refusals took any error, a crash included, for the
    refusal: a server that crashed on every forbidden lock and bad input passed them."""
    from radixcheck.properties.conformance.test_construction import test_handle_from_another_cache_is_refused
    from radixcheck.properties.findings.failures import oracle_of
    from radixcheck.properties.target import Target

    factory = crashes_for_refusals()
    try:
        with pytest.raises(WireCrash, match="panic in the refusal path") as caught:
            test_handle_from_another_cache_is_refused(Target("wire:crash_for_refusal", factory, factory.capabilities), 1)
        machine = machine_for(factory, factory.capabilities, 1, "wire_crash_for_refusal")()
        with pytest.raises(WireCrash, match="panic in the refusal path"):
            machine._expect_refusal("bad input (a negative amount)", "evict", -1)
    finally:
        factory.close()
    assert oracle_of(caught.value) == "crash (WireCrash: the wire server answered error 13 (crash))"


# The reference server, logging each request's op and cache id: what the server saw, in its order.
LOGGING = r"""
import json, sys
from radixcheck.reference import wire_server

class Logging(wire_server.Server):
    def respond(self, line):
        req = json.loads(line)
        with open(sys.argv[1], "a") as log:
            log.write(f"{req['op']} {req.get('args', {}).get('cache', '')}\n")
        return super().respond(line)

wire_server.Server = Logging
wire_server.main(sys.argv[2:])
"""


def test_a_runs_caches_are_dropped_when_the_next_run_begins(tmp_path: Any) -> None:
    """A cache made in a run of a program (an example, a replay) is dropped just before the next
    run's first request, with the run's other caches in the order made, held or not; one made
    outside a run is dropped once Python frees it (before the next request)."""
    from radixcheck.properties.target import forget_hangs, new_run

    log = tmp_path / "server.log"
    factory = wire_factory([sys.executable, "-c", LOGGING, str(log)])
    try:
        new_run()
        held = factory(SlotAllocator(8), 1)  # 1
        factory(SlotAllocator(8), 1)  # 2: freed at once
        gc.collect()
        held.total_size()  # its run goes on: nothing dropped
        new_run()
        factory(SlotAllocator(8), 1).total_size()  # 3: run 1's caches dropped first
        forget_hangs()  # a new test: no run
        factory(SlotAllocator(8), 1)  # 4: made outside a run, freed at once
        factory(SlotAllocator(8), 1).total_size()  # 5
    finally:
        forget_hangs()
        factory.close()
    assert log.read_text().split("\n")[1:-1] == [
        "new ", "new ", "total_size 1", "drop 1", "drop 2", "new ", "total_size 3", "drop 3", "new ", "drop 4", "new ",
        "total_size 5"]


def _server_saw(log: Any, threshold: int | None) -> list[str]:
    """The requests a derandomized machine's run sent (op and cache), with the cyclic garbage
    collector run every ``threshold`` allocations (None: never)."""
    factory = wire_factory([sys.executable, "-c", LOGGING, str(log)])
    saved, was_on = gc.get_threshold(), gc.isenabled()
    try:
        gc.collect()
        if threshold is None:
            gc.disable()
        else:
            gc.set_threshold(threshold)
        run_machine(machine_for(factory, factory.capabilities, 1, "wire_drops"),
                    settings(profiles.SETTINGS["ci"], max_examples=12, stateful_step_count=20))
    finally:
        gc.set_threshold(*saved)
        if was_on:
            gc.enable()
        factory.close()
    return log.read_text().splitlines()


@pytest.mark.deep  # two server processes through a state machine
def test_what_the_server_sees_does_not_depend_on_when_the_garbage_collector_runs(tmp_path: Any) -> None:
    """A cache the suite no longer uses is dropped on the server at a point the stream fixes, not
    when Python's cyclic collector happens to free it (which depends on everything the process
    allocated before: its path, its worker, the tests that ran first). A drop's timing decided
    whether a server numbering handles per cache refused a legal lock, and so an audit's findings."""
    often = _server_saw(tmp_path / "often.log", 10)
    never = _server_saw(tmp_path / "never.log", None)
    assert any(line.startswith("drop") for line in often), often[:40]
    assert often == never, next((i, a, b) for i, (a, b) in enumerate(zip(often, never, strict=False)) if a != b)


# A server declaring SGLang's priority policy by name and arguments, which refuses every other request
# with the arguments it was sent (so a test reads what travelled).
ECHO_POLICY = r"""
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "init":
        caps = {"eviction_policy": {"named": sys.argv[1], **json.loads(sys.argv[2])}, "namespaces": True}
        out = {"id": req["id"], "ok": {"protocol": 1, "capabilities": caps, "server": "echo"}}
    elif req["op"] == "new":
        out = {"id": req["id"], "ok": 1}
    else:
        out = {"id": req["id"], "error": 1000, "text": json.dumps(req["args"], sort_keys=True)}
    print(json.dumps(out), flush=True)
"""


def test_a_named_policy_travels_with_its_arguments_and_a_priority_with_its_request() -> None:
    """SGLang's named policies cross the wire by name and arguments (WIRE.md, "Eviction policies"), so a
    wire target's LFU or priority order is judged as in process, and a priority policy's requests carry
    ``"priority"``; a plain string stays a name (its order not exercised), as before."""
    from radixcheck.properties.cache import policies
    from radixcheck.properties.cache.mutants import LfuMatchHitsReference, PriorityReference, SlruReference
    from radixcheck.reference import RadixCache
    from radixcheck.reference.wire_server import Server

    for cache, form in ((PriorityReference, {"named": "priority"}), (SlruReference, {"named": "slru", "threshold": 2}),
                        (LfuMatchHitsReference, {"named": "lfu", "hits_on_match": True}), (RadixCache, "lru")):
        assert Server(cache).capabilities()["eviction_policy"] == form, cache
    factory = wire_factory([sys.executable, "-c", ECHO_POLICY, "priority", "{}"])
    try:
        declared = factory.capabilities.eviction_policy
        assert isinstance(declared, policies.Policy) and declared.takes_priority and declared.name == "priority"
        cache = factory(SlotAllocator(8), 1)
        for call in (lambda: cache.match_prefix([1, 2], namespace="a", priority=3),
                     lambda: cache.insert([1, 2], np.arange(2), namespace="a", priority=3)):
            with pytest.raises(WireRefused, match='"priority": 3'):
                call()
    finally:
        factory.close()
    factory = wire_factory([sys.executable, "-c", ECHO_POLICY, "slru", '{"threshold": 5}'])
    try:
        assert factory.capabilities.eviction_policy.name == "slru(threshold=5)"
    finally:
        factory.close()
    with pytest.raises(WireProtocolError, match="'named' must be one of"):
        wire_factory([sys.executable, "-c", ECHO_POLICY, "quota", "{}"]).capabilities  # noqa: B018
    # The Python server hands a request's priority to the cache it serves.
    server = Server(PriorityReference)
    new = server.respond(b'{"id": 1, "op": "new", "args": {"page_size": 1}}')
    reply = server.respond(json.dumps({"id": 2, "op": "insert", "args": {"cache": new["ok"], "tokens": [1], "values": [4],
                                                                       "priority": 7}}).encode())
    assert reply["ok"] == 0
    (cache, _), = server.caches.values()
    assert cache.match_prefix([1])[1].priority == 7


@pytest.mark.deep  # a server process through a state machine
def test_a_priority_mutant_is_caught_over_the_wire_by_its_order() -> None:
    """PriorityIgnored (takes the requests' priorities, evicts by recency): over the wire its policy
    used to travel as a bare name, so its order was never judged and it passed; now it is caught as in process."""
    from radixcheck.properties.cache.mutants import PriorityIgnored

    factory = wire_factory([*reference_command(), "--cache", f"radixcheck.properties.cache.mutants:{PriorityIgnored.__name__}"])
    try:
        with pytest.raises(PriorityIgnored.caught_by):
            run_machine(machine_for(factory, factory.capabilities, 1, "wire_PriorityIgnored"), profiles.SETTINGS["mutation"])
    finally:
        factory.close()


def test_a_wire_server_starved_of_cpu_is_not_a_call_that_blocks(monkeypatch) -> None:  # noqa: ANN001
    """Past the wall-clock backstop, a call whose answer another process computes (a wire server) is
    judged by that process's CPU time and run-queue wait too: a server computing or waiting for a
    CPU on a loaded machine goes on (up to the cap), one that blocks is stopped. Before, every call
    computed elsewhere was stopped at the backstop: a Node.js server's evict at 4.8 s of its CPU in
    60 s of wall clock, at load 21 on 2 cores, was "a call that blocks" (session 62's trial)."""
    from radixcheck.properties import target

    monkeypatch.setattr(target, "_run_queue_wait", lambda: 0.0)  # this process only waits on the pipe
    clock = {"cpu": 0.0, "wait": 0.0}
    call = target._Call("evict", 5.0)
    call.elsewhere = ("the wire server", lambda: clock["cpu"], lambda: clock["wait"])
    assert target._waits_for_a_cpu(call, (0.0, 60.0), capped=False)  # the first look opens the window
    clock["cpu"], clock["wait"] = 0.5, 4.0  # of 5 s of wall clock: computing or runnable for 4.5
    assert target._waits_for_a_cpu(call, (0.0, 65.0), capped=False)
    assert not target._waits_for_a_cpu(call, (0.0, 70.0), capped=False)  # then 5 s with neither: it blocks
    assert not target._waits_for_a_cpu(call, (0.0, 75.0), capped=True)  # past the cap: stopped all the same
    blind = target._Call("evict", 5.0)
    blind.elsewhere = ("the wire server", lambda: 1.0, lambda: None)  # its wait unreadable: the backstop as before
    assert not target._waits_for_a_cpu(blind, (0.0, 60.0), capped=False)
