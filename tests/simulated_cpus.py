"""Simulated CPUs for the kernel-selection tests, so a test about CPU features means the same on any host.

Each CPU is stated in full: what ``platform.machine()`` says and its ``/proc/cpuinfo`` flag line
(x86 ``flags``, ARM ``Features``), abridged from real machines with every SIMD flag kept. None is
derived from the host's flags: a test that starts from the host's ``/proc/cpuinfo`` and removes a
flag means something else on every CPU it runs on.

``simulated(cpu)`` runs ``model.kernel_build`` and ``model.q8kernel`` as if on ``cpu``. Building
and self-testing a path, and loading its library, are stood in for, so the host never runs an
instruction it may not have (an AVX2-only host can simulate an AVX-512 one).
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from radixcheck.model import kernel_build, q8kernel


@dataclass(frozen=True)
class SimulatedCPU:
    key: str  # the test id
    name: str
    machine: str  # what platform.machine() returns
    flags: frozenset[str]  # the /proc/cpuinfo "flags" (x86) or "Features" (ARM) line


def _cpu(key: str, name: str, machine: str, flags: str) -> SimulatedCPU:
    return SimulatedCPU(key, name, machine, frozenset(flags.split()))


NO_AVX2 = _cpu(
    "x86-no-avx2", "x86-64 without AVX2 (Sandy Bridge: SSE4.2 and AVX, no FMA)", "x86_64",
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx "
    "pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 cx16 pcid sse4_1 sse4_2 x2apic popcnt aes xsave avx "
    "lahf_lm xsaveopt",
)
AVX512_NO_VNNI = _cpu(
    "skylake-sp", "AVX-512 without VNNI (Skylake-SP)", "x86_64",
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx "
    "pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx "
    "f16c rdrand lahf_lm abm 3dnowprefetch fsgsbase bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx "
    "smap clflushopt clwb avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves",
)
ZEN3 = _cpu(
    "zen3", "AVX2 only (Zen 3)", "x86_64",
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx "
    "mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe "
    "popcnt aes xsave avx f16c rdrand lahf_lm abm sse4a misalignsse 3dnowprefetch fsgsbase bmi1 avx2 smep bmi2 erms "
    "invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves clzero umip pku vaes vpclmulqdq "
    "rdpid fsrm",
)
ZEN4 = _cpu(
    "zen4", "AVX-512 VNNI (Zen 4)", "x86_64",
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx "
    "mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe "
    "popcnt aes xsave avx f16c rdrand lahf_lm abm sse4a misalignsse 3dnowprefetch fsgsbase bmi1 avx2 smep bmi2 erms "
    "invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt "
    "xsavec xgetbv1 xsaves avx512_bf16 clzero umip pku avx512vbmi avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni "
    "avx512_bitalg avx512_vpopcntdq rdpid fsrm",
)
AARCH64 = _cpu(
    "aarch64", "aarch64 (Neoverse N1)", "aarch64",
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs",
)
CPUS = (NO_AVX2, AVX512_NO_VNNI, ZEN3, ZEN4, AARCH64)


def _clear_choices() -> None:
    """``q8kernel``'s cached choices, so the next call decides anew (for the simulated CPU, or the host again)."""
    q8kernel._open.cache_clear()
    q8kernel.load.cache_clear()


@contextmanager
def simulated(cpu: SimulatedCPU, kernel: str = "auto", failing: Mapping[str, str] | None = None) -> Iterator[list[str]]:
    """Run ``kernel_build`` and ``q8kernel`` as if on ``cpu``, with ``$RADIXCHECK_Q8_KERNEL`` set
    to ``kernel``. A path that gets as far as its build is "built" (no compiler runs) and passes
    its self-test, except one in ``failing`` (path -> what its self-test reports); its library is
    a stand-in object. Yields the names of the paths built, in order (a test checks that a path
    the CPU lacks never is). The cached choices are cleared on entry and exit."""
    built: list[str] = []

    def ensure(kp: kernel_build.KernelPath, cc: str, selftest: Callable[[Path], str | None],
               selftest_id: str = "") -> tuple[Path, str | None]:
        built.append(kp.name)
        return Path(f"/simulated/{kp.name}.so"), (failing or {}).get(kp.name)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernel_build, "cpu_flags", lambda: cpu.flags)
        mp.setattr(platform, "machine", lambda: cpu.machine)  # the module kernel_build reads it from
        mp.setattr(kernel_build, "compiler", lambda: "simulated-cc")  # a host without a compiler simulates too
        mp.setattr(kernel_build, "ensure", ensure)
        mp.setattr(q8kernel, "_library", lambda so: SimpleNamespace(so=so))  # never loaded: it may hold foreign instructions
        mp.setenv(q8kernel.ENV, kernel)
        _clear_choices()
        try:
            yield built
        finally:
            _clear_choices()  # before the patches go: nothing simulated stays cached for the host's tests
