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


def test_hypothesis_keeps_no_storage_directory_of_ours_after_the_run(monkeypatch, tmp_path: Path) -> None:
    """Hypothesis reads ``HYPOTHESIS_STORAGE_DIRECTORY`` once and keeps the directory: restoring the
    variable alone left a process that goes on after the run (an in-process ``pytest.main``)
    writing into radixcheck's cache, and storage read before the run sent the run into the project."""
    from hypothesis import configuration

    monkeypatch.setenv("RADIXCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(HYPOTHESIS_STORAGE_ENV, raising=False)
    project = tmp_path / "project" / ".hypothesis"
    before = getattr(configuration, "__hypothesis_home_directory")  # this session's own, put back after
    configuration.set_hypothesis_home_dir(project)  # read before the run, as a project's own test may have
    try:
        with hypothesis_storage_in_cache() as where:
            assert configuration.storage_directory("examples", intent_to_write=False).path == where / "examples"
        assert configuration.storage_directory("examples", intent_to_write=False).path == project / "examples"
        configuration.set_hypothesis_home_dir(None)  # not read yet: read afresh after the run, from the variable
        with hypothesis_storage_in_cache():
            configuration.storage_directory("examples", intent_to_write=False)
        assert configuration.storage_directory("x", intent_to_write=False).home_directory == Path.cwd() / ".hypothesis"
    finally:
        configuration.set_hypothesis_home_dir(before)


def test_the_header_says_the_storage_radixcheck_set_apart_from_the_users_environment(monkeypatch, tmp_path: Path) -> None:
    """The plugin's header listed radixcheck's own storage setting as the user's environment
    (``radixcheck environment: {'HYPOTHESIS_STORAGE_DIRECTORY': …}``, NU and composed trials)."""
    monkeypatch.setenv("RADIXCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(HYPOTHESIS_STORAGE_ENV, raising=False)
    target = load_target("radixcheck.reference:RadixCache")
    with hypothesis_storage_in_cache() as where:
        lines = report_header(target, "ci")
    assert not any(HYPOTHESIS_STORAGE_ENV in line for line in lines if line.startswith("radixcheck environment"))
    assert f"radixcheck hypothesis storage: {where} (radixcheck's cache, for radixcheck's tests only: " \
           f"{HYPOTHESIS_STORAGE_ENV} is restored after each)" in lines
    monkeypatch.setenv(HYPOTHESIS_STORAGE_ENV, str(tmp_path / "mine"))  # the user's own: their environment, said as such
    with hypothesis_storage_in_cache():
        lines = report_header(target, "ci")
    assert any(str(tmp_path / "mine") in line for line in lines if line.startswith("radixcheck environment"))
    assert not any(line.startswith("radixcheck hypothesis storage") for line in lines)


PROJECT_TEST = """
import json, os
from hypothesis import configuration, given, settings, strategies as st

@given(st.integers())
def test_a_property(x):
    assert x == x

def test_where():
    with open(os.environ["OBSERVED"], "w") as f:
        json.dump({"env": os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"), "database": repr(settings().database),
                   "home": str(configuration.storage_directory("x", intent_to_write=False).home_directory)}, f)
"""


@pytest.mark.deep
def test_a_radix_target_run_leaves_the_projects_own_hypothesis_tests_their_storage(tmp_path: Path) -> None:
    """``pytest --radix-target X`` in a project whose own Hypothesis tests run in the same session
    (no conformance test collected): it printed nothing, but moved their example database into
    radixcheck's cache for the whole session (the variable set at configure). Now only radixcheck's
    own tests use that storage."""
    import json
    import subprocess

    project = tmp_path / "project"
    project.mkdir()
    (project / "test_mine.py").write_text(PROJECT_TEST)
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path)), "OBSERVED": str(tmp_path / "seen.json"),
           "RADIXCHECK_CACHE": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--radix-target",
                             "radixcheck.reference:RadixCache"], cwd=project, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert "radixcheck" not in result.stdout + result.stderr  # nothing collected of radixcheck's: nothing said
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["env"] is None and seen["home"] == str(project / ".hypothesis"), seen
    assert str(tmp_path / "cache") not in seen["database"], seen
