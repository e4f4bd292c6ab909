"""The kernel A/B tool's command line (nothing is built here)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv, says", [(["attention", "--old", "main", "--reps", "0"], "--reps"),
                                        (["attention", "--old", "no-such-revision-here"], "not a git revision")])
def test_kernel_ab_refuses_bad_arguments_in_one_line(argv: list[str], says: str, capsys) -> None:
    from radixcheck.model import kernel_ab

    with pytest.raises(SystemExit) as e:
        kernel_ab.main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and says in err and len(err.splitlines()) == 1


def test_kernel_ab_refuses_an_unknown_slot_layout_in_one_line(capsys) -> None:
    from radixcheck.model import kernel_ab

    with pytest.raises(SystemExit) as e:
        kernel_ab.main(["workloads", "--old", "main", "--slots", "sideways"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "--slots" in err and "invalid choice" in err and len(err.splitlines()) == 1


def test_kernel_ab_puts_the_cached_prefix_where_the_live_arm_does() -> None:
    """The A/B's cached prefix sits in the slots the live arm's radix arm gets for its first prompt
    (scattered one by one: issue 43, thirteenth round, 1.5-2 % of a suffix request), unless asked
    for ascending ones."""
    import numpy as np

    from radixcheck.model import kernel_ab, load_default
    from radixcheck.reports.live import RadixArm

    size, slots = kernel_ab.prefix_slots(40, 96, "live")
    arm = RadixArm(load_default(), 96)
    assert size == 96 and np.array_equal(slots, arm.allocator.alloc(40))
    assert np.count_nonzero(np.diff(slots) != 1) > 30  # not a few runs of consecutive slots
    size, slots = kernel_ab.prefix_slots(40, 96, "ascending")
    assert size == 40 and np.array_equal(slots, np.arange(40))
