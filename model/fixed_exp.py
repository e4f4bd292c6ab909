"""The exponential of the exact model (softmax and SiLU), defined by its IEEE operations so that C
and NumPy agree bit for bit.

Why not ``np.exp``: NumPy computes float64 ``exp`` with glibc on some CPUs and with its own SIMD
code on others (AVX-512), and the compiled kernels (``model/kernels/exp.c``) cannot call either one
bit-compatibly. Any fixed, accurate formula does, if both sides perform the same correctly rounded
operations in the same order. This one is the textbook reduction:

    k = rint(x * log2(e));  r = (x - k * ln2_hi) - k * ln2_lo;  e^x = 2^k * sum_{i<=12} r^i / i!

with ``ln2_hi`` holding few enough bits that ``k * ln2_hi`` is exact, ``|r| <= ln2 / 2``, the
Taylor sum evaluated by Horner's rule (its truncation error is below 2e-16 relative), and the
scaling by ``2^k`` exact because the result is a normal number: ``x`` is kept in
``[EXP_MIN, EXP_MAX]``, below which the result is 0 (and for ``-inf``: a masked key in softmax,
whose probability quantised to 2**-21 of the row maximum is 0 anyway) and above which it is
``+inf`` (SiLU's ``x / (1 + e**-x)`` is then ``-0.0`` instead of about ``-1e-305``).
"""

from __future__ import annotations

import math

import numpy as np

EXP_MIN = -708.0  # k >= -1021: 2^k and the result stay normal numbers
EXP_MAX = 709.0  # k <= 1023: 2^k finite, p * 2^k below the largest float64
LOG2E = 1.4426950408889634  # log2(e), rounded to float64
LN2_HI = 6.93147180369123816490e-01  # ln 2 to 32 bits (fdlibm's): k * LN2_HI is exact for |k| < 2**21
LN2_LO = 1.90821492927058770002e-10  # ln 2 - LN2_HI, rounded to float64
POLY = tuple(1.0 / math.factorial(i) for i in range(13))  # r^i / i!, i = 0..12


def fixed_exp(x: np.ndarray) -> np.ndarray:
    """``e**x`` (0 below ``EXP_MIN`` and for ``-inf``, ``+inf`` above ``EXP_MAX``), bit for bit as the C kernel."""
    x = np.asarray(x, dtype=np.float64)
    ok = (x >= EXP_MIN) & (x <= EXP_MAX)
    x_in = np.where(ok, x, 0.0)
    k = np.rint(x_in * LOG2E)
    r = (x_in - k * LN2_HI) - k * LN2_LO
    p = np.full(x.shape, POLY[-1])
    for c in POLY[-2::-1]:
        p = p * r + c
    return np.where(ok, np.ldexp(p, k.astype(np.int32)), np.where(x > EXP_MAX, np.inf, 0.0))

