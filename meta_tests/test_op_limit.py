"""The per-operation limit (properties/target.py): it counts the CPU time a call spends, so a
loaded machine, which stretches a correct call's wall clock, does not make it a hang; a call that
blocks without computing meets the wall-clock backstop; and an interrupt swallowed where it
landed (a gc callback) is raised again, so the call is never left unbounded.

Load is simulated, not depended on: a call that sleeps stands for one that waits for a CPU (wall
time passes, little CPU time is spent); one that spins stands for a hang. No test asserts a
duration: the limits here are far apart from the work, so a slow host changes nothing."""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

import pytest

from radixcheck.properties.target import (
    TIMEOUT_ENV,
    WALL_TIMEOUT_ENV,
    OperationTimeout,
    _alarm,
    forget_hangs,
    guarded,
    metering,
    op_wall_timeout,
)


@pytest.fixture(autouse=True)
def _fresh_hangs():
    forget_hangs()  # a hang here must not refuse another test's calls
    yield
    forget_hangs()


def spin(seconds: float) -> str:
    """Compute for ``seconds`` of CPU time."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return "returned"


def test_a_call_that_computes_past_the_limit_is_stopped_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "600")  # the wall clock plays no part
    with pytest.raises(OperationTimeout, match=r"^evict did not return within 0.2 s of CPU time"):
        guarded("evict", spin, 30)


def test_a_call_that_waits_longer_than_the_limit_but_computes_little_is_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loaded machine: 0.6 s of wall clock against a 0.2 s limit, spending almost no CPU time.
    Its wall-clock backstop (30 s here) is far away; a wall-clock limit of 0.2 s would have stopped it."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "30")
    assert guarded("evict", lambda: time.sleep(0.6) or "returned") == "returned"


def test_a_call_that_blocks_meets_the_wall_clock_backstop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadlock spends no CPU time: the backstop stops it, and its message says it was blocked."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "0.5")
    with pytest.raises(OperationTimeout, match=r"^evict did not return within 0.5 s of wall-clock time.*blocks.*computed for only"):
        guarded("evict", time.sleep, 60)


def test_the_backstop_is_generous_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WALL_TIMEOUT_ENV, raising=False)
    monkeypatch.setenv(TIMEOUT_ENV, "5")
    assert op_wall_timeout() == 60  # 12 times the limit, and at least 60 s
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    assert op_wall_timeout() == 60
    monkeypatch.setenv(TIMEOUT_ENV, "10")
    assert op_wall_timeout() == 120


def _collects_then_computes(interrupted: list[BaseException], then: Any) -> str:
    """A collection whose gc callback computes until the limit's interrupt lands there (Python swallows it:
    a gc callback's exception goes to ``sys.unraisablehook``), then ``then()``."""
    def slow_callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and not interrupted:
            try:
                spin(600)
            except BaseException as exc:  # seen here, then swallowed by gc
                interrupted.append(exc)
                raise

    gc.callbacks.append(slow_callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(slow_callback)
    return then()


def test_an_interrupt_swallowed_in_a_gc_callback_is_raised_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first interrupt lands in a gc callback (the collection the call starts spins there until
    interrupted), where Python swallows it; the call then computes on, and must still be stopped.
    Without the timers firing again it would run its whole 10 s and return."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "600")
    interrupted: list[BaseException] = []
    with pytest.raises(OperationTimeout, match="of CPU time"):
        guarded("evict", _collects_then_computes, interrupted, lambda: spin(10))
    assert len(interrupted) == 1 and isinstance(interrupted[0], OperationTimeout), interrupted  # the first was swallowed


def test_an_interrupt_swallowed_in_a_gc_callback_is_not_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python hands a swallowed exception to ``sys.unraisablehook``, whose default prints "Exception ignored
    in: <function ... gc_callback ...> ... OperationTimeout" on stderr: an audit's user saw that traceback
    (Hypothesis's own gc callback, under the shrink's 0.5 s limit) though the call was stopped as it should be.
    The limit's own interrupt is dropped there; anything else swallowed meanwhile still reaches the hook,
    and the hook is the previous one again once the calls are over."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "600")
    shown: list[BaseException | None] = []
    printer = lambda unraisable: shown.append(unraisable.exc_value)  # noqa: E731 - stands for the default, which prints
    monkeypatch.setattr(sys, "unraisablehook", printer)

    class ComplainsWhenFreed:
        def __del__(self) -> None:
            raise ValueError("a __del__ of the target's that fails")

    def complains_then_computes() -> str:
        ComplainsWhenFreed()  # freed at once: its exception is swallowed, and must still be shown
        return spin(10)

    interrupted: list[BaseException] = []
    with pytest.raises(OperationTimeout, match="of CPU time"):
        guarded("evict", _collects_then_computes, interrupted, complains_then_computes)
    assert interrupted, "the interrupt never landed in the gc callback"
    assert [type(exc) for exc in shown] == [ValueError], shown
    assert sys.unraisablehook is printer


def test_an_interrupt_caught_by_the_target_is_raised_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target (or a C extension) that catches the interrupt and carries on computing is still stopped."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "600")
    caught: list[BaseException] = []

    def carries_on() -> str:
        try:
            spin(10)
        except Exception as exc:  # noqa: BLE001 - the careless target under test
            caught.append(exc)
        return spin(10)

    with pytest.raises(OperationTimeout):
        guarded("evict", carries_on)
    assert len(caught) == 1


def test_a_stopped_calls_cleanup_is_not_cut_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stopped call unwinds through its except and finally clauses: cleanup (the wire adapter kills
    and reaps a blocked server there). The timer ticks on until the call is left, and a tick that
    raised the interrupt again inside them cut the cleanup short: a loaded machine, which stalls it
    anywhere, left a wire server running (s59). Stalled here past several ticks, an exception raised
    and caught inside the cleanup included."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.05")  # ticks every 0.0125 s
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "0.3")  # the cleanup's own backstop too: far from its 0.06 s
    cleaned: list[str] = []

    def blocks_then_cleans_up() -> None:
        try:
            time.sleep(30)
        except OperationTimeout:
            try:
                raise OSError("a pipe already closed")
            except OSError:
                time.sleep(0.03)
            cleaned.append("except")
            raise
        finally:
            time.sleep(0.03)
            cleaned.append("finally")

    with pytest.raises(OperationTimeout, match="^evict did not return within 0.3 s of wall-clock time"):
        guarded("evict", blocks_then_cleans_up)
    assert cleaned == ["except", "finally"]


