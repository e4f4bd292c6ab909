"""Tests of the suite itself: the model's bit-identity properties must catch an ordinary model.

A plain-float-BLAS variant of the same model (``load_default(arithmetic="float")``: float32 GEMMs
and NumPy reductions) is what most people would write. exactness.md measured that it is not
shape-stable; these tests show the very checks the properties run reject it, while the exact
model passes them on the same inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from radixcheck.model import KVPool, load_default
from radixcheck.model.checks import check_chunked_equals_full, check_reuse_after_split
from radixcheck.model.llama import Model

EXACT = load_default()
NO_MEMO = Model(EXACT.config, EXACT.weights, memo_kv=False)
FLOAT = load_default(arithmetic="float")
VOCAB = EXACT.config.vocab_size


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread_by_default():
    with threadpool_limits(limits=1):
        yield


def _reuse_property(model):
    """The reuse-after-split property of properties/test_model_reuse.py, bound to ``model``."""

    @settings(deadline=None, max_examples=60, database=None, phases=[Phase.explicit, Phase.generate])
    @given(toks=st.lists(st.integers(0, VOCAB - 1), min_size=2, max_size=48), data=st.data())
    def prop(toks: list[int], data: st.DataObject) -> None:
        split = data.draw(st.integers(1, len(toks) - 1), label="split")
        check_reuse_after_split(model, toks, split)

    return prop


def test_reuse_property_rejects_the_float_blas_model() -> None:
    with pytest.raises(AssertionError, match="logits"):
        _reuse_property(FLOAT)()


@pytest.mark.deep  # a serving state machine over the exact model to a verdict
def test_reuse_property_accepts_the_exact_model() -> None:
    _reuse_property(EXACT)()


def test_float_model_differs_at_most_split_points() -> None:
    toks = np.random.default_rng(3).integers(0, VOCAB, 32)
    failures = 0
    for split in range(1, toks.size):
        try:
            check_reuse_after_split(FLOAT, toks, split)
        except AssertionError:
            failures += 1
    assert failures > 0, "the float model happened to be shape-stable here; the properties would not catch it"


def test_chunked_property_rejects_the_float_blas_model() -> None:
    toks = np.random.default_rng(4).integers(0, VOCAB, 30)
    with pytest.raises(AssertionError, match="chunked prefill"):
        for chunk in (1, 3, 7):
            check_chunked_equals_full(FLOAT, toks, chunk)


def test_serving_state_machine_rejects_the_float_blas_model() -> None:
    from hypothesis.stateful import run_state_machine_as_test

    from tests.test_model_radix import ServingMachine

    class FloatServing(ServingMachine):
        MODEL = FLOAT

    cfg = settings(deadline=None, max_examples=30, stateful_step_count=10, database=None, phases=[Phase.generate],
                   derandomize=True)  # the same 30 programs every run: a gate test must not depend on a draw
    with pytest.raises(AssertionError, match="reused"):
        run_state_machine_as_test(FloatServing, settings=cfg)


# ---- mutants: plausible model bugs the properties must catch ---------------------------------


class ChunkRelativeRope(type(EXACT)):
    """Bug: rotary positions counted from the start of the computed chunk, not of the sequence."""

    def rope(self, x, positions):
        return super().rope(x, positions - positions[0])


class UnroundedFreshKV(KVPool):
    """Bug: freshly computed K/V are attended to at full precision; only cached ones are rounded
    to the storage dtype (so a full prefill and a reused prefix see different keys)."""

    def write(self, layer, slots, k, v):
        super().write(layer, slots, k, v)
        self._fresh = (layer, np.asarray(slots), np.asarray(k, np.float64), np.asarray(v, np.float64))

    def read(self, layer, slots):
        k, v = super().read(layer, slots)
        fl, fs, fk, fv = getattr(self, "_fresh", (None, None, None, None))
        if fl == layer:
            where = {int(s): i for i, s in enumerate(fs)}
            for j, s in enumerate(slots):
                if int(s) in where:
                    k[j], v[j] = fk[where[int(s)]], fv[where[int(s)]]
        return k, v


def test_reuse_property_catches_chunk_relative_rope() -> None:
    # kernel="numpy": the step-by-step path, where RoPE is this Python method (the C path's fused
    # layers rotate inside one call, model.fused, and would never call the mutant)
    mutant = ChunkRelativeRope(EXACT.config, EXACT.weights, kernel="numpy")
    with pytest.raises(AssertionError, match="logits"):
        _reuse_property(mutant)()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn"])
def test_reuse_property_catches_unrounded_fresh_kv(monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    """K/V are computed in float64, so even float32 storage rounds them: every dtype catches it.

    On a model without the K/V memo, which re-reads the whole context from the pool on every call,
    as engines do: the memoising model reads each row back once, right after writing it, so this
    pool's unrounded read would reach every later call alike and no split could show it (the memo
    itself is held to the memo-less model by ``tests/test_model_kv_memo.py``)."""
    from radixcheck.model import checks as model_checks

    monkeypatch.setattr(model_checks, "KVPool", UnroundedFreshKV)
    toks = np.random.default_rng(6).integers(0, VOCAB, 24)
    failures = 0
    for split in range(1, toks.size):
        try:
            check_reuse_after_split(NO_MEMO, toks, split, dtype=dtype)
        except AssertionError:
            failures += 1
    assert failures > 0, f"{dtype} reuse property did not notice fresh K/V bypassing the storage rounding"


def test_memo_property_catches_a_memo_of_unrounded_fresh_kv() -> None:
    """The memoising model reads each row back once, right after writing it: a read that skips the
    storage rounding is then memoised and reused by later calls, unlike the memo-less model, which
    re-reads the context as stored every call. ``tests/test_model_kv_memo.py`` compares the two."""
    toks = np.random.default_rng(6).integers(0, VOCAB, 24)

    def second_call(pool_class: type[KVPool]) -> list[np.ndarray]:
        logits = []
        for model in (EXACT, NO_MEMO):
            pool = pool_class(model.config, 32, dtype="bfloat16")
            model.prefill(pool, toks[:12], np.arange(12), 0)
            logits.append(model.prefill(pool, toks, np.arange(24), 12))
        return logits

    assert np.array_equal(*second_call(KVPool)), "control: with a correct pool the two models agree"
    assert not np.array_equal(*second_call(UnroundedFreshKV)), "memo and memo-less model agreed although the memo kept unrounded K/V"


_MUTATED_BUILD = r"""
import json, sys, warnings
from radixcheck.model import exact, kernel_build, kernel_selftest, q8kernel
src = dict(kernel_build.sources())
old = "double w = v * sx[i];"  # put(): the output's second rounding, in every path's product
assert old in src["q8_matmul.c"]
src["q8_matmul.c"] = src["q8_matmul.c"].replace(old, "double w = v * sx[i] * (1.0 + 0x1p-52);")
kernel_build.sources = lambda: src
if sys.argv[1] == "again":  # the verdict is kept: a later process does not run the self-test again
    kernel_selftest.run = lambda lib: sys.exit("the self-test ran again")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kernel = exact.ExactOps().kernel
