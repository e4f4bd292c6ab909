"""A slot pool holding K and V for every layer, addressed by int64 slot ids.

The radix cache stores slot ids as its values; the model reads and writes K/V rows through them.
K is stored *before* rotary embedding (RoPE is applied when K is read, at the position the slot
has in the sequence being served), which makes re-labelling positions — the cheap "re-rotation"
eviction — exact by construction for a 1-layer model.

Storage dtypes: ``float32`` (default), ``float16`` (llama.cpp's default), and via ml-dtypes
``bfloat16`` and ``float8_e4m3fn``. Values are
rounded to the storage dtype when written (float8 and float16 saturate at their largest finite value instead of
overflowing), and the model only ever attends to stored values, so a full prefill and a reused prefix see
the same rounded K/V.

``KVMemo`` (one per model, ``pool.memo(model)``) keeps values the model derives from stored rows —
for exact attention, the integer form of each K row rotated to its position, and of each V row —
so a cached prefix is not rotated and re-quantised on every request. It is invalidated whenever a
row is written or copied over through this class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

STORAGE_DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn")  # float16: what llama.cpp stores by default


def storage_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a KV storage dtype name (ml_dtypes, ~0.6 s to import, only when asked for)."""
    if name in ("float32", "float16"):
        return np.dtype(name)
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name))

SATURATE = {"float8_e4m3fn": 448.0, "float16": 65504.0}  # clip instead of overflowing to NaN / inf


class KVPoolError(ValueError):
    """Bad slot ids or a pool that does not fit the model."""


