"""Oracle 4, for every eviction policy — ``evict(n)`` frees what was asked, no less and no more.

* At least ``n`` tokens, unless nothing evictable (no unlocked leaf) is left.
* No more than it needed: a cache evicts leaf after leaf, so once the leaves it has freed reach
  ``n`` it stops. The ``free()`` calls show the order: if the calls before the last one had
  already freed ``n`` tokens, the last one was not needed (an off-by-one ``<=`` in the loop, or
  a cap that ignores ``n``). ``evict(0)`` frees nothing. A cache that frees all its victims in
  one call cannot be judged this way and is not (the LRU oracle still bounds it by recency).
"""

from __future__ import annotations

from radixcheck.oracles.violations import Check, EvictionAmountViolation, shown


def check_amount(num_tokens: int, freed_per_call: list[int], oldest_unlocked_leaf: tuple[int, ...] | None) -> None:
    """``freed_per_call``: tokens freed by each ``free()`` call of one ``evict``, in order;
    ``oldest_unlocked_leaf``: the prefix of an unlocked leaf that survived, if any."""
    calls = [n for n in freed_per_call if n > 0]
    freed = sum(calls)
    if freed < num_tokens and oldest_unlocked_leaf is not None:
        raise EvictionAmountViolation(
            f"evict({num_tokens}) freed only {freed} tokens but left unlocked leaf {shown(oldest_unlocked_leaf)}",
            Check("len(freed) >= n or cache.match_prefix(leaf)[0].size < len(leaf)", "len(freed)",
                  {"n": num_tokens, "leaf": list(oldest_unlocked_leaf)}),
        )
    if num_tokens == 0 and freed:
        raise EvictionAmountViolation(f"evict(0) freed {freed} tokens; it must free nothing", Check("not freed", "freed"))
    if len(calls) > 1 and freed - calls[-1] >= num_tokens:
        raise EvictionAmountViolation(
            f"evict({num_tokens}) kept going: its first {len(calls) - 1} free() calls had freed {freed - calls[-1]} tokens, "
            f"then it freed {calls[-1]} more (in all {freed}, over {len(calls)} calls)",
            Check("len(free_calls) < 2 or sum(map(len, free_calls[:-1])) < n", "[len(call) for call in free_calls]", {"n": num_tokens}),
        )
