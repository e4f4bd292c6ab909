"""llama.cpp side of the differential check and the benchmark (llama-cpp-python is OPTIONAL).

Never a test or CI dependency: run these by hand with a Python that has ``llama_cpp`` installed;
``python -m radixcheck.model.llamacpp_env`` builds one (~10 min). The ``worker`` and ``logits``
commands need only llama-cpp-python and NumPy, so the benchmark and ``model.fidelity`` run this
file directly in that venv (``python model/llamacpp.py worker ...``) without radixcheck there.

``python -m radixcheck.model.llamacpp fixture [--out model/fixtures/llamacpp_smollm2.json]``
    Runs llama.cpp on the same Q8_0 GGUF our model loads (``model.smollm2.prepare()``) for a few
    prompts and writes llama.cpp's token ids and top-k logits at every position. The test
    ``properties/test_model_smollm2.py`` compares our argmax with it when the fixture exists.

``python model/llamacpp.py worker GGUF``
    A persistent timing worker used by ``python -m radixcheck.model.bench --llama-python ...``: prints
    ``ready`` and llama.cpp's system info (the instructions its build uses), then reads a token
    count ``T`` per line on stdin, prefills ``T`` random tokens from an empty KV cache and prints
    the wall and CPU seconds taken.

``python model/llamacpp.py logits GGUF IDS_JSON OUT.npy``
    llama.cpp's logits at every position for one token-id list (used by ``model.fidelity``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).with_name("fixtures") / "llamacpp_smollm2.json"
TOP_K = 8

PROMPTS = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "The quick brown fox jumps over the lazy dog. 1234567890 is a number with 10 digits.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "<|im_start|>user\nList three colours of the rainbow.<|im_end|>\n<|im_start|>assistant\nRed, orange and",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u2014 \u6771\u4eac \U0001f680 ok",
]


def _llama(path: str, n_ctx: int, logits_all: bool, threads: int = 2):  # noqa: ANN202 - llama_cpp is optional
    from llama_cpp import Llama

    return Llama(
        model_path=path,
        n_ctx=n_ctx,
        n_batch=512,
        n_ubatch=512,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=logits_all,
        verbose=False,
    )


def write_fixture(out: Path) -> None:
    import llama_cpp

    from radixcheck.model import smollm2

    path = str(smollm2.prepare())
    llm = _llama(path, 512, logits_all=True)
    cases = []
    for text in PROMPTS:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        scores = np.asarray(llm.scores[: len(ids)], dtype=np.float32)
        top = np.argsort(-scores, axis=1, kind="stable")[:, :TOP_K]
        cases.append(
            {
                "text": text,
                "token_ids": [int(t) for t in ids],
                "top_ids": top.tolist(),
                "top_logits": np.take_along_axis(scores, top, axis=1).round(5).tolist(),
            }
        )
    doc = {
        "source": "llama.cpp via llama-cpp-python",
        "llama_cpp_python": llama_cpp.__version__,
        "gguf": Path(path).name,
        "note": "top-k logits per position; llama.cpp stores KV in f16 and quantizes activations",
        "top_k": TOP_K,
        "cases": cases,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({k: v for k, v in doc.items() if k != "cases"}, ensure_ascii=False)[:-1]
    body = ",\n  ".join(json.dumps(c, ensure_ascii=False) for c in cases)
    out.write_text(f'{head}, "cases": [\n  {body}\n]}}\n')
    print(f"wrote {out} ({sum(len(c['token_ids']) for c in cases)} positions)")


def worker(path: str, threads: int) -> None:
    import llama_cpp

    llm = _llama(path, 2048, logits_all=False, threads=threads)
    rng = np.random.default_rng(0)
    info = llama_cpp.llama_print_system_info().decode(errors="replace").replace("\n", " ").strip()
    print(f"ready {info}", flush=True)  # the instructions this llama.cpp build uses, for the report
    for line in sys.stdin:
        T = int(line)
        toks = [int(t) for t in rng.integers(0, llm.n_vocab(), T)]
        llm.reset()
        t0, c0 = time.perf_counter(), time.process_time()
        llm.eval(toks)
        print(f"{time.perf_counter() - t0:.6f} {time.process_time() - c0:.6f}", flush=True)


def logits(path: str, ids_json: str, out: str, threads: int) -> None:
    """All-position logits (float32, full vocabulary) of one token-id list, saved with ``np.save``."""
    ids = [int(t) for t in json.loads(ids_json)]
    llm = _llama(path, max(64, len(ids)), logits_all=True, threads=threads)
    llm.reset()
    llm.eval(ids)
    np.save(out, np.asarray(llm.scores[: len(ids)], dtype=np.float32))


def main() -> None:
    try:  # one-line usage errors; run as a file in the llama venv, radixcheck is not there: plain argparse
        from radixcheck.argtypes import ArgumentParser, positive_int
    except ImportError:
        ArgumentParser, positive_int = argparse.ArgumentParser, int
    ap = ArgumentParser(prog="python -m radixcheck.model.llamacpp", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fixture")
    f.add_argument("--out", type=Path, default=FIXTURE)
    w = sub.add_parser("worker")
    w.add_argument("gguf")
    w.add_argument("--threads", type=positive_int, default=2)
    g = sub.add_parser("logits")
    g.add_argument("gguf")
    g.add_argument("ids_json", help="token ids as a JSON list")
    g.add_argument("out", help="where to np.save the (len, vocab) float32 logits")
    g.add_argument("--threads", type=positive_int, default=1)
    args = ap.parse_args()
    if args.cmd == "fixture":
        write_fixture(args.out)
    elif args.cmd == "logits":
        logits(args.gguf, args.ids_json, args.out, args.threads)
    else:
        worker(args.gguf, args.threads)


if __name__ == "__main__":
    main()
