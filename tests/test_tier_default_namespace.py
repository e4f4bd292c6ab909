"""A cache that keeps ``namespace=None`` apart from a call without the keyword (a wire server keying
``null`` and an absent field apart, the first bug a new user's Node.js server had) fails oracle 13
with a message that names the likely cause: the world sent the default namespace both ways."""
from __future__ import annotations

from typing import Any

import pytest

from radixcheck.oracles.violations import TierResidencyViolation
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache


class NullApart(TieredRadixCache):
    """``namespace=None`` said is a namespace of its own: the default one is the keyword left out."""

    @staticmethod
    def _apart(keywords: dict[str, Any]) -> dict[str, Any]:
        if "namespace" in keywords and keywords["namespace"] is None:
            return {**keywords, "namespace": "<null>"}
        return keywords

    def match_prefix(self, tokens: Any, **keywords: Any) -> Any:  # type: ignore[override]
        return super().match_prefix(tokens, **self._apart(keywords))

    def insert(self, tokens: Any, values: Any, **keywords: Any) -> int:  # type: ignore[override]
        return super().insert(tokens, values, **self._apart(keywords))


def _both_spellings(factory: Any) -> None:
    w = TierWorld(factory, page_size=1, write_policy="write_through")
    w.serve([0, 0], namespace=None)
    w.finish(-1)
    w.serve([0, 0])
    w.check()


def test_the_reference_takes_both_spellings_as_one_namespace() -> None:
    _both_spellings(TieredRadixCache)


def test_a_cache_keeping_them_apart_is_told_the_default_namespace_went_both_ways() -> None:
    with pytest.raises(TierResidencyViolation) as caught:
        _both_spellings(NullApart)
    message = str(caught.value)
    assert "returned device slots []" in message  # the oracle's own finding first, as before
    assert "namespace=None and with no namespace=" in message and "null and an absent field" in message


def test_one_spelling_alone_gives_no_hint() -> None:
    """A world that said only one spelling of the default namespace has no reason to name it."""
    class DropsEverything(TieredRadixCache):
        def match_prefix(self, tokens: Any, **keywords: Any) -> Any:  # type: ignore[override]
            return super().match_prefix([], **keywords)

    w = TierWorld(DropsEverything, page_size=1, write_policy="write_through")
    w.serve([0, 0])
    w.finish(-1)
    with pytest.raises(TierResidencyViolation) as caught:
        w.serve([0, 0])
    assert "namespace=None" not in str(caught.value)
