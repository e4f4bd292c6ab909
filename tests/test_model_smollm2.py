"""The real SmolLM2-135M-Instruct (Q8_0): tokenizer, exact reuse, agreement with llama.cpp.

Marked ``real_model``; skipped unless the Q8_0 GGUF is already on disk (``python -m
model.smollm2`` fetches and converts it into ``$RADIXCHECK_CACHE`` or ~/.cache/radixcheck; these
tests never download). Kept small: a real prefill takes ~0.1-1 s here.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixcheck.model import KVPool, smollm2
from radixcheck.model.checks import check_reuse_after_split
from radixcheck.model.llamacpp import FIXTURE

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.deep,  # the deep tier (docs/reference/test-tiers.md): loading the 135M model costs seconds
    pytest.mark.xdist_group("real_model"),  # one worker loads the 135M model once, not each worker
    pytest.mark.skipif(not smollm2.available(), reason=f"SmolLM2 Q8_0 GGUF not at {smollm2.q8_path()}"),
]


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """1 BLAS thread: 2-thread OpenBLAS on a loaded 2-core machine spends its time spinning. The
    1-vs-2-thread bit-identity of the real model is checked by ``python -m radixcheck.model.kernel_check --real``."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="session")  # session: xdist may interleave other modules' tests on this worker
def real_weights():
    """The GGUF read once (gguf-py's reader parses the whole vocabulary: ~2 s a read)."""
    from radixcheck.model.gguf_io import read_gguf

    config, weights, reader = read_gguf(smollm2.q8_path())
    del reader  # its parsed metadata holds ~150 MB
    return config, weights


@pytest.fixture(scope="session")
def real(real_weights):
    from radixcheck.model.llama import Model

    return Model(*real_weights, keep_q8=False)  # as smollm2.load_smollm2 builds it (a model copies what it keeps of the weights)


@pytest.fixture(scope="session")
def tokenizer():
    from radixcheck.model.tokenizer import load_smollm2_tokenizer

    return load_smollm2_tokenizer(download=False)


CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


def test_config_is_smollm2_135m(real) -> None:
    c = real.config
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_dim, c.vocab_size) == (
        30,
        576,
        9,
        3,
        64,
        1536,
        49152,
    )
    assert c.rope_theta == 100000.0


def test_greedy_answer_is_paris(real, tokenizer) -> None:
    ids = tokenizer.encode(CHAT).ids
    pool = KVPool(real.config, 64)
    seq = list(ids)
    logits = real.prefill(pool, seq, np.arange(len(seq)))
    for _ in range(6):
        seq.append(int(logits[-1].argmax()))
        logits = real.prefill(pool, seq, np.arange(len(seq)), len(seq) - 1)
    assert "Paris" in tokenizer.decode(seq[len(ids) :])


@settings(deadline=None, max_examples=3)
@given(split=st.integers(1, 15))  # the chat prompt has 16 tokens
def test_real_model_reuse_after_split_is_bit_identical(real, tokenizer, split: int) -> None:
    ids = tokenizer.encode(CHAT).ids
    check_reuse_after_split(real, ids, split, seed=split)


def test_c_kernel_equals_float64_blas_on_the_real_weights(real) -> None:
    """Every compiled Q8_0 kernel path and float64 BLAS give the same bits on real matrices (the
    tied head, and the first layer's matrices), with row counts that are not multiples of the
    kernels' tiles (5: AVX2 tiles only; 21: a 16-row AVX-512 tile and 5 rows)."""
    from radixcheck.model import q8kernel
    from radixcheck.model.checks import assert_bit_identical
    from radixcheck.model.exact import ExactOps

    if not q8kernel.available():
        pytest.skip("no compiled Q8_0 kernel")
    blas = ExactOps("numpy")
    rng = np.random.default_rng(0)
    for w in (real._head, *(v for v in real._layers[0].values() if hasattr(v, "q"))):
        for n in (5, 21):
            x = rng.standard_normal((n, w.shape[1]))
            want = blas.linear(x, w, np.float32)
            for path in q8kernel.available():
                assert_bit_identical(ExactOps(path).linear(x, w, np.float32), want, f"real weights: {path} kernel vs BLAS, {n} rows")


def test_exact_model_stays_close_to_the_float64_reference(real, real_weights, tokenizer) -> None:
    """Fidelity: on the same Q8_0 weights, an unquantised float64 forward pass and the exact model
    agree on every argmax and within 0.1 logits (measured: max 0.054 on the fixture prompts)."""
    import gc

    from radixcheck.model.llama import Model

    texts = [CHAT]
    got = [real.prefill(KVPool(real.config, 64), ids, np.arange(len(ids))) for ids in (tokenizer.encode(t).ids for t in texts)]
    config, weights = real_weights
    ref = Model(config, weights, arithmetic="float64", keep_q8=False)
    for text, g in zip(texts, got, strict=True):
        ids = tokenizer.encode(text).ids
        want = ref.prefill(KVPool(config, 64), ids, np.arange(len(ids)))
        assert np.array_equal(g.argmax(axis=1), want.argmax(axis=1)), f"argmax differs from float64 on {text!r}"
        assert float(np.max(np.abs(g - want))) < 0.1
    del ref
    gc.collect()


