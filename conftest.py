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
