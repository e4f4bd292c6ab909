"""The llama.cpp environment builder's options (nothing is built here)."""

from __future__ import annotations

import pytest

from radixcheck.model import llamacpp_env


def test_avx2_build_has_its_own_venv_and_turns_every_avx512_form_off(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("RADIXCHECK_CACHE", str(tmp_path))
    assert llamacpp_env.main(["--avx2", "--print-python"]) == 0
    assert capsys.readouterr().out.strip() == str(llamacpp_env.python_of(tmp_path / "llama-venv-avx2"))
    assert llamacpp_env.main(["--print-python"]) == 0
    assert capsys.readouterr().out.strip() == str(llamacpp_env.python_of(tmp_path / "llama-venv"))
    flags = dict(a.removeprefix("-D").split("=") for a in llamacpp_env.AVX2_CMAKE_ARGS.split())
    assert flags["GGML_NATIVE"] == "OFF" and flags["GGML_AVX2"] == "ON"
    assert all(v == "OFF" for k, v in flags.items() if "AVX512" in k)


def test_bad_version_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        llamacpp_env.main(["--avx2", "--version", "latest"])
    assert e.value.code == 2
