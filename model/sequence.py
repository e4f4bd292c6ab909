"""A per-sequence view of the KV pool: the KV primitives the seed's radix cache is built from.

``Sequence(model, pool)`` owns a list of tokens and the pool slots holding their K/V (slots come
from the pool's own free list). Operations:

- ``extend(tokens, chunk_size=None)``: prefill more tokens on top of the cached ones;
- ``clone()``: an independent copy (K/V copied into fresh slots);
- ``truncate(n)``: keep the first ``n`` tokens (exact by construction: nothing cached depends on
  later tokens);
- ``evict_span(a, b)``: forget ``tokens[a:b]`` so that the result equals, bit for bit, a sequence
  that never saw them: the tail after the span attended to it, so it is recomputed;
- ``evict_span_relabel(a, b)``: the seed's cheap variant — drop the span's slots and let later
  tokens move ``b - a`` positions down (K is stored before RoPE, so this is the "re-rotation").
  It equals never-saw only when nothing cached depends on the span: a tail span, or a 1-layer
  model (whose K/V depend on the token and position only). In a model with more than one layer a
  middle span leaks into the later tokens' K/V of layers >= 1.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq

import numpy as np

from radixcheck.model.kv_pool import KVPool
from radixcheck.model.llama import InputError, Model


class Sequence:
    """One sequence's tokens and KV slots in a shared ``KVPool``."""

    def __init__(self, model: Model, pool: KVPool) -> None:
        model.check_pool(pool)
        self.model = model
        self.pool = pool
        self.tokens = np.zeros(0, dtype=np.int64)
        self.slots = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.tokens.size)

    def extend(self, tokens: Seq[int] | np.ndarray, chunk_size: int | None = None) -> np.ndarray:
        """Prefill ``tokens`` after the cached ones; returns their logits (n, vocab) float32."""
        new = self.model.check_tokens(tokens)
        all_tokens = np.concatenate([self.tokens, new])
        self.model.check_tokens(all_tokens)  # length limit
        if new.size > self.pool.available():
            raise InputError(f"pool has {self.pool.available()} free slots, {new.size} needed")
        slots = np.concatenate([self.slots, self.pool.alloc(new.size)])
        n = len(self)
        if chunk_size is None:
            logits = self.model.prefill(self.pool, all_tokens, slots, n)
        else:
            logits = self.model.prefill_chunked(self.pool, all_tokens, slots, n, chunk_size)
        self.tokens, self.slots = all_tokens, slots
        return logits

    def clone(self) -> Sequence:
        """An independent copy: its K/V lives in freshly allocated slots."""
        if len(self) > self.pool.available():
            raise InputError(f"pool has {self.pool.available()} free slots, {len(self)} needed to clone")
        other = Sequence(self.model, self.pool)
        other.tokens = self.tokens.copy()
        other.slots = self.pool.alloc(len(self))
        self.pool.copy_slots(self.slots, other.slots)
        return other

    def _check_span(self, a: int, b: int) -> None:
        if not (0 <= a <= b <= len(self)):
            raise InputError(f"span [{a}, {b}) is not inside the sequence of length {len(self)}")

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` tokens and free the rest of the slots."""
        self._check_span(n, len(self))
        self.pool.free(self.slots[n:])
        self.tokens, self.slots = self.tokens[:n].copy(), self.slots[:n].copy()

    def evict_span(self, a: int, b: int) -> None:
        """Forget ``tokens[a:b]`` exactly: truncate to ``a`` and re-prefill ``tokens[b:]``."""
        self._check_span(a, b)
        tail = self.tokens[b:].copy()
        self.truncate(a)
        if tail.size:
            self.extend(tail)

    def evict_span_relabel(self, a: int, b: int) -> None:
        """Cheap eviction: drop the span's slots; later tokens shift down to positions a, a+1, ...

        Exact only for tail spans or 1-layer models (see the module docstring).
        """
        self._check_span(a, b)
        self.pool.free(self.slots[a:b])
        keep = np.r_[0:a, b : len(self)]
        self.tokens, self.slots = self.tokens[keep], self.slots[keep]

    def kv(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of this sequence's K and V, (n_layers, len, n_kv_heads, head_dim)."""
        return self.pool.rows(self.slots)

    def free(self) -> None:
        """Return all slots to the pool."""
        self.truncate(0)
