"""A new user's planted bugs (``reports/findings/hicache_like_trial.md``, session 61) rebuilt on the
tiered reference: small in-repo mutants, so the messages and files they give are checked here
without the user's code. Each is a factory ``radixcheck audit meta_tests.nu_trial:bN`` takes."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode


class KeyedByText(TieredRadixCache):
    """B1 (needs a second tenant): each namespace's tree found by its text, so ``None`` / ``"None"`` share one."""

    def _root_for(self, namespace: Hashable) -> TierNode:
        return super()._root_for(str(namespace))


class BackupSkipsFailed(TieredRadixCache):
    """B2 (needs the host tier): write-through tries every page, going on past a failed allocation,
    so a child is backed up without its parent (a gap in the backup chain)."""

    def _back_up_path(self, last: TierNode) -> None:
        for node in self._path(last):
            if node.host is None and node.writing is None:
                self._write(node)


class UnlockSkipsLoading(TieredRadixCache):
    """B3 (needs an aborted request): an unlock skips the pages still loading ("the load pins them"),
    so a request ended before its load landed leaves its lock behind."""

    def dec_lock_ref(self, handle: Any) -> None:
        for node in self._path(handle):
            if node.loading is None:
                node.lock_ref -= 1


b1, b2, b3 = KeyedByText, BackupSkipsFailed, UnlockSkipsLoading
