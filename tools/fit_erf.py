"""Fit the Chebyshev series flowjit's vectorised erf uses (run offline; needs mpmath).

For |x| in [X0, X1] = [1, 6]: erf(x) = 1 - exp(-x*x) * g(t),  g = erfc(x) * exp(x*x),
t = 1 / (1 + P x), and g is a Chebyshev series in u, the affine map of t onto [-1, 1].
Prints the constants to paste into flowjit/compiler/codegen/mathlib.py and the fit's
worst relative error (in float64 evaluation, against mpmath at 40 digits); then
``python -m flowjit.compiler.codegen.polyfit`` gives ERF_LARGE, the series in powers of u.

    python tools/fit_erf.py [--p 0.25] [--degree 24]
"""

import argparse
from fractions import Fraction

import mpmath
import numpy as np

X0, X1 = 1.0, 6.0


def fit(p: float, degree: int):
    mpmath.mp.dps = 40
    t_low, t_high = 1 / (1 + p * X1), 1 / (1 + p * X0)
    n = degree + 1
    nodes = [mpmath.cos(mpmath.pi * (k + mpmath.mpf(1) / 2) / n) for k in range(n)]
    values = []
    for u in nodes:
        t = (u * (t_high - t_low) + (t_high + t_low)) / 2
        x = (1 / t - 1) / p
        values.append(mpmath.erfc(x) * mpmath.exp(x * x))
    coefficients = []
    for j in range(n):
        total = sum(values[k] * mpmath.cos(mpmath.pi * j * (k + mpmath.mpf(1) / 2) / n) for k in range(n))
        coefficients.append(float(total * 2 / n) / (2 if j == 0 else 1))
    return t_low, t_high, coefficients


def evaluate(x, p, t_low, t_high, coefficients):
    t = 1 / (1 + p * x)
    u = (2 * t - (t_high + t_low)) / (t_high - t_low)
    b1 = b2 = 0.0
    for c in reversed(coefficients[1:]):
        b1, b2 = c + 2 * u * b1 - b2, b1
    return coefficients[0] + u * b1 - b2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--p", type=float, default=0.25)
    parser.add_argument("--degree", type=int, default=24)
    args = parser.parse_args()
    t_low, t_high, coefficients = fit(args.p, args.degree)
    worst = 0.0
    for x in np.linspace(X0, X1, 4001):
        got = evaluate(float(x), args.p, t_low, t_high, coefficients)
        want = mpmath.erfc(x) * mpmath.exp(mpmath.mpf(x) ** 2)
        worst = max(worst, abs(float((got - want) / want)))
    print(f"# p={args.p} degree={args.degree}: worst relative error of g {worst:.3g}")
    print(f"ERF_P = {args.p!r}")
    # u = 2 (t - t_low) / (t_high - t_low) - 1 as one multiply-add (p = 1/4: u = 5 t - 3).
    low, high = (1 / (1 + Fraction(args.p) * Fraction(x)) for x in (X1, X0))    # exactly
    scale, shift = 2 / (high - low), (high + low) / (high - low)
    print(f"ERF_U_SCALE, ERF_U_SHIFT = {float(scale)!r}, {float(shift)!r}")
    print("ERF_C = (" + ", ".join(repr(c) for c in coefficients) + ")")


if __name__ == "__main__":
    main()
