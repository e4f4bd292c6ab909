"""Factories for radixcheck: my index as shipped (raw vLLM stream, copies counted) and the
deduplicated-stream variant the Dynamo-fed routers use."""
from myindex import BlockIndex

from radixcheck import IndexCapabilities


def make() -> BlockIndex:
    return BlockIndex(count_copies=True)


make.capabilities = IndexCapabilities(
    counts_copies=True,             # we read vLLM's raw stream, as llm-d does
    accepts_any_removal_order=True,
    max_dp_ranks=4,
    validates_events=True,
    tolerates_redelivery=False,     # a repeated store is another copy in this mode
    reports_sizes=True, offers_dump=True, reports_resident=True,
)


def make_dedup() -> BlockIndex:
    return BlockIndex(count_copies=False)


make_dedup.capabilities = IndexCapabilities(
    counts_copies=False, accepts_any_removal_order=True, max_dp_ranks=4, validates_events=True,
    tolerates_redelivery=True, reports_sizes=True, offers_dump=True, reports_resident=True,
)


def make_bounded() -> BlockIndex:
    """What we run in production: at most 64 distinct blocks, the coldest forgotten."""
    return BlockIndex(count_copies=True, capacity=64)


make_bounded.capabilities = make.capabilities


def make_bounded8() -> BlockIndex:
    return BlockIndex(count_copies=True, capacity=8)


make_bounded8.capabilities = make.capabilities
