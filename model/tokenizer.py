"""A ``tokenizers`` BPE built from a GGUF's own vocabulary and merges (GPT-2 style byte-level).

For SmolLM2 (``tokenizer.ggml.pre == "smollm"``) the pre-tokenizer splits digits individually and
then applies GPT-2 byte-level pre-tokenization; control tokens (token type 3) are added as special
tokens so ``<|im_start|>`` etc. map to their single ids. This reproduced llama.cpp's token ids on
every test string tried (see exactness.md); ``model/llamacpp_diff.py`` re-checks it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from radixcheck.model.gguf_io import GGUFError, _field, _open

CONTROL = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL


def from_gguf_reader(reader: Any) -> Any:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    kind = _field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise GGUFError(f"tokenizer model {kind!r} is not supported (only GPT-2 style byte-level BPE)")
    tokens = list(_field(reader, "tokenizer.ggml.tokens"))
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    types = list(_field(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=False)
    tok = Tokenizer(bpe)
    pre = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if _field(reader, "tokenizer.ggml.pre", "default", required=False) == "smollm":
        pre.insert(0, pre_tokenizers.Digits(individual_digits=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(pre)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types, strict=True) if ty == CONTROL])
    return tok


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """A ``tokenizers.Tokenizer`` for the GGUF at ``path``. ``encode(text).ids`` gives token ids
    (no BOS is added, as llama.cpp does for SmolLM2).

    Reading 49k tokens and merges out of the GGUF takes seconds, so the result is kept beside
    it as ``<gguf>.<size>.tokenizer.json`` (tokenizers' own format) and read from there next time."""
    from tokenizers import Tokenizer

    gguf = Path(path)
    saved = gguf.with_name(f"{gguf.name}.{gguf.stat().st_size}.tokenizer.json")
    if saved.is_file():
        return Tokenizer.from_file(str(saved))
    tok = from_gguf_reader(_open(gguf))
    tmp = saved.with_suffix(f".{os.getpid()}.tmp")
    tok.save(str(tmp))
    os.replace(tmp, saved)  # atomic: a parallel test worker never reads half a file
    return tok


def load_smollm2_tokenizer(download: bool = True) -> Any:
    from radixcheck.model import smollm2

    return load_tokenizer(smollm2.prepare() if download else smollm2.q8_path())
