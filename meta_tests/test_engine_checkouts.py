"""Engines not on the package registry are read from the user's own checkout, and say so.

Runs without torch and without any engine: the checkouts here are tiny git repositories made in
``tmp_path``, shaped like the engine's (its folder, a module with a relative and an absolute
import). What is tested is :mod:`radixcheck.properties.adapters.checkout`: one clear message when
the setting is missing, the commit read and recorded, a warning for a commit radixcheck was not
validated on, a commit taken from the checkout's history, and the module imported unchanged with
radixcheck's stand-ins put in first; and that the matrix marks an engine without its checkout
"not run" without weakening the verdicts a report already holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from radixcheck.properties.adapters import checkout as co
from radixcheck.properties.adapters import lightllm_radix, mini_sglang
from radixcheck.properties.cache.contract import SlotAllocator

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

FAKE = co.EngineRepo(
    name="fake-engine",
    setting="RADIXCHECK_FAKE_ENGINE_SRC",
    url="https://example.invalid/fake-engine",
    folder="python/fakeengine/cache",
    validated={"0" * 40: "a commit no fake checkout has"},
)

MODULE = """from fakeengine_core import answer
from .base import BASE


def value():
    return (BASE, answer())
"""


def git(repo: Path, *args: str) -> str:
    env = os.environ | {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def make_checkout(root: Path, folder: str, base: str = "first") -> Path:
    """A git repository with ``folder/cache.py`` (see MODULE) and ``folder/base.py``, one commit."""
    (root / folder).mkdir(parents=True)
    (root / folder / "cache.py").write_text(MODULE)
    (root / folder / "base.py").write_text(f"BASE = {base!r}\n")
    (root / folder / "__init__.py").write_text("raise ImportError('the whole engine would be imported here')\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", base)
    return root


@pytest.fixture
def clean_modules():
    """Remove whatever a test put into sys.modules (packages made by import_unchanged, stand-ins)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


@pytest.mark.parametrize("value", [None, "", "/no/such/dir"])
def test_a_missing_setting_is_one_message_saying_what_to_clone(monkeypatch, value) -> None:
    if value is None:
        monkeypatch.delenv(co.MINI_SGLANG.setting, raising=False)
    else:
        monkeypatch.setenv(co.MINI_SGLANG.setting, value)
    with pytest.raises(co.CheckoutMissing) as caught:
        co.checkout(co.MINI_SGLANG)
    message = str(caught.value)
    for part in ("git clone https://github.com/sgl-project/mini-sglang", "checkout 20fcd7f",
                 "export RADIXCHECK_MINISGLANG_SRC=", "f074873"):
        assert part in message
    assert "\n" not in message