def test_a_cleanup_that_hangs_is_stopped_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cleanup gets the call's limits once more, then the ticks raise again: a target that blocks
    or computes in its finally clause is not a hang of the suite."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.05")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "0.1")
    finished: list[str] = []

    def hangs_in_its_cleanup(cleanup: Any) -> None:
        try:
            time.sleep(30)
        finally:
            cleanup(30)
            finished.append("cleanup")

    for cleanup in (time.sleep, spin):
        with pytest.raises(OperationTimeout, match="^evict did not return within 0.1 s of wall-clock time"):
            guarded("evict", hangs_in_its_cleanup, cleanup)
        forget_hangs()
    assert finished == []


def test_no_timer_outlives_its_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a call returns (or is stopped), computing on is never interrupted: the timers are off."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.05")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "0.1")
    assert guarded("evict", spin, 0.0) == "returned"
    with pytest.raises(OperationTimeout):
        guarded("match_prefix", spin, 30)
    assert spin(0.1) == "returned"  # past both limits, outside any call
    time.sleep(0.15)


def test_a_call_stays_bounded_after_a_guarded_call_inside_it_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """An adapter may make a guarded call inside a guarded one. The inner call's end must hand the
    timer back to the outer call, not stop it: else the outer call computes on unbounded (here it
    would run its 30 s and return)."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "600")

    def outer() -> str:
        assert guarded("inner", lambda: "quick") == "quick"
        return spin(30)

    with pytest.raises(OperationTimeout, match=r"^evict did not return within 0.2 s of CPU time"):
        guarded("evict", outer)


def test_a_guarded_call_inside_another_that_hangs_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "600")
    with pytest.raises(OperationTimeout, match=r"^inner did not return"):
        guarded("evict", lambda: guarded("inner", spin, 30))


def test_a_longer_limit_keeps_the_ratio_of_wall_clock_to_cpu_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target's load (an engine's import) has a CPU limit of its own, ten times the operations'
    here: its backstop is ten times theirs too (1 s), so 0.6 s of waiting for a CPU is not a hang.
    With the operations' backstop (or the CPU limit itself, 0.5 s) as its wall limit, it was."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.05")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "0.1")
    with _alarm(0.5, "factory() while loading the target"):
        time.sleep(0.6)
    with pytest.raises(OperationTimeout, match=r"^factory\(\) while loading the target did not return within 1 s of wall-clock"):
        with _alarm(0.5, "factory() while loading the target"):
            time.sleep(30)


def test_a_metered_call_that_hangs_leaves_the_collector_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A metered call (the step-cost watch) runs with the collector off. Once it hangs, every tick
    raises the interrupt again until the call is left: a tick that landed in the restore, before
    ``gc.enable()`` (a loaded machine stalls the process anywhere; simulated by a restore that
    computes past several ticks), left the collector off for the rest of the worker, and a later
    test that checks it failed (tests/test_throughput.py). The restore now runs off the call's timer."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.05")  # ticks every 0.0125 s once the limit has passed
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "600")
    was, enable = gc.isenabled(), gc.enable

    def stalled_enable() -> None:
        spin(0.05)
        enable()

    enable()
    monkeypatch.setattr(gc, "enable", stalled_enable)
    try:
        with metering(lambda *told: None, ("insert",)), pytest.raises(OperationTimeout, match="^insert did not return"):
            guarded("insert", spin, 30)
        collecting = gc.isenabled()
    finally:
        monkeypatch.setattr(gc, "enable", enable)
        (gc.enable if was else gc.disable)()  # this worker's later tests get the collector as it was
    assert collecting


def test_a_call_waiting_for_a_cpu_past_the_backstop_is_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """NU trial: at a load of ~16 on 2 cores an audit's evict got 2.2 s of CPU in 60 s and was called
    "a call that blocks". A call that is runnable all along (here the run-queue wait is faked to grow
    with the wall clock, as on a machine loaded many times over) goes on past the backstop."""
    import radixcheck.properties.target as target

    monkeypatch.setattr(target, "_run_queue_wait", time.monotonic, raising=False)
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "0.2")
    assert guarded("evict", lambda: time.sleep(0.8) or "returned") == "returned"


def test_a_starved_call_meets_the_backstop_in_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    import radixcheck.properties.target as target

    monkeypatch.setattr(target, "_run_queue_wait", time.monotonic)
    monkeypatch.setattr(target, "STARVED_CAP", 2)
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setenv(WALL_TIMEOUT_ENV, "0.2")
    with pytest.raises(OperationTimeout, match=r"^evict did not return within 0.2 s of wall-clock time"):
        guarded("evict", time.sleep, 60)


def test_the_run_queue_wait_is_read_where_linux_gives_it() -> None:
    import os

    import radixcheck.properties.target as target

    waited = target._run_queue_wait()
    assert (waited is None) == (not os.path.exists(target.SCHEDSTAT))
    assert waited is None or waited >= 0
