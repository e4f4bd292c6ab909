"""The default model: a tiny seeded "wiring" model with random Q8_0 weights.

It has the full Llama architecture (GQA, RoPE, SwiGLU, RMSNorm, untied head) at toy size, so
property tests run in milliseconds. Its logits carry no meaning, but every code path of the real
model is exercised and exactness is exactly as hard to get right.
"""

from __future__ import annotations

import numpy as np

from radixcheck.model.llama import Config, LayerWeights, Model, Weights
from radixcheck.model.q8 import quantize

DEFAULT_CONFIG = Config(
    n_layers=3,
    d_model=128,
    n_heads=4,
    n_kv_heads=2,
    head_dim=32,
    ffn_dim=352,
    vocab_size=384,
    max_seq_len=1024,
    rope_theta=10000.0,
    norm_eps=float(np.float32(1e-5)),  # representable in GGUF's float32 field
    name="synthetic-wiring",
)


def synthetic_weights(config: Config, seed: int = 0, tied: bool = False) -> Weights:
    """Random weights, quantised to Q8_0, scaled like a trained model (std ~ 1/sqrt(fan_in))."""
    rng = np.random.default_rng(seed)
    c = config

    def mat(rows: int, cols: int, gain: float = 1.0) -> np.ndarray:
        return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(gain / np.sqrt(cols))

    def norm() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(c.d_model)).astype(np.float32)

    layers = []
    for _ in range(c.n_layers):
        layers.append(
            LayerWeights(
                attn_norm=norm(),
                # a larger q/k gain gives peaky attention, so attention patterns actually matter
                wq=quantize(mat(c.n_heads * c.head_dim, c.d_model, 4.0)),
                wk=quantize(mat(c.n_kv_heads * c.head_dim, c.d_model, 2.0)),
                wv=quantize(mat(c.n_kv_heads * c.head_dim, c.d_model)),
                wo=quantize(mat(c.d_model, c.n_heads * c.head_dim, 0.5)),
                ffn_norm=norm(),
                w_gate=quantize(mat(c.ffn_dim, c.d_model)),
                w_up=quantize(mat(c.ffn_dim, c.d_model)),
                w_down=quantize(mat(c.d_model, c.ffn_dim, 0.5)),
            )
        )
    embd = quantize(rng.standard_normal((c.vocab_size, c.d_model), dtype=np.float32))
    output = None if tied else quantize(mat(c.vocab_size, c.d_model, 4.0))
    return Weights(token_embd=embd, layers=layers, out_norm=norm(), output=output)


def load_default(seed: int = 0, arithmetic: str = "exact", config: Config | None = None, tied: bool = False) -> Model:
    """The default synthetic wiring model (``DEFAULT_CONFIG``: 3 layers, 4 heads / 2 KV heads of
    dim 32, d_model 128, ffn 352, vocab 384, max_seq_len 1024), deterministic for a given seed.

    ``arithmetic="float"`` gives the deliberately inexact plain-float-BLAS variant (meta-tests).
    ``config`` overrides the shape (e.g. ``n_layers=1`` for the re-rotation eviction tests).
    """
    cfg = config or DEFAULT_CONFIG
    return Model(cfg, synthetic_weights(cfg, seed, tied), arithmetic=arithmetic)