print(json.dumps({"kernel": kernel, "status": str(q8kernel.status("portable")), "warnings": [str(w.message) for w in caught]}))
"""


@pytest.mark.deep  # compiles a mutated kernel in a subprocess
def test_a_compiled_path_that_gives_other_bits_fails_its_self_test_and_is_not_used(tmp_path) -> None:
    """The kernel self-test can fail: the portable path built from C whose product rounds one bit
    differently (a real build, in a fresh cache) fails against the NumPy path, is reported, and the
    model takes the NumPy path; a second process reads the kept verdict and refuses it too."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "RADIXCHECK_CACHE": str(tmp_path), "RADIXCHECK_Q8_KERNEL": "portable"}
    for run in ("first", "again"):
        res = subprocess.run([sys.executable, "-c", _MUTATED_BUILD, run], env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout.strip().splitlines()[-1])
        assert out["kernel"] == "numpy"
        assert out["status"].startswith("portable: failed (self-test against the NumPy path: Q8_0 product"), out["status"]
        assert [w.split(" (self-test")[0] for w in out["warnings"]] == ["no usable compiled Q8_0 kernel (portable: failed"]


_LANES_MUTANT = r"""
import json, sys
from radixcheck.model import kernel_build, q8kernel
src = dict(kernel_build.sources())
old, new = sys.argv[1], sys.argv[2]
name = sys.argv[3] if len(sys.argv) > 3 else "q8_matmul.c"
assert src[name].count(old) == 1, old
src[name] = src[name].replace(old, new)
kernel_build.sources = lambda: src
print(json.dumps({"status": str(q8kernel.status("avx2"))}))
"""

