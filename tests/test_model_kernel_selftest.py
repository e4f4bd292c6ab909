"""The kernel self-test's half-integer quantisation cases are what they claim to be, and a verdict
kept from an earlier self-test is not trusted by a changed one (NumPy only: no kernel is built, so
this runs the same on any CPU). That a kernel computing the quotient by a reciprocal fails on the
cases is ``meta_tests/test_model_meta.py`` (deep: it compiles mutants)."""

from __future__ import annotations

import numpy as np
import pytest

from radixcheck.model import kernel_build
from radixcheck.model.exact import P_BITS, ExactOps, quantize_rows
from radixcheck.model.fixed_exp import fixed_exp
from radixcheck.model.kernel_selftest import HALF_INTEGER_EXPONENTS, half_integer_attention, half_integer_rows

BITS = (8, 15, 20, 21)  # the int16 cases' precisions and the float64 ones'


def _quotients(bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: the rows, their scale as ``quantize_rows`` computes it, and ``x / scale``."""
    x = half_integer_rows(bits)
    _, scale = quantize_rows(x, bits)
    return x, scale, x / scale[..., None]


@pytest.mark.parametrize("bits", BITS)
def test_every_group_has_one_scale_set_by_its_first_column(bits: int) -> None:
    x, scale, _ = _quotients(bits)
    assert x.shape == (len(HALF_INTEGER_EXPONENTS), x.shape[1], 15)
    assert np.array_equal(np.abs(x).max(axis=-1), x[..., 0]), "a value above the row's amax would change its scale"
    assert np.array_equal(scale, np.broadcast_to(scale[:, :1], scale.shape))
    assert np.array_equal(np.frexp(x[:, 0, 0])[1] - 1, HALF_INTEGER_EXPONENTS)


@pytest.mark.parametrize("bits", BITS)
def test_quotients_land_on_and_one_ulp_either_side_of_half_integers(bits: int) -> None:
    _, scale, q = _quotients(bits)
    half = np.floor(q) + 0.5
    for g, exponent in enumerate(HALF_INTEGER_EXPONENTS):
        if scale[g, 0] < np.finfo(np.float64).tiny:
            continue  # a subnormal scale: the values' own spacing is coarser than an ulp of the quotient
        on, h = q[g, :, 1:], half[g, :, 1:]
        for what, target in (("on", h), ("one ulp above", np.nextafter(h, np.inf)), ("one ulp below", np.nextafter(h, -np.inf))):
            assert (on == target).sum() >= 20, f"{bits} bits, amax ~2^{exponent}: too few quotients {what} a half-integer"
        ks = np.unique(np.abs(h[on == h]) - 0.5)
        assert ks.min() == 0 and ks.max() >= 2 ** (bits - 2), f"{bits} bits, amax ~2^{exponent}: half-integers {ks.min()}..{ks.max()}"


@pytest.mark.parametrize("bits", BITS)
def test_a_reciprocal_rounds_differently_in_every_group_and_in_each_paths_tail(bits: int) -> None:
    """``rint(x * (1 / scale))`` (the mutant the self-test must catch) differs from
    ``rint(x / scale)`` in every group, in the AVX-512 loop's columns and in both vector paths'
    scalar tails (columns 8.. and 12..); where the scale is subnormal, its reciprocal overflows."""
    x, scale, q = _quotients(bits)
    with np.errstate(over="ignore", invalid="ignore"):
        apart = np.rint(x * (1 / scale[..., None])) != np.rint(q)
    for g, exponent in enumerate(HALF_INTEGER_EXPONENTS):
        assert apart[g].any(), f"{bits} bits, amax ~2^{exponent}: x * (1 / scale) rounds as x / scale everywhere"
        if scale[g, 0] < np.finfo(np.float64).tiny:
            with np.errstate(over="ignore"):
                assert np.isinf(1 / scale[g, 0])
    for columns in (slice(1, 8), slice(8, 15), slice(12, 15)):
        assert apart[..., columns].any(), f"{bits} bits: no difference in columns {columns}"


def test_the_attention_cases_quantise_the_value_scales_as_probabilities() -> None:
    """The attention cases' premise: a zero query's exponentials are exactly 1, so each head's
    probabilities are its value scales quantised to ``P_BITS`` (the half-integer rows), every
    query sees the row maximum (key 0), and the outputs are finite and not all zero."""
    exponents, (q, ki, sk, vi, sv, pos) = half_integer_attention()
    assert fixed_exp(np.zeros(1))[0] == 1.0
    assert not q.any() and pos.min() > 0 and np.array_equal(sv.max(axis=0), sv[0])
    for h, exponent in enumerate(exponents):
        rows = half_integer_rows(P_BITS)[HALF_INTEGER_EXPONENTS.index(exponent)]
        assert np.array_equal(np.sort(sv[:, h]), np.sort(np.abs(rows).ravel()))
    out = ExactOps("numpy").attention_quantised(q, ki, sk, vi, sv, pos).reshape(q.shape)
    assert np.isfinite(out).all() and np.abs(out).max(axis=(0, 2)).min() > 0


def test_a_verdict_kept_for_another_self_test_is_not_trusted(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A library that passed an earlier self-test runs a changed one (the verdict is kept with the
    self-test's version) and is refused if it fails it; the same version reads the kept verdict
    without running. No compiler runs: the library is a stand-in file already in the cache."""
    monkeypatch.setenv("RADIXCHECK_CACHE", str(tmp_path))
    kp, cc = kernel_build.BY_NAME["portable"], str(tmp_path / "no-such-cc")
    so = kernel_build.library_file(kp, cc)
    so.parent.mkdir(parents=True)
    so.write_bytes(b"")
    ran: list[str | None] = []

    def selftest(verdict: str | None):  # noqa: ANN202 - a self-test that answers ``verdict``
        return lambda path: ran.append(verdict) or verdict

    # a verdict from before versions were kept, with the build's compiler warnings
    so.with_suffix(".selftest.json").write_text('{"passed": true, "detail": "", "compiler_warnings": "w"}')
    assert kernel_build.ensure(kp, cc, selftest(None), "v1") == (so, None)
    assert kernel_build.ensure(kp, cc, selftest("not run: v1's verdict is kept"), "v1") == (so, None)
    failure = "int16 quantisation on and next to half-integers: ... differ"
    assert kernel_build.ensure(kp, cc, selftest(failure), "v2") == (so, failure)
    assert kernel_build.ensure(kp, cc, selftest(None), "v2") == (so, failure), "v2's failure is kept"
    assert ran == [None, failure]
    assert kernel_build.compiler_warnings(kp, cc) == "w", "a verdict tested again keeps the build's warnings"
