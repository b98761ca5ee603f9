"""The vectorised math functions: <= 4 ulp of numpy on 10**6 points per function and dtype,
numpy's exact results at the special values, and docs/math.md not understating the error."""

import pathlib
import re

import numpy as np
import pytest

from flowjit.compiler.codegen import accuracy, library, mathlib
from helpers import packed

DOCS = pathlib.Path(__file__).parent.parent.parent / "docs" / "math.md"


@pytest.fixture(scope="module")
def rows():
    return accuracy.measure(points=1_000_000)


def test_every_function_within_4_ulp_of_numpy(rows):
    assert len(rows) == 14
    for row in rows:
        assert row["points"] >= 1_000_000
        assert row["max_ulp"] <= 4, row
        assert row["special_max_ulp"] <= 4, row


def test_special_values_are_exact(rows):
    for row in rows:
        assert row["special_mismatches"] == [], row


def test_docs_table_does_not_understate_the_error(rows):
    documented = {}
    for line in DOCS.read_text().splitlines():
        match = re.match(r"\| (\w+) \| (float\d+) \| [\d,]+ \| ([\d.e+-]+) \|", line)
        if match:
            documented[(match.group(1), match.group(2))] = float(match.group(3))
    assert len(documented) == 14
    for row in rows:
        assert documented[(row["function"], row["dtype"])] >= row["max_ulp"] or row["max_ulp"] <= 1, row


def test_sin_cos_on_the_hardest_arguments_match_mpmath():
    """Arguments a hair from a multiple of pi/2 (down to 2**-61 away) need the exact reduction."""
    errors = accuracy.hard_trig_errors()
    assert len(errors) == 4
    for key, error in errors.items():
        assert error <= 1, (key, error)


@pytest.mark.parametrize("function", sorted(set(library.ROUTINES.values())))
def test_kernels_vectorise(function):
    """No libm call in the loop: LLVM emits packed arithmetic for every function we inline."""
    from numba import njit
    inlined = getattr(mathlib, function)
    dtype = np.float64 if function.endswith("f64") else np.float32

    @njit(error_model="numpy")
    def kernel(x, out):
        for i in range(x.shape[0]):
            out[i] = inlined(x[i])
    x = np.ones(8, dtype)
    kernel(x, np.empty(8, dtype))
    assembly = next(iter(kernel.inspect_asm().values()))
    assert not re.search(r"call\w*\s+\S*(sin|cos|exp|log|tanh|erf)", assembly)
    # (log_f32 and sin_f32 evaluate in float64 lanes and round once at the end)
    assert packed(assembly, "arith", dtype) or packed(assembly, "arith", np.float64), \
        "the polynomial is not evaluated in packed lanes"


def test_polynomial_literals_match_their_derivation():
    """mathlib's economized coefficients are what polyfit computes in exact arithmetic, and
    each economization drops less than its function can afford."""
    from flowjit.compiler.codegen import polyfit
    budgets = {"exp_f64": 2.0 ** -56, "exp_f32": 2.0 ** -23, "erf_small": 2.0 ** -56, "erf_large": 0.0,
               "erf_small_f32": 2.0 ** -28, "erf_large_f32": 2.0 ** -28}
    assert set(budgets) == set(polyfit.FITS)
    for name, fit in polyfit.FITS.items():
        coefficients, dropped = fit()
        assert getattr(mathlib, name.upper()) == tuple(float(c) for c in coefficients), name
        assert dropped <= budgets[name], (name, float(dropped))


def test_economization_reproduces_a_polynomial_it_does_not_truncate():
    """Economizing a cubic at degree 3 changes nothing; at degree 2 it drops exactly the
    T_3 coefficient, and the result is off by at most that on the interval."""
    from fractions import Fraction

    from flowjit.compiler.codegen import polyfit
    cubic = [Fraction(1), Fraction(-2), Fraction(3, 7), Fraction(5, 3)]
    same, dropped = polyfit.economize(cubic, -1, 3, 3)
    assert same == cubic and dropped == 0
    lower, dropped = polyfit.economize(cubic, -1, 3, 2)
    assert len(lower) == 3 and dropped == Fraction(5, 3) * 2 ** 3 / 4      # half-width 2, T_3 = 4u^3 - 3u
    for z in [Fraction(k, 8) for k in range(-8, 25)]:
        error = sum(c * z ** n for n, c in enumerate(cubic)) - sum(c * z ** n for n, c in enumerate(lower))
        assert abs(error) <= dropped
