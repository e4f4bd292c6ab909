"""Every compiled kernel path computes the same exact integers as float64 BLAS, so the same bits.

Each compiled path usable on this machine (``model.q8kernel.available()``: AVX-512, AVX2,
portable C) must agree with ``ExactOps("numpy")`` bit for bit on every product: any shape
(activation rows 1..n, across the AVX-512 form's 16-row tiles and the AVX2 forms' 16-, 8-, 4- and 1-row tiles),
extreme int8 values (-128 and 127), block scales spread over many binary orders (so ``integerise``
lowers the activation precision), all-zero rows and blocks, and any number of threads. The whole
model must give the same logits on every path. A path this CPU cannot run is reported as a
skipped ``test_kernel_path_passes_its_self_test[...]`` ("not tested"), never as a pass.

These tests are about bits, so they run the paths the host runs, whatever they are. Which path
a CPU gets (and what a path it lacks reports) is ``tests/test_model_kernel_selection.py``, on
simulated CPUs, the same on any host.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixcheck.model import KVPool, fused, load_default, q8kernel
from radixcheck.model.checks import assert_bit_identical
from radixcheck.model.exact import ExactOps, integerise
from radixcheck.model.llama import Model
from radixcheck.model.q8 import Q8Matrix

pytestmark = pytest.mark.skipif(q8kernel.load() is None, reason="no compiled Q8_0 kernel (no compiler or RADIXCHECK_Q8_KERNEL=numpy)")

PATHS = q8kernel.available()  # the compiled paths the host runs (each passed its self-test), best first: maybe only portable
NUMPY = ExactOps("numpy")  # no ExactOps("c") at import: it raises under RADIXCHECK_Q8_KERNEL=numpy, before the skip


@pytest.mark.parametrize("path", q8kernel.PATHS)
def test_kernel_path_passes_its_self_test(path: str) -> None:
    """A path the CPU runs must build and pass its self-test; one it cannot run is "not tested"
    (a skip naming the missing instructions), never a pass."""
    st_ = q8kernel.status(path)
    if st_.state == "not tested":
        pytest.skip(str(st_))
    assert st_.state == "passed", str(st_)
    assert ExactOps(path).kernel == path


def _matrix(rng: np.random.Generator, rows: int, nb: int, spread: int, extreme: bool) -> Q8Matrix:
    if extreme:
        qs = rng.choice(np.array([-128, 127, -127, 0], dtype=np.int8), size=(rows, nb * 32))
    else:
        qs = rng.integers(-128, 128, size=(rows, nb * 32), dtype=np.int8)
    scales = (rng.uniform(0.5, 1.0, (rows, nb)) * 2.0 ** rng.integers(-spread, 1, (rows, nb)) * 2**-6).astype(np.float16)
    scales[rng.random((rows, nb)) < 0.1] = 0  # zero blocks
    if rows > 2:
        scales[1] = 0  # an all-zero row
    return Q8Matrix(qs, scales)


@settings(deadline=None, max_examples=25)
@given(
    n=st.integers(1, 40),
    rows=st.integers(1, 200),
    nb=st.integers(1, 50),
    spread=st.integers(0, 14),
    extreme=st.booleans(),
    threads=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_c_kernel_equals_float64_blas(n: int, rows: int, nb: int, spread: int, extreme: bool, threads: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    w = integerise(_matrix(rng, rows, nb, spread, extreme))
    x = rng.standard_normal((n, nb * 32)) * 10.0 ** rng.integers(-3, 4)
    x[rng.random(x.shape) < 0.05] = 0
    for dtype in (np.float64, np.float32):
        want = NUMPY.linear(x, w, dtype)
        for path in PATHS:
            c = ExactOps(path)
            c.threads = threads
            assert_bit_identical(c.linear(x, w, dtype), want, f"{path} kernel vs BLAS ({dtype.__name__})")


def test_c_kernel_on_full_magnitude_activations_and_weights() -> None:
    """Every activation at +-(2**act_bits - 1) and every weight at -128 / 127: the largest block sums."""
    rng = np.random.default_rng(1)
    w = integerise(Q8Matrix(np.where(rng.random((130, 1536)) < 0.5, -128, 127).astype(np.int8), np.full((130, 48), 0.01, np.float16)))
    for n in (9, 16, 21):  # AVX-512: a partial 16-row tile, a whole one, a whole one and 5 rows for the AVX2 form
        x = np.where(rng.random((n, 1536)) < 0.5, -1.0, 1.0)
        want = NUMPY.linear(x, w)
        for path in PATHS:
            assert_bit_identical(ExactOps(path).linear(x, w), want, f"{path} kernel vs BLAS at full magnitude, {n} rows")


@pytest.mark.parametrize("n", [5, 8, 16, 21, 24, 25, 33, 70])
def test_both_forms_of_a_product_equal_float64_blas(n: int) -> None:
    """The AVX-512 path's byte form (which needs the matrix's weight sums and integer multipliers)
    and its widening form (a matrix without weight sums, its activation bits lowered; and the same
    blocks as the byte form's without the integer multipliers) all give BLAS's bits on every path."""
    rng = np.random.default_rng(n)
    qs = rng.integers(-128, 128, size=(70, 96), dtype=np.int8)
    narrow = integerise(Q8Matrix(qs, np.full((70, 3), 2.0**-5, np.float16)))
    wide_scales = np.full((70, 3), 2.0**-4, np.float16)
    wide_scales[:, 1] = 2.0**-22
    wide = integerise(Q8Matrix(qs, wide_scales))
    assert narrow.wsum is not None and narrow.mult_groups is not None and narrow.act_bits == 15
    assert wide.wsum is None and wide.mult_groups is None and wide.act_bits < 15
    x = rng.standard_normal((n, 96)) * 5
    for w in (narrow, wide, replace(narrow, mult_groups=None)):
        want = NUMPY.linear(x, w)
        for path in PATHS:
            what = f"{path}, {n} rows, weight sums {w.wsum is not None}, integer multipliers {w.mult_groups is not None}"
            assert_bit_identical(ExactOps(path).linear(x, w), want, what)


@pytest.mark.parametrize("cols", [96, 1536])
def test_a_long_product_equals_float64_blas(cols: int) -> None:
    """The AVX2 path's lanes form takes its activation tiles in blocks (~192 KB: 4 tiles of 16 rows
    at 1536 columns, 64 at 96): 150 rows are three blocks at 1536 columns (the last one a 16-row tile
    and an 8-row one), one at 96; every path gives BLAS's bits on both."""
    rng = np.random.default_rng(cols)
    w = integerise(_matrix(rng, 29, cols // 32, 6, False))
    x = rng.standard_normal((150, cols))
    want = NUMPY.linear(x, w)
    for path in PATHS:
        assert_bit_identical(ExactOps(path).linear(x, w), want, f"{path}, 150 rows x {cols} columns")


def test_mult_groups_lay_out_every_multiplier() -> None:
    """``IntMatrix.mult_groups[(r // 8) * 8 * nb + 8 * b + r % 8] == mult[r, b]``, zero padding elsewhere;
    none where a multiplier does not fit an int32 (block scales 2**31 apart in a row)."""
    rng = np.random.default_rng(4)
    w = integerise(_matrix(rng, 21, 5, 10, False))
    g, nb = w.mult_groups, 5
    assert g is not None and g.dtype == np.int32 and g.size == 24 * nb + 2
    for r in range(21):
        for b in range(nb):
            assert g[(r // 8) * 8 * nb + 8 * b + r % 8] == w.mult[r, b]
    assert not g[[(21 // 8) * 8 * nb + 8 * b + j for b in range(nb) for j in range(5, 8)]].any() and not g[-2:].any()
    spread = np.full((3, 2), 2.0**-24, np.float16)
    spread[:, 1] = 2.0**8  # mantissa 2**10 shifted by 32 binary orders: above 2**31
    qs = np.zeros((3, 64), np.int8)
    qs[:, 0] = 1  # tiny weight sums: the byte form's bound holds, the int32 multipliers do not
    sparse = integerise(Q8Matrix(qs, spread))
    assert sparse.mult.max() >= 2.0**31 and sparse.mult_groups is None


def test_model_logits_do_not_depend_on_the_kernel_or_threads() -> None:
    toks = np.random.default_rng(2).integers(0, 384, 70)
    out = []
    for kernel, threads in (("numpy", 1), *((path, t) for path in PATHS for t in (1, 2, 3))):
        m = load_default()
        m.ops = ExactOps(kernel)
        m.threads = threads
        out.append(m.prefill(KVPool(m.config, 70), toks, np.arange(70)))
    for o in out[1:]:
        assert_bit_identical(o, out[0], "kernel path / threads")


def test_c_quantize_equals_quantize_rows() -> None:
    """The kernel's activation quantisation is ``exact.quantize_rows`` bit for bit: zero rows,
    signed zeros, subnormals, huge values and exact halves (round half to even) included."""
    from radixcheck.model.exact import ExactnessError, quantize_rows

    rng = np.random.default_rng(3)
    x = rng.standard_normal((12, 96)) * 10.0 ** rng.integers(-300, 300, (12, 1))
    x[0] = 0.0
    x[1] = -0.0
    x[2, :3] = [5e-324, -5e-324, 1e-310]
    x[3] = np.arange(96) - 47.5  # amax 47.5: many quotients land on exact halves at low bits
    x[4] = 1.5 * (np.arange(96) % 3 - 1)
    for lib in map(q8kernel.load, PATHS):
        for bits in (8, 11, 15):
            want_i, want_s = quantize_rows(x, bits)
            got_i, got_s = q8kernel.quantize(lib, x, bits)
            assert_bit_identical(got_s, want_s, f"{lib.kernel_path}: scales ({bits} bits)")
            assert_bit_identical(got_i.astype(np.float64), want_i, f"{lib.kernel_path}: integers ({bits} bits)")
        for bits in (8, 15, 20, 21, 30):  # the float64 form used by attention (q, k: 20; v: 15; p: 21)
            want_i, want_s = quantize_rows(x.reshape(3, 4, 96), bits)
            got_i, got_s = q8kernel.quantize_rows(lib, x.reshape(3, 4, 96), bits)
            assert_bit_identical(got_s, want_s, f"{lib.kernel_path}: scales ({bits} bits, float64 form)")
            assert_bit_identical(got_i, want_i, f"{lib.kernel_path}: integers ({bits} bits, float64 form)")
    y = x.copy()
    y[5, 7] = np.nan
    for lib in map(q8kernel.load, PATHS):
        with pytest.raises(ExactnessError, match="non-finite"):
            q8kernel.quantize(lib, y, 15)
        with pytest.raises(ExactnessError, match="non-finite"):
            q8kernel.quantize_rows(lib, y, 20)


@pytest.mark.parametrize("d", [1, 3, 128, 576, 1000])
def test_c_rmsnorm_equals_the_numpy_rmsnorm(d: int) -> None:
    from radixcheck.model.exact import rowsum

    rng = np.random.default_rng(d)
    x = rng.standard_normal((7, d)) * 10.0 ** rng.integers(-5, 5, (7, 1))
    w = rng.standard_normal(d)
    want = x * (1.0 / np.sqrt(rowsum(x * x) / d + 1e-5))[:, None] * w[None, :]
    for path in PATHS:
        assert_bit_identical(q8kernel.rmsnorm(q8kernel.load(path), x, w, 1e-5), want, f"{path}: rmsnorm (d={d})")


@settings(deadline=None, max_examples=25)
@given(
    T=st.integers(1, 40),
    past=st.integers(0, 90),
    heads=st.sampled_from([(9, 3, 64), (4, 2, 32), (2, 1, 6), (3, 3, 20)]),  # D 6 / 20: the kernel's scalar tails
    memo=st.booleans(),
    shuffled=st.booleans(),
    threads=st.integers(1, 2),
    seed=st.integers(0, 2**16),
)
def test_c_attention_equals_the_numpy_attention(
    T: int, past: int, heads: tuple[int, int, int], memo: bool, shuffled: bool, threads: int, seed: int
) -> None:
    """``attention_quantised`` in C is its NumPy body bit for bit: any shape, queries spread over
    the context in order or shuffled (so the kernel's row pairs have different lengths, either
    one the longer), cached keys read in place from scattered rows of memo-like arrays or passed
    as one block, one or two threads."""
    H, Hkv, D = heads
    rng = np.random.default_rng(seed)
    L = past + T
    q = rng.standard_normal((T, H, D)) * 10.0 ** rng.integers(-3, 4)
    ki, sk, vi, sv = NUMPY.quantise_kv(rng.standard_normal((L, Hkv, D)) * 3, rng.standard_normal((L, Hkv, D)))
    pos = rng.permutation(np.arange(past, L)) if shuffled else np.arange(past, L)  # any order of positions
    kv, cached = (ki, sk, vi, sv), None
    if memo and past:  # cached rows scattered over a larger array, as in a KVMemo
        slots = rng.permutation(3 * past)[:past]
        arrays = [np.zeros((3 * past, *a.shape[1:]), np.float32 if a.ndim == 3 else np.float64) for a in kv]
        for a, src in zip(arrays, kv, strict=True):
            a[slots] = src[:past]
        kv, cached = tuple(a[past:] for a in kv), (slots, *arrays)
    want = NUMPY.attention_quantised(q, *kv, pos, cached)
    for path in PATHS:
        c = ExactOps(path)
        c.threads = threads
        assert_bit_identical(c.attention_quantised(q, *kv, pos, cached), want, f"{path}: attention")


def test_fixed_exp_is_exp_to_a_few_ulps_and_exactly_one_at_zero() -> None:
    from radixcheck.model.fixed_exp import EXP_MAX, EXP_MIN, fixed_exp

    x = np.concatenate([np.linspace(EXP_MIN, EXP_MAX, 400_001), np.random.default_rng(4).uniform(-50, 50, 100_000)])
    got, want = fixed_exp(x), np.exp(x)
    assert np.max(np.abs(got - want) / want) < 1e-15
    assert fixed_exp(np.array([0.0, -0.0]))[0] == 1.0 == fixed_exp(np.array([-0.0]))[0]
    assert np.array_equal(fixed_exp(np.array([EXP_MIN - 1e-9, -1e4, -np.inf, np.nan])), np.zeros(4))
    assert np.array_equal(fixed_exp(np.array([EXP_MAX + 1e-9, 1e4, np.inf])), np.full(3, np.inf))


def test_c_swiglu_equals_the_numpy_swiglu() -> None:
    """SiLU(gate) * up in C (the fixed exponential, vectorised) is the NumPy expression bit for bit,
    including gates far enough out that the exponential saturates to 0 or infinity."""
    base = load_default()
    numpy = Model(base.config, base.weights, kernel="numpy")
    rng = np.random.default_rng(7)
    gu = rng.standard_normal((9, 2 * base.config.ffn_dim)) * 10.0 ** rng.integers(-3, 3, (9, 1))
    gu[0, :6] = [800.0, -800.0, 709.5, -709.5, 0.0, -0.0]
    for path in PATHS:
        c = Model(base.config, base.weights, kernel=path)
        assert_bit_identical(c.swiglu(gu), numpy.swiglu(gu), f"{path}: swiglu")


def test_c_rope_and_rotated_kv_equal_the_numpy_ones() -> None:
    """RoPE and the memo's rotate-and-quantise in C are ``Model.rope`` / ``quantise_kv(rope(k), v)``
    bit for bit; a position outside the tables raises instead of reading past them."""
    base = load_default()
    numpy = Model(base.config, base.weights, kernel="numpy")
    rng = np.random.default_rng(6)
    pos = rng.integers(0, base.config.max_seq_len, 37)
    x = rng.standard_normal((37, base.config.n_heads, base.config.head_dim)) * 100
    k, v = (rng.standard_normal((37, base.config.n_kv_heads, base.config.head_dim)) for _ in range(2))
    for path in PATHS:
        c = Model(base.config, base.weights, kernel=path)
        assert_bit_identical(c.rope(x, pos), numpy.rope(x, pos), f"{path}: rope")
        for got, want in zip(c._rotated_kv(k, v, pos), numpy._rotated_kv(k, v, pos), strict=True):
            assert_bit_identical(got, want, f"{path}: rotate + quantise K/V")
        with pytest.raises(IndexError, match="RoPE position"):
            c.rope(x, pos + base.config.max_seq_len)


@pytest.mark.deep  # every kernel path over whole layers
@settings(deadline=None, max_examples=15)
@given(
    tokens=st.lists(st.integers(0, 383), min_size=2, max_size=90),
    cut=st.floats(0, 1),
    storage=st.sampled_from(["float32", "bfloat16"]),
    last_only=st.booleans(),
)
def test_fused_layers_equal_the_unfused_and_numpy_paths(tokens: list[int], cut: float, storage: str, last_only: bool) -> None:
    """All layers in one C call (``model.fused``, one thread, a float32 pool) and a layer in two
    (other storage) give the bits of the call-per-step path (two threads) and of the NumPy path, on
    a full prefill and on a suffix over a reused prefix, on every compiled path."""
    base = load_default()
    models = {"NumPy": Model(base.config, base.weights, kernel="numpy")}
    for path in PATHS:
        models[f"{path}, fused"] = Model(base.config, base.weights, kernel=path)
        models[f"{path}, call per step"] = Model(base.config, base.weights, kernel=path, threads=2)
    calls = []
    n = int(cut * (len(tokens) - 1))
    outs = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fused, "layer_rest", lambda *a, f=fused.layer_rest: calls.append(1) or f(*a))  # a layer, bfloat16 pools
        mp.setattr(fused, "layers_forward", lambda *a, f=fused.layers_forward: calls.extend([1] * len(a[1])) or f(*a))  # all, float32
        for what, m in models.items():
            pool = KVPool(m.config, 128, dtype=storage)
            m.prefill(pool, tokens[:n], np.arange(n), 0)
            outs[what] = (m.prefill(pool, tokens, np.arange(len(tokens)), n, last_only=last_only), *pool.rows(np.arange(len(tokens))))
    assert len(calls) == len(PATHS) * base.config.n_layers * (2 if n else 1)  # each fused model ran fused, once per layer and call
    for what, got in outs.items():
        for g, w, part in zip(got, outs["NumPy"], ("logits", "stored K", "stored V"), strict=True):
            assert_bit_identical(g, w, f"{what} vs NumPy: {part}")


def test_the_c_exponential_has_the_python_constants() -> None:
    """``model/kernels/fixed_exp.h`` spells the same float64 values as ``model/fixed_exp.py`` (the
    C side cannot import them, so the test holds the two files together)."""
    import re

    from radixcheck.model import fixed_exp, kernel_build

    text = kernel_build.sources()["fixed_exp.h"]
    defines = dict(re.findall(r"#define (EXP_\w+) \(?([^)\s]+)\)?", text))
    assert float.fromhex(defines["EXP_MIN"]) == fixed_exp.EXP_MIN
    assert float.fromhex(defines["EXP_MAX"]) == fixed_exp.EXP_MAX
    assert float.fromhex(defines["EXP_LOG2E"]) == fixed_exp.LOG2E
    assert float.fromhex(defines["EXP_LN2_HI"]) == fixed_exp.LN2_HI
    assert float.fromhex(defines["EXP_LN2_LO"]) == fixed_exp.LN2_LO
    assert int(defines["EXP_DEGREE"]) == len(fixed_exp.POLY) - 1
    poly = re.search(r"EXP_POLY\[[^]]*\] = \{([^}]*)\}", text).group(1)
    assert [float.fromhex(c) for c in poly.replace(",", " ").split()] == list(fixed_exp.POLY)


@pytest.fixture
def fresh_choice(monkeypatch: pytest.MonkeyPatch):
    """``q8kernel.load``'s choices made anew under a changed environment (and anew again afterwards)."""
    q8kernel.load.cache_clear()
    yield monkeypatch
    q8kernel.load.cache_clear()


def test_the_environment_forces_a_path(fresh_choice: pytest.MonkeyPatch) -> None:
    """``RADIXCHECK_Q8_KERNEL`` picks the path of ``auto`` and ``c`` (so a subprocess can run any
    of them); a name that is no path is a clear error, not a silent fallback."""
    for path in (*PATHS, "numpy"):
        fresh_choice.setenv(q8kernel.ENV, path)
        q8kernel.load.cache_clear()
        assert ExactOps().kernel == path
        assert load_default().ops.kernel == path
    q8kernel.load.cache_clear()
    with pytest.raises(RuntimeError, match="RADIXCHECK_Q8_KERNEL=numpy"):
        ExactOps("c")
    fresh_choice.setenv(q8kernel.ENV, "avx-512")
    q8kernel.load.cache_clear()
    with pytest.raises(ValueError, match="RADIXCHECK_Q8_KERNEL='avx-512': expected one of auto, avx512, avx2, portable, numpy"):
        ExactOps()


def test_the_kernels_compile_without_warnings(tmp_path) -> None:
    """Each usable path's library was built with ``-Wall -Wextra`` and nothing printed; each C file
    compiles alone (``kernels.h`` declares what the files share), checked with the portable flags."""
    import subprocess

    from radixcheck.model import kernel_build

    cc = kernel_build.compiler()
    for path in PATHS:
        assert kernel_build.compiler_warnings(kernel_build.BY_NAME[path], cc) == "", path
    for name, text in kernel_build.sources().items():
        (tmp_path / name).write_text(text)
    for name in kernel_build.sources():
        if name.endswith(".c"):
            res = subprocess.run([cc, "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I", str(tmp_path), str(tmp_path / name)],
                                 capture_output=True, text=True)
            assert res.returncode == 0, res.stderr


def test_fused_workspace_buffers_start_on_a_cache_line() -> None:
    """Every scratch buffer of a fused call starts at a multiple of 64 bytes, whatever NumPy's heap
    holds (the AVX-512 product stores 64-byte rows: off a line each straddles two, model/NOTES.md,
    issue 43, twelfth round), and has the shape and dtype asked for."""
    from radixcheck.model.llama import DENOM_BITS, P_BITS, QK_BITS

    m = load_default()
    keep = [np.empty(k) for k in (3, 5, 7, 1000, 40000)]  # odd-sized blocks ahead of the workspace's
    for T in (1, 3, 16, 64, 257):
        ws = fused.Workspace(m.config, np.arange(T + 2), 2, m._cos, m._sin, (QK_BITS, P_BITS, DENOM_BITS))
        assert {n: b.ctypes.data % fused.ALIGN for n, b in ws.buffers.items() if b.ctypes.data % fused.ALIGN} == {}, T
        assert ws.buffers["gu"].shape == (T, 2 * m.config.ffn_dim) and ws.buffers["xi"].dtype == np.int16
        keep.append(np.empty(T * 3 + 1))
    a = fused.aligned_empty((3, 5), np.int16)
    assert a.shape == (3, 5) and a.dtype == np.int16 and a.flags.c_contiguous and a.ctypes.data % 64 == 0
