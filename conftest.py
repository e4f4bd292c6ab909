"""radixcheck's own test session (this checkout only; never shipped or imported by the kit).

Here radixcheck's Hypothesis profiles are the session's: registered over Hypothesis's names (so
`ci` is radixcheck's `ci`) and the default one loaded, as the self-tests and meta-tests expect.
The installed plugin does neither in other projects (``radixcheck.profiles``).
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from radixcheck import profiles

for _name, _settings in profiles.SETTINGS.items():
    settings.register_profile(_name, _settings)


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("hypothesis_profile", None):  # else Hypothesis's plugin has loaded the one asked for
        settings.load_profile(profiles.default_profile())


# The SIMD level the kernels use, named by the best compiled path the CPU's flags allow.
_SIMD = {"avx512": "AVX-512 VNNI", "avx2": "AVX2", "portable": "none (portable C)"}


def pytest_report_header(config: pytest.Config) -> str:
    """Every gate log names the CPU it ran on, its SIMD level and the kernel path chosen. From the
    CPU's flags only: building a path (about a second each) waits for the first test that needs it,
    whose self-test may still pass it over (a skip or warning in the log then says so). Under
    xdist only the controller prints the header."""
    import platform

    from radixcheck.model import kernel_build, q8kernel

    runs = [p.name for p in kernel_build.PATHS if not kernel_build.missing_flags(p)]
    try:
        want = q8kernel.chosen()
    except ValueError as e:  # a bad RADIXCHECK_Q8_KERNEL fails the tests that read it, not the header
        want = str(e)
    if want == "auto":
        kernel = f"{runs[0]} (auto: the best path the CPU's flags allow)"
    elif want in q8kernel.PATHS and want not in runs:
        kernel = f"numpy ({q8kernel.ENV}={want}, which this CPU lacks)"
    else:
        kernel = f"{want} ({q8kernel.ENV})" if want in q8kernel.CHOICES else want
    return f"CPU: {kernel_build.cpu_name()}, {platform.machine()}, SIMD: {_SIMD[runs[0]]}; Q8_0 kernel path: {kernel}"
