"""The shrink and reduction budgets count CPU seconds (``radixcheck.properties.budget_clock``), so a
loaded machine, which only stretches the wall clock, gives a finding the same shrink and reduction;
a wall-clock backstop stops a target that sleeps or blocks."""

from __future__ import annotations

import threading
import time

import pytest

from radixcheck.properties import budget_clock
from radixcheck.properties.adapters import wire
from radixcheck.properties.budget_clock import WALL_FACTOR_ENV, BudgetWatch, count_cpu_of, forget_cpu_of
from radixcheck.properties.target import BudgetSpent, check_budget, time_budget


def test_a_block_that_waits_does_not_spend_a_cpu_budget() -> None:
    """Before, the budget was wall clock: a thread that slept past it ran it out (as a loaded machine did)."""
    with time_budget(0.5):  # its backstop, 10 s of wall clock, is far off even on a loaded machine
        sleeper = threading.Thread(target=time.sleep, args=(0.6,))
        sleeper.start()
        sleeper.join()
        check_budget("after the sleep")  # 0.6 s of wall clock, almost no CPU: within 0.5 s of CPU


def test_a_busy_loop_spends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WALL_FACTOR_ENV, "1000")  # only the CPU clock can stop it here, however loaded the machine
    started = time.process_time()
    with time_budget(0.05), pytest.raises(BudgetSpent):
        while True:
            check_budget("a busy step")
    assert time.process_time() - started >= 0.05


def test_the_wall_clock_backstop_stops_a_block_that_only_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WALL_FACTOR_ENV, "2")
    with time_budget(0.05):
        time.sleep(0.15)  # past 2 budgets of wall clock, with no CPU spent
        with pytest.raises(BudgetSpent):
            check_budget("after the wait")


@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_a_budget_of_0_or_less_is_spent_at_once(seconds: float) -> None:
    with time_budget(seconds), pytest.raises(BudgetSpent):
        check_budget("the first step")


def test_a_wall_clock_budget_counts_the_wall_clock() -> None:
    """``radixcheck bench --max-seconds`` is how long its user waits: wall clock, as before."""
    with time_budget(0.05, wall_clock=True):
        time.sleep(0.1)
        with pytest.raises(BudgetSpent):
            check_budget("after the wait")


def test_another_process_s_cpu_counts_and_stays_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wire server computes the answers while this process waits: its CPU time is the budget's too,
    and what it spent stays counted once it stops (a restarted server must not give the budget back)."""
    monkeypatch.setattr(budget_clock, "OTHERS_EVERY", 0.0)
    server = [10.0]  # its CPU time, as /proc would give it
    key = object()
    with time_budget(1.0):
        count_cpu_of(key, lambda: server[0])
        try:
            check_budget("before it computes")
            server[0] += 2.0
            with pytest.raises(BudgetSpent):
                check_budget("after it computed 2 s")
        finally:
            forget_cpu_of(key)
        with pytest.raises(BudgetSpent):
            check_budget("after it stopped")


def test_a_wire_server_is_counted_while_it_runs() -> None:
    watch = BudgetWatch(1e9)
    counted = budget_clock._others_spent
    connection = wire.WireConnection(wire.reference_command())  # the server starts: it imports radixcheck, numpy
    pid = connection.process.pid
    assert pid in budget_clock._others
    connection.close()
    assert pid not in budget_clock._others
    assert budget_clock._others_spent > counted  # its start-up's CPU time, read before it was reaped
    assert watch.cpu() >= budget_clock._others_spent - counted
