"""The vectorised math functions: <= 4 ulp of numpy on 10**6 points per function and dtype,
numpy's exact results at the special values, and docs/math.md not understating the error."""

import pathlib
import re

import numpy as np
import pytest

from flowjit.compiler.codegen import accuracy, library, mathlib
from helpers import packed

DOCS = pathlib.Path(__file__).parent.parent.parent / "docs" / "math.md"


# The sweep compiles each routine for both dtypes with FMA contraction, as kernels compile by
# default (CompileOptions.fma; ~40 numba compiles, each inlining its routine): the tests that read
# it, and the hard-argument and vectorisation tests that reuse its runners, run in one xdist worker
# (--dist loadgroup), so a run computes it once, not once per worker.  The same checks without
# contraction (fma=False: ~40 compiles more) run under ``make test-slow``
# (test_every_function_without_fma_within_4_ulp_of_numpy).
SWEEP = pytest.mark.xdist_group("mathlib-accuracy-sweep")


@pytest.fixture(scope="module")
def rows():
    return accuracy.measure(points=1_000_000, fmas=(True,))


def check_rows(rows) -> None:
    assert len(rows) == 2 * len(accuracy.FUNCTIONS) == len(library.ROUTINES)
    for row in rows:
        assert row["points"] >= 1_000_000
        assert row["max_ulp"] <= 4, row
        assert row["special_max_ulp"] <= 4, row


@SWEEP
def test_every_function_within_4_ulp_of_numpy(rows):
    check_rows(rows)


@SWEEP
def test_special_values_are_exact(rows):
    for row in rows:
        assert row["special_mismatches"] == [], row


@pytest.mark.sweep
def test_every_function_without_fma_within_4_ulp_of_numpy():
    """The two tests above for kernels compiled without FMA contraction (a sweep: ``make
    test-slow`` runs it)."""
    rows = accuracy.measure(points=1_000_000, fmas=(False,))
    check_rows(rows)
    for row in rows:
        assert row["special_mismatches"] == [], row


@SWEEP
def test_docs_table_does_not_understate_the_error(rows):
    documented = {key: row["max_ulp"] for key, row in accuracy.documented_rows(str(DOCS)).items()}
    assert len(documented) == len(rows)
    for row in rows:
        assert documented[(row["function"], row["dtype"])] >= row["max_ulp"] or row["max_ulp"] <= 1, row


@SWEEP
def test_sin_cos_on_the_hardest_arguments_match_mpmath():
    """Arguments a hair from a multiple of pi/2 (down to 2**-61 away) need the exact reduction."""
    errors = accuracy.hard_trig_errors()
    assert len(errors) == 4
    for key, error in errors.items():
        assert error <= 1, (key, error)


@SWEEP
@pytest.mark.parametrize("function", sorted(set(library.ROUTINES.values())))
def test_kernels_vectorise(function):
    """No libm call in the loop: LLVM emits packed arithmetic for every function we inline.
    The loop is the accuracy sweep's own runner, with FMA contraction as kernels compile by
    default (a plain loop of the function over an array, compiled with error_model="numpy"),
    so in the sweep's worker this test compiles nothing."""
    name, suffix = function.rsplit("_", 1)
    dtype = np.float64 if suffix == "f64" else np.float32
    runner = accuracy._runner(name, dtype, True)
    x = np.ones((2, 8) if name in accuracy.BINARY else 8, dtype)    # a binary runner's x: both arguments
    runner(x, np.ones(8, dtype))
    assembly = "".join(runner.inspect_asm().values())
    assert not re.search(r"call\w*\s+\S*(sin|cos|tan|exp|log|erf|pow|atan|asin|acos)", assembly)
    # (log_f32, sin_f32 and most of the newer float32 functions evaluate in float64 lanes and
    # round once at the end)
    assert packed(assembly, "arith", dtype) or packed(assembly, "arith", np.float64), \
        "the polynomial is not evaluated in packed lanes"
    if name in ("exp", "expm1", "exp2", "tanh", "sinh", "cosh", "log", "log2", "log10", "log1p"):
        # exponents go between float64 and int64 through the bits (mathlib.int_of_float64): AVX2
        # has no packed conversion, and LLVM converted lane by lane (tanh_f64: 4.2 -> 2.9 ns)
        assert not re.search(r"\bv?cvt(t?sd2si|si2sdq?)\s+[^\n]*%r", assembly), "a scalar int64 conversion"


def test_polynomial_literals_match_their_derivation():
    """mathlib's economized coefficients are what polyfit computes in exact arithmetic, and
    each economization drops less than its function can afford."""
    from flowjit.compiler.codegen import polyfit
    from flowjit.compiler.codegen import mathlib_trig
    budgets = {"exp_f64": 2.0 ** -56, "exp_f32": 2.0 ** -23, "erf_small": 2.0 ** -56, "erf_large": 0.0,
               "erf_small_f32": 2.0 ** -28, "erf_large_f32": 2.0 ** -28, "atan_f64": 2.0 ** -56,
               "asin_f64": 2.0 ** -54}      # (P's error counts times z <= 1/4 in asin: 2**-56)
    assert set(budgets) == set(polyfit.FITS)
    for name, fit in polyfit.FITS.items():
        coefficients, dropped = fit()
        module = mathlib_trig if hasattr(mathlib_trig, name.upper()) else mathlib
        assert getattr(module, name.upper()) == tuple(float(c) for c in coefficients), name
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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_ufuncs_lower_to_vectorised_routines(dtype):
    """Every float math ufunc flowjit traces calls its mathlib routine in the kernel, not libm
    (a libm call per element stops the vectoriser): softplus's log1p, arctan2, pow with an
    array exponent, and the rest."""
    import flowjit
    x = np.linspace(0.1, 0.9, 16).astype(dtype)
    programs = {name: (lambda x, f=getattr(np, name): f(x)) for name in
                ("exp2", "expm1", "log1p", "log2", "log10", "sinh", "cosh", "tan", "arcsin", "arccos", "arctan")}
    programs["arctan2"] = lambda x: np.arctan2(x, x[::-1])
    programs["pow"] = lambda x: np.power(x, x[::-1])
    programs["pow_scalar"] = lambda x: x ** 2.2              # numpy's fast paths around the routine
    suffix = "f32" if dtype == np.float32 else "f64"
    for name, program in programs.items():
        (source,) = flowjit.jit(program).lower(x).kernel_sources().values()
        code = [line for line in source[source.index("def kernel"):].splitlines() if not line.strip().startswith("#")]
        routine = name.split("_")[0]
        assert any(f"fj.{routine}_{suffix}(" in line for line in code), (name, code)
        assert not any(re.search(r"\bmath\.|\*\*", line) for line in code), (name, code)
