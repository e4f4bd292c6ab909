"""My own tests: radixcheck's state machine as a library, on my cache and on two planted bugs."""

import bugs
import pytest
from hypothesis import settings
from vllm_like import make, make_full

from radixcheck import machine_for, run_machine
from radixcheck.oracles.violations import ContractViolation

SEARCH = settings(max_examples=40, stateful_step_count=30, deadline=None)


@pytest.mark.parametrize("page_size", [1, 2, 4])
def test_my_cache_conforms(page_size):
    run_machine(machine_for(make, make.capabilities, page_size, name="vllm_like"), search=SEARCH)


def test_full_attention_group_alone_conforms():
    run_machine(machine_for(make_full, make_full.capabilities, 2, name="vllm_full"), search=SEARCH)


@pytest.mark.parametrize("bug", [bugs.WindowPinsLastBlockOnly, bugs.AbortFreesCachedPrefix])
def test_a_planted_bug_is_caught(bug):
    with pytest.raises(ContractViolation):
        run_machine(machine_for(bug, bug.capabilities, 2, name=bug.__name__), search=SEARCH)
