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


def test_no_amx_build_takes_the_cpus_simd_forms_and_no_amx(tmp_path, monkeypatch, capsys) -> None:
    """The CPU is simulated (a flag set), never the host's: a Sapphire Rapids-like set and an AVX2-only one."""
    monkeypatch.setenv("RADIXCHECK_CACHE", str(tmp_path))
    assert llamacpp_env.main(["--no-amx", "--print-python"]) == 0
    assert capsys.readouterr().out.strip() == str(llamacpp_env.python_of(tmp_path / "llama-venv-noamx"))
    spr = frozenset("avx avx2 fma f16c avx512f avx512vbmi avx512_vnni avx512_bf16 avx_vnni amx_tile amx_int8".split())
    flags = dict(a.removeprefix("-D").split("=") for a in llamacpp_env.no_amx_cmake_args(spr).split())
    assert flags["GGML_NATIVE"] == "OFF" and all(v == "OFF" for k, v in flags.items() if "AMX" in k)
    assert all(flags[k] == "ON" for k in ("GGML_AVX2", "GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_BF16", "GGML_AVX_VNNI"))
    zen3 = dict(a.removeprefix("-D").split("=") for a in llamacpp_env.no_amx_cmake_args(frozenset("avx avx2 fma f16c".split())).split())
    assert zen3["GGML_AVX2"] == "ON" and all(v == "OFF" for k, v in zen3.items() if "512" in k or "VNNI" in k)


def test_avx2_and_no_amx_together_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        llamacpp_env.main(["--avx2", "--no-amx", "--print-python"])
    assert e.value.code == 2 and "choose one" in capsys.readouterr().err


def test_a_worker_that_dies_is_named_not_an_unpacking_error(tmp_path) -> None:
    """A stand-in worker that says ready, then dies by SIGSEGV at the first prefill (as llama.cpp's AMX
    product did): the error names the signal and the prefill."""
    from radixcheck.model.bench import LlamaWorker

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ready CPU : AVX2 = 1 |'\nread line\nkill -SEGV $$\n")
    fake.chmod(0o755)
    worker = LlamaWorker(str(fake), tmp_path / "model.gguf", threads=1)
    with pytest.raises(RuntimeError, match=r"^the llama.cpp worker died \(signal SIGSEGV\) during a prefill of 8 tokens"):
        worker.prefill_seconds(8)

