"""Each failure MATRIX.md lists is labelled with the finding its own record shows (the oracle, the policy
it judged by, the write policy it failed under, the waiver line it met), never with one label per row:
a HiCache lfu row's write_back failures are N3, its waived order findings #3."""

from __future__ import annotations

from radixcheck.reports import matrix

META = {"command": "x", "xdist": [], "profile": "audit", "wall_seconds": 1, "machine": "2 cores"}
ORDER = ("evict(1000000) freed Page([0], device+host) (… 2 hits, key (2, 7)) while the unlocked device leaf "
         "Page([0, 0], device) (… 1 hits, key (1, 9)) stayed: under {policy} it goes first")
WAIVER = ("/x/reports/waivers/sglang_hicache.txt:14: sglang_findings.md #3, under a named policy "
          "(lfu, mru, priority, slru: their keys read the last use)")


def _failed(policy: str, write: str) -> dict:
    return {"outcome": "failed", "oracle": "4 eviction order", "reason": ORDER.format(policy=policy),
            "program": f"state = m()\nstate.teardown()\nradixcheck: write policy {write}, page size 1"}


def _line(card: str, test: str, *, waived: bool = False) -> str:
    start = f"- `{test}` — {'waived: ' if waived else ''}oracle"
    return next(line for line in card.splitlines() if line.startswith(start))


def test_a_hicache_failure_is_labelled_by_the_finding_its_record_shows() -> None:
    production = {"outcome": "failed", "oracle": "4 eviction order", "reason": ORDER.format(policy="lfu"),
                  "program": "radixcheck: in the tier production world (write_back, page size 1), while: …",
                  "waived": [{"oracle": "4 eviction order", "message": ORDER.format(policy="lfu"), "waiver": WAIVER,
                              "step": "the write_through production world",
                              "known_deviation": "suffix-refreshed-on-mid-edge-use"}]}
    rows = [{"name": "sglang_hicache.hicache_python_lfu_salted", "spec": "m:f", "seconds": 1.0, "tests": {
                "test_tier_at_production_scale[page_size=1]": production,
                "test_tier_state_machine[page_size=2]": _failed("lfu", "write_back"),
                "test_tier_state_machine[page_size=4]": _failed("lfu", "write_through")}},
            {"name": "sglang_hicache.hicache_python_slru_salted", "spec": "m:g", "seconds": 1.0, "tests": {
                "test_tier_state_machine[page_size=1]": _failed("slru(threshold=2)", "write_back")}},
            {"name": "sglang_hicache.hicache_python_mru_salted", "spec": "m:h", "seconds": 1.0, "tests": {
                "test_tier_state_machine[page_size=1]": _failed("mru", "write_back")}}]
    card = matrix.render(rows, META)
    lfu = card[card.index("#### `sglang_hicache.hicache_python_lfu_salted`"):card.index("#### `sglang_hicache.hicache_python_slru")]
    n3, three = "**finding N3 no hit counted under write_back", "**finding #3 mid-edge hit refreshes the unused suffix**"
    assert n3 in _line(lfu, "test_tier_at_production_scale[page_size=1]")  # stopped in the write_back world
    assert three in _line(lfu, "test_tier_at_production_scale[page_size=1]", waived=True)  # its waiver cites #3
    assert n3 in _line(lfu, "test_tier_state_machine[page_size=2]")
    assert three in _line(lfu, "test_tier_state_machine[page_size=4]")  # write_through counts hits: not N3
    slru = card[card.index("#### `sglang_hicache.hicache_python_slru_salted`"):]
    assert n3 in _line(slru[:slru.index("#### `sglang_hicache.hicache_python_mru")], "test_tier_state_machine[page_size=1]")
    mru = card[card.index("#### `sglang_hicache.hicache_python_mru_salted`"):]
    assert three in _line(mru, "test_tier_state_machine[page_size=1]")  # mru reads no hit count
    assert "(and N3" not in card  # one finding a label


def test_the_write_policy_and_policy_come_from_the_record() -> None:
    assert matrix.write_policy({"program": "x\nradixcheck: write policy write_through_selective, page size 4"}) == (
        "write_through_selective")
    assert matrix.write_policy({"step": "the write_back production world"}) == "write_back"
    assert matrix.write_policy({"program": "state.teardown()"}) == ""
    assert matrix.judged_policy("… stayed: the host tier evicts by slru's key first") == "slru"
    assert matrix.judged_policy("… stayed: the device tier evicts least recently used first") == ""
    assert matrix.cited_finding({"waiver": WAIVER}) == "#3"
