"""float32 log1p: e ln2 + f + f*f g(f) in float64 from u = 1 + x (exact), rounded once.

Within 1 ulp of the correctly rounded log1p, and correctly rounded but for inputs whose
log1p lies within about 2**-36 of a float32 midpoint; x itself below 2**-29 (denormals and
signed zeros included); numpy's special values; the polynomial is its derivation's.
"""

from fractions import Fraction

import numpy as np
import pytest

from flowjit.compiler.codegen import accuracy, mathlib_explog


def run(x, fma: bool) -> np.ndarray:
    """log1p_f32 over x in the accuracy sweep's loop."""
    x = np.ascontiguousarray(np.atleast_1d(np.float32(x)))
    out = np.empty_like(x)
    accuracy._runner("log1p", np.float32, fma)(x, out)
    return out


def correctly_rounded(x) -> np.ndarray:
    """float64 log1p rounded to float32: a float64 result 1 ulp off moves the float32 one only
    within 2**-52 of a float32 midpoint."""
    with np.errstate(all="ignore"):
        return np.log1p(np.float64(x)).astype(np.float32)


def bit_range(lo, hi, step: int = 1) -> np.ndarray:
    """Every ``step``-th float32 from lo to hi (both >= 0 or both <= -0.0), by bit pattern
    (the range itself never materialised: 2**-126 to 2**-29 is 800M floats)."""
    a, b = (int(np.float32(v).view(np.uint32)) for v in (lo, hi))
    return np.arange(min(a, b), max(a, b) + 1, step, dtype=np.int64).astype(np.uint32).view(np.float32)


def test_polynomial_is_its_economization():
    """The literals are what log1p_f32_fit computes; g drops < 2**-35 (f*f g is at most half
    of log1p's size, so < 2**-36 of the result)."""
    coefficients, dropped = mathlib_explog.log1p_f32_fit()
    assert mathlib_explog.LOG1P_F32 == tuple(float(c) for c in coefficients)
    assert dropped < Fraction(1, 2 ** 35)
    bounds = (Fraction(-2929, 10000), Fraction(4143, 10000))       # covers [sqrt(1/2) - 1, sqrt(2) - 1]
    assert (bounds[0] + 1) ** 2 < Fraction(1, 2) and (bounds[1] + 1) ** 2 > 2


@pytest.mark.parametrize("fma", [True, False])
def test_within_1_ulp_of_correct_rounding(fma):
    """Every float32 around the 2**-29 threshold (both signs) and below +-1/8, just above -1, across
    the reduction's boundaries near sqrt(2) - 1 and sqrt(1/2) - 1, and 4M strided over every
    bit pattern in [-1, inf): at most 1 ulp from the correctly rounded result, and that on
    almost no input."""
    dense = [bit_range(2.0 ** -29.05, 2.0 ** -28.9), bit_range(-2.0 ** -29.05, -2.0 ** -28.9),
             bit_range(0.125 - 2.0 ** -14, 0.125), bit_range(-0.125, -0.125 + 2.0 ** -14),
             bit_range(-1.0, -1.0 + 2.0 ** -10), bit_range(0.41, 0.42), bit_range(-0.295, -0.29)]
    strided = [np.arange(0, 0x7F800000, 997, dtype=np.int64), np.arange(0x80000000, 0xBF800000, 499, dtype=np.int64)]
    x = np.concatenate(dense + [s.astype(np.uint32).view(np.float32) for s in strided])
    x = x[x > -1]
    got, want = run(x, fma), correctly_rounded(x)
    error = accuracy.ulp_error(got, want)
    assert error.max() <= 1, x[np.argmax(error)]
    assert np.count_nonzero(error) <= x.size // 1_000_000, np.count_nonzero(error)


@pytest.mark.parametrize("fma", [True, False])
def test_tiny_inputs_are_themselves(fma):
    """Below 2**-29, log1p(x) = x to float32 precision: denormals, the signed zeros and
    samples up to the threshold come back unchanged, sign included."""
    positive = np.concatenate([bit_range(0.0, 2.0 ** -126, 7), bit_range(2.0 ** -126, 2.0 ** -29, 101),
                               np.float32([np.nextafter(np.float32(2.0 ** -29), np.float32(0))])])
    x = np.concatenate([positive, -positive])
    got = run(x, fma)
    assert np.array_equal(got.view(np.uint32), x.view(np.uint32))
    np.testing.assert_array_equal(got, correctly_rounded(x))


@pytest.mark.parametrize("fma", [True, False])
def test_special_values_are_numpys(fma):
    """-1 -> -inf, below -1 (and -inf) -> NaN, inf -> inf, NaN -> NaN, the extremes finite
    and correctly rounded."""
    x = np.float32([-1.0, -1.0000001, -2.0, -3.4028235e38, -np.inf, np.inf, np.nan, 0.0, -0.0,
                    3.4028235e38, -0.99999994, 1.0, 2.0 ** 53, 2.0 ** 60])
    got = run(x, fma)
    with np.errstate(all="ignore"):
        want = np.log1p(x)
    same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
    special = ~np.isfinite(want) | (want == 0)
    assert same[special].all(), list(zip(x[special], got[special], want[special]))
    assert accuracy.ulp_error(got[~special], correctly_rounded(x[~special])).max() == 0
