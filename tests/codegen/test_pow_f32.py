"""float32 pow: 2**(b log2|a|) in float64 by two economized polynomials, rounded once.

Within 1 ulp of the correctly rounded pow, and correctly rounded but for inputs within
about 2**-37 of a midpoint; exact where pow is a power of two, including the float32
denormal midpoints that round to even; the polynomials are their derivation's.
"""

from fractions import Fraction

import numpy as np
import pytest

from flowjit.compiler.codegen import accuracy, mathlib_explog

GAMMAS = (2.2, 1 / 2.2, 1 / 2.4, 0.4545)


def run(a, b, fma: bool) -> np.ndarray:
    """pow_f32 over the pairs (a[i], b[i]) in the accuracy sweep's loop."""
    x = np.stack(np.broadcast_arrays(np.atleast_1d(np.float32(a)), np.atleast_1d(np.float32(b))))
    out = np.empty(x.shape[1], np.float32)
    accuracy._runner("pow", np.float32, fma)(np.ascontiguousarray(x), out)
    return out


def correctly_rounded(a, b) -> np.ndarray:
    """float64 pow rounded to float32: a float64 result 1 ulp off moves the float32 one only
    within 2**-52 of a float32 midpoint."""
    with np.errstate(all="ignore"):
        return np.power(np.float64(a), np.float64(b)).astype(np.float32)


def test_polynomials_are_their_economizations():
    """The literals are what pow_f32_fits computes; Q drops < 2**-45 (relative: Q >= 1.2),
    R < 2**-44 (times |r| <= 1/2 in P = 1 + r R(r) >= 0.7)."""
    (log2, log2_dropped), (exp2, exp2_dropped) = mathlib_explog.pow_f32_fits()
    assert mathlib_explog.LOG2_F32 == tuple(float(c) for c in log2)
    assert mathlib_explog.EXP2_F32 == tuple(float(c) for c in exp2)
    assert log2_dropped < Fraction(1, 2 ** 45) and exp2_dropped < Fraction(1, 2 ** 44)
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workprec(400):
        assert abs(mpmath.mpf(mathlib_explog.LN2_DIGITS) - mpmath.log(2)) < mpmath.mpf(10) ** -88


@pytest.mark.parametrize("fma", [True, False])
def test_gamma_and_range_edges_within_1_ulp_of_correct_rounding(fma):
    """Gamma curves (a in [0, 1], of every binade), and exponents that put pow near the
    overflow bound, into the float32 denormals and below them: at most 1 ulp from the
    correctly rounded result, and that on almost no input."""
    rng = np.random.default_rng(7)
    n = 200_000
    uniform = rng.uniform(0, 1, n).astype(np.float32)
    binades = accuracy._every_positive(np.float32, n, rng)
    binades = binades[binades <= 1]
    bases = np.concatenate([uniform, binades])
    a = np.tile(bases, len(GAMMAS))
    b = np.repeat(np.array(GAMMAS, np.float32), bases.size)
    edge_bases = accuracy._every_positive(np.float32, n, rng)
    edge_bases = edge_bases[edge_bases != 1]
    with np.errstate(divide="ignore"):
        edge_exponents = (rng.uniform(-152, 129, edge_bases.size) / np.log2(edge_bases.astype(np.float64)))
    a = np.concatenate([a, edge_bases])
    b = np.concatenate([b, edge_exponents.astype(np.float32)])
    got, want = run(a, b, fma), correctly_rounded(a, b)
    error = accuracy.ulp_error(got, want)
    assert error.max() <= 1, (a[np.argmax(error)], b[np.argmax(error)])
    assert np.count_nonzero(error) <= a.size // 100_000, np.count_nonzero(error)


@pytest.mark.parametrize("fma", [True, False])
def test_powers_of_two_are_exact(fma):
    """2**k exactly for every float32 from 2**-149 to 2**127, and 0 for 2**-150 (halfway to
    2**-149: to even) and below; the old exp(b log a) landed a hair above 2**-150 and gave
    2**-149."""
    k = np.arange(-170, 130)
    cases = [(np.float32(2.0), k), (np.float32(0.5), -k), (np.float32(4.0), k / 2), (np.float32(2.0 ** -75), k / -75)]
    for base, exponent in cases:
        exponent = exponent.astype(np.float32)
        exact = exponent * np.log2(np.float64(base))
        keep = exact == np.rint(exact)
        got = run(base, exponent[keep], fma)
        with np.errstate(over="ignore"):
            want = np.ldexp(np.float64(1.0), np.rint(exact[keep]).astype(int)).astype(np.float32)
        np.testing.assert_array_equal(got, want)
    assert run(np.float32(2.0), np.float32(-150.0), fma)[0] == 0.0
    assert run(np.float32(-2.0), np.float32(-149.0), fma)[0] == -np.float32(2.0 ** -149)


@pytest.mark.parametrize("fma", [True, False])
def test_special_values_are_numpys(fma):
    """Every pair of special values (and negative bases with integer and other exponents)
    gives numpy's value, sign included: zeros, infinities, NaN and ones by the exponent's
    own arithmetic and the few selects after it."""
    values = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf, np.nan,
                       1e-45, -1e-45, 1e30, -1e30, 127.0, 128.0, -149.0, -150.0, 0.999999, 1.000001,
                       3.4028235e38, -3.4028235e38], np.float32)
    a, b = np.repeat(values, values.size), np.tile(values, values.size)
    got = run(a, b, fma)
    with np.errstate(all="ignore"):
        want = np.power(a, b)
    same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
    exact = np.isnan(want) | np.isinf(want) | (want == 0) | (np.abs(want) == 1)
    wrong = np.nonzero(exact & ~same)[0]
    assert wrong.size == 0, [(a[i], b[i], got[i], want[i]) for i in wrong[:10]]
    with np.errstate(over="ignore"):                # np.spacing(inf), where numpy's result is finite
        assert accuracy.ulp_error(got[~exact], correctly_rounded(a, b)[~exact]).max() <= 1
