"""Which compiled kernel path each CPU gets: the same verdicts on any host.

Every test here runs under a simulated CPU (``tests/simulated_cpus.py``: its machine and flags
stated in full, never the host's), with the builds, self-tests and libraries stood in for, so
no kernel runs and neither a compiler nor ``RADIXCHECK_Q8_KERNEL`` on the host changes a verdict.
Whether the paths the host does run give the NumPy path's bits is ``tests/test_model_q8kernel.py``.
"""

from __future__ import annotations

import warnings

import pytest

from radixcheck.model import kernel_build, q8kernel
from radixcheck.model.exact import ExactOps

from .simulated_cpus import AARCH64, AVX512_NO_VNNI, CPUS, NO_AVX2, ZEN3, ZEN4, SimulatedCPU, simulated

ALL_AVX512 = "avx2 fma avx512f avx512bw avx512vl avx512dq avx512_vnni"  # everything the AVX-512 path needs, in its order

# Per simulated CPU: the paths it lacks -> the flags their status names, and the path ``auto`` takes.
EXPECTED = {
    NO_AVX2: ({"avx512": ALL_AVX512, "avx2": "avx2 fma"}, "portable"),  # AVX (1) is not AVX2
    AVX512_NO_VNNI: ({"avx512": "avx512_vnni"}, "avx2"),
    ZEN3: ({"avx512": "avx512f avx512bw avx512vl avx512dq avx512_vnni"}, "avx2"),
    ZEN4: ({}, "avx512"),
    AARCH64: ({"avx512": ALL_AVX512, "avx2": "avx2 fma"}, "portable"),  # off x86 every x86 flag is missing
}
assert set(EXPECTED) == set(CPUS)
each_cpu = pytest.mark.parametrize("cpu", CPUS, ids=lambda cpu: cpu.key)


@each_cpu
def test_a_cpu_without_the_instructions_reports_the_path_not_tested(cpu: SimulatedCPU) -> None:
    """Each path the CPU lacks is "not tested", naming exactly the flags it lacks, and is never
    built or loaded; every other path is built, passes its self-test and is available."""
    lacks, _ = EXPECTED[cpu]
    runs = [p for p in q8kernel.PATHS if p not in lacks]
    with simulated(cpu) as built:
        statuses = [q8kernel.status(p) for p in q8kernel.PATHS]
        assert q8kernel.available() == runs
    not_passed = {s.path: str(s) for s in statuses if s.state != "passed"}
    assert not_passed == {p: f"{p}: not tested (this CPU lacks {f})" for p, f in lacks.items()}
    assert built == runs


@each_cpu
def test_auto_takes_the_best_path_the_cpu_runs(cpu: SimulatedCPU) -> None:
    """``auto`` (the model's default kernel) takes the first path the CPU runs and builds no other;
    passing over a path the CPU lacks is no warning (it is not a fault)."""
    _, auto = EXPECTED[cpu]
    with simulated(cpu) as built, warnings.catch_warnings():
        warnings.simplefilter("error")
        assert q8kernel.path_of(q8kernel.load()) == auto
        assert ExactOps().kernel == auto == ExactOps("c").kernel
    assert built == [auto]


def test_a_path_that_failed_or_that_the_cpu_lacks_is_not_used() -> None:
    """``auto`` passes over a path whose self-test failed (a warning naming it and the failure) and
    takes the next; a path asked for by name that the CPU cannot run is refused, naming what it
    lacks: a warning and the NumPy path from the environment, a ``RuntimeError`` from ``ExactOps(path)``."""
    with simulated(ZEN4, failing={"avx512": "Q8_0 product ... differ"}) as built:
        with pytest.warns(RuntimeWarning, match=r"Q8_0 kernel path avx512: failed \(self-test against the NumPy path: Q8_0 product"):
            assert q8kernel.path_of(q8kernel.load()) == "avx2"
        assert str(q8kernel.status("avx512")) == "avx512: failed (self-test against the NumPy path: Q8_0 product ... differ)"
    assert built == ["avx512", "avx2"]

    lacks = r"avx512: not tested \(this CPU lacks avx512f avx512bw avx512vl avx512dq avx512_vnni\)"
    with simulated(ZEN3, kernel="avx512") as built:
        with pytest.warns(RuntimeWarning, match=rf"no usable compiled Q8_0 kernel \({lacks}\): .* NumPy path"):
            assert ExactOps().kernel == "numpy"
        with pytest.warns(RuntimeWarning, match=lacks), pytest.raises(RuntimeError, match=f"not usable here: {lacks}"):
            ExactOps("avx512")
    assert built == []


def test_off_x86_no_x86_path_runs_whatever_the_flags_say() -> None:
    """An x86 path's flags count only on an x86 machine: an aarch64 machine whose flag line carried
    every x86 name still gets the portable path (so the machine, not only the flags, is simulated)."""
    arm_with_x86_names = SimulatedCPU("arm-x86-names", "aarch64 with x86 flag names", "aarch64", ZEN4.flags)
    with simulated(arm_with_x86_names) as built:
        assert [kernel_build.missing_flags(p) for p in kernel_build.PATHS] == [ALL_AVX512.split(), ["avx2", "fma"], []]
        assert q8kernel.path_of(q8kernel.load()) == "portable"
    assert built == ["portable"]