class KVMemo:
    """Per layer and slot: attention's integer form of the stored K row rotated to a position, and
    of the stored V row, as computed by the model (``ExactOps.quantise_kv``) from ``KVPool.read``.

    Every entry is a pure function of the stored row (and, for K, the position it was rotated
    for), so a hit is bit-identical to recomputing it. An entry is dropped when ``KVPool.write`` or
    ``KVPool.copy_slots`` changes its row; a K entry only hits at the position it was rotated for
    (``Sequence.evict_span_relabel`` moves tokens to new positions: those rows simply miss). The
    integers fit float32 exactly (|k| < 2**20, |v| < 2**15); scales are kept as float64. Arrays
    are allocated per layer on first use (zero pages: only slots actually used take memory).
    """

    def __init__(self, pool: KVPool) -> None:
        self._shape = (pool.num_slots, pool.n_kv_heads, pool.head_dim)
        self._layers: list[dict[str, np.ndarray] | None] = [None] * pool.n_layers

    def _layer(self, layer: int) -> dict[str, Any]:
        m = self._layers[layer]
        if m is None:
            s, h, _ = self._shape
            m = {
                "k": np.zeros(self._shape, np.float32),
                "sk": np.zeros((s, h)),
                "v": np.zeros(self._shape, np.float32),
                "sv": np.zeros((s, h)),
                "pos": np.full(s, -1, np.int64),  # -1: no entry
            }
            self._layers[layer] = m
        return m

    def misses(self, layer: int, slots: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Indices ``i`` for which ``slots[i]`` has no entry for ``positions[i]``."""
        m = self._layers[layer]
        if m is None:
            return np.arange(slots.size)
        return np.flatnonzero(m["pos"][slots] != positions)

    def store(
        self, layer: int, slots: np.ndarray, positions: np.ndarray, ki: np.ndarray, sk: np.ndarray, vi: np.ndarray, sv: np.ndarray
    ) -> None:
        m = self._layer(layer)
        m["k"][slots], m["sk"][slots], m["v"][slots], m["sv"][slots] = ki, sk, vi, sv
        m["pos"][slots] = positions

    def arrays(self, layer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(k, sk, v, sv)`` of ``layer``, indexed by slot (the model reads the rows of its cached
        slots in place; callers store every missing entry first, see ``misses``)."""
        m = self._layer(layer)
        return m["k"], m["sk"], m["v"], m["sv"]

    def addresses(self, layer: int) -> tuple[int, int, int, int, int]:
        """Where ``arrays(layer)`` and the entries' positions live (for the C kernel,
        ``model.fused``, which reads and fills them in place; looked up once per layer)."""
        m = self._layer(layer)
        if "at" not in m:
            m["at"] = tuple(m[name].ctypes.data for name in ("k", "sk", "v", "sv", "pos"))
        return m["at"]

    def invalidate(self, layer: int | None, slots: np.ndarray) -> None:
        """Drop the entries of ``slots`` at ``layer`` (every layer if ``None``)."""
        for li in range(len(self._layers)) if layer is None else (layer,):
            m = self._layers[li]
            if m is not None:
                m["pos"][slots] = -1


class KVPool:
    """K/V storage: ``k`` and ``v`` have shape ``(n_layers, num_slots, n_kv_heads, head_dim)``.

    ``KVPool(config, num_slots=4096, dtype="float32")``; ``config`` is a model's ``Config`` (any
    object with ``n_layers``, ``n_kv_heads`` and ``head_dim``).

    The pool also offers a small free list (``alloc`` / ``free``) for callers that do not bring
    their own allocator (``model.Sequence`` uses it). Do not mix it with an external allocator
    such as ``properties.cache.contract.SlotAllocator`` on the same pool.
    """

    def __init__(self, config: Any, num_slots: int = 4096, dtype: str = "float32") -> None:
        if dtype not in STORAGE_DTYPES:
            raise KVPoolError(f"unsupported KV storage dtype {dtype!r}; choose one of {sorted(STORAGE_DTYPES)}")
        if int(num_slots) <= 0:
            raise KVPoolError(f"num_slots must be positive, got {num_slots}")
        self.n_layers = int(config.n_layers)
        self.n_kv_heads = int(config.n_kv_heads)
        self.head_dim = int(config.head_dim)
        self.num_slots = int(num_slots)
        self.dtype_name = dtype
        self.dtype = storage_dtype(dtype)
        shape = (self.n_layers, self.num_slots, self.n_kv_heads, self.head_dim)
        self.k = np.zeros(shape, dtype=self.dtype)
        self.v = np.zeros(shape, dtype=self.dtype)
        self.filled = np.zeros(self.num_slots, dtype=bool)  # slot has ever been written
        self._free = list(range(self.num_slots - 1, -1, -1))  # a stack: lowest id on top
        self._free_set = set(self._free)
        self._memos: dict[Any, KVMemo] = {}  # see KVMemo; keyed by the model that fills it

    # ---- validation -------------------------------------------------------------------------
    def check_slots(self, slots: Any, name: str = "slots") -> np.ndarray:
        """Return ``slots`` as a unique int64 1-D array inside the pool, or raise ``KVPoolError``."""
        arr = np.asarray(slots)
        if arr.ndim != 1:
            raise KVPoolError(f"{name} must be a 1-D array of slot ids, got shape {arr.shape}")
        if arr.size and not (np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_):
            raise KVPoolError(f"{name} must hold integer slot ids, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        if arr.size:
            bad = arr[(arr < 0) | (arr >= self.num_slots)]
            if bad.size:
                raise KVPoolError(f"{name}: slot id {int(bad[0])} is outside the pool [0, {self.num_slots})")
            if np.unique(arr).size != arr.size:
                raise KVPoolError(f"{name}: slot ids must be distinct")
        return arr

    # ---- reading and writing ----------------------------------------------------------------
    def to_storage(self, x: np.ndarray) -> np.ndarray:
        """Round float values to the storage dtype."""
        x = np.asarray(x, dtype=np.float32)
        if self.dtype_name in SATURATE:
            x = np.clip(x, -SATURATE[self.dtype_name], SATURATE[self.dtype_name])
        return x.astype(self.dtype)

    def write(self, layer: int, slots: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
        """Store ``k``, ``v`` (n, n_kv_heads, head_dim) at ``slots`` of ``layer`` (no validation)."""
        self.k[layer, slots] = self.to_storage(k)
        self.v[layer, slots] = self.to_storage(v)
        self.filled[slots] = True
        for m in self._memos.values():
            m.invalidate(layer, slots)

    def mark_written(self, slots: np.ndarray) -> None:
        """What ``write`` does besides storing, for code that stores rows of ``k`` / ``v`` itself
        (``model.fused``, float32 pools): mark ``slots`` filled and drop their memo entries at
        every layer. Call it before the rows change."""
        self.filled[slots] = True
        for m in self._memos.values():
            m.invalidate(None, slots)

    def layer_rows(self, layer: int) -> tuple[int, int]:
        """Where layer ``layer``'s K and V rows start in memory (``k[layer]``, ``v[layer]``: C order)."""
        step = layer * self.k.strides[0]
        return self.k.ctypes.data + step, self.v.ctypes.data + step

    def memo(self, owner: Any) -> KVMemo:
        """The ``KVMemo`` that ``owner`` (a model) keeps for this pool, created on first use.

        Only ``write`` and ``copy_slots`` invalidate it: code that assigns to ``k`` / ``v``
        directly must call ``clear_memos()``.
        """
        m = self._memos.get(owner)
        if m is None:
            m = self._memos[owner] = KVMemo(self)
        return m

    def clear_memos(self) -> None:
        self._memos.clear()

    def read(self, layer: int, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The stored (pre-RoPE) K and V of ``slots`` at ``layer``, as float64."""
        return self.k[layer, slots].astype(np.float64), self.v[layer, slots].astype(np.float64)

    def rows(self, slots: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Copies of K and V for ``slots`` across all layers: (n_layers, n, n_kv_heads, head_dim)."""
        s = self.check_slots(slots)
        return self.k[:, s].copy(), self.v[:, s].copy()

    def copy_slots(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Copy K/V (all layers) from ``src`` slots to ``dst`` slots."""
        src = self.check_slots(src, "src")
        dst = self.check_slots(dst, "dst")
        if src.size != dst.size:
            raise KVPoolError(f"copy_slots: {src.size} source slots but {dst.size} destination slots")
        self.k[:, dst] = self.k[:, src]
        self.v[:, dst] = self.v[:, src]
        self.filled[dst] = self.filled[src]
        for m in self._memos.values():
            m.invalidate(None, dst)

    # ---- a simple free list -----------------------------------------------------------------
    def available(self) -> int:
        return len(self._free)

    def alloc(self, n: int) -> np.ndarray:
        """Take ``n`` free slots (lowest ids first); raises ``KVPoolError`` if the pool is full."""
        if n < 0 or n > len(self._free):
            raise KVPoolError(f"cannot allocate {n} slots: {len(self._free)} free of {self.num_slots}")
        out = [self._free.pop() for _ in range(n)]
        self._free_set.difference_update(out)
        return np.asarray(out, dtype=np.int64)

    def free(self, slots: Sequence[int] | np.ndarray) -> None:
        """Return slots to the free list."""
        s = self.check_slots(slots)
        again = [int(i) for i in s if int(i) in self._free_set]
        if again:
            raise KVPoolError(f"slot {again[0]} is already free")
        self._free.extend(int(i) for i in s)
        self._free.sort(reverse=True)
        self._free_set.update(int(i) for i in s)

    def __repr__(self) -> str:
        return (
            f"KVPool(layers={self.n_layers}, slots={self.num_slots}, kv_heads={self.n_kv_heads}, "
            f"head_dim={self.head_dim}, dtype={self.dtype_name})"
        )
