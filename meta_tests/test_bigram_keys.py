"""Key modes (the contract's "Key modes"): a bigram cache is declared, validated and judged in keys."""

import numpy as np
import pytest

from radixcheck.properties.cache.contract import Capabilities, SlotAllocator
from radixcheck.reference.bigram import BigramRadixCache


def test_key_mode_is_validated() -> None:
    with pytest.raises(ValueError, match="key_mode must be one of"):
        Capabilities(key_mode="trigram")
    with pytest.raises(ValueError, match="one slot per key"):
        Capabilities(key_mode="bigram", lifecycle="requests")
    assert any("key_mode='bigram'" in gap for gap in Capabilities(key_mode="bigram").not_exercised())


def test_bigram_pages_are_counted_in_bigrams() -> None:
    """n raw tokens are n - 1 keys, cut to whole pages of keys (sglang #24371, #28692)."""
    allocator = SlotAllocator(64)
    cache = BigramRadixCache(allocator, page_size=4)
    slots = allocator.alloc(8)
    assert cache.insert([7, 1, 2, 3, 4, 5, 6, 9], slots) == 0  # 8 raw tokens: 7 bigrams, one page of 4 cached
    assert cache.total_size() == 4
    assert np.array_equal(cache.match_prefix([7, 1, 2, 3, 4, 5, 6, 9])[0], slots[:4])
    assert len(cache.match_prefix([7, 1, 2, 3])[0]) == 0  # a page of raw tokens is 3 bigrams: less than a page
    assert np.array_equal(cache.match_prefix([7, 1, 2, 3, 4])[0], slots[:4])
    assert len(cache.match_prefix([8, 1, 2, 3, 4])[0]) == 0  # the first bigram differs
