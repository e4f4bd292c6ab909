"""A cache that stops answering after a refusal, and loops in ``evict`` since: its finding's replay past
failures must end where it stopped answering (meta_tests/test_root_cause.py), not wait for ``evict``
to hang. Also an audit target for measuring that replay (``meta_tests.replay_hang_mutants:PanicsOnUnmatchedUnlock``)."""

from __future__ import annotations

from typing import Any

from radixcheck.reference import RadixCache


class PanicsOnUnmatchedUnlock(RadixCache):
    """Refuses an unmatched unlock of a handle it gave out, but "panics" doing it (as Dynamo's indexer
    did on a self-parent store): every call after it raises, and ``evict`` walks a cycle for ever. Its
    shortest program caches something first, so the replay's end-of-program eviction would reach ``evict``."""

    offline = False

    def _answering(self) -> None:
        if self.offline:
            raise RuntimeError("cache offline: it panicked on an unmatched unlock")

    def dec_lock_ref(self, handle: Any) -> None:
        self._answering()
        try:
            return super().dec_lock_ref(handle)
        except ValueError as exc:
            if str(exc).startswith("unmatched unlock"):  # a handle it gave out, held by nobody: not an unknown handle
                self.offline = True
            raise

    def evict(self, num_tokens: int) -> int:
        while self.offline:  # computes for ever (the walk of a cycle)
            pass
        return super().evict(num_tokens)

    def match_prefix(self, *args: Any, **kwargs: Any) -> Any:
        self._answering()
        return super().match_prefix(*args, **kwargs)

    def insert(self, *args: Any, **kwargs: Any) -> Any:
        self._answering()
        return super().insert(*args, **kwargs)

    def inc_lock_ref(self, handle: Any) -> Any:
        self._answering()
        return super().inc_lock_ref(handle)

    def total_size(self) -> int:
        self._answering()
        return super().total_size()

    def evictable_size(self) -> int:
        self._answering()
        return super().evictable_size()

    def protected_size(self) -> int:
        self._answering()
        return super().protected_size()
