"""radixcheck's Hypothesis settings, by profile name.

| profile    | search                                    | use                                   |
|------------|-------------------------------------------|---------------------------------------|
| `dev`      | 100 examples x 50 steps, random seeds     | the default on a laptop               |
| `ci`       | the same, derandomized, no database       | picked when ``CI`` is set             |
| `thorough` | 600 examples x 200 steps                  | long audits                           |
| `audit`    | `ci`, stopping at the first bug per test  | the matrix and engine audits          |
| `mutation` | `audit` without shrinking                 | meta-tests, catalogue, mutation score |
| `gate`     | `ci` with 25 examples; one production world | radixcheck's own gate (its pyproject) |

Saved failures (the example database of `dev` and `thorough`) live in the user's cache directory
(:func:`radixcheck.cache_dir.cache_dir`), never in the project that runs radixcheck's tests;
Hypothesis's own per-run ``.hypothesis/constants`` stays where Hypothesis puts it (moving it
would take a process-wide setting). These settings apply to radixcheck's own tests and state machines only: they are passed to
:func:`radixcheck.properties.findings.verdict.run_machine` and put on the conformance tests with
``@settings(current())``. Nothing here loads a profile into Hypothesis, so a project that has
radixcheck installed keeps its own default settings and its own ``settings.load_profile``. The
profile is chosen by :func:`select` (the pytest plugin calls it with ``--hypothesis-profile``),
else ``HYPOTHESIS_PROFILE`` if it names one of these, else `ci` when ``CI`` is set, else `dev`.

The names are also registered with Hypothesis, so that ``--hypothesis-profile=thorough`` and
``HYPOTHESIS_PROFILE`` accept them, but never over a name already registered: Hypothesis's own
`ci` profile (which it loads by itself on CI machines) stays Hypothesis's for every other test.

Every state-machine test also bounds its own shrinking (``radixcheck.properties.findings.verdict``), so a
broken cache's first failure is printed in seconds whatever the profile.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import InvalidArgument

from radixcheck.cache_dir import cache_dir

EXAMPLES = 100  # state-machine runs per test: the gate's budget
STEPS = 50  # rules per run

# Saved failures go to the user's cache directory, not to .hypothesis/ in whatever project runs radixcheck's tests.
_EXAMPLES = DirectoryBasedExampleDatabase(str(cache_dir() / "hypothesis" / "examples"))
_common = settings(deadline=None, database=_EXAMPLES,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
SETTINGS: dict[str, settings] = {"dev": settings(_common, max_examples=EXAMPLES, stateful_step_count=STEPS)}
SETTINGS["ci"] = settings(SETTINGS["dev"], derandomize=True, database=None, print_blob=True)
SETTINGS["thorough"] = settings(_common, max_examples=6 * EXAMPLES, stateful_step_count=4 * STEPS)
SETTINGS["audit"] = settings(SETTINGS["ci"], report_multiple_bugs=False)
SETTINGS["mutation"] = settings(SETTINGS["audit"], phases=[Phase.explicit, Phase.generate])
# radixcheck's own gate (selected in its pyproject.toml): the reference checked as a regression check, within the
# 60 s budget of a 2-core Zen 3; the strength figures are the reports' (kill rates over 200 streams per mutant, false
# alarms over 50 full-size streams per correct cache). Fewer examples than one production world's worth (100) also means
# one world per target, at its smallest page size (radixcheck.properties.cache.scale_machine.runs_world_at).
GATE_EXAMPLES = 25
SETTINGS["gate"] = settings(SETTINGS["ci"], max_examples=GATE_EXAMPLES)

PROFILES = tuple(SETTINGS)

for _name, _settings in SETTINGS.items():
    try:
        settings.get_profile(_name)  # taken (Hypothesis's `ci`, or a project's own): leave it alone
    except InvalidArgument:
        settings.register_profile(_name, _settings)

_selected: str | None = None
_verbosity: Verbosity | None = None  # --hypothesis-verbosity, which reaches radixcheck's tests too
_seeded = False  # --radix-seed: every profile derandomized, with no saved failures to start from


def default_profile() -> str:
    """``HYPOTHESIS_PROFILE`` if it names a radixcheck profile, else `ci` under CI, else `dev`."""
    named = os.environ.get("HYPOTHESIS_PROFILE")
    return named if named in SETTINGS else ("ci" if os.environ.get("CI") else "dev")


def select(name: str | None, verbosity: str | None = None, seeded: bool = False) -> str:
    """Choose the profile of radixcheck's tests in this process (a name that is not radixcheck's,
    e.g. a project's own ``--hypothesis-profile=mine``, leaves radixcheck on its default), and
    the verbosity asked for on pytest's command line, if any. ``seeded`` (``--radix-seed``): the
    profile's search, derandomized and without the example database, so that the run is the seed's
    stream only (the seed itself is in the machines' names, ``Target.name``)."""
    global _selected, _verbosity, _seeded
    _selected = name if name in SETTINGS else None
    _verbosity = Verbosity[verbosity] if verbosity else None
    _seeded = seeded
    return selected()


def saved_selection() -> Callable[[], None]:
    """A callable that puts today's selection back. A pytest session run inside another process (an
    in-process ``radixcheck audit``) would otherwise leave its profile, and its seed, to every later test."""
    state = (_selected, _verbosity, _seeded)

    def restore() -> None:
        global _selected, _verbosity, _seeded
        _selected, _verbosity, _seeded = state

    return restore


def selected() -> str:
    return _selected or default_profile()


def current() -> settings:
    """The settings radixcheck's tests and :func:`~radixcheck.properties.findings.verdict.run_machine` use."""
    chosen = SETTINGS[selected()]
    if _seeded:
        chosen = settings(chosen, derandomize=True, database=None)
    return chosen if _verbosity is None else settings(chosen, verbosity=_verbosity)
