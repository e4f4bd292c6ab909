"""A reference cache whose sizes are kept counts, wrapped to compare them with a walk of its tree after every call:
the check both references' deep recount tests make (plain and tiered)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def recounting(base: type, calls: Iterable[str], kept: Callable[[Any], tuple], drift: list[str]) -> type:
    """``base`` noting in ``drift``, after every call in ``calls`` (raised or not), where ``kept(cache)`` differs
    from the cache's own walk (``_recounted_sizes()``: what its sizes read before they were kept)."""

    def wrap(name: str) -> Any:
        method = getattr(base, name)

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            finally:
                try:
                    walked = self._recounted_sizes()
                except RecursionError:  # a mutant whose walk is its bug: its sizes are judged where they can be
                    walked = None
                if walked is not None and kept(self) != walked:
                    drift.append(f"{base.__name__}.{name}: kept {kept(self)}, walked {walked}")
        return call

    return type(base.__name__, (base,), {name: wrap(name) for name in calls if hasattr(base, name)})