# the AVX2 lanes form, broken three ways: every activation block after the first starts one tile late
# (only a product of more than one block shows it), each block's first pair of columns is lost, and
# the int64 fold (matrices with integer multipliers) drops the odd lanes' block sums after the first block;
# and the weight widening (issue 43, seventh round) three more: only the first block of tiles gets a
# widening pass (the later blocks' tiles read the last chunk's weights), a block's one tile, which widens
# its weights itself, leaves a group's last row out, and the multipliers of a group of 4 rows are read
# from its 8-row group's first half; and (eighth round) a block of many tiles, whose tiles now read the
# integer multipliers in place after the pass, reads them 4 apart (the pass's copies' stride) instead of 8;
# and (eleventh round: a block's one tile widens two blocks ahead into four rings) its tile reads the ring
# of the block after its own; and (twelfth round: a group's outputs leave as one store per activation row
# after a 4 x 4 transpose) the transpose gives a quad's third row the fourth's outputs, a tile's last rows short of a quad are
# not stored, and a float32 output stores the quad's first row's outputs in every row
_LANES_MUTANTS = {
    "a tile skipped after each activation block": ("tb < tiles; tb += block)", "tb < tiles; tb += block + 1)"),
    "a block's first pair dropped": ("s[j][h] = k ? madd_add(", "s[j][h] = k > 1 ? madd_add("),
    "the int64 fold's odd lanes lost": ("b ? _mm256_add_epi64(od, ", "b ? (od, "),
    "only the first block of tiles widens": ("        if (!single)\n", "        if (!single && tb == 0)\n"),
    "a one-tile block's group widened without its last row": ("if (j < src.live) {", "if (j + 1 < src.live) {"),
    "a group's multipliers from its 8-row group's first half": ("mgrp + g / 8 * 8 * nb + g % 8", "mgrp + g / 8 * 8 * nb"),
    "a pass's tiles read the multipliers in place 4 apart": ("mi[b * (M8 ? 8 : LANES_ROWS) + j]", "mi[b * (M8 && W ? 8 : LANES_ROWS) + j]"),
    "a one-tile block's tile reads the next block's ring": ("W && R ? wg + 64 * (b & 3) :", "W && R ? wg + 64 * ((b + 1) & 3) :"),
    "a quad's third row stored with the fourth's outputs": ("t[2] = _mm256_permute2f128_pd(u0, u2, 0x31)",
                                                            "t[2] = _mm256_permute2f128_pd(u1, u3, 0x31)"),
    "a tile's last rows short of a quad not stored": ("i1 - (i0 + l) < 4 ? i1 - (i0 + l) : 4", "i1 - (i0 + l) < 4 ? 0 : 4"),
    "a float32 output takes its quad's first row": ("_mm256_cvtpd_ps(t[k])", "_mm256_cvtpd_ps(t[0])"),
}


