"""Dynamo's KV router index accepts a BlockStored whose chain names one block twice, and a later
BlockRemoved of that block then leaves it matched and dumped (the router keeps routing to it).

    .audit-venv/bin/python reports/repro/dynamo_chain_names_block_twice.py

ai-dynamo-runtime 1.6.1 (PyPI), dynamo._core.RadixTree, the Python binding of
lib/kv-router/src/indexer/radix_tree.rs. Its guard against self-referencing stores (added after
ai-dynamo/dynamo#4394, the indexer panic; #4395) compares each block with the store's
parent_hash only, so a chain in which a block comes back (A, B, A: a cycle, like the
self-reference of #4394 but one block longer) passes. No correct publisher sends one (a block
hash chains every block before it), which is what the guard is for: a producer bug, a hash
collision or a corrupted replay. The store is applied whole, and the removal of A that follows
removes one of its two positions: the other stays matched and dumped although the worker's
events say it holds no A. Exits 1 while the behaviour is present, 0 once such a store is refused
(or leaves nothing after A's removal), 2 without the package.
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


WORKER, A, B = 1, 100, 101
tree = RadixTree()
problems = []
try:
    tree.apply_event(WORKER, stored(1, None, [(A, 11), (B, 12), (A, 13)]))  # A named twice: a cycle A -> B -> A
    print("BlockStored(parent=None, blocks=[A, B, A]) accepted")
except (RuntimeError, ValueError) as exc:
    print(f"BlockStored(parent=None, blocks=[A, B, A]) refused: {exc}")
tree.apply_event(WORKER, removed(2, [A]))  # the worker's events: A is gone
tree.apply_event(WORKER, removed(3, [B]))  # and B: the worker holds nothing
scores = tree.find_matches([11]).scores
dump = tree.dump_tree_as_events()
print(f"after BlockRemoved([A]) and BlockRemoved([B]): find_matches([tokens of A]) = {scores}; dump: {len(dump)} event(s)")
if scores:
    problems.append(f"the router still matches block A on worker {WORKER} after the worker removed it: {scores}")
if dump:
    problems.append(f"dump_tree_as_events() still lists {len(dump)} event(s) for a worker that holds nothing: {dump[0][:160]}")
for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
