"""Dynamo's KV router index drops, for a worker, every block stored under a block that worker
removed, although the worker still holds them: their own removes are then refused, they do not
match again when the parent is stored again, and stores under them are refused.

    .audit-venv/bin/python reports/repro/dynamo_parent_removed_first.py

ai-dynamo-runtime 1.6.1 (PyPI), dynamo._core.RadixTree (lib/kv-router/src/indexer/radix_tree.rs,
``apply_removed``: a remove cuts the worker's coverage of the compressed edge at the removed
position and scrubs the rest of the edge from its lookup, the "eager" removal of the suffix).
An engine may evict a block while blocks stored under it stay cached: vLLM's block pool evicts
any free block (``BlockPool.evict_blocks`` for blocks whose KV transfer failed, a hash-based
lookup after the parent was recomputed), and SGLang published one BlockRemoved per page, head
first, until sgl-project/sglang#29265 (the stream ai-dynamo/dynamo#10916 met: "repeated removes of
suffixes already pruned with their ancestor", closed unmerged). vLLM then matches the child again
as soon as the parent is back (``get_computed_blocks`` walks block hashes), so a router must too.

Here one worker caches [P, C] (one store), evicts P, then C; another request stores P again, then
a request on [P, C, D] hits P and C on the engine and stores D under C. Exits 1 while the
behaviour is present, 0 once the index follows the worker's events, 2 without the package.
"""

import json
import sys

try:
    from dynamo._core import RadixTree
except ImportError:
    print("ai-dynamo-runtime is not installed (pip install ai-dynamo-runtime==1.6.1, or python -m radixcheck.reports.audit_env)",
          file=sys.stderr)
    sys.exit(2)


def stored(event_id, parent, blocks):
    return json.dumps({"event_id": event_id, "dp_rank": 0, "data": {"stored": {
        "parent_hash": parent, "blocks": [{"block_hash": h, "tokens_hash": t} for h, t in blocks]}}}).encode()


def removed(event_id, hashes):
    return json.dumps({"event_id": event_id, "dp_rank": 0, "data": {"removed": {"block_hashes": hashes}}}).encode()


def apply(what, event):
    try:
        tree.apply_event(WORKER, event)
        print(f"{what}: applied")
        return None
    except RuntimeError as exc:
        print(f"{what}: refused ({exc})")
        return str(exc)


WORKER, (P, tP), (C, tC), (D, tD) = 1, (100, 11), (101, 12), (102, 13)
problems = []
tree = RadixTree()
apply("1. BlockStored(None, [P, C])", stored(1, None, [(P, tP), (C, tC)]))
apply("2. BlockRemoved([P])   (the worker still holds C)", removed(2, [P]))
scores = tree.find_matches([tP, tC]).scores
print(f"   find_matches([P, C]) = {scores}  (the worker holds C but not P: 0 is right)")
refused = apply("3. BlockStored(None, [P])   (P recomputed)", stored(3, None, [(P, tP)]))
scores = tree.find_matches([tP, tC]).scores.get((WORKER, 0), 0)
print(f"   find_matches([P, C]) -> {scores} block(s) on worker {WORKER}; the engine matches 2 (it holds P and C)")
if scores != 2:
    problems.append(f"after P is stored again, the router matches {scores} block(s) of [P, C]; the worker holds both")
refused = apply("4. BlockStored(C, [D])   (a request on [P, C, D] hit P and C)", stored(4, C, [(D, tD)]))
if refused:
    problems.append(f"a store under C, which the worker holds, is refused: {refused}")
refused = apply("5. BlockRemoved([C])   (C evicted at last)", removed(5, [C]))
if refused:
    problems.append(f"the worker's remove of C, which it held, is refused: {refused}")
for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
