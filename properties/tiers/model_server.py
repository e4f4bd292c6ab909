"""The NumPy model served through a tiered cache: the KV itself goes to host and back.

``TieredModelServer`` keeps the model's KV pool as the device tier and a host KV array as the host
tier; its controller copies the K/V rows of every layer at each transfer's completion, which the
caller delivers (:meth:`TieredModelServer.complete`). A request is served as an engine serves it:
match, load back the host part, wait for its loads, prefill the rest on top of the reused prefix,
insert, unlock. The bit-identity obligation across tiers: its logits equal a from-scratch
prefill's, ``np.array_equal``, whichever tier the prefix came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from radixcheck.model.kv_pool import KVPool
from radixcheck.model.llama import Model
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.tiers.contract import HostPool, Transfer


class KVTransferController:
    """Allocates on ``write``/``load`` and copies the K/V rows when :meth:`complete` is called."""

    def __init__(self, device: SlotAllocator, host: HostPool, pool: KVPool) -> None:
        self.device, self.host, self.pool = device, host, pool
        shape = (pool.n_layers, host.pool_size, pool.n_kv_heads, pool.head_dim)
        self.host_k = np.zeros(shape, dtype=pool.dtype)
        self.host_v = np.zeros(shape, dtype=pool.dtype)
        self.pending: list[Transfer] = []
        self._count = 0

    def _transfer(self, kind: str, device: np.ndarray, host: np.ndarray) -> Transfer:
        self._count += 1
        transfer = Transfer(kind, device, host, self._count)
        self.pending.append(transfer)
        return transfer

    def write(self, device_slots: Any) -> Transfer | None:
        device = np.asarray(device_slots, dtype=np.int64).copy()
        host = self.host.alloc(len(device))
        return None if host is None else self._transfer("write", device, host)

    def load(self, host_slots: Any) -> Transfer | None:
        host = np.asarray(host_slots, dtype=np.int64).copy()
        if len(host) > self.device.available():
            return None
        return self._transfer("load", self.device.alloc(len(host)), host)

    def complete(self, transfer: Transfer) -> None:
        self.pending.remove(transfer)
        d, h = transfer.device_slots, transfer.host_slots
        if transfer.kind == "write":
            self.host_k[:, h] = self.pool.k[:, d]
            self.host_v[:, h] = self.pool.v[:, d]
        else:
            for layer in range(self.pool.n_layers):  # write() also drops the pool's memos of these rows
                self.pool.write(layer, d, self.host_k[layer, h], self.host_v[layer, h])


class TieredModelServer:
    def __init__(self, model: Model, factory: Callable[..., Any], device_slots: int, host_slots: int,
                 write_policy: str = "write_through", dtype: str = "float32") -> None:
        self.model = model
        self.pool = KVPool(model.config, device_slots, dtype=dtype)
        self.device = SlotAllocator(device_slots)
        self.host = HostPool(host_slots)
        self.controller = KVTransferController(self.device, self.host, self.pool)
        self.cache = factory(self.device, self.host, self.controller, 1, write_policy)

    def complete(self, transfer: Transfer) -> None:
        self.controller.complete(transfer)
        self.cache.transfer_done(transfer)

    def complete_all(self, kind: str | None = None) -> None:
        for transfer in list(self.controller.pending):
            if kind is None or transfer.kind == kind:
                self.complete(transfer)

    def serve(self, tokens: Sequence[int]) -> tuple[np.ndarray, int, int]:
        """(logits of the computed suffix, tokens reused, of which loaded back from host)."""
        match = self.cache.match_prefix(list(tokens))
        values, handle, from_host = match.device_values, match.device_handle, 0
        if match.host_length:
            values, handle = self.cache.load_back(match.host_handle)
            from_host = len(values) - len(match.device_values)
            self.complete_all("load")  # the forward waits for its loads
        cached = min(len(values), len(tokens) - 1)
        self.cache.inc_lock_ref(handle)
        new = self.device.alloc(len(tokens) - cached)
        slots = np.concatenate([np.asarray(values[:cached], dtype=np.int64), new])
        logits = self.model.prefill(self.pool, tokens, slots, cached)
        prefix_len = self.cache.insert(list(tokens), slots)
        if prefix_len > cached:
            self.device.free(slots[cached:prefix_len])
        self.cache.dec_lock_ref(handle)
        return logits, cached, min(from_host, cached)