NEAR_TIE = 0.25  # logits: llama.cpp's own activation quantization moves logits by ~0.2 (mean) here


@pytest.mark.skipif(not FIXTURE.is_file(), reason="no llama.cpp fixture (python -m radixcheck.model.llamacpp fixture)")
def test_argmax_agrees_with_llama_cpp_on_the_fixture(real, tokenizer) -> None:
    """Same Q8_0 weights, same token ids; argmax must agree wherever llama.cpp's top-1 leads its
    top-2 by more than NEAR_TIE. Overall agreement and the max logit difference are printed."""
    doc = json.loads(FIXTURE.read_text())
    positions = agree = 0
    max_diff, decisive_misses = 0.0, []
    for case in doc["cases"]:
        ids = case["token_ids"]
        assert tokenizer.encode(case["text"]).ids == ids, f"tokenizer differs from llama.cpp on {case['text']!r}"
        ours = real.prefill(KVPool(real.config, len(ids)), ids, np.arange(len(ids)))
        top_ids = np.asarray(case["top_ids"])
        top_logits = np.asarray(case["top_logits"])
        hit = ours.argmax(axis=1) == top_ids[:, 0]
        positions += len(ids)
        agree += int(hit.sum())
        margin = top_logits[:, 0] - top_logits[:, 1]
        decisive_misses += [(case["text"][:20], int(p)) for p in np.flatnonzero(~hit & (margin > NEAR_TIE))]
        max_diff = max(max_diff, float(np.max(np.abs(np.take_along_axis(ours, top_ids, axis=1) - top_logits))))
    print(
        f"\nargmax agreement with llama.cpp: {agree}/{positions} positions; "
        f"max |logit diff| on llama.cpp's top-{doc['top_k']}: {max_diff:.3f}"
    )
    assert not decisive_misses, f"argmax differs where llama.cpp is decisive: {decisive_misses}"


def test_real_model_prefix_back_from_host_is_bit_identical(real) -> None:
    """Cross-tier bit identity on SmolLM2: a prefix written back to host, its device slots reused,
    loaded back for a request that extends it (``tests/test_model_tiers.py`` on the synthetic model)."""
    from tests.test_model_tiers import round_trip

    first = [1, 4093, 314, 253, 2114, 30, 198, 504, 3365, 282]
    assert round_trip(real, first, first[:8] + [1001, 77], "write_back") == 8


_PEAK_PROBE = """
from radixcheck.model import smollm2
model = smollm2.load_smollm2(download=False)
print([line for line in open("/proc/self/status") if line.startswith("VmHWM")][0].split()[1])
"""


def test_loading_peaks_under_470_mib() -> None:
    """Issue 43: peak RSS <= 470 MB. The load was the peak (472 MiB measured when it read the
    tensors through the reader's mmap: the file's pages beside their copies; ~385 since); a fresh
    process, so nothing this test session allocated counts."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PEAK_PROBE], capture_output=True, text=True, timeout=600, check=True)
    peak_mib = int(out.stdout.split()[-1]) / 1024
    assert peak_mib <= 470, f"load_smollm2() peaked at {peak_mib:.1f} MiB VmHWM (limit 470)"


def test_read_gguf_gives_the_files_own_bytes(real_weights) -> None:
    """``read_gguf`` reads tensors with file reads (not the reader's mmap): every Q8 matrix equals
    the one parsed from the reader's own view of the same tensor."""
    from radixcheck.model.gguf_io import _open
    from radixcheck.model.q8 import from_gguf_bytes

    _, weights = real_weights
    tensors = {t.name: t for t in _open(smollm2.q8_path()).tensors}
    names = {"attn_q": "wq", "attn_k": "wk", "attn_v": "wv", "attn_output": "wo"}
    names |= {"ffn_gate": "w_gate", "ffn_up": "w_up", "ffn_down": "w_down"}
    pairs = [(f"blk.{i}.{k}.weight", getattr(lw, a)) for i, lw in enumerate(weights.layers) for k, a in names.items()]
    for name, m in [*pairs, ("token_embd.weight", weights.token_embd)]:
        view = from_gguf_bytes(np.asarray(tensors[name].data), *m.shape)
        assert np.array_equal(view.qs, m.qs) and np.array_equal(view.scales.view(np.uint16), m.scales.view(np.uint16)), name
