"""Planted bugs: one factory per bug, each my index with one defect switched on (myindex.py, `bug`)."""
from myindex import BlockIndex
from myrouter_adapter import make, make_dedup

BUGS = {  # name -> (bug switch, stream the index reads: True = raw vLLM copies counted)
    "B1": ("store_twice_counts", False),    # a block stored twice outlives one removal (Dynamo finding 1's kind)
    "B2": ("copies_ignored", True),         # raw stream read as a set: the first copy's remove drops the block
    "B3": ("remove_drops_children", True),  # removing a parent drops children the rank still holds (Dynamo #10916)
    "B4": ("park_orphans", True),           # out-of-order tolerance: a store under an unknown parent waits for it
    "B5": ("ranks_conflated", True),        # dp_rank ignored: ranks of one worker collide
    "B6": ("hash_i63", True),               # u64 hashes kept as i63 keys: hashes >= 2**63 collide with others
    "B7": ("clear_leaves_holders", True),   # AllBlocksCleared leaves the rank in the holders map
    "B8": ("remove_worker_rank0", True),    # remove_worker forgets only dp rank 0
    "B9": ("linear_lookup", True),          # the child lookup scans every known block: O(n) per query block
    "B10": ("dump_unordered", True),        # dump() in set order: a child's store before its parent's
    "B11": ("sizes_count_copies", True),    # sizes() counts copies, not distinct blocks
    "B12": ("overlap_counts_held", True),   # overlap = blocks held along the path, not the leading chain
}


def _factory(switch: str, raw: bool):
    def factory() -> BlockIndex:
        return BlockIndex(count_copies=raw, bug=switch)
    factory.capabilities = (make if raw else make_dedup).capabilities
    return factory


for _name, (_switch, _raw) in BUGS.items():
    globals()[_name] = _factory(_switch, _raw)
