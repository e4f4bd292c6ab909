"""The conformance state machine, run against the selected target at each page size it offers."""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from properties.cache_machine import machine_for

PAGE_SIZES = [1, 2, 4]


@pytest.mark.parametrize("page_size", PAGE_SIZES, ids=lambda p: f"page_size={p}")
def test_cache_state_machine(target, page_size: int) -> None:
    if page_size not in target.capabilities.page_sizes:
        pytest.skip(f"{target.spec} does not offer page_size={page_size}")
    run_state_machine_as_test(machine_for(target.factory, target.capabilities, page_size, target.name))
