"""lmdeploy: the prefix cache's LRU clock keeps whole seconds, so eviction among blocks used within
the same second is by memory address, not by recency.

    pip install torch==2.13.0 && pip install lmdeploy==0.18.0 --no-deps
    pip install pydantic transformers mmengine psutil pybase64 pyzmq xgrammar shortuuid
    python reports/repro/lmdeploy_access_time_seconds.py

lmdeploy 0.18.0, ``lmdeploy/pytorch/paging/block_manager/base_block_manager.py``:
``LogicalMemory.access_time`` is ``np.zeros(num_blocks, dtype=np.int64)`` and
``LogicalAllocator.update_access_time`` stores ``time.perf_counter()`` (float seconds) into it, so
every timestamp is truncated to a whole second. ``KVBlockLifecycle.evict`` (``paging/block_trie/
kv_lifecycle.py``) orders leaves by ``(access_time, id(node))``: blocks used in the same second tie,
and the tie goes to the lower memory address. A serving engine matches and frees many requests a
second, so its "least recently used" leaf is mostly an arbitrary one.

Here, as lmdeploy's scheduler drives the trie (``match``, ``block_manager.allocate``,
``BlockTrie.allocate``, the request's end), an old prompt is cached, then a new one 20 ms later;
``BlockTrie.evict(1)`` should take the old prompt's block. It is repeated over fresh tries; any
trial that evicts the new block is the bug. Exits 1 while it is present, 0 once access times keep
sub-second order (a float64 array, or a counter), 2 without lmdeploy.
"""

import sys
import time

try:
    import numpy as np
    from lmdeploy.pytorch.messages import SchedulerSession, SequenceMeta
    from lmdeploy.pytorch.paging.block_manager.default_block_manager import DefaultBlockManager
    from lmdeploy.pytorch.paging.block_trie import BlockTrie
    from lmdeploy.pytorch.strategies.ar.sequence import ARSequenceStrategy
except ImportError as exc:
    print(f"cannot import lmdeploy 0.18.0: {exc}", file=sys.stderr)
    sys.exit(2)

BLOCK = 4
TRIALS = 40


class Lifecycle:  # what SchedulerSession.add_sequence asks of the engine's SequenceLifecycle
    def __init__(self):
        self.n = 0

    def new_sequence_id(self):
        self.n += 1
        return self.n

    def add_sequence(self, seq, status):
        pass


def serve(trie, manager, session, tokens):
    """One request runs to completion: match, allocate, cache its blocks, end."""
    seq = session.add_sequence(np.asarray(tokens, dtype=np.int64))
    trie.match(seq)
    manager.allocate(seq)
    trie.allocate(seq)
    blocks = seq.logical_blocks.get_real_blocks().tolist()
    manager.free(seq)
    return blocks


newer_evicted = 0
for trial in range(TRIALS):
    manager = DefaultBlockManager(64, 0)
    trie = BlockTrie(allocator=manager.allocator, block_size=BLOCK, enabled=True)
    session = SchedulerSession(0, SequenceMeta(block_size=BLOCK, strategy=ARSequenceStrategy(), enable_prefix_caching=True),
                               Lifecycle())
    (old,) = serve(trie, manager, session, [1] * BLOCK)
    time.sleep(0.02)
    (new,) = serve(trie, manager, session, [2] * BLOCK)
    times = manager.allocator.get_access_time(np.array([old, new]))
    trie.evict(1)
    survivors = {node.block_id for root in trie._roots.values() for node in root.children.values()}
    if new not in survivors:
        newer_evicted += 1
        if newer_evicted == 1:
            print(f"trial {trial}: the old prompt's block {old} (access_time {times[0]}) survived, the new one's "
                  f"{new} (access_time {times[1]}, used 20 ms later) was evicted; access_time dtype "
                  f"{manager.allocator.get_access_time(np.array([old])).dtype}")

print(f"{newer_evicted} of {TRIALS} trials evicted the newer block instead of the least recently used one")
if newer_evicted:
    print("BUG: LogicalMemory.access_time is int64, so time.perf_counter() is truncated to whole seconds")
sys.exit(1 if newer_evicted else 0)
