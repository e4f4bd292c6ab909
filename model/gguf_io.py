"""Read and write llama-architecture GGUF files (via gguf-py) as ``Config`` + Q8_0 ``Weights``.

``read_gguf(path)`` accepts any llama GGUF whose matrices are in a type gguf-py can dequantize
(Q8_0 is taken as is, byte for byte; Q4_1, F16, ... are dequantized and re-quantized to Q8_0).
``write_gguf(path, config, weights, fields)`` writes a Q8_0 GGUF that llama.cpp can load, copying
metadata fields (tokenizer, chat template, ...) from a source file.

GGUF lists tensor shapes input-first: a weight of shape ``[in, out]`` is stored as ``out`` rows of
``in`` values, which is our ``Q8Matrix`` ``(out, in)`` layout.

Errors: ``GGUFError`` (a ``ValueError``) for a truncated, corrupted or incomplete file,
``UnsupportedArchitecture`` (a subclass) for anything that is not a llama model we can run.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from radixcheck.model.llama import Config, LayerWeights, Weights
from radixcheck.model.q8 import Q8Matrix, from_gguf_bytes, quantize, to_gguf_bytes

SUPPORTED_ARCHITECTURES = ("llama",)
GGUF_MAGIC = b"GGUF"


class GGUFError(ValueError):
    """A GGUF file that cannot be read: truncated, corrupted, or missing something we need."""


class UnsupportedArchitecture(GGUFError):
    """A readable GGUF of a model architecture (or variant) this package cannot run."""


def _open(path: str | os.PathLike[str]) -> Any:
    import gguf

    p = Path(path)
    if not p.is_file():
        raise GGUFError(f"GGUF file not found: {p}")
    with open(p, "rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise GGUFError(f"{p} is not a GGUF file (magic {magic!r}, expected {GGUF_MAGIC!r})")
    try:
        reader = gguf.GGUFReader(p)
    except Exception as e:  # gguf-py raises assorted errors on damaged files
        raise GGUFError(f"corrupt or truncated GGUF file {p}: {type(e).__name__}: {e}") from e
    size = p.stat().st_size
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size:
            raise GGUFError(f"truncated GGUF file {p}: tensor {t.name!r} runs past the end of the file")
    return reader


def _field(reader: Any, key: str, default: Any = None, required: bool = True) -> Any:
    f = reader.fields.get(key)
    if f is None:
        if required and default is None:
            raise GGUFError(f"GGUF metadata key {key!r} is missing")
        return default
    try:
        return f.contents()
    except Exception as e:
        raise GGUFError(f"GGUF metadata key {key!r} is corrupt: {e}") from e


def read_config(reader: Any) -> Config:
    arch = _field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise UnsupportedArchitecture(f"unsupported GGUF architecture {arch!r}; this model implements {list(SUPPORTED_ARCHITECTURES)}")
    d_model = int(_field(reader, f"{arch}.embedding_length"))
    n_heads = int(_field(reader, f"{arch}.attention.head_count"))
    n_kv_heads = int(_field(reader, f"{arch}.attention.head_count_kv", n_heads))
    head_dim = int(_field(reader, f"{arch}.attention.key_length", d_model // n_heads))
    rope_dims = int(_field(reader, f"{arch}.rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        raise UnsupportedArchitecture(f"partial rotary embedding ({rope_dims} of {head_dim} dims) is not supported")
    if _field(reader, f"{arch}.rope.scaling.type", "none", required=False) not in ("none", b"none"):
        raise UnsupportedArchitecture("RoPE scaling is not supported")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    vocab = int(_field(reader, f"{arch}.vocab_size", len(tokens.data) if tokens is not None else None))
    name = _field(reader, "general.name", "gguf", required=False)
    return Config(
        n_layers=int(_field(reader, f"{arch}.block_count")),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        ffn_dim=int(_field(reader, f"{arch}.feed_forward_length")),
        vocab_size=vocab,
        max_seq_len=int(_field(reader, f"{arch}.context_length", 2048)),
        rope_theta=float(_field(reader, f"{arch}.rope.freq_base", 10000.0)),
        norm_eps=float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
        name=str(name),
    )


def _read_bytes(f: BinaryIO, t: Any) -> np.ndarray:
    """Tensor ``t``'s bytes, read into a fresh array. Why not ``t.data`` (a view of the reader's
    mmap): every page a view touches stays resident until the reader goes, so converting the
    whole file through it held the file (145 MB for SmolLM2) beside its converted copies, the load's
    peak RSS. Read this way, only one tensor's bytes are alive at a time (same bytes, same bits).
    The buffer is an anonymous mapping of its own, not ``np.empty``: freeing a large malloc'd
    buffer raises glibc's mmap threshold, after which the model's arrays came from the heap and
    ~95 MB of it stayed resident after the load (measured)."""
    buf = np.frombuffer(mmap.mmap(-1, max(1, int(t.n_bytes))), np.uint8)[: int(t.n_bytes)]
    f.seek(int(t.data_offset))
    if f.readinto(memoryview(buf)) != buf.size:
        raise GGUFError(f"truncated GGUF file: tensor {t.name!r} runs past the end of the file")
    return buf


def _tensor_to_q8(t: Any, rows: int, cols: int, f: BinaryIO) -> Q8Matrix:
    import gguf

    qtype = gguf.GGMLQuantizationType
    if t.tensor_type == qtype.Q8_0:
        return from_gguf_bytes(_read_bytes(f, t), rows, cols)
    try:
        values = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
    except NotImplementedError as e:
        raise GGUFError(f"tensor {t.name!r}: cannot dequantize type {t.tensor_type.name}") from e
    return quantize(np.asarray(values, dtype=np.float32).reshape(rows, cols))


def read_gguf(path: str | os.PathLike[str]) -> tuple[Config, Weights, Any]:
    """Read a llama GGUF: ``(config, Q8_0 weights, the GGUFReader)``."""
    reader = _open(path)
    config = read_config(reader)
    tensors = {t.name: t for t in reader.tensors}
    c = config

    with open(path, "rb") as f:  # the tensors are read from here, not through the reader's mmap (_read_bytes)
        def mat(name: str, rows: int, cols: int, required: bool = True) -> Q8Matrix | None:
            t = tensors.get(name)
            if t is None:
                if required:
                    raise GGUFError(f"{path}: tensor {name!r} is missing")
                return None
            shape = tuple(int(s) for s in t.shape)
            if shape != (cols, rows):
                raise GGUFError(f"{path}: tensor {name!r} has shape {list(shape)}, expected {[cols, rows]}")
            return _tensor_to_q8(t, rows, cols, f)

        def vec(name: str) -> np.ndarray:
            t = tensors.get(name)
            if t is None:
                raise GGUFError(f"{path}: tensor {name!r} is missing")
            import gguf

            v = np.asarray(gguf.quants.dequantize(np.asarray(t.data), t.tensor_type), dtype=np.float32).reshape(-1)
            if v.size != c.d_model:
                raise GGUFError(f"{path}: tensor {name!r} has {v.size} values, expected {c.d_model}")
            return v.copy()

        q_dim, kv_dim = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        layers = []
        for i in range(c.n_layers):
            b = f"blk.{i}."
            layers.append(
                LayerWeights(
                    attn_norm=vec(b + "attn_norm.weight"),
                    wq=mat(b + "attn_q.weight", q_dim, c.d_model),
                    wk=mat(b + "attn_k.weight", kv_dim, c.d_model),
                    wv=mat(b + "attn_v.weight", kv_dim, c.d_model),
                    wo=mat(b + "attn_output.weight", c.d_model, q_dim),
                    ffn_norm=vec(b + "ffn_norm.weight"),
                    w_gate=mat(b + "ffn_gate.weight", c.ffn_dim, c.d_model),
                    w_up=mat(b + "ffn_up.weight", c.ffn_dim, c.d_model),
                    w_down=mat(b + "ffn_down.weight", c.d_model, c.ffn_dim),
                )
            )
        weights = Weights(
            token_embd=mat("token_embd.weight", c.vocab_size, c.d_model),
            layers=layers,
            out_norm=vec("output_norm.weight"),
            output=mat("output.weight", c.vocab_size, c.d_model, required=False),
        )
    return config, weights, reader


def copy_fields(reader: Any) -> list[tuple[str, Any, Any, Any]]:
    """Metadata fields of a GGUF as ``(key, value, type, sub_type)``, for ``write_gguf``."""
    import gguf

    out = []
    for key, f in reader.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        out.append((key, f.contents(), vtype, sub))
    return out


def write_gguf(
    path: str | os.PathLike[str],
    config: Config,
    weights: Weights,
    fields: list[tuple[str, Any, Any, Any]] | None = None,
    architecture: str = "llama",
) -> None:
    """Write a Q8_0 GGUF (norms in F32). ``fields`` (from ``copy_fields``) are copied verbatim;
    the hyper-parameter keys are (re)written from ``config``. Writes to ``path`` atomically."""
    import gguf

    c = config
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.partial")  # concurrent writers do not collide
    w = gguf.GGUFWriter(tmp, architecture)
    a = architecture
    own = {
        f"{a}.block_count": c.n_layers,
        f"{a}.context_length": c.max_seq_len,
        f"{a}.embedding_length": c.d_model,
        f"{a}.feed_forward_length": c.ffn_dim,
        f"{a}.attention.head_count": c.n_heads,
        f"{a}.attention.head_count_kv": c.n_kv_heads,
        f"{a}.rope.dimension_count": c.head_dim,
        f"{a}.vocab_size": c.vocab_size,
    }
    for key, value in own.items():
        w.add_uint32(key, int(value))
    w.add_float32(f"{a}.rope.freq_base", float(c.rope_theta))
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", float(c.norm_eps))
    w.add_uint32("general.file_type", int(gguf.LlamaFileType.MOSTLY_Q8_0))
    skip = set(own) | {f"{a}.rope.freq_base", f"{a}.attention.layer_norm_rms_epsilon"}
    names = {key for key, *_ in fields or []}
    if "general.name" not in names:
        w.add_name(c.name)
    for key, value, vtype, sub in fields or []:
        if key not in skip:
            w.add_key_value(key, value, vtype, sub_type=sub)

    def q8(name: str, m: Q8Matrix) -> None:
        w.add_tensor(name, to_gguf_bytes(m), raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    q8("token_embd.weight", weights.token_embd)
    for i, lw in enumerate(weights.layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", lw.attn_norm.astype(np.float32))
        q8(b + "attn_q.weight", lw.wq)
        q8(b + "attn_k.weight", lw.wk)
        q8(b + "attn_v.weight", lw.wv)
        q8(b + "attn_output.weight", lw.wo)
        w.add_tensor(b + "ffn_norm.weight", lw.ffn_norm.astype(np.float32))
        q8(b + "ffn_gate.weight", lw.w_gate)
        q8(b + "ffn_up.weight", lw.w_up)
        q8(b + "ffn_down.weight", lw.w_down)
    w.add_tensor("output_norm.weight", weights.out_norm.astype(np.float32))
    if weights.output is not None:
        q8("output.weight", weights.output)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)
