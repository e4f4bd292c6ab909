"""The top-level package's lazy exports: every advertised name resolves to the object its module defines."""

from __future__ import annotations

from importlib import import_module

import pytest

import radixcheck


@pytest.mark.parametrize("name", radixcheck.__all__)
def test_every_export_resolves_to_its_module_object(name: str) -> None:
    module = import_module(radixcheck._EXPORTS[name])
    assert getattr(radixcheck, name) is getattr(module, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        radixcheck.no_such_thing  # noqa: B018


def test_every_contract_is_exported() -> None:
    # Each target kind's declaration is importable from the top level, as the docs show.
    for name in ("Capabilities", "TierCapabilities", "IndexCapabilities", "TenantTreeCapabilities"):
        assert name in radixcheck.__all__