def test_a_directory_that_is_not_the_engine_is_refused(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(co.LIGHTLLM.setting, str(tmp_path))
    with pytest.raises(co.CheckoutMissing, match="is not a LightLLM checkout: it has no lightllm/server"):
        co.checkout(co.LIGHTLLM)


def test_the_factories_raise_it_before_needing_torch(monkeypatch) -> None:
    monkeypatch.delenv(co.MINI_SGLANG.setting, raising=False)
    monkeypatch.delenv(co.LIGHTLLM.setting, raising=False)
    monkeypatch.setattr(mini_sglang, "_loaded", {})  # as if nothing were loaded yet (an audit venv with the settings)
    monkeypatch.setattr(lightllm_radix, "_loaded", {})
    for factory, setting in ((mini_sglang.newest, co.MINI_SGLANG.setting), (mini_sglang.pre_fix_52, co.MINI_SGLANG.setting),
                             (lightllm_radix.radix_cache, co.LIGHTLLM.setting)):
        with pytest.raises(co.CheckoutMissing, match=f"{setting} is not set"):
            factory(SlotAllocator(16), 1)


def test_the_working_tree_commit_is_recorded_and_an_unvalidated_one_warned(monkeypatch, tmp_path) -> None:
    repo = make_checkout(tmp_path / "fake", FAKE.folder)
    monkeypatch.setenv(FAKE.setting, str(repo))
    with pytest.warns(co.UnvalidatedCommit, match="NOT a commit radixcheck was validated on"):
        source = co.working_tree(FAKE)
    assert source.commit == git(repo, "rev-parse", "HEAD")
    assert not source.modified and not source.validated
    assert source.commit[:12] in source.describe()
    (repo / FAKE.folder / "base.py").write_text("BASE = 'edited'\n")
    with pytest.warns(co.UnvalidatedCommit):
        edited = co.working_tree(FAKE)
    assert edited.modified and "uncommitted changes" in edited.describe()


def test_a_validated_commit_is_not_warned(monkeypatch, tmp_path) -> None:
    repo = make_checkout(tmp_path / "fake", FAKE.folder)
    validated = co.EngineRepo(**{**FAKE.__dict__, "validated": {git(repo, "rev-parse", "HEAD"): "this one"}})
    monkeypatch.setenv(FAKE.setting, str(repo))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        source = co.working_tree(validated)
    assert source.validated and "; validated)" in source.describe()


def test_a_commit_comes_from_the_checkout_history_into_the_cache(monkeypatch, tmp_path) -> None:
    repo = make_checkout(tmp_path / "fake", FAKE.folder)
    first = git(repo, "rev-parse", "HEAD")
    (repo / FAKE.folder / "base.py").write_text("BASE = 'second'\n")
    git(repo, "commit", "-qam", "second")
    monkeypatch.setenv(FAKE.setting, str(repo))
    monkeypatch.setenv(co.CACHE_ENV, str(tmp_path / "cache"))
    source = co.at_commit(FAKE, first[:7])
    assert source.commit == first and source.root == tmp_path / "cache" / "engines" / "fake-engine" / first
    assert (source.folder / "base.py").read_text() == "BASE = 'first'\n"  # the commit, not the working tree
    assert co.at_commit(FAKE, first).root == source.root  # archived once
    with pytest.raises(co.CheckoutMissing, match="has no commit deadbee in its history"):
        co.at_commit(FAKE, "deadbee")


def test_the_module_is_imported_unchanged_with_stand_ins_first(monkeypatch, tmp_path, clean_modules) -> None:
    repo = make_checkout(tmp_path / "fake", FAKE.folder)
    monkeypatch.setenv(FAKE.setting, str(repo))
    path = repo / FAKE.folder / "cache.py"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    stand_in = ModuleType("fakeengine_core")
    stand_in.answer = lambda: 42
    co.install_stand_ins({"fakeengine_core": stand_in})
    with pytest.warns(co.UnvalidatedCommit):
        source = co.working_tree(FAKE)
    module = co.import_unchanged(source, "cache")
    assert module.value() == ("first", 42)  # its sibling from the checkout, the stand-in for the engine's import
    assert module.__file__ == str(path.resolve())
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert co.import_unchanged(source, "cache") is module


def test_a_stand_in_never_replaces_a_real_module(clean_modules) -> None:
    real = ModuleType("fakeengine_real")
    sys.modules["fakeengine_real"] = real
    with pytest.raises(ImportError, match="already imported"):
        co.install_stand_ins({"fakeengine_real": ModuleType("fakeengine_real")})
    assert sys.modules["fakeengine_real"] is real


def test_the_matrix_marks_an_engine_without_checkout_not_run_and_keeps_verdicts(monkeypatch, tmp_path) -> None:
    from radixcheck.reports import matrix

    monkeypatch.delenv(co.LIGHTLLM.setting, raising=False)
    assert matrix.main(["--only", "lightllm", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "MATRIX.md").read_text()
    assert "| `lightllm.radix_cache` | not run: needs a checkout |" in report
    assert "RADIXCHECK_LIGHTLLM_SRC is not set" in report
    # A report that already holds verdicts for those rows keeps them, and keeps other engines' rows.
    saved = json.loads((tmp_path / "artifacts" / "matrix.json").read_text())
    verdict = {"outcome": "failed", "oracle": "lru", "reason": "an earlier verdict"}
    saved["rows"] = [{k: v for k, v in r.items() if k != "not_run"} | {"tests": {"test_x": verdict}} for r in saved["rows"]]
    saved["rows"].append({"name": "vllm.somewhere", "spec": "x:y", "seconds": 1.0, "tests": {"test_x": verdict}})
    (tmp_path / "artifacts" / "matrix.json").write_text(json.dumps(saved))
    assert matrix.main(["--only", "lightllm", "--out", str(tmp_path)]) == 0
    rows = {r["name"]: r for r in json.loads((tmp_path / "artifacts" / "matrix.json").read_text())["rows"]}
    assert rows["lightllm.radix_cache"]["tests"] == {"test_x": verdict}
    assert "vllm.somewhere" in rows


def test_the_stand_ins_for_one_import_leave_sys_modules_as_they_were(clean_modules) -> None:
    real = ModuleType("fakeengine_pkg")
    sys.modules["fakeengine_pkg"] = real
    stand_ins = {"fakeengine_pkg": ModuleType("fakeengine_pkg"), "fakeengine_pkg.sub": ModuleType("fakeengine_pkg.sub")}
    with co.stand_ins_while_importing(stand_ins):
        assert sys.modules["fakeengine_pkg"] is stand_ins["fakeengine_pkg"]
    assert sys.modules["fakeengine_pkg"] is real and "fakeengine_pkg.sub" not in sys.modules


def test_a_registry_release_that_is_not_installed_says_what_to_install(monkeypatch) -> None:
    from importlib import metadata

    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(co.NotInstalled, match="pip install --no-deps lightllm==0.0.1"):
        lightllm_radix.source_of("release_0_0_1")
    monkeypatch.setattr(metadata, "version", lambda name: "9.9")
    with pytest.raises(co.NotInstalled, match="lightllm 9.9 is installed"):
        lightllm_radix.release()


def test_the_matrix_records_the_commit_an_engine_ran(monkeypatch, tmp_path) -> None:
    from radixcheck.reports import matrix

    repo = make_checkout(tmp_path / "lightllm", co.LIGHTLLM.folder)
    monkeypatch.setenv(co.LIGHTLLM.setting, str(repo))
    engine = next(e for e in matrix.ENGINES if e.key == "lightllm")
    targets = {n: spec for n, spec in matrix.engine_targets(engine).items() if ".radix_cache" in n}  # the checkout's
    with pytest.warns(co.UnvalidatedCommit):
        sources, missing = matrix.engine_sources(engine, targets)
    assert missing == {}
    head = git(repo, "rev-parse", "HEAD")[:12]
    assert sources and all(f"LightLLM {head}" in s and "NOT a commit" in s for s in sources.values())
