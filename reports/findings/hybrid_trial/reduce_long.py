"""Reduce the long repro again: the operations of `long_repro_LoadDoneNoRequeue_default.py.txt`
replayed on the bug, then `reduced` with a budget of argv[1] seconds (session 55, helper D).
Usage, from this folder: python reduce_long.py 90"""

import re
import sys
import time
from pathlib import Path

from bugs import LoadDoneNoRequeue as make

from radixcheck.properties.tiers.lifecycle import LifecycleTierWorld
from radixcheck.properties.tiers.repro import reduced, replay

src = (Path(__file__).parent / "long_repro_LoadDoneNoRequeue_default.py.txt").read_text()
body = src[src.index("    w = LifecycleTierWorld"):src.index("    # the operation that fails")]
ops = [line.strip() for line in body.splitlines()[1:] if line.strip() and not line.strip().startswith("#")]
ops.append(src[src.index("    # the operation that fails"):].splitlines()[2].strip())
expanded = []
for op in ops:  # w.complete(5, 6) -> one line per transfer, as the world's log says them
    joined = re.fullmatch(r"w\.complete\(([\d, ]+)\)", op)
    expanded += [f"w.complete({n.strip()})" for n in joined[1].split(",")] if joined else [op]
run = replay(make, 1, "write_back", expanded, LifecycleTierWorld)
print("operations", len(expanded), "failure:", type(run.failure).__name__, str(run.failure)[:120])
started = time.monotonic()
best, said = reduced(make, run.world, run.failure, seconds=float(sys.argv[1]))
print(said, f"{time.monotonic() - started:.1f} s wall")
