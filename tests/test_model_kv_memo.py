"""The pool's ``KVMemo`` (attention's integer form of cached K/V, kept between calls) never changes
a bit: any sequence of KV operations gives the same logits and the same stored K/V as a model that
recomputes the whole context's integer K/V on every call (``memo_kv=False``).

The operations are the ones that could leave a stale entry: re-extending after ``truncate`` (slots
rewritten with other tokens), ``evict_span_relabel`` (tokens move to new positions: K must be
re-rotated), ``clone`` (K/V copied into other slots) and ``evict_span`` (truncate + recompute).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from radixcheck.model import KVPool, load_default
from radixcheck.model.checks import assert_bit_identical
from radixcheck.model.llama import Model
from radixcheck.model.sequence import Sequence

MEMO = load_default()
PLAIN = Model(MEMO.config, MEMO.weights, memo_kv=False)
VOCAB = MEMO.config.vocab_size

ops_st = st.lists(
    st.one_of(
        st.tuples(st.just("extend"), st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=12)),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("relabel"), st.floats(0, 1), st.floats(0, 1)),
        st.tuples(st.just("evict"), st.floats(0, 1), st.floats(0, 1)),
        st.tuples(st.just("clone")),
    ),
    min_size=1,
    max_size=10,
)


def test_the_exact_model_memoises_and_the_plain_one_does_not() -> None:
    assert MEMO._memo_kv and not PLAIN._memo_kv
    pool = KVPool(MEMO.config, 8)
    MEMO.prefill(pool, [1, 2, 3], [4, 5, 6], 0)
    MEMO.prefill(pool, [1, 2, 3, 4], [4, 5, 6, 7], 3)
    assert MEMO.ops.name == "exact" and pool.memo(MEMO).misses(0, np.array([4, 5, 6]), np.arange(3)).size == 0


@settings(deadline=None, max_examples=40)
@given(ops=ops_st, first=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=24))
def test_memo_changes_no_bit(ops: list[tuple], first: list[int]) -> None:
    with threadpool_limits(limits=1):
        seqs = []
        for model in (MEMO, PLAIN):
            s = Sequence(model, KVPool(model.config, 256))
            s.extend(first)
            seqs.append(s)
        for op in ops:
            n = len(seqs[0])
            if op[0] == "extend" and n + len(op[1]) <= 120:
                got, want = (s.extend(op[1]) for s in seqs)
                assert_bit_identical(got, want, f"logits after {op}")
            elif op[0] == "truncate":
                for s in seqs:
                    s.truncate(int(op[1] * n))
            elif op[0] in ("relabel", "evict"):
                a, b = sorted((int(op[1] * n), int(op[2] * n)))
                for s in seqs:
                    (s.evict_span_relabel if op[0] == "relabel" else s.evict_span)(a, b)
            elif op[0] == "clone" and 2 * n <= 256 - 130:
                for i, s in enumerate(seqs):
                    c = s.clone()
                    s.free()
                    seqs[i] = c
            (k1, v1), (k2, v2) = seqs[0].kv(), seqs[1].kv()
            assert_bit_identical(k1, k2, f"stored K after {op}")
            assert_bit_identical(v1, v2, f"stored V after {op}")
        probe = [7, 11, 13]
        if len(seqs[0]) + len(probe) <= 256 - 0:
            got, want = (s.extend(probe) for s in seqs)
            assert_bit_identical(got, want, "logits of a final probe")


def test_copying_over_memoised_rows_invalidates_them() -> None:
    """Rows 0..9 are memoised for prompt ``a``; ``copy_slots`` then puts prompt ``b``'s K/V there."""
    rng = np.random.default_rng(11)
    a, b = list(rng.integers(0, VOCAB, 10)), list(rng.integers(0, VOCAB, 10))
    out = []
    with threadpool_limits(limits=1):
        for model in (MEMO, PLAIN):
            pool = KVPool(model.config, 64)
            model.prefill(pool, a, np.arange(10), 0)
            model.prefill(pool, a + [5], np.arange(11), 10)  # memoises slots 0..9 at positions 0..9
            model.prefill(pool, b, np.arange(20, 30), 0)
            pool.copy_slots(np.arange(20, 30), np.arange(10))
            out.append(model.prefill(pool, b + [5], np.r_[0:10, 40], 10))
        want = PLAIN.prefill(KVPool(PLAIN.config, 11), b + [5], np.arange(11), 0)[10:]
    assert_bit_identical(out[0], out[1], "memo vs no memo after copy_slots")
    assert_bit_identical(out[0], want, "reuse of copied rows vs full prefill")


def test_mark_written_drops_every_layers_memo_entries_of_its_slots() -> None:
    """``KVPool.mark_written`` (the fused path's stand-in for ``write``'s bookkeeping) marks the
    slots filled and drops their memo entries at every layer, and only theirs."""
    pool = KVPool(MEMO.config, 8)
    MEMO.prefill(pool, [1, 2, 3, 4], [0, 1, 2, 3], 0)
    memo = pool.memo(MEMO)
    layers = range(MEMO.config.n_layers)
    assert all(memo.misses(li, np.arange(4), np.arange(4)).size == 0 for li in layers)
    pool.mark_written(np.array([1, 5]))
    assert pool.filled.tolist() == [True, True, True, True, False, True, False, False]
    assert all(memo.misses(li, np.arange(4), np.arange(4)).tolist() == [1] for li in layers)
