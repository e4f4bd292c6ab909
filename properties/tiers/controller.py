"""The suite's side of a tiered cache: its device pool, host pool and transfer controller.

The controller starts transfers when the cache asks and leaves them pending; the state machine
delivers each completion (:meth:`TierWorld.complete`) when Hypothesis says, copying the KV at
that moment, as a DMA engine does. ``fail_plan`` lets Hypothesis fail the next allocations (a
full pool fails them too). Every call in either direction is written to ``log`` as a line of
plain Python, which is what a repro file replays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from radixcheck.oracles.tier_model import TierModel, as_ints
from radixcheck.oracles.violations import HostSlotViolation
from radixcheck.properties import layer_tally
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.tiers.contract import HostPool, Transfer


class DevicePool(SlotAllocator):
    """The base contract's slot pool, telling the tier model of every free as it happens."""

    def __init__(self, pool_size: int, model: TierModel, seed: int = 0) -> None:
        super().__init__(pool_size, seed=seed)
        self.model = model
        # a running request's own slots, which its request method may free now (lifecycle="requests";
        # set by the suite around the call): no cached page holds them, so the tier model does not judge them
        self.releasable: set[int] = set()

    def free(self, ids: Any) -> None:
        ids_list = as_ints(ids)
        if set(ids_list) <= self.in_use and len(set(ids_list)) == len(ids_list):
            cached = [s for s in ids_list if s not in self.releasable]
            if cached:
                self.model.on_device_free(cached)
            self.releasable.difference_update(ids_list)
        super().free(ids)


class SuiteController:
    """``write(device_slots)`` / ``load(host_slots)``: allocate, start, return a pending
    :class:`Transfer` (or ``None``: the allocation failed)."""

    def __init__(self, device: DevicePool, host: HostPool, model: TierModel) -> None:
        self.device, self.host, self.model = device, host, model
        self.fail_plan: list[bool] = []
        self.pending: list[Transfer] = []
        self.device_kv: dict[int, int] = {}
        self.host_kv: dict[int, int] = {}
        self.log: list[str] = []
        self.transfers = 0
        self.loads = 0  # load-backs started: a run with none never brought a page back from host

    def _number(self) -> int:
        self.transfers += 1
        return self.transfers

    def _fails(self, n: int, available: int) -> bool:
        planned = self.fail_plan.pop(0) if self.fail_plan else False
        return planned or n > available

    def write(self, device_slots: Any) -> Transfer | None:
        layer_tally.touch(layer_tally.HOST_TIER)  # a backup asked: the step drove the host tier
        slots = np.asarray(device_slots, dtype=np.int64).reshape(-1).copy()
        if self._fails(len(slots), self.host.available()):
            self.model.on_write(slots, None)
            self.log.append(f"#   controller.write({as_ints(slots)}) -> None (allocation failed)")
            return None
        host = self.host.alloc(len(slots))
        self.model.on_write(slots, host)
        transfer = Transfer("write", slots, host, self._number())
        self.pending.append(transfer)
        self.log.append(f"#   controller.write({as_ints(slots)}) -> write #{transfer.number} to host {as_ints(host)}")
        return transfer

    def refused(self, device_slots: Any) -> None:
        """The cache looked at the host pool (``host_pool.available()``), found too little room for a
        backup of ``device_slots`` and did not ask: a failed allocation, as ``write`` returning
        ``None`` is (SGLang checks the host pool's room before it asks). Refused while there is room."""
        slots = np.asarray(device_slots, dtype=np.int64).reshape(-1).copy()
        if len(slots) <= self.host.available():
            raise HostSlotViolation(f"the cache gave up a backup of {len(slots)} device slots for lack of host room, but "
                                    f"{self.host.available()} host slots are free")
        self.model.on_write(slots, None)
        self.log.append(f"#   controller.refused({as_ints(slots)}) (no host room: {self.host.available()} free)")

    def load(self, host_slots: Any) -> Transfer | None:
        layer_tally.touch(layer_tally.HOST_TIER)  # a load-back asked
        slots = np.asarray(host_slots, dtype=np.int64).reshape(-1).copy()
        if self._fails(len(slots), self.device.available()):
            self.model.on_load(slots, self.host.in_use)
            self.log.append(f"#   controller.load({as_ints(slots)}) -> None (allocation failed)")
            return None
        self.model.on_load(slots, self.host.in_use)  # checked before the device slots are taken
        device = self.device.alloc(len(slots))
        self.loads += 1
        self.model.on_load_started(slots, device)
        transfer = Transfer("load", device, slots, self._number())
        self.pending.append(transfer)
        self.log.append(f"#   controller.load({as_ints(slots)}) -> load #{transfer.number} to device {as_ints(device)}")
        return transfer

    def copy(self, transfer: Transfer) -> None:
        """The transfer's copy, done at its completion."""
        layer_tally.touch(layer_tally.HOST_TIER)
        source, target = (self.device_kv, self.host_kv) if transfer.kind == "write" else (self.host_kv, self.device_kv)
        src, dst = ((transfer.device_slots, transfer.host_slots) if transfer.kind == "write"
                    else (transfer.host_slots, transfer.device_slots))
        for s, d in zip(as_ints(src), as_ints(dst), strict=True):
            target[d] = source.get(s, -1)
        self.model.on_ack(transfer.kind, transfer.device_slots, transfer.host_slots, self.device_kv, self.host_kv)