@pytest.mark.deep
@pytest.mark.parametrize("mutant", sorted(_LANES_MUTANTS))
def test_the_avx2_lanes_form_broken_fails_its_self_test(tmp_path, mutant: str) -> None:
    """The AVX2 path's lanes form (activation rows in the lanes, tiles in blocks) built from broken C,
    in a fresh cache, fails its self-test against the NumPy path on the product; the unbroken C,
    built the same way, passes (the control). Needs a host that runs AVX2 (the bits of a path, not
    which path a CPU gets: that is simulated in tests/test_model_kernel_selection.py)."""
    import json
    import os
    import subprocess
    import sys

    from radixcheck.model import kernel_build

    missing = kernel_build.missing_flags(kernel_build.BY_NAME["avx2"])
    if missing:
        pytest.skip(f"this CPU lacks {' '.join(missing)}")
    env = {**os.environ, "RADIXCHECK_CACHE": str(tmp_path)}
    old, new = _LANES_MUTANTS[mutant]
    for args, control in (((old, old), True), ((old, new), False)):
        res = subprocess.run([sys.executable, "-c", _LANES_MUTANT, *args], env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        status = json.loads(res.stdout.strip().splitlines()[-1])["status"]
        if control:
            assert status.startswith("avx2: passed"), status
        else:
            assert status.startswith("avx2: failed (self-test against the NumPy path: Q8_0 product"), status


# the AVX2 attention's int16 p.v (issue 43), broken two ways: the second key of every pair loses its
# probability's high part, and a block's last key is dropped when its key count is odd; and (sixth
# round) the value pairs, now read straight from the float32 rows, take the pair's first key's row twice;
# and (ninth round: query rows in the lanes) the q.k tile reads its fourth key from the third's row, the
# softmax counts the exponentials of keys a row does not see, takes the unmasked maximum over the keys its
# first lane sees (not every lane), quantises probabilities past a vector's keys (up to the block's
# longest row) from scores the softmax never processed, and a value row's last dimension of a tail of
# fewer than 8 (D not a multiple of 8) is lost
_PV_MUTANTS = {
    "a pair's second key's high part lost": ("_mm_or_si128(_mm_srli_epi32(i0, 11), _mm_slli_epi32(_mm_srli_epi32(i1, 11), 16))",
                                             "_mm_srli_epi32(i0, 11)"),
    "an odd block's last key dropped": ("const int64_t npairs = (n + 1) / 2;", "const int64_t npairs = n / 2;"),
    "a value pair's second row read from its first key": ("? kv_row(2 * k + 1, n_cached", "? kv_row(2 * k, n_cached"),
    "a q.k tile's fourth key read from the third's row": ("*k3 = k2 + D;", "*k3 = k2;"),
    "unseen keys' exponentials counted": ("const __m256d e = _mm256_andnot_pd(unseen, x[i]);", "const __m256d e = x[i];"),
    "the unmasked maximum over the first lane's keys": ("for (int64_t l = 1; l < 4; l++) js", "for (int64_t l = 1; l < 1; l++) js"),
    "probabilities past a vector's keys not zero": ("if (j < le) /* exact conversions", "if (j < lb) /* exact conversions"),
    "a value row's tail loses its last dimension": ("i < D - d; i++) t[i]", "i + 1 < D - d; i++) t[i]"),
}


@pytest.mark.deep
@pytest.mark.parametrize("mutant", sorted(_PV_MUTANTS))
def test_the_avx2_int16_pv_broken_fails_its_self_test(tmp_path, mutant: str) -> None:
    """The AVX2 attention (its int16 p.v and value pairs) built from broken C, in a fresh
    cache, fails its self-test against the NumPy path on attention; the unbroken C, built the same way, passes (the control)."""
    import json
    import os
    import subprocess
    import sys

    from radixcheck.model import kernel_build

    missing = kernel_build.missing_flags(kernel_build.BY_NAME["avx2"])
    if missing:
        pytest.skip(f"this CPU lacks {' '.join(missing)}")
    env = {**os.environ, "RADIXCHECK_CACHE": str(tmp_path)}
    old, new = _PV_MUTANTS[mutant]
    for args, control in (((old, old), True), ((old, new), False)):
        res = subprocess.run([sys.executable, "-c", _LANES_MUTANT, *args, "attention.c"], env=env, capture_output=True, text=True,
                             timeout=300)
        assert res.returncode == 0, res.stderr
        status = json.loads(res.stdout.strip().splitlines()[-1])["status"]
        if control:
            assert status.startswith("avx2: passed"), status
        else:
            assert status.startswith("avx2: failed (self-test against the NumPy path: attention"), status


_PATHS_MUTANT = r"""
import json, sys
from radixcheck.model import kernel_build, q8kernel
src = dict(kernel_build.sources())
for name, old, new in json.loads(sys.argv[1]):
    assert src[name].count(old) == 1, old
    src[name] = src[name].replace(old, new)
kernel_build.sources = lambda: src
print(json.dumps({path: str(q8kernel.status(path)) for path in sys.argv[2:]}))
"""

# rint(x / scale) computed as rint(x * (1 / scale)), without the fallback to the division next to a
# half-integer (model/NOTES.md, issue 43, fifth round: this mutant passed the self-test before its
# half-integer cases), in each form of each quantisation: the int16 one (q8_matmul.c: q8_quantize),
# the float64 one (kernels.h: round_quotients, for quantize_f64 and attention's queries) and
# attention's probabilities (attention.c: softmax_row, and the vector forms' p = rint(e / sp)).
# A form's paths: the AVX-512 loop is the avx512 path's, the AVX2 loop the avx2 path's; the scalar
# loop is the portable path's and the vector paths' tails (rows not a multiple of 8 or 4 wide; the
# vector attentions have no scalar softmax: attention's scalar loop is the portable path's only).
_RECIPROCAL_MUTANTS = {
    ("int16", "avx512 loop"): ("q8_matmul.c", ["_mm512_div_pd(_mm512_loadu_pd(xr + j), _mm512_set1_pd(scale))"], ("avx512",)),
    ("int16", "avx2 loop"): ("q8_matmul.c", ["_mm256_div_pd(_mm256_loadu_pd(xr + j), _mm256_set1_pd(scale))"], ("avx2",)),
    ("int16", "scalar loop"): ("q8_matmul.c", ["round_even(xr[j] / scale)"], ("portable", "avx2", "avx512")),
    ("float64", "avx512 loop"): ("kernels.h", ["_mm512_div_pd(_mm512_loadu_pd(x + j), _mm512_set1_pd(scale))"], ("avx512",)),
    ("float64", "avx2 loop"): ("kernels.h", ["_mm256_div_pd(_mm256_loadu_pd(x + j), _mm256_set1_pd(scale))"], ("avx2",)),
    ("float64", "scalar loop"): ("kernels.h", ["out[j] = round_even(x[j] / scale);"], ("portable", "avx2", "avx512")),
    ("attention", "avx512 form"): ("attention.c", ["_mm512_div_pd(_mm512_load_pd(S + j * RP), sp)",
                                                   "_mm512_div_pd(_mm512_load_pd(S + (j + 1) * RP), sp)"], ("avx512",)),
    ("attention", "avx2 form"): ("attention.c", ["_mm256_div_pd(_mm256_loadu_pd(S + j * RP), sp)",
                                                 "_mm256_div_pd(_mm256_loadu_pd(S + (j + 1) * RP), sp)"], ("avx2",)),
    ("attention", "scalar loop"): ("attention.c", ["s[j] = round_even(s[j] / sp);"], ("portable",)),
}
_HALF_INTEGER_FAILURE = {"int16": "int16 quantisation", "float64": "float64 quantisation", "attention": "attention probabilities"}


def _reciprocal(old: str) -> str:
    """``old`` (a division by ``scale`` or ``sp``) as a multiplication by its reciprocal."""
    if old.startswith("_mm512_div_pd(_mm512_load_pd(S"):  # sp: a register of 8 rows' scales
        return old.replace("_mm512_div_pd(", "_mm512_mul_pd(").replace(", sp)", ", _mm512_div_pd(_mm512_set1_pd(1.0), sp))")
    if old.startswith("_mm256_div_pd(_mm256_loadu_pd(S"):  # sp: a register of 4 rows' scales
        return old.replace("_mm256_div_pd(", "_mm256_mul_pd(").replace(", sp)", ", _mm256_div_pd(_mm256_set1_pd(1.0), sp))")
    for div, mul in (("_mm512_div_pd(", "_mm512_mul_pd("), ("_mm256_div_pd(", "_mm256_mul_pd(")):
        if old.startswith(div):
            return old.replace(div, mul).replace("set1_pd(scale)", "set1_pd(1.0 / scale)")
    return old.replace("/ scale", "* (1.0 / scale)").replace("/ sp", "* (1.0 / sp)")


@pytest.fixture(scope="module")
def _shared_kernel_cache(tmp_path_factory: pytest.TempPathFactory):
    """One kernel cache for the module: the unbroken control of each path is built once."""
    return tmp_path_factory.mktemp("kernels")


def _statuses_with(edits: list[list[str]], paths: list[str], cache: object) -> dict[str, str]:
    """Each path's status (built and self-tested in a subprocess, in the kernel cache ``cache``) with
    ``edits`` ([file, old, new] replacements) applied to the C (``_PATHS_MUTANT``)."""
    import json
    import os
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", _PATHS_MUTANT, json.dumps(edits), *paths],
                         env={**os.environ, "RADIXCHECK_CACHE": str(cache)}, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.deep  # compiles mutated kernels in subprocesses
@pytest.mark.parametrize("mutant", sorted(_RECIPROCAL_MUTANTS), ids=" ".join)
def test_a_quantisation_by_reciprocal_fails_its_self_test(_shared_kernel_cache, mutant: tuple[str, str]) -> None:
    """A quantisation form whose quotient is ``x * (1 / scale)`` (the same bits as ``x / scale``
    except next to a half-integer) built from C, in a fresh cache, fails its self-test against the
    NumPy path on that quantisation's half-integer cases, on every path this CPU runs that compiles
    the form; the unbroken C, built the same way, passes (the control)."""
    from radixcheck.model import kernel_build

    name, olds, paths = _RECIPROCAL_MUTANTS[mutant]
    paths = [p for p in paths if not kernel_build.missing_flags(kernel_build.BY_NAME[p])]
    if not paths:
        pytest.skip(f"this CPU runs none of {', '.join(_RECIPROCAL_MUTANTS[mutant][2])}")
    for rewrite, control in ((str, True), (_reciprocal, False)):
        edits = [[name, old, rewrite(old)] for old in olds]
        for path, status in _statuses_with(edits, paths, _shared_kernel_cache).items():
            if control:
                assert status.startswith(f"{path}: passed"), status
            else:
                want = f"{path}: failed (self-test against the NumPy path: {_HALF_INTEGER_FAILURE[mutant[0]]} on and next to half-integers"
                assert status.startswith(want), status


def _reciprocal_with_fallback(old: str) -> str:
    """The scalar ``round_even(x / scale)`` in ``old`` as ``y = x * (1 / scale)`` rounded, except
    where ``y`` is within ``|y| * 2^-48`` of a half-integer (or not finite: a subnormal scale),
    where the division is kept: ``y`` is within ``|y| * 2^-51`` of ``x / scale``, so the bits are
    the division's (model/NOTES.md, issue 43, fifth round; not kept there: no faster)."""
    x = old[old.index("round_even(") + len("round_even("):old.index(" / scale")]
    y = f"({x} * (1.0 / scale))"
    return old.replace(f"round_even({x} / scale)", f"round_even(fabs({y} - floor({y}) - 0.5) > fabs({y}) * 0x1p-48 ? {y} : {x} / scale)")


@pytest.mark.deep  # compiles a kernel in a subprocess
def test_a_quantisation_by_reciprocal_with_the_division_next_to_half_integers_passes(_shared_kernel_cache) -> None:
    """The self-test rejects a quotient that differs from the division, not a reciprocal as such:
    both quantisers' scalar loops computing ``x * (1 / scale)`` with the division kept next to a
    half-integer pass it (the portable path, and the vector paths' tails), and the same C without
    the fallback fails it (the control: these rows reach the half-integer cases)."""
    from radixcheck.model import kernel_build

    scalar = [v for k, v in sorted(_RECIPROCAL_MUTANTS.items()) if k[0] != "attention" and k[1] == "scalar loop"]
    paths = [p for p in scalar[0][2] if not kernel_build.missing_flags(kernel_build.BY_NAME[p])]
    for rewrite, passes in ((_reciprocal_with_fallback, True), (_reciprocal, False)):
        edits = [[name, old, rewrite(old)] for name, (old,), _ in scalar]
        for path, status in _statuses_with(edits, paths, _shared_kernel_cache).items():
            if passes:
                assert status.startswith(f"{path}: passed"), status
            else:
                want = f"{path}: failed (self-test against the NumPy path: int16 quantisation on and next to half-integers"
                assert status.startswith(want), status
