"""How the two O(n) bugs (I6, T6) cost at router scale, beside the correct structures (CPU seconds)."""
import random
import time

import mybugs
import myrouter

from radixcheck.properties.index.contract import BlockStored, StoredBlock


def index_cost(make, prompts, blocks=16, queries=200):
    idx, rng = make(), random.Random(0)
    chains = []
    for p in range(prompts):
        parent, chain = None, []
        for _b in range(blocks):
            h = rng.getrandbits(64)
            t = rng.getrandbits(64)
            chain.append(t)
            idx.apply_event(p % 4, 0, BlockStored(parent, (StoredBlock(h, t),)))
            parent = h
        chains.append(chain)
    t0 = time.process_time()
    for _q in range(queries):
        idx.find_matches(chains[rng.randrange(prompts)])
    return (time.process_time() - t0) / queries


def tree_cost(make, prompts, evictions=200):
    tree, rng = make(), random.Random(0)
    tree.add_tenants(["a", "b"], 0.0)
    for p in range(prompts):
        key = "".join(rng.choice("abc") for _ in range(24))
        tree.insert(key, "ab"[p % 2], float(p + 1))
    t0 = time.process_time()
    for _ in range(evictions):
        tree.evict("a", 4)
    return (time.process_time() - t0) / evictions


for n in (100, 1000, 10000):
    print(f"index, {n} prompts x 16 blocks: find_matches {index_cost(myrouter.make_index, n)*1e6:.0f} us correct, "
          f"{index_cost(mybugs.I6, n)*1e6:.0f} us I6", flush=True)
for n in (100, 1000, 10000):
    print(f"tree, {n} prompts x 24 chars: evict(4) {tree_cost(myrouter.make_tree, n)*1e6:.0f} us correct, "
          f"{tree_cost(mybugs.T6, n)*1e6:.0f} us T6", flush=True)
