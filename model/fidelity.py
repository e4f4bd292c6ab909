"""How far the exact model's logits are from the model's float64 arithmetic — and llama.cpp's.

    python -m radixcheck.model.fidelity                                   # exact vs float64 only
    python -m radixcheck.model.fidelity --llama-python "$(python -m radixcheck.model.llamacpp_env --print-python)"
    python -m radixcheck.model.fidelity --llama-python PY --md reports/PREFILL-smollm2.md   # also write the section

On the real SmolLM2-135M (same Q8_0 weights for everyone), one chat prompt, every position, the
full vocabulary: max |Δlogit| and argmax agreement of

* the exact model (``arithmetic="exact"``: integerised activations, q/k/v and probabilities),
* llama.cpp (llama-cpp-python, ``model/llamacpp.py logits``: Q8_0 activations, float16 KV),

against the float64 reference (``arithmetic="float64"``: the same Q8_0 weights, no activation,
q/k/v or probability quantisation; ``model.exact.FloatOps``). Nothing here is timed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from radixcheck.argtypes import ArgumentParser, python_with, refuse_weaker
from radixcheck.provenance import generated_by

CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\nThe capital of"  # 19 tokens
SECTION = "fidelity"


def llama_logits(python: str, gguf: Path, ids: list[int]) -> np.ndarray:
    """llama.cpp's all-position logits, from its own venv (``model/llamacpp.py logits``)."""
    script = Path(__file__).resolve().with_name("llamacpp.py")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "logits.npy"
        subprocess.run([python, str(script), "logits", str(gguf), json.dumps(ids), str(out)], check=True)
        return np.load(out)


def measure(text: str = CHAT, llama_python: str | None = None) -> dict[str, Any]:
    import gc

    from radixcheck.model import KVPool, smollm2
    from radixcheck.model.gguf_io import read_gguf
    from radixcheck.model.llama import Model
    from radixcheck.model.tokenizer import load_smollm2_tokenizer

    ids = load_smollm2_tokenizer().encode(text).ids
    n = len(ids)
    m = smollm2.load_smollm2()
    exact = m.prefill(KVPool(m.config, n), ids, np.arange(n))
    del m
    gc.collect()
    config, weights, reader = read_gguf(smollm2.q8_path())
    del reader
    ref_model = Model(config, weights, arithmetic="float64", keep_q8=False)
    del weights
    ref = ref_model.prefill(KVPool(config, n), ids, np.arange(n))
    del ref_model
    gc.collect()
    out: dict[str, Any] = {"text": text, "tokens": n, "vocab": int(ref.shape[1])}

    def compare(name: str, got: np.ndarray) -> None:
        d = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        out[name] = {
            "max_abs_diff": float(d.max()),
            "mean_abs_diff": float(d.mean()),
            "argmax_agrees": int((got.argmax(axis=1) == ref.argmax(axis=1)).sum()),
        }

    compare("exact", exact)
    if llama_python:
        lc = llama_logits(llama_python, smollm2.q8_path(), list(ids))
        compare("llama.cpp", lc)
        out["exact_vs_llama.cpp_argmax_agrees"] = int((exact.argmax(axis=1) == lc.argmax(axis=1)).sum())
    return out


def markdown(r: dict[str, Any], command: str) -> str:
    n = r["tokens"]
    rows = [
        f"| {name} | {r[name]['max_abs_diff']:.3f} | {r[name]['mean_abs_diff']:.4f} | {r[name]['argmax_agrees']}/{n} |"
        for name in ("exact", "llama.cpp")
        if name in r
    ]
    lines = [
        f"## Fidelity: distance from the model's float64 arithmetic (`{command}`)",
        "",
        f"{generated_by()} "
        f"SmolLM2-135M-Instruct, same Q8_0 weights, {n}-token chat prompt {json.dumps(r['text'])}, all {n} positions x the full "
        f"vocabulary ({r['vocab']}). Reference: the float64 forward pass (no activation / q / k / v / probability quantisation).",
        "",
        "| logits | max abs Δ vs float64 | mean abs Δ | argmax agrees with float64 |",
        "|---|---|---|---|",
        *rows,
    ]
    if "exact_vs_llama.cpp_argmax_agrees" in r:
        lines += ["", f"Exact vs llama.cpp argmax: {r['exact_vs_llama.cpp_argmax_agrees']}/{n} positions agree."]
    return "\n".join(lines) + "\n"


def replace_section(path: Path, name: str, body: str) -> None:
    """Write ``body`` between ``<!-- name -->`` markers in ``path`` (other sections are kept)."""
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    block = f"{begin}\n{body}{end}\n"
    if begin in text and end in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end) + 1 :]
    else:
        text = (text + "\n" if text else "") + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def read_section(path: Path, name: str) -> str:
    """The text between ``<!-- name -->`` markers in ``path`` ('' if there is none)."""
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return text[text.index(begin) : text.index(end)] if begin in text and end in text else ""


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m radixcheck.model.fidelity", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-python", type=python_with("llama_cpp"),
                    help="a Python with llama-cpp-python (python -m radixcheck.model.llamacpp_env)")
    ap.add_argument("--text", default=CHAT, help="the prompt (default: a 19-token chat prompt)")
    ap.add_argument("--md", type=Path, help="also write the table as a section of this markdown file")
    ap.add_argument("--force", action="store_true", help="replace the --md section even without its llama.cpp row")
    args = ap.parse_args(argv)
    if not args.text:
        ap.error("argument --text: the prompt is empty")
    if args.md and "| llama.cpp |" in read_section(args.md, SECTION) and not args.llama_python:
        refuse_weaker(ap, args.md, ["no --llama-python: the llama.cpp row would be lost"], args.force, elsewhere="another --md file")
    r = measure(args.text, args.llama_python)
    cmd = "python -m radixcheck.model.fidelity" + (" --llama-python PY" if args.llama_python else "")
    md = markdown(r, cmd)
    print(md)
    print(json.dumps(r))
    if args.md:
        replace_section(args.md, SECTION, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
