"""Router pairs for the end-to-end check: vLLM's KV cache manager publishing its KV events, and a
router index reading them (``radixcheck.properties.index.router_e2e``).

Select one with ``radixcheck audit radixcheck.properties.adapters.router_pairs:<pair>`` in the audit
environment (vLLM and Dynamo installed). Each pair is vLLM's adapter
(``radixcheck.properties.adapters.vllm_prefix``, worker 1) and an index:

* ``vllm_into_dynamo``: Dynamo's ``RadixTree`` (ai-dynamo-runtime 1.6.1), the events deduplicated first
  as Dynamo's worker-side publisher does (``EventDedupFilter``), tokens hashes by Dynamo's own
  ``compute_block_hash_for_seq`` (what its publisher sends and its router computes for a request);
* ``vllm_raw_into_dynamo``: the same, fed vLLM's raw stream (no filter): what a router gets from a
  publisher that forwards vLLM's events as they are;
* ``vllm_into_reference``: the reference index, deduplicated events;
* ``vllm_raw_into_copy_counting``: the copy-counting reference index, vLLM's raw stream.

The engine runs at page size 4 only (vLLM's cache machine costs minutes per page size on CPU).
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections.abc import Callable
from typing import Any

from radixcheck.properties.index.router_contract import RouterCapabilities, RouterPair

PAGE_SIZES = (4,)


def blake_tokens_hashes(tokens: list[int], block_size: int) -> list[int]:
    """One 64-bit hash per whole block of ``tokens`` (a router's local block hash)."""
    return [int.from_bytes(hashlib.blake2b(repr(tokens[i:i + block_size]).encode(), digest_size=8).digest(), "big")
            for i in range(0, len(tokens) // block_size * block_size, block_size)]


def dynamo_tokens_hashes(tokens: list[int], block_size: int) -> list[int]:
    """Dynamo's own local block hashes (``dynamo._core.compute_block_hash_for_seq``)."""
    from dynamo._core import compute_block_hash_for_seq

    return list(compute_block_hash_for_seq(list(tokens), block_size))


def _pair(name: str, index: str, deduplicated: bool, tokens_hashes: Callable[[list[int], int], list[int]]) -> Callable[[], RouterPair]:
    from radixcheck.properties.adapters import vllm_prefix

    if index.startswith("dynamo"):
        from radixcheck.properties.adapters import dynamo_index

        make_index = dynamo_index.FACTORIES[index]
    else:
        from radixcheck.properties.index import mutants as index_mutants
        from radixcheck.reference.kv_index import KvIndex

        make_index = KvIndex if index == "reference" else index_mutants.CopyCountingKvIndex
    engine = vllm_prefix.FACTORIES["vllm_prefix"]

    def factory() -> RouterPair:
        return RouterPair(engine=engine, index=make_index,
                          events=lambda events, page_size: vllm_prefix.index_events(events, tokens_hashes),
                          tokens_hashes=tokens_hashes)

    factory.__name__ = factory.__qualname__ = name
    factory.capabilities = RouterCapabilities(  # type: ignore[attr-defined]
        engine=dataclasses.replace(engine.capabilities, page_sizes=PAGE_SIZES), index=make_index.capabilities,
        deduplicated=deduplicated)
    return factory


FACTORIES: dict[str, Callable[[], RouterPair]] = {
    "vllm_into_dynamo": _pair("vllm_into_dynamo", "dynamo_radix_tree_leaves_first", True, dynamo_tokens_hashes),
    "vllm_raw_into_dynamo": _pair("vllm_raw_into_dynamo", "dynamo_radix_tree_leaves_first", False, dynamo_tokens_hashes),
    "vllm_into_reference": _pair("vllm_into_reference", "reference", True, blake_tokens_hashes),
    "vllm_raw_into_copy_counting": _pair("vllm_raw_into_copy_counting", "copy_counting", False, blake_tokens_hashes),
}


def __getattr__(name: str) -> Any:
    try:
        return FACTORIES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = ["FACTORIES", "blake_tokens_hashes", "dynamo_tokens_hashes", *FACTORIES]

if __name__ == "__main__":
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.router_pairs:{_name}", _f.capabilities, file=sys.stdout)
