"""Cross-tier bit identity: a request served from a prefix that went to host and came back gives
logits ``np.array_equal`` to a from-scratch prefill (the synthetic model here; SmolLM2 below,
where its GGUF is on disk). Between the round trip and the request, the device slots the prefix
left are reused by other requests, so a load that brought back the wrong rows, or none, shows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from radixcheck.model import load_default
from radixcheck.model.checks import assert_bit_identical, full_prefill
from radixcheck.properties.tiers.model_server import KVTransferController, TieredModelServer
from radixcheck.reference.tiered_cache import TieredRadixCache

MODEL = load_default()
VOCAB = MODEL.config.vocab_size


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    with threadpool_limits(limits=1):
        yield


def round_trip(model, first: list[int], second: list[int], policy: str) -> int:
    """Serve ``first``, push it to host, churn the device, serve ``second`` (sharing its prefix):
    its logits must equal recompute's. Returns how many of its tokens came back from host."""
    server = TieredModelServer(model, TieredRadixCache, device_slots=96, host_slots=96, write_policy=policy)
    server.serve(first)
    for _ in range(len(first) + 1):  # write-back writes one page per eviction; the copies complete in between
        server.cache.evict(10**6)
        server.complete_all()
    assert server.cache.device_size() == 0 and server.cache.host_size() >= len(first) // 2
    churn = [(t + 1) % VOCAB for t in first]  # other requests take the freed device slots
    server.serve(churn)
    logits, cached, from_host = server.serve(second)
    want, _ = full_prefill(model, second)
    assert_bit_identical(logits, want[cached:], f"{len(second)} tokens, {from_host} of them reused from host")
    return from_host


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_prefix_back_from_host_is_bit_identical(policy: str) -> None:
    first = [5, 9, 1, 200, 17, 17, 3, 44, 90, 2]
    assert round_trip(MODEL, first, first[:7] + [301, 12], policy) == 7


@settings(deadline=None, max_examples=6)
@given(first=st.lists(st.integers(0, VOCAB - 1), min_size=2, max_size=24), data=st.data())
def test_any_prefix_back_from_host_is_bit_identical(first: list[int], data: st.DataObject) -> None:
    cut = data.draw(st.integers(1, len(first)), label="cut")
    tail = data.draw(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=8), label="tail")
    round_trip(MODEL, first, first[:cut] + tail, data.draw(st.sampled_from(["write_through", "write_back"])))


class LoadsRowsReversed(KVTransferController):
    """A controller whose loads bring a run of host rows back in reverse order."""

    def complete(self, transfer) -> None:
        if transfer.kind == "load":
            transfer.host_slots = transfer.host_slots[::-1].copy()
        super().complete(transfer)


def test_a_load_that_brings_back_the_wrong_rows_is_caught(monkeypatch) -> None:
    monkeypatch.setattr("radixcheck.properties.tiers.model_server.KVTransferController", LoadsRowsReversed)
    first = [5, 9, 1, 200, 17, 17, 3, 44, 90, 2]
    with pytest.raises(AssertionError, match="values differ"):
        round_trip(MODEL, first, first[:7] + [301, 12], "write_through")
