"""radixcheck's model package: a Llama decoder in NumPy with exact (shape-stable) KV reuse.

Public API::

    from radixcheck.model import load_default, KVPool
    m = load_default()                         # tiny seeded synthetic model (m.config)
    pool = KVPool(m.config, num_slots=4096, dtype="float32")   # or "bfloat16", "float8_e4m3fn"
    logits = m.prefill(pool, tokens, slots, num_cached)         # float32 (len - num_cached, vocab)

See ``model.llama.Model.prefill`` for the contract, ``model.exact`` for why reuse is bit-identical,
``model.sequence.Sequence`` for clone / truncate / evict-span, and ``model.smollm2.load_smollm2``
for the real SmolLM2-135M-Instruct.
"""

from radixcheck.model.exact import ExactnessError
from radixcheck.model.kv_pool import STORAGE_DTYPES, KVPool, KVPoolError
from radixcheck.model.llama import Config, InputError, Model
from radixcheck.model.sequence import Sequence
from radixcheck.model.synthetic import DEFAULT_CONFIG, load_default

__all__ = [
    "DEFAULT_CONFIG",
    "STORAGE_DTYPES",
    "Config",
    "ExactnessError",
    "InputError",
    "KVPool",
    "KVPoolError",
    "Model",
    "Sequence",
    "load_default",
    "load_smollm2",
]


def __getattr__(name: str):  # noqa: ANN202 - PEP 562: `python -m radixcheck.model.smollm2` must not find it imported already
    if name == "load_smollm2":
        from radixcheck.model.smollm2 import load_smollm2

        return load_smollm2
    raise AttributeError(f"module 'radixcheck.model' has no attribute {name!r}")
