"""My own tests: radixcheck's tier machine as a library, on my cache and on one planted bug."""

import bugs
import pytest
from hybridcache import make
from hypothesis import settings

from radixcheck import run_machine, tier_machine_for
from radixcheck.oracles.violations import SecondValueViolation

SEARCH = settings(max_examples=60, stateful_step_count=40, deadline=None)


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("page_size", [1, 2])
def test_my_cache_conforms(page_size, policy):
    run_machine(tier_machine_for(make, page_size, policy, name="hybrid"), search=SEARCH)


def test_a_demoted_state_is_caught():
    with pytest.raises(SecondValueViolation):
        run_machine(tier_machine_for(bugs.DemoteDropsState, 1, "write_back", name="demote"), search=SEARCH)
