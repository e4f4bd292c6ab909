"""The Hypothesis profiles radixcheck registers (importing this module registers them).

| profile    | search                                    | use                                   |
|------------|-------------------------------------------|---------------------------------------|
| `dev`      | 100 examples x 50 steps, random seeds     | the default on a laptop               |
| `ci`       | the same, derandomized, no database       | picked when ``CI`` is set             |
| `thorough` | 600 examples x 200 steps                  | long audits                           |
| `audit`    | `ci`, stopping at the first bug per test  | the matrix and engine audits          |
| `mutation` | `audit` without shrinking                 | meta-tests, catalogue, mutation score |

Every state-machine test also bounds its own shrinking (``radixcheck.properties.verdict``), so a
broken cache's first failure is printed in seconds whatever the profile.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

EXAMPLES = 100  # state-machine runs per test: the gate's budget
STEPS = 50  # rules per run

_common = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.register_profile("dev", _common, max_examples=EXAMPLES, stateful_step_count=STEPS)
settings.register_profile("ci", settings.get_profile("dev"), derandomize=True, database=None, print_blob=True)
settings.register_profile("thorough", _common, max_examples=6 * EXAMPLES, stateful_step_count=4 * STEPS)
settings.register_profile("audit", settings.get_profile("ci"), report_multiple_bugs=False)
settings.register_profile("mutation", settings.get_profile("audit"), phases=[Phase.explicit, Phase.generate])

PROFILES = ("dev", "ci", "thorough", "audit", "mutation")


def default_profile() -> str:
    """``HYPOTHESIS_PROFILE`` if set, else `ci` under CI, else `dev`."""
    return os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


def load_default() -> str:
    name = default_profile()
    settings.load_profile(name)
    return name
