"""An audit leaves nothing in the user's project, and a factory that declares no capabilities
is told which defaults it is held to. (The installed flow, no ``.hypothesis/`` in the project
after two real audits, is checked by .ci/installed-path.)"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from radixcheck.audit import AuditResult, report_card
from radixcheck.cache_dir import HYPOTHESIS_STORAGE_ENV, cache_dir, hypothesis_storage_in_cache
from radixcheck.properties.target import load_target
from radixcheck.pytest_plugin import report_header


def test_hypothesis_storage_goes_to_the_cache_and_comes_back(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RADIXCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(HYPOTHESIS_STORAGE_ENV, raising=False)
    with hypothesis_storage_in_cache() as where:
        assert os.environ[HYPOTHESIS_STORAGE_ENV] == str(where) == str(tmp_path / "cache" / "hypothesis")
    assert HYPOTHESIS_STORAGE_ENV not in os.environ
    monkeypatch.setenv(HYPOTHESIS_STORAGE_ENV, str(tmp_path / "mine"))  # the user's own choice wins
    with hypothesis_storage_in_cache() as where:
        assert where == tmp_path / "mine"
    assert os.environ[HYPOTHESIS_STORAGE_ENV] == str(tmp_path / "mine")


def test_the_cache_is_the_platform_user_cache_unless_set(monkeypatch) -> None:
    from platformdirs import user_cache_dir

    monkeypatch.delenv("RADIXCHECK_CACHE", raising=False)
    assert cache_dir() == Path(user_cache_dir("radixcheck", appauthor=False))
    assert Path.cwd() not in cache_dir().parents


@pytest.fixture
def undeclared(monkeypatch) -> str:
    module = types.ModuleType("undeclared_cache_adapter")
    from radixcheck.reference import RadixCache

    module.make = lambda allocator, page_size: RadixCache(allocator, page_size)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return f"{module.__name__}:make"


def test_a_factory_without_capabilities_is_warned_with_the_defaults(undeclared: str) -> None:
    target = load_target(undeclared)
    warning = target.defaults_warning()
    assert warning and "no `capabilities`" in warning and "page sizes [1, 2, 4]" in warning and "Capabilities(" in warning
    assert any("WARNING" in line and "no `capabilities`" in line for line in report_header(target, "ci"))
    card = report_card(AuditResult(target.spec, repr(target.capabilities), [], "ci", warnings=[warning]))
    assert "**Warning:**" in card and "page sizes [1, 2, 4]" in card


def test_a_declared_factory_gets_no_warning() -> None:
    assert load_target("radixcheck.reference:RadixCache").defaults_warning() is None
