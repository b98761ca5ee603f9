"""Polynomial coefficients for mathlib, by Chebyshev economization in exact arithmetic.

A Taylor series converges slowly at the ends of an interval, so it needs more terms than
the interval deserves.  Economization rewrites a long Taylor polynomial in the Chebyshev
basis of the interval, drops the high-order Chebyshev terms (each at most 1 in size on the
interval, so what is dropped is bounded by the sum of their coefficients), and converts
back.  Every step here is a rational operation on ``Fraction``s, so the only rounding is
the final one to float64 or float32.

mathlib keeps the results as literals (this module is not imported at run time; import
time is part of every first call).  ``tests/codegen/test_mathlib.py`` checks that the
literals equal what this module computes and that the dropped terms stay under their
budgets.  Print them with::

    python -m flowjit.compiler.codegen.polyfit
"""

from __future__ import annotations

import math
from fractions import Fraction


def economize(taylor, lo, hi, degree: int) -> tuple[list[Fraction], Fraction]:
    """The coefficients (in z, lowest first) of the degree-``degree`` economization of
    ``sum(taylor[n] * z**n)`` over ``[lo, hi]``, and a bound on what it dropped there."""
    lo, hi = Fraction(lo), Fraction(hi)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    n = len(taylor)
    in_u = [Fraction(0)] * n                         # p(mid + half * u)
    for k, c in enumerate(taylor):
        for j in range(k + 1):
            in_u[j] += Fraction(c) * math.comb(k, j) * mid ** (k - j) * half ** j
    chebyshev = [Fraction(0)] * n                    # u**k = 2**(1-k) sum_i C(k,i) T_(k-2i), T_0 halved
    for k, c in enumerate(in_u):
        for i in range(k // 2 + 1):
            weight = Fraction(math.comb(k, i), 2 ** (k - 1)) if k else Fraction(1)
            if k and 2 * i == k:
                weight /= 2
            chebyshev[k - 2 * i] += c * weight
    dropped = sum((abs(c) for c in chebyshev[degree + 1:]), Fraction(0))
    kept_in_u = chebyshev_to_power(chebyshev[:degree + 1])
    in_z = [Fraction(0)] * (degree + 1)              # u = (z - mid) / half
    for k, c in enumerate(kept_in_u):
        for j in range(k + 1):
            in_z[j] += c * math.comb(k, j) * (-mid) ** (k - j) / half ** k
    return in_z, dropped


def chebyshev_to_power(chebyshev) -> list[Fraction]:
    """sum(c_j T_j(u)) as coefficients of u**i, lowest first (T_(j+1) = 2u T_j - T_(j-1))."""
    power = [Fraction(0)] * len(chebyshev)
    previous, current = [Fraction(1)], [Fraction(0), Fraction(1)]   # T_0, T_1
    for j, c in enumerate(chebyshev):
        if j >= 2:
            following = [Fraction(0)] + [2 * a for a in current]
            for i, a in enumerate(previous):
                following[i] -= a
            previous, current = current, following
        for i, a in enumerate(previous if j == 0 else current):
            power[i] += Fraction(c) * a
    return power


# |r| <= ln2/2 < 0.3466 after the Cody-Waite reduction of exp.
EXP_REDUCED = Fraction(3466, 10000)


def exp_f64() -> tuple[list[Fraction], Fraction]:
    """exp(r) on |r| <= ln2/2, degree 11 (the degree-13 Taylor polynomial dropped 4e-18)."""
    return economize([Fraction(1, math.factorial(n)) for n in range(24)], -EXP_REDUCED, EXP_REDUCED, 11)


def exp_f32() -> tuple[list[Fraction], Fraction]:
    """g(r) = (exp(r) - 1 - r) / r**2 on |r| <= ln2/2, degree 4: exp = 1 + r + r*r*g(r)."""
    return economize([Fraction(1, math.factorial(n + 2)) for n in range(16)], -EXP_REDUCED, EXP_REDUCED, 4)


def _erf_h_series() -> list[Fraction]:
    # erf(x) = 2/sqrt(pi) * x * h(x*x),  h(z) = sum (-1)**n z**n / (n! (2n+1))
    return [Fraction((-1) ** n, math.factorial(n) * (2 * n + 1)) for n in range(30)]


def erf_small() -> tuple[list[Fraction], Fraction]:
    """h on [0, 1] (|x| < 1), degree 11 (the 19-term Taylor polynomial it replaces dropped
    6e-18)."""
    return economize(_erf_h_series(), 0, 1, 11)


def erf_small_f32() -> tuple[list[Fraction], Fraction]:
    """h for float32, degree 6: it drops 1.1e-9, under 2**-28 of h >= 0.74."""
    return economize(_erf_h_series(), 0, 1, 6)


def erf_large() -> tuple[list[Fraction], Fraction]:
    """tools/fit_erf.py's Chebyshev series for erfc(x) exp(x*x) (mathlib.ERF_C, in u) in
    powers of u, for Horner's rule: one multiply-add a term instead of Clenshaw's two
    operations.  Its coefficients decay like the Chebyshev ones, so nothing cancels."""
    from flowjit.compiler.codegen.mathlib import ERF_C
    return chebyshev_to_power(ERF_C), Fraction(0)


def erf_large_f32() -> tuple[list[Fraction], Fraction]:
    """The same series truncated to degree 8 for float32, in powers of u: the Chebyshev
    terms it drops sum to 5.6e-10, under 2**-28 of g >= 0.2."""
    from flowjit.compiler.codegen.mathlib import ERF_C
    return chebyshev_to_power(ERF_C[:9]), sum((abs(Fraction(c)) for c in ERF_C[9:]), Fraction(0))


ATAN_REDUCED = Fraction(7, 16)      # |u| after mathlib_trig's five-region reduction of arctan


def atan_f64() -> tuple[list[Fraction], Fraction]:
    """Q(z) of atan(u) = u + u z Q(z), z = u*u <= (7/16)**2, degree 11: it drops 4e-18 of Q
    (times z <= 0.19 in atan)."""
    series = [Fraction((-1) ** n, 2 * n + 1) for n in range(1, 60)]
    return economize(series, 0, ATAN_REDUCED ** 2, 11)


def asin_f64() -> tuple[list[Fraction], Fraction]:
    """P(z) of asin(t) = t + t z P(z), z = t*t <= 1/4, degree 12: it drops 1.4e-17 of P
    (times z <= 1/4 in asin)."""
    series = [Fraction(math.factorial(2 * n), 4 ** n * math.factorial(n) ** 2 * (2 * n + 1)) for n in range(1, 90)]
    return economize(series, 0, Fraction(1, 4), 12)


FITS = {"exp_f64": exp_f64, "exp_f32": exp_f32, "erf_small": erf_small, "erf_small_f32": erf_small_f32,
        "erf_large": erf_large, "erf_large_f32": erf_large_f32, "atan_f64": atan_f64, "asin_f64": asin_f64}


def main() -> None:
    for name, fit in FITS.items():
        coefficients, dropped = fit()
        print(f"# {name}: dropped <= {float(dropped):.3g}")
        print(f"{name.upper()} = (" + ", ".join(repr(float(c)) for c in coefficients) + ")")


if __name__ == "__main__":
    main()
