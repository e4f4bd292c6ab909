"""A tier repro file as short as its story (reports/findings/window_trial.md, friction 7): a run of
one repeated operation is cut to one before delta debugging, a run of completions is one call, and
the controller's calls under an operation are one comment. The file sends the same calls."""

from __future__ import annotations

import pytest

from radixcheck.oracles.violations import TierWindowViolation
from radixcheck.properties.tiers.repro import compact, reduced, replay, tier_script
from radixcheck.properties.tiers.window_mutants import LoadBackRestoresNoWindow
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_window_cache import TieredWindowCache


def _through_host(factory: type) -> tuple[TierWorld, BaseException | None]:
    """[1, 2] and [1, 2, 0, 1, 2] cached, both sent to host by evicting until nothing moves (six
    evictions, four of them with nothing left to move), the longer one loaded back and read."""
    world = TierWorld(factory, 1, "write_through")
    try:
        for tokens in ([1, 2], [1, 2, 0, 1, 2]):
            world.serve(tokens)
            world.finish()
        for _ in range(6):
            world.evict(10**6)
            world.complete_all()
        world.serve([1, 2, 0, 1, 2])
        world.finish()
    except TierWindowViolation as exc:
        return world, exc
    return world, None


def _operations(world: TierWorld) -> list[str]:
    return [line for line in world.log if not line.startswith("#")]


def test_a_run_of_one_repeated_operation_is_cut_to_one_first() -> None:
    """Two replays (the run's own, then every run of repeats cut at once) leave no operation repeated:
    delta debugging alone, in two replays, leaves the repeated evictions."""
    world, failure = _through_host(LoadBackRestoresNoWindow)
    assert failure is not None
    ops = _operations(world)
    assert any(a == b for a, b in zip(ops, ops[1:], strict=False)), ops  # the story has repeats
    best, said = reduced(LoadBackRestoresNoWindow, world, failure, seconds=60, replays=2)
    assert best is not None, said
    assert len(best.operations) < len(ops) and not any(a == b for a, b in zip(best.operations, best.operations[1:], strict=False)), (
        best.operations)


def test_completions_and_controller_calls_are_written_compactly_and_replay_the_same() -> None:
    log = ["w.serve([1, 2], load=True)", "w.finish(-1)", "#   controller.write([16]) -> write #1 to host [0]",
           "#   controller.write([30]) -> write #2 to host [1]", "w.complete(1)", "w.complete(2)", "w.evict(4)",
           "#   controller.load([0]) -> None (allocation failed)", "w.complete(3)"]
    assert compact(log) == ["w.serve([1, 2], load=True)", "w.finish(-1)", "#   controller: write #1 [16] -> [0], write #2 [30] -> [1]",
                            "w.complete(1, 2)", "w.evict(4)", "#   controller: load([0]) -> None (allocation failed)", "w.complete(3)"]
    many = ["w.finish(-1)", *(f"#   controller.write([{k}]) -> write #{k} to host [{k}]" for k in range(1, 30))]
    assert all(len(line) <= 110 for line in compact(many)) and len(compact(many)) < 10
    world, failure = _through_host(TieredWindowCache)  # correct: the story runs to its end
    assert failure is None
    again = replay(TieredWindowCache, 1, "write_through", compact(_operations(world)))
    assert again.failure is None and again.world.log == world.log  # w.complete(1, 2) is w.complete(1); w.complete(2)


@pytest.mark.parametrize("factory", [LoadBackRestoresNoWindow])
def test_the_written_file_has_one_call_per_completion_run(factory: type) -> None:
    world, failure = _through_host(factory)
    assert failure is not None
    text = tier_script(world, failure, f"{factory.__module__}:{factory.__name__}")
    assert "w.complete(1, 2, 3, 4, 5)" in text and "w.complete(1)\n" not in text, text
    assert "#   controller: write #1 [" in text


def test_a_reduction_still_shrinking_at_its_budget_goes_on_up_to_twice_it() -> None:
    from radixcheck.properties.tiers.repro import goes_on

    assert goes_on(4.9, 3.0, 5.0)  # within its budget, shrinking or not
    assert goes_on(6.0, 1.0, 5.0) and goes_on(9.9, 0.5, 5.0)  # past it, shorter within the last 1.25 s
    assert not goes_on(6.0, 1.5, 5.0)  # past it, and no shorter for 1.5 s: done
    assert not goes_on(10.0, 0.0, 5.0)  # twice the budget: done, however it shrinks
    assert not goes_on(0.0, 0.0, 0.0)  # a budget of 0: no reduction


def test_a_completion_follows_its_transfer_when_an_operation_that_started_another_is_left_out() -> None:
    """Transfers are numbered as they start, so a reduction that left out an operation starting one
    made every later ``w.complete(n)`` name another transfer or none, and each such candidate failed
    otherwise: a hybrid trial's finding stayed at 399 operations (526 lines). Each completion now
    follows its transfer (renumbered; left out with it), so the writes of a prompt the finding does
    not need go, and only the needed transfer's completion stays."""
    from radixcheck.properties.tiers.repro import renumbered, transfer_starts

    log = ["w.serve([1])", "#   controller.write([3]) -> write #1 to host [0]", "w.serve([2])",
           "#   controller.write([4]) -> write #2 to host [1]", "w.complete(2)", "w.complete(1)"]
    starts = transfer_starts(log)
    assert starts == {1: 0, 2: 2}
    assert [line for _, line in renumbered([(2, log[2]), (4, log[4]), (5, log[5])], starts)] == ["w.serve([2])", "w.complete(1)"]

    world, failure = TierWorld(LoadBackRestoresNoWindow, 1, "write_through"), None
    try:
        for tokens in ([1, 2], [7, 8, 9]):  # writes #1-#2, then #3-#5; only [7, 8, 9]'s are needed
            world.serve(tokens)
            world.finish()
        world.complete(5)  # the last page's copy; the rest are left in flight
        world.evict(10**6)
        world.serve([7, 8, 9])
        world.finish()
    except TierWindowViolation as exc:
        failure = exc
    assert failure is not None
    best, said = reduced(LoadBackRestoresNoWindow, world, failure, seconds=60)
    assert best is not None, said
    log = best.world.log
    first_serve = log.index(next(line for line in log if line.startswith("w.serve([7, 8, 9]")))
    assert not any(line.startswith("#   controller.write") for line in log[:first_serve]), log  # [1, 2]'s writes left out
