"""Namespaces (#29): bad namespaces are refused without a trace, the isolation oracle judges for
the right reason, and a target without namespaces is never sent the keyword."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.isolation import check_match_isolated
from radixcheck.oracles.prefix_set import PrefixSetModel
from radixcheck.oracles.violations import TenantIsolationViolation
from radixcheck.properties.cache.contract import Capabilities, SlotAllocator
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import KeyedRootsTree, TreePerNamespace
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference import RadixCache

NAMESPACED = [RadixCache, TreePerNamespace, KeyedRootsTree]


def _state(cache, allocator: SlotAllocator, tokens: list[int]) -> tuple:
    return (cache.total_size(), cache.evictable_size(), cache.protected_size(), len(allocator.freed_log),
            sorted(allocator.in_use), cache.match_prefix(tokens, namespace="a")[0].tolist())


@pytest.mark.parametrize("make", NAMESPACED, ids=lambda m: m.__name__)
@pytest.mark.parametrize("bad", [["lora"], ("lora", ["salt"]), {"lora": 1}], ids=["list", "tuple-with-list", "dict"])
def test_an_unhashable_namespace_is_refused_and_changes_nothing(make, bad) -> None:
    allocator = SlotAllocator(1 << 16)
    cache = make(allocator, 1)
    tokens = [1, 2, 3]
    cache.insert(tokens, allocator.alloc(3), namespace="a")
    slots = allocator.alloc(4)  # the caller's, for the refused insert
    before = _state(cache, allocator, tokens)
    for call in (lambda: cache.match_prefix([1, 2, 3, 4], namespace=bad), lambda: cache.insert([1, 2, 3, 4], slots.copy(), namespace=bad),
                 lambda: cache.evict_prefix([1], namespace=bad)):
        with pytest.raises(TypeError, match="namespace must be hashable"):
            call()
    assert _state(cache, allocator, tokens) == before


def test_the_isolation_oracle_names_the_namespace_and_the_insert() -> None:
    """A match under "b" that returns slots "a" cached fails, naming "a" and the call that put them there;
    the same slots under "a" pass."""
    model = PrefixSetModel(1)
    model.insert((1, 2), [10, 11], "a")
    born = model.clock
    check_match_isolated(model, "a", (1, 2), [10, 11], lambda clock: f"call {clock}")
    with pytest.raises(TenantIsolationViolation, match=rf"namespace 'a' by call {born}"):
        check_match_isolated(model, "b", (1, 2), [10, 11], lambda clock: f"call {clock}")


class RefusesNamespaces(RadixCache):
    """A correct cache without namespaces: any namespace sent to it fails the run."""

    def match_prefix(self, tokens, **kwargs):  # noqa: ANN001, ANN003
        assert not kwargs, f"sent {kwargs} to a target without namespaces"
        return super().match_prefix(tokens)

    def insert(self, tokens, values, **kwargs):  # noqa: ANN001, ANN003
        assert not kwargs, f"sent {kwargs} to a target without namespaces"
        return super().insert(tokens, values)

    def evict_prefix(self, tokens, **kwargs):  # noqa: ANN001, ANN003
        assert not kwargs, f"sent {kwargs} to a target without namespaces"
        return super().evict_prefix(tokens)


def test_a_target_without_namespaces_is_never_sent_one() -> None:
    """Undeclared, no namespace is sent (the run passes); declared, the same cache is sent them
    (the run fails), so the check itself can fail."""
    search = settings(profiles.SETTINGS["mutation"], max_examples=10)
    run_machine(machine_for(RefusesNamespaces, Capabilities(), 1, "meta_RefusesNamespaces"), search)
    with pytest.raises(AssertionError, match="to a target without namespaces"):
        run_machine(machine_for(RefusesNamespaces, Capabilities(namespaces=True), 1, "meta_RefusesNamespaces_declared"), search)


def test_the_header_says_when_isolation_is_not_exercised() -> None:
    assert any(gap.startswith("tenant isolation") for gap in Capabilities().not_exercised())
    assert not any(gap.startswith("tenant isolation") for gap in Capabilities(namespaces=True).not_exercised())


def test_a_namespace_is_its_value_not_its_rendering() -> None:
    """The reference separates every adversarial pair, and "no keyword" is the namespace None."""
    from radixcheck.properties.cache.tenants import PAIRS, UNSAID

    for a, b in PAIRS:
        allocator = SlotAllocator(1 << 16)
        cache = RadixCache(allocator, 1)
        keyword = {} if a is UNSAID else {"namespace": a}
        cache.insert([1, 2], allocator.alloc(2), **keyword)
        same = (a is UNSAID and b is None)
        assert len(cache.match_prefix(np.array([1, 2]), namespace=b)[0]) == (2 if same else 0), (a, b)


def test_the_trusting_tenants_variant_would_show_bad_input_sent_to_it() -> None:
    """TrustingTenants passes (test_mutants' correct-variant test) because the suite sends it no bad
    input: sent some, it fails instead of refusing."""
    from radixcheck.properties.cache.mutants import TrustingTenants

    cache = TrustingTenants(SlotAllocator(1 << 10), 1)
    with pytest.raises(AssertionError, match="trusts its callers was sent bad input"):
        cache.match_prefix([1, 2], namespace=["unhashable"])
    with pytest.raises(AssertionError, match="trusts its callers was sent bad input"):
        cache.insert([1.5], np.array([3]))


class RefusesUnsentKinds(RadixCache):
    """A correct cache whose requests carry no empty string, feature hashes, float, bool, nor an int
    beside its decimal string (an engine's string fields): sent one, it fails the run. Not a check of
    the suite's own classification: each kind is tested here by hand."""

    def __init__(self, allocator, page_size=1):  # noqa: ANN001
        super().__init__(allocator, page_size)
        self.texts: dict[str, object] = {}

    def _root_for(self, namespace):  # noqa: ANN001, ANN202
        parts = list(namespace) if isinstance(namespace, tuple) else [namespace]
        assert namespace != "" and not (isinstance(namespace, tuple) and len(namespace) > 2), f"sent {namespace!r}"
        assert not any(isinstance(p, (float, bool)) for p in parts), f"sent {namespace!r}"
        text = repr(tuple(str(p) if isinstance(p, int) else p for p in parts))  # ints in decimal, as the engine's fields
        assert self.texts.setdefault(text, namespace) == namespace, f"sent {namespace!r} and {self.texts[text]!r}"
        return super()._root_for(namespace)


ENGINE_UNSENT = ("empty", "multimodal", "decimal", "float", "bool")


def test_unsent_namespace_kinds_are_never_sent() -> None:
    """Declared unsent, no namespace of those kinds is drawn (the run passes); undeclared, the same
    cache is sent them (the run fails), so the declaration is what kept them out."""
    search = settings(profiles.SETTINGS["mutation"], max_examples=6)
    unsent = Capabilities(namespaces=True, unsent_namespaces=ENGINE_UNSENT)
    run_machine(machine_for(RefusesUnsentKinds, unsent, 1, "meta_RefusesUnsentKinds"), search)
    with pytest.raises(AssertionError, match="sent "):
        run_machine(machine_for(RefusesUnsentKinds, Capabilities(namespaces=True), 1, "meta_RefusesUnsentKinds_all"), search)
    assert any("empty-string namespace" in gap for gap in unsent.not_exercised())
    with pytest.raises(ValueError, match="unsent_namespaces"):
        Capabilities(namespaces=True, unsent_namespaces=("lora",))


@pytest.mark.parametrize("kind, example", [
    ("decimal", lambda a, b: a != b and any(isinstance(x, int) and not isinstance(x, bool) and str(x) == y
                                           for x, y in [(a, b), (b, a)])),
    ("float", lambda a, b: isinstance(a, float) or isinstance(b, float)),
    ("bool", lambda a, b: isinstance(a, bool) or isinstance(b, bool)),
])
@pytest.mark.deep
def test_each_kind_is_generated_unless_declared_unsent(kind, example) -> None:
    """The generated pairs hold each kind when the target takes it, and never when it declares it unsent."""
    from hypothesis import find
    from hypothesis.errors import NoSuchExample

    from radixcheck.properties.cache.tenants import confusable_pairs

    find(confusable_pairs(()), lambda pair: example(*pair), settings=settings(database=None, max_examples=300))
    with pytest.raises(NoSuchExample):
        find(confusable_pairs((kind,)), lambda pair: example(*pair), settings=settings(database=None, max_examples=60))


@pytest.mark.deep
def test_the_pairs_only_the_type_tells_apart_and_the_equal_ones_are_generated() -> None:
    """``5``/``"5"``, ``None``/``"None"``, a tuple and its rendering, and ``1``/``1.0``/``True``
    (equal, of different types) are among the generated pairs."""
    from hypothesis import find

    from radixcheck.properties.cache.tenants import confusable_pairs

    quick = settings(database=None, max_examples=500)
    pairs = confusable_pairs(())
    find(pairs, lambda p: set(map(repr, p)) == {"None", "'None'"}, settings=quick)
    find(pairs, lambda p: isinstance(p[0], tuple) and p[1] == str(p[0]) or isinstance(p[1], tuple) and p[0] == str(p[1]),
         settings=quick)
    find(pairs, lambda p: p[0] == p[1] and {type(p[0]), type(p[1])} == {int, float}, settings=quick)
    find(pairs, lambda p: p[0] == p[1] and bool in {type(p[0]), type(p[1])}, settings=quick)


def test_equal_namespaces_share_and_type_only_pairs_do_not() -> None:
    """The reference (its namespaces keyed by value) shares ``1``, ``1.0`` and ``True`` and keeps ``5``
    and ``"5"`` apart; the two catalogued mutants get one of these wrong each."""
    from radixcheck.properties.cache.mutants import NamespaceKeyedByStr, NamespaceSplitsEqualValues

    def shared(make, first, second) -> bool:  # noqa: ANN001
        allocator = SlotAllocator(1 << 10)
        cache = make(allocator, 1)
        cache.insert([1, 2], allocator.alloc(2), namespace=first)
        return len(cache.match_prefix([1, 2], namespace=second)[0]) == 2

    for first, second in [(1, 1.0), (1, True), (("lora", 7), ("lora", 7.0))]:
        assert shared(RadixCache, first, second) and not shared(NamespaceSplitsEqualValues, first, second)
    for first, second in [(5, "5"), (None, "None"), ((1, 2), "(1, 2)")]:
        assert not shared(RadixCache, first, second) and shared(NamespaceKeyedByStr, first, second)
        assert not shared(NamespaceSplitsEqualValues, first, second)


def test_the_report_card_says_whether_tenant_isolation_was_checked() -> None:
    """Every engine row of the matrix has a "Tenant isolation" line: checked for the namespaced
    adapters (naming what is not sent), not exercised (and why) for the others."""
    import os

    from radixcheck.audit import AuditResult, report_card
    from radixcheck.reports.matrix import ENGINES

    os.environ.setdefault("RADIXCHECK_SGLANG_LAZY", "1")
    lines = {}
    for engine in ENGINES:
        for name, factory in __import__(engine.module, fromlist=["FACTORIES"]).FACTORIES.items():
            caps = getattr(factory, "capabilities", None) or factory.tier_capabilities  # a tier target declares the latter
            lines[f"{engine.key}.{name}"] = caps.tenant_isolation()
    assert lines["sglang_tenants.radix_lru_extra_key"].startswith("checked (oracle 10)")
    assert "not sent: the empty-string namespace" in lines["vllm_tenants.vllm_prefix_tenants"]
    assert "multimodal feature hashes" in lines["vllm_tenants.vllm_prefix_tenants"].split("; not sent")[0]
    assert lines["sglang.radix_lru"].startswith("not exercised: no namespaces declared")
    assert lines["router_e2e.vllm_into_dynamo"] == "not exercised: the engine declares no namespaces"
    assert lines["dynamo.dynamo_radix_tree"].startswith("not exercised on the index alone")
    assert lines["sglang_hicache.hicache_python"].startswith("not exercised: no namespaces declared")
    caps = Capabilities(namespaces=True)
    card = report_card(AuditResult("mine:make", repr(caps), [], "ci", tenant_isolation=caps.tenant_isolation()))
    assert "Tenant isolation: checked (oracle 10)" in card
    plain = Capabilities()  # no namespaces: said once, in the not-exercised list, not twice
    card = report_card(AuditResult("mine:make", repr(plain), plain.not_exercised(), "ci",
                                   tenant_isolation=plain.tenant_isolation()))
    assert "Tenant isolation:" not in card and "- tenant isolation (no namespaces declared" in card


def test_lifecycle_requests_run_under_tenants_namespaces_when_both_are_declared() -> None:
    """A target that declares namespaces and a lifecycle has its requests drawn under tenants' namespaces
    (meta_tests/test_lifecycle_namespaces.py), so its report card lists no gap for it; one without
    namespaces is still told that tenant isolation is not exercised."""
    for lifecycle in ("tree", "requests"):
        both = Capabilities(namespaces=True, lifecycle=lifecycle).not_exercised()
        assert not any("namespace" in gap for gap in both), both
    assert any(gap.startswith("tenant isolation") for gap in Capabilities(lifecycle="requests").not_exercised())


def test_plain_isolation_and_order_messages_shorten_a_long_namespace() -> None:
    """The plain cache's isolation (10), LRU (4) and policy order (4) messages say the suite's
    250-character tenant keys by their ends and length, as the tier messages do (the layers trial's
    FAIL line was 600 characters of 'x'); the pair is still told apart. Repro lines are written from
    the calls, not from these messages: they keep the namespace whole."""
    from radixcheck.oracles.isolation import check_insert_isolated, check_quarantine_isolated, check_quarantine_left_others
    from radixcheck.oracles.lru import check_lru
    from radixcheck.oracles.policy import check_order
    from radixcheck.oracles.prefix_set import Entry
    from radixcheck.oracles.violations import ContractViolation
    from radixcheck.properties.cache.tenants import LONG_KEY

    first, second = LONG_KEY + "-1", LONG_KEY + "-2"
    model = PrefixSetModel()
    model.insert([1, 2], [10, 11], namespace=first)
    said = lambda born: f"call {born}"  # noqa: E731
    newer = Entry((1,), (10,), None, last_use=5, namespace=first)
    older = Entry((1,), (11,), None, last_use=2, namespace=second)
    checks = {
        "match": lambda: check_match_isolated(model, second, [1, 2], [10, 11], said),
        "insert": lambda: check_insert_isolated(model, second, [1, 2], 2, 0, said),
        "quarantine": lambda: check_quarantine_isolated(model.longest_cached([1, 2], first), second, [1], said),
        "quarantine, the other tenant": lambda: check_quarantine_left_others(first, [1], second, [1, 2], 0, 2),
        "lru": lambda: check_lru([(0, newer), (1, older)], None, 1, 1),
        "policy": lambda: check_order([newer], older, False, 1, lambda e: e.last_use, lambda e: "stats", "lru"),
    }
    for name, check in checks.items():
        with pytest.raises(ContractViolation) as caught:
            check()
        message = str(caught.value)
        assert LONG_KEY not in message and len(message) < 400, (name, message)
        assert "xx-1' (251 characters)" in message and "xx-2' (251 characters)" in message, (name, message)
