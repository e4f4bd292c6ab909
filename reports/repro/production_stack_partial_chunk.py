"""vLLM production stack (a6c01db): ``HashTrie.longest_prefix_match`` counts a final partial chunk as
a whole chunk, so a match can be longer than the request (and than anything cached).

    export RADIXCHECK_PRODUCTION_STACK_SRC=~/src/production-stack   # your clone of github.com/vllm-project/production-stack
    pip install xxhash==3.5.0                                        # the router's pin
    python reports/repro/production_stack_partial_chunk.py

Exits 1 while the behaviour is present (prints what happened), 0 once it is fixed, 2 without the
checkout. Runs ``src/vllm_router/prefix/hashtrie.py`` unchanged from the clone's working tree (its
``vllm_router.log`` import is stood in for: it needs starlette, and the trie only logs; see
``properties/adapters/production_stack.py``).
"""

import asyncio
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a clone run without installing radixcheck

from radixcheck.properties.adapters.checkout import EngineUnavailable  # noqa: E402
from radixcheck.properties.adapters.production_stack import load, source_of  # noqa: E402

try:
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # an unvalidated working tree is said, not hidden
        hashtrie = load()
        print(source_of("hashtrie").describe())
except EngineUnavailable as exc:
    print(f"not run: {exc}", file=sys.stderr)
    sys.exit(2)


async def main() -> list[str]:
    problems = []
    trie = hashtrie.HashTrie()  # chunk_size=128, the router's default
    await trie.insert("Hello", "http://engine-a")  # a short prompt routed to engine a
    length, endpoints = await trie.longest_prefix_match("Hello", {"http://engine-a", "http://engine-b"})
    print(f"insert('Hello') then longest_prefix_match('Hello') -> ({length}, {sorted(endpoints)})")
    if length > len("Hello"):
        problems.append(f"matched {length} characters of a 5-character request")
    prompt = "x" * 130  # one whole chunk and a 2-character tail
    await trie.insert(prompt, "http://engine-b")
    length, endpoints = await trie.longest_prefix_match(prompt, {"http://engine-a", "http://engine-b"})
    print(f"a 130-character prompt matched again -> ({length}, {sorted(endpoints)})")
    if length > len(prompt):
        problems.append(f"matched {length} characters of a {len(prompt)}-character request: it passes a "
                        f"prefix_min_match_length of 256 that only 130 matching characters should not")
    return problems


problems = asyncio.run(main())
for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
