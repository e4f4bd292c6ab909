"""The production world's end, on every layer: one flush of the whole cache, as an engine flushes
it between benchmark runs (SGLang's ``Scheduler.flush_cache`` calls ``tree_cache.reset()``; a
HiCache tree's clears its host pool too) and as a router drops a worker's tree. A reset that
recurses down the deep history, or leaves pages behind, is met there: a wire trial's server died
resetting a tree 1,000 nodes deep, and no test had reset one. The plain production world
(``ProductionScaleMachine.teardown``) and the tier one (``radixcheck.properties.tiers.scale``)
both end here, each with its own checked reset."""

from __future__ import annotations

import sys
from collections.abc import Callable

FLUSH = "the world flushed: one reset of the whole cache, as an engine's flush between runs"


def flush_due(offered: bool) -> bool:
    """Whether the world is flushed now: the target offers a reset, and no failure is on its way out
    (a caller in a ``finally``: a second failure would hide the first)."""
    return offered and sys.exc_info()[1] is None


def flush_world(reset: Callable[[], None]) -> None:
    """``reset``: the one call and its checks; a failure there says it came from the flush."""
    try:
        reset()
    except Exception as exc:
        exc.add_note(f"radixcheck: in the production world's teardown, while: {FLUSH}")
        raise
