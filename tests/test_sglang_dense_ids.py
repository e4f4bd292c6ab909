"""The FULL+SWA adapter's id translation (``sglang_trees._DenseIds``): SGLang's FULL-to-SWA mapping is
indexed by FULL id, so the adapter hands SGLang dense local ids. A wrong translation would free the
wrong suite slot; a double free must reach the suite as a refused id, not as another slot."""

from __future__ import annotations

import os

os.environ.setdefault("RADIXCHECK_SGLANG_LAZY", "1")  # no engine import: the translation is plain Python

from radixcheck.properties.adapters.sglang_trees import _DenseIds  # noqa: E402


def test_local_ids_are_dense_and_round_trip() -> None:
    ids = _DenseIds()
    local, fresh = ids.local([9_000_000, 5, 16_000_000])
    assert local == [1, 2, 3] and fresh == [0, 1, 2]  # 0 is SGLang's padding slot, never handed out
    assert ids.suite(local) == [9_000_000, 5, 16_000_000]
    again, fresh = ids.local([5, 7])
    assert again == [2, 4] and fresh == [1]  # a known slot keeps its local id


def test_a_released_id_is_reused_and_a_second_release_reads_as_refused() -> None:
    ids = _DenseIds()
    local, _ = ids.local([11, 12])
    assert ids.release([local[0]]) == [11]
    assert ids.release([local[0]]) == [-1]  # freed twice: the suite's allocator refuses -1
    assert ids.release([0]) == [-1]  # SGLang's padding slot (a FULL id with no peer) is no suite slot
    reused, _ = ids.local([13])
    assert reused == [local[0]] and ids.suite(reused) == [13]
