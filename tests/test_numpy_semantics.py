"""numpy's semantics, exactly: elementwise ops, Python scalars and reductions against numpy.

Table-driven.  For each dtype flowjit compiles, arrays hold its special values (+-0, +-inf,
NaN, the integer extremes) and, for binary ops, every pair of them.  A few jitted functions
compute the ops of a table, up to 16 each (a few compiles per dtype and path, not one per op;
one kernel of a whole 51-op table took 60% more compile time than four of 13), math-routine
cases two each, a reduction table whole (its reductions fuse as siblings), and the
interpreter, the fused kernels and the unfused ones must each give numpy's dtype and
values: bit for bit (NaN where numpy has NaN, the sign of every zero, inf), and within the
dtype's tolerance only where a libm function may round differently.  Where numpy raises,
flowjit raises the same exception class, at trace time when numpy's check is static, with
this file's name in the message.

Unfused kernels run the same scalar code as fused ones, so ``make test`` checks them on the
half float only, the dtype the driver converts around every kernel (int8, uint64, bool, int64
and float64 too under ``make test-slow``) to bound the number of compiles.  ``make test`` runs
a sample of the most expensive tables; ``make test-slow`` (the ``sweep`` marker) runs the rest: each sweep's
docstring names the test it completes.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import flowjit
from flowjit.errors import TraceError
from helpers import TOLERANCE

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64]
# The dtypes whose tables make test also compiles unfused (fuse=False: a kernel per op, every
# intermediate stored in its dtype): the half float, the dtype the driver converts around every
# kernel, so the one where a kernel per op changes the most.  The other dtypes with lowerings of
# their own (the narrowest signed and the widest unsigned integer, bool, int64, float64) run
# unfused under ``make test-slow`` (test_tables_unfused_on_more_dtypes): each dtype's tables
# unfused are about 20 s of a cold compile.  make test's other unfused checks of integers:
# test_integer_division_by_minus_one_wraps_like_numpy (int8, int64), the corpora's unfused samples.
UNFUSED_DTYPES = {np.float16}
UNFUSED_SWEEP_DTYPES = [np.bool_, np.int8, np.int64, np.uint64, np.float64]
# make test's sample of DTYPES for the per-dtype tables (binary pairs, unary special values, NEP 50
# scalars): every kind and width class with lowerings of its own (bool, the narrowest and widest
# signed, a narrow and the widest unsigned, each float).  The other four integer dtypes run under
# ``make test-slow`` (the sweep marker on their parameters): about 2 minutes of make test's CPU.
SWEEP_ONLY_DTYPES = {np.int16, np.int32, np.uint8, np.uint32}


def dtype_params(dtypes=DTYPES) -> list:
    return [pytest.param(d, id=np.dtype(d).name, marks=[pytest.mark.sweep] if d in SWEEP_ONLY_DTYPES else [])
            for d in dtypes]


MIXED_PAIRS = [(np.int8, np.uint8), (np.int64, np.uint64), (np.float32, np.int32), (np.float16, np.int8),
               (np.bool_, np.float32), (np.uint16, np.int64)]


def specials(dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.array([False, True])
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, 3.0, 7.0, -7.0, np.inf, -np.inf, np.nan,
                         info.max, -info.max, info.smallest_normal], dtype)
    info = np.iinfo(dtype)
    values = [0, 1, 2, 3, 7, int(info.max), int(info.max) - 1]
    if dtype.kind == "i":
        values += [-1, -2, -7, int(info.min), int(info.min) + 1]
    return np.array(values, dtype)


def every_pair(a_dtype, b_dtype) -> tuple[np.ndarray, np.ndarray]:
    a, b = specials(a_dtype), specials(b_dtype)
    return np.repeat(a, len(b)), np.tile(b, len(a))


def _integer_power(a, b):
    """numpy raises for negative integer exponents: keep them >= 0 when both are integers."""
    if np.dtype(a.dtype).kind in "biu" and np.dtype(b.dtype).kind in "biu":
        b = np.maximum(b, 0) if np.dtype(b.dtype).kind != "b" else b
    return np.power(a, b)


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "floor_divide": np.floor_divide, "remainder": np.remainder, "fmod": np.fmod,
    "floordiv_operator": lambda a, b: a // b, "mod_operator": lambda a, b: a % b,
    "divmod_quotient": lambda a, b: divmod(a, b)[0], "divmod_remainder": lambda a, b: np.divmod(a, b)[1],
    "power": _integer_power, "maximum": np.maximum, "minimum": np.minimum, "fmax": np.fmax,
    "fmin": np.fmin, "arctan2": np.arctan2, "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2,
    "copysign": np.copysign, "heaviside": np.heaviside, "equal": np.equal, "not_equal": np.not_equal,
    "less": np.less, "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
}
UNARY = {
    "negative": np.negative, "absolute": np.absolute, "abs_builtin": abs, "sign": np.sign, "sqrt": np.sqrt,
    "square": np.square, "reciprocal": np.reciprocal, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "rint": np.rint, "logical_not": np.logical_not, "invert": np.invert, "isnan": np.isnan,
    "isinf": np.isinf, "isfinite": np.isfinite,
    # ndarray's ** takes fast paths np.power does not (float16 (-inf) ** 0.5 is nan, np.power's inf)
    "pow_half": lambda x: x ** 0.5, "pow_two": lambda x: x ** 2, "pow_minus_one": lambda x: x ** -1,
    "pow_zero": lambda x: x ** 0, "pow_one": lambda x: x ** 1, "pow_three": lambda x: x ** 3,
    "pow_minus_half": lambda x: x ** -0.5, "pow_one_and_half": lambda x: x ** 1.5,
    "pow_two_float": lambda x: x ** 2.0, "pow_minus_one_float": lambda x: x ** -1.0,
    "power_half": lambda x: np.power(x, 0.5), "power_half_f64": lambda x: np.power(x, np.float64(0.5)),
    "power_zero_d_half": lambda x: np.power(x, np.array(0.5, np.float32)),
    "power_of_two": lambda x: np.power(2.0, x), "power_minus_two": lambda x: np.power(-2.0, x),
    "round_minus_two": lambda x: np.round(x, -2), "round_minus_one": lambda x: np.round(x, -1),
    "round": np.round, "round_one": lambda x: np.round(x, 1), "round_two": lambda x: x.round(2),
    "round_forty": lambda x: np.round(x, 40),
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10,
    "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan, "arcsin": np.arcsin,
    "arccos": np.arccos, "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "cbrt": np.cbrt, "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh,
    "fabs": np.fabs, "deg2rad": np.deg2rad, "radians": np.radians, "rad2deg": np.rad2deg, "degrees": np.degrees,
    "signbit": np.signbit,
}
# Rounded by a libm function (or flowjit's vectorised one): equal within the dtype's tolerance,
# but exactly at NaN, inf and zero.
APPROXIMATE = {"arctan2", "logaddexp", "logaddexp2", "cbrt", "arcsinh", "arccosh", "arctanh", "power", "pow_minus_half", "pow_one_and_half", "power_of_two",
               "power_minus_two", "exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
               "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "round_one", "round_two"}

# numpy's own fmax/fmin return +0.0 or -0.0 for (0.0, -0.0) depending on the array's length
# and the element's position (SIMD body or scalar tail): only the value is checked there.
# So do max/min reductions, whose order of comparisons is numpy's SIMD tree's.
ZERO_SIGN_VARIES = {"fmax", "fmin"} | {f"{name}_{axes}" for name in ("max", "min")
                                       for axes in ("all", "axis0", "axis1")}

# Python scalars: NEP 50 (weak scalars), numpy's OverflowError, comparisons answered whole.
SCALARS = {
    "plus_100": lambda x: x + 100, "plus_1000": lambda x: x + 1000, "minus_1": lambda x: x - 1,
    "plus_minus_1": lambda x: x + (-1), "times_2_5": lambda x: x * 2.5, "plus_true": lambda x: x + True,
    "three_minus": lambda x: 3 - x, "big_plus": lambda x: 1e300 + x, "plus_2_64": lambda x: x + 2 ** 64,
    "less_1000": lambda x: x < 1000, "at_least_minus_5": lambda x: x >= -5, "equal_minus_1": lambda x: x == -1,
    "not_2_64": lambda x: x != 2 ** 64, "greater_2_70": lambda x: 2 ** 70 > x, "less_2_1100": lambda x: x < 2 ** 1100,
    "and_1000": lambda x: np.logical_and(x, 1000), "or_zero_float": lambda x: np.logical_or(x, 0.0),
    "and_minus_1": lambda x: x & -1, "arctan2_1000": lambda x: np.arctan2(x, 1000),
    "maximum_int64_max": lambda x: np.maximum(x, 2 ** 63 - 1), "power_1000": lambda x: x ** 1000,
    "where_1000": lambda x: np.where(x > 0, x, 1000), "where_minus_1": lambda x: np.where(x > 0, -1, x),
    "where_2_5": lambda x: np.where(x > 0, x, 2.5), "where_2_70": lambda x: np.where(x > 0, x, 2 ** 70),
    "where_scalars": lambda x: np.where(x > 0, 1000, 2000),
    "clip_wide": lambda x: np.clip(x, -1000, 1000), "clip_high": lambda x: np.clip(x, 0, 1000),
    "clip_low_out": lambda x: np.clip(x, 1000, 2000),
    "add_dtype_int16": lambda x: np.add(x, 100, dtype=np.int16),
    "add_dtype_float32": lambda x: np.add(x, x, dtype=np.float32),
    "sqrt_dtype_float32": lambda x: np.sqrt(x, dtype=np.float32),
    "logical_dtype_bool": lambda x: np.logical_and(x, 2, dtype=np.bool_),
}


# -- comparison ----------------------------------------------------------------------------------------
def assert_numpy_equal(got, want, label: str, rtol: float = 0.0, zero_sign: bool = True) -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{label}: dtype {got.dtype}, numpy {want.dtype}"
    assert got.shape == want.shape, f"{label}: shape {got.shape}, numpy {want.shape}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=label, strict=True)
        return
    wide_got, wide_want = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(wide_want)
    assert np.array_equal(np.isnan(wide_got), nan), f"{label}: NaN at {np.isnan(wide_got)}, numpy {nan}\n" \
                                                    f"got {got}\nnumpy {want}"
    exact = ~nan & (~np.isfinite(wide_want) | (wide_want == 0) | ~np.isfinite(wide_got) | (rtol == 0.0))
    same = wide_got[exact] == wide_want[exact]
    if zero_sign:
        same &= np.signbit(wide_got[exact]) == np.signbit(wide_want[exact])
    assert same.all(), f"{label}: got {got[exact][~same]} where numpy has {want[exact][~same]} " \
                       f"(inputs at {np.flatnonzero(exact)[~same]})"
    close = ~nan & ~exact
    np.testing.assert_allclose(wide_got[close], wide_want[close], rtol=rtol, atol=0, err_msg=label)


def numpy_outcome(function, *args):
    """numpy's result, or the exception it raises."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return function(*args), None
        except Exception as error:        # noqa: BLE001 - numpy's own complaint is the expectation
            return None, error


def builtin_class(error: Exception) -> type:
    return next(cls for cls in type(error).__mro__ if cls.__module__ == "builtins")


def split_cases(cases: dict, *args):
    """The cases numpy computes (with its results) and those where it raises (with its error)."""
    good, bad = {}, {}
    for name, function in cases.items():
        result, error = numpy_outcome(function, *args)
        if error is None:
            good[name] = result
        else:
            bad[name] = error
    return good, bad


OPS_PER_PROGRAM = 16
# Cases whose kernels inline a math routine (exp, log, trig, pow: a fast and a general path
# each) go at most two to a program: numba's compile time grows much faster than the number of
# routines a kernel inlines.  The 17 float64 routine cases took 35 s of CPU as one kernel, 31 s
# as two (the 16 a program above), 16 s as five and 14 s as nine or as seventeen.  Two still
# puts routines side by side in a kernel, where their fast paths' guards combine.
ROUTINES_PER_PROGRAM = 2
# Reductions of one input fuse into a few sibling-reduction kernels: a whole table in one
# program compiles fused as 6 kernels (float16: 9 s of CPU), where 16 cases a program made 16
# (15 s).  Unfused, each op is a kernel however the table is split.
REDUCTIONS_PER_PROGRAM = 64


def chunks(names: list[str], per_program: int = OPS_PER_PROGRAM) -> list[list[str]]:
    """``names`` in equal runs of at most ``per_program``: compile time grows faster than a
    kernel's size, so a table compiles as a few programs rather than one."""
    count = -(-len(names) // per_program)
    size = -(-len(names) // count) if names else 1
    return [names[start:start + size] for start in range(0, len(names), size)]


def table_program(cases: dict, names: list[str]):
    def program(*args):
        return tuple(cases[name](*args) for name in names)
    return program


PATHS = ("interpreter", "fused", "unfused")


def paths(dtypes, which=None) -> list[tuple[str, dict]]:
    """The paths of ``which``; by default the interpreter, fused kernels, and unfused ones
    where every dtype is in UNFUSED_DTYPES."""
    if which is None:
        which = PATHS if all(dtype in UNFUSED_DTYPES for dtype in dtypes) else PATHS[:2]
    options = {"interpreter": {"backend": "interpreter"}, "fused": {}, "unfused": {"fuse": False}}
    return [(path, options[path]) for path in which]


def check_table(cases: dict, args: tuple, dtypes, approximate=frozenset(), which=None,
                per_program: int = OPS_PER_PROGRAM) -> None:
    """Every case numpy computes, on every path (``which``, or paths' default), against numpy,
    ``per_program`` cases a jitted program; every case numpy rejects, rejected."""
    good, bad = split_cases(cases, *args)
    names = sorted(good)
    rtol = max(TOLERANCE.get(np.dtype(d), 0.0) for d in dtypes) or TOLERANCE[np.dtype(np.float16)]
    for path, options in paths(dtypes, which):
        results = []
        for chunk in chunks(names, per_program):
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                results.extend(flowjit.jit(table_program(cases, chunk), **options)(*args))
        assert len(results) == len(names)
        for name, got in zip(names, results):
            label = f"{name}{tuple(np.dtype(d).name for d in dtypes)} {path}"
            assert_numpy_equal(got, good[name], label, rtol if name in approximate else 0.0,
                               zero_sign=name not in ZERO_SIGN_VARIES)
    for name, numpy_error in bad.items():
        kind = builtin_class(numpy_error)
        with pytest.raises(kind) as info, np.errstate(all="ignore"):
            flowjit.jit(table_program(cases, [name]))(*args)
        if isinstance(info.value, TraceError):
            assert __file__ in str(info.value), f"{name}: {info.value}"
        if type(numpy_error) in (OverflowError, ValueError):
            assert str(numpy_error) in str(info.value), f"{name}: {info.value} vs numpy's {numpy_error}"


# -- elementwise -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", dtype_params())
def test_binary_ops_on_every_pair_of_special_values(dtype):
    check_table(BINARY, every_pair(dtype, dtype), [dtype], APPROXIMATE)


def _pair_id(pair) -> str:
    return "-".join(np.dtype(d).name for d in pair)


@pytest.mark.parametrize("pair", MIXED_PAIRS, ids=_pair_id)
def test_binary_ops_promote_mixed_dtypes(pair):
    """Interpreted and fused; unfused under ``make test-slow`` (test_mixed_dtypes_unfused)."""
    check_table(BINARY, every_pair(*pair), pair, APPROXIMATE, which=("interpreter", "fused"))


@pytest.mark.sweep
@pytest.mark.parametrize("pair", [(np.float16, np.int8), (np.int64, np.uint64)], ids=_pair_id)
def test_mixed_dtypes_unfused(pair):
    """The rest of test_binary_ops_promote_mixed_dtypes: unfused, on pairs of dtypes with
    lowerings of their own (a sweep: ``make test-slow`` runs it)."""
    check_table(BINARY, every_pair(*pair), pair, APPROXIMATE, which=("unfused",))


def unary_tables(dtype) -> list[tuple[dict, tuple, frozenset]]:
    """The unary table for ``dtype``: (cases, arguments, approximate cases) for each part."""
    values = specials(dtype)
    if dtype in (np.uint32, np.uint64):
        # round(x, -1) of the largest values rounds up past the dtype's range, and numpy's
        # float64 -> uint cast of that is the x86 instruction's, which kernels do not copy.
        rounding = {name: case for name, case in UNARY.items() if name.startswith("round_minus")}
        cases = {name: case for name, case in UNARY.items() if name not in rounding}
        return [(rounding, (values[values < np.iinfo(dtype).max - 10],), frozenset()),
                (cases, (values,), APPROXIMATE)]
    return [(UNARY, (values,), APPROXIMATE)]


# The unary cases whose kernel inlines a math routine (mathlib's exp, log, trig, hyperbolic and
# pow functions).  Unfused, each is a large kernel of its own per dtype (the six unfused dtypes'
# unary tables took most of this file's compile time in a cold run) running the scalar code
# that the fused kernels run too.
ROUTINE_UNARY = frozenset({"exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
                           "arccos", "arctan", "sinh", "cosh", "tanh", "power_of_two", "power_minus_two",
                           "cbrt", "arcsinh", "arccosh", "arctanh"})


def _part(cases: dict, routines: bool) -> dict:
    return {name: case for name, case in cases.items() if (name in ROUTINE_UNARY) == routines}


# The dtypes whose math-routine cases make test compiles: the three float dtypes.  The integers
# reach the same float16/32/64 routines through a cast to the float dtype numpy promotes them to
# (those casts are in make test's binary and scalar tables and its fused non-routine unary cases:
# sqrt, reciprocal, the powers): make test checks their routine cases interpreted, and fused (two
# kernels inlining the 21 routines: 11 to 19 s of a cold compile per dtype) under ``make
# test-slow`` (test_unary_math_routines_of_the_other_integers).
ROUTINE_DTYPES = {np.float16, np.float32, np.float64}


@pytest.mark.parametrize("dtype", dtype_params())
def test_unary_ops_on_special_values(dtype):
    """Every unary case on every path, but the math-routine cases unfused, and fused for the
    integers outside ROUTINE_DTYPES: those run under ``make test-slow``
    (test_unary_math_routines_unfused, test_unary_math_routines_of_the_other_integers)."""
    routine_paths = ("interpreter", "fused") if dtype in ROUTINE_DTYPES else ("interpreter",)
    for cases, args, approximate in unary_tables(dtype):
        check_table(_part(cases, routines=False), args, [dtype], approximate)
        check_table(_part(cases, routines=True), args, [dtype], approximate, which=routine_paths,
                    per_program=ROUTINES_PER_PROGRAM)


@pytest.mark.sweep
@pytest.mark.parametrize("dtype", [d for d in DTYPES if d in UNFUSED_DTYPES or d in UNFUSED_SWEEP_DTYPES],
                         ids=lambda d: np.dtype(d).name)
def test_unary_math_routines_unfused(dtype):
    """The rest of test_unary_ops_on_special_values: the math-routine cases, unfused (a sweep:
    ``make test-slow`` runs it, ``make test`` does not)."""
    for cases, args, approximate in unary_tables(dtype):
        check_table(_part(cases, routines=True), args, [dtype], approximate, which=("unfused",))


@pytest.mark.sweep
@pytest.mark.parametrize("dtype", [d for d in DTYPES if d not in ROUTINE_DTYPES], ids=lambda d: np.dtype(d).name)
def test_unary_math_routines_of_the_other_integers(dtype):
    """The rest of test_unary_ops_on_special_values: the math-routine cases of the integers
    outside ROUTINE_DTYPES, fused (a sweep: ``make test-slow`` runs it)."""
    for cases, args, approximate in unary_tables(dtype):
        check_table(_part(cases, routines=True), args, [dtype], approximate, which=("fused",),
                    per_program=ROUTINES_PER_PROGRAM)


@pytest.mark.parametrize("dtype", dtype_params())
def test_python_scalars_follow_nep_50(dtype):
    check_table(SCALARS, (specials(dtype),), [dtype], {"arctan2_1000", "big_plus"})


def _power_fast_path_tables(dtype, which) -> None:
    base = np.array([[-np.inf, -0.0], [np.inf, 4.0]], dtype)
    cases = {
        "zero_d": lambda x, e: np.power(x, e[0, 0]), "broadcast_1x1": lambda x, e: np.power(x, e[:1, :1]),
        "row": lambda x, e: np.power(x, e[:1]), "column": lambda x, e: np.power(x, e[:, :1]),
        "same_shape": lambda x, e: np.power(x, e), "one_by_one": lambda x, e: np.power(x[:1, :1], e[:1, :1]),
    }
    for exponent in (0.5, -1.0, 2.0, 1.0, 0.0):
        check_table(cases, (base, np.full((2, 2), exponent, dtype)), [dtype], which=which,
                    per_program=1)     # each case inlines a pow: one a program is cheapest


def test_power_fast_paths_follow_the_exponents_broadcast():
    """numpy's float power loop takes 1/x, 1, sqrt, x, x*x when the exponent is one value
    broadcast over the result, and pow otherwise: (-inf) ** 0.5 is nan or inf by shape.
    float64, interpreted and fused (one kernel of five inlined pows: 9 s of a cold compile);
    float32, and both unfused, under ``make test-slow`` (test_power_fast_paths_sweep below)."""
    _power_fast_path_tables(np.float64, which=("interpreter", "fused"))


@pytest.mark.sweep
def test_power_fast_paths_sweep():
    """The rest of test_power_fast_paths_follow_the_exponents_broadcast: float32 on every path,
    float64 unfused, where each case is a kernel of its own (a sweep: ``make test-slow`` runs it)."""
    _power_fast_path_tables(np.float32, which=PATHS)
    _power_fast_path_tables(np.float64, which=("unfused",))


def test_integer_division_by_minus_one_wraps_like_numpy():
    """MIN // -1 is MIN and MIN % -1 is 0 (numpy 2), for every signed width: never a trap."""
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        info = np.iinfo(dtype)
        x = np.array([info.min, info.min + 1, info.max, -1, 0], dtype)
        cases = {"floordiv": lambda a: a // -1, "mod": lambda a: a % -1, "fmod": lambda a: np.fmod(a, -1),
                 "floordiv_array": lambda a: a // np.negative(np.ones_like(a)),
                 "mod_array": lambda a: a % np.negative(np.ones_like(a)),
                 "divmod": lambda a: np.divmod(a, np.full_like(a, -1))[0]}
        # unfused too at both ends of the widths (int64: the width whose hardware division traps)
        check_table(cases, (x,), [dtype], which=PATHS if dtype in (np.int8, np.int64) else None)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_integer_division_by_constants_is_plain_and_matches_numpy(dtype):
    """// and % by a constant other than 0 and -1 are numba's own operators, which are numpy's
    there (the floor, the divisor's sign) and which LLVM turns into multiplications; by 0 and
    -1 they keep the helpers that give numpy's 0 and MIN // -1 == MIN."""
    info = np.iinfo(dtype)
    x = specials(dtype)
    divisors = [1, 2, 7, 10, 1000, int(info.max), int(info.max) - 1] + (
        [-2, -7, -10, int(info.min), int(info.min) + 1] if info.min < 0 else [])
    divisors = [d for d in divisors if info.min <= d <= info.max]
    cases = {}
    for divisor in divisors:
        constant = dtype(divisor)
        cases[f"floordiv_{divisor}"] = lambda a, c=constant: a // c
        cases[f"mod_{divisor}"] = lambda a, c=constant: a % c
        cases[f"divmod_{divisor}"] = lambda a, c=constant: np.divmod(a, c)[1] - (a // c) * 3
    check_table(cases, (x,), [dtype])
    source = "".join(flowjit.jit(lambda a: (a // dtype(7), a % dtype(10), a // dtype(0), a % dtype(0)))
                     .lower(x).kernel_sources().values())
    assert re.search(r"// np\.u?int\d+\(7\)\)", source) and re.search(r"% np\.u?int\d+\(10\)\)", source), source
    assert "fj.floordiv_" in source and "fj.mod_int(" in source, source      # (by zero: numpy's 0)


# -- reductions ----------------------------------------------------------------------------------------
# var and std's ddof on the 4x5 input, per axis: the count n - ddof above one, one (axis 0's
# ddof 3), zero (axis 1's ddof 5: inf or NaN) and below zero (axis 0's 5, axis 1's 7).  The
# other ddofs (n - ddof above one again: 3, 5, 7 over all 20 elements, 3 on axis 1; below zero
# again: 7 on axis 0) run under ``make test-slow`` (test_reductions_with_more_ddofs).
DDOFS = {None: (0, 1), 0: (0, 1, 3, 5), 1: (0, 1, 5, 7)}
SWEEP_DDOFS = {None: (3, 5, 7), 0: (7,), 1: (3,)}


def _reductions(ddofs: dict, plain: bool = True) -> dict:
    cases = {}
    for axis in (None, 0, 1):
        suffix = "all" if axis is None else f"axis{axis}"
        for name in ("sum", "prod", "mean", "max", "min", "argmax", "argmin", "all", "any") if plain else ():
            cases[f"{name}_{suffix}"] = lambda x, name=name, axis=axis: getattr(np, name)(x, axis=axis)
        for ddof in ddofs[axis]:
            cases[f"var_ddof{ddof}_{suffix}"] = lambda x, ddof=ddof, axis=axis: np.var(x, axis=axis, ddof=ddof)
            cases[f"std_ddof{ddof}_{suffix}"] = lambda x, ddof=ddof, axis=axis: x.std(axis=axis, ddof=ddof)
    if plain:
        cases["all_keepdims"] = lambda x: np.all(x, axis=0, keepdims=True)
        cases["any_keepdims"] = lambda x: x.any(axis=1, keepdims=True)
    return cases


REDUCTIONS = _reductions(DDOFS)
SWEEP_REDUCTIONS = _reductions(SWEEP_DDOFS, plain=False)
REDUCTION_APPROXIMATE = {name for name in {**REDUCTIONS, **SWEEP_REDUCTIONS}
                         if name.startswith(("mean", "var", "std"))}


def reduction_input(dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        rows = [[1.0, -2.5, 0.5, 3.0, 7.0], [1.0, np.inf, 2.0, -0.0, 3.0], [np.nan, 1.0, -np.inf, 2.0, 0.0],
                [-0.0, 0.0, -0.0, 0.0, -0.0]]
        return np.array(rows, dtype)
    values = specials(dtype)
    return np.resize(values, (4, 5))


REDUCTION_DTYPES = [np.bool_, np.int8, np.int64, np.uint64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", REDUCTION_DTYPES, ids=lambda d: np.dtype(d).name)
def test_reductions_with_special_values(dtype):
    check_table(REDUCTIONS, (reduction_input(dtype),), [dtype], REDUCTION_APPROXIMATE,
                per_program=REDUCTIONS_PER_PROGRAM)


@pytest.mark.sweep
@pytest.mark.parametrize("dtype", REDUCTION_DTYPES, ids=lambda d: np.dtype(d).name)
def test_reductions_with_more_ddofs(dtype):
    """The rest of test_reductions_with_special_values: var and std with SWEEP_DDOFS (a sweep:
    ``make test-slow`` runs it), unfused also where UNFUSED_SWEEP_DTYPES has the dtype."""
    which = PATHS if dtype in UNFUSED_SWEEP_DTYPES else None
    check_table(SWEEP_REDUCTIONS, (reduction_input(dtype),), [dtype], REDUCTION_APPROXIMATE, which=which,
                per_program=REDUCTIONS_PER_PROGRAM)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0,)], ids=str)
def test_reductions_of_empty_arrays(shape):
    """numpy's identities (sum 0, prod 1, all True, any False), NaN means and variances, and its
    ValueErrors for max/min/argmax/argmin over an empty axis, raised at trace time."""
    kept = ("sum", "prod", "mean", "max", "min", "argmax", "argmin", "all", "any", "var_ddof0", "std_ddof1")
    cases = {name: case for name, case in REDUCTIONS.items()
             if name.startswith(kept) and (len(shape) == 2 or "axis1" not in name)}
    check_table(cases, (np.zeros(shape, np.float32),), [np.float32], REDUCTION_APPROXIMATE,
                per_program=REDUCTIONS_PER_PROGRAM)
    bool_cases = {name: case for name, case in cases.items() if name.startswith(("all", "any"))}
    check_table(bool_cases, (np.zeros(shape, np.int8),), [np.int8])


@pytest.mark.sweep
@pytest.mark.parametrize("dtype", UNFUSED_SWEEP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_tables_unfused_on_more_dtypes(dtype):
    """The unfused path of the tables above on UNFUSED_SWEEP_DTYPES (a sweep: ``make test-slow``
    runs it; ``make test`` checks them interpreted and fused): binary ops, unary ops but the
    math routines (test_unary_math_routines_unfused has those), Python scalars and reductions."""
    unfused = ("unfused",)
    check_table(BINARY, every_pair(dtype, dtype), [dtype], APPROXIMATE, which=unfused)
    for cases, args, approximate in unary_tables(dtype):
        check_table(_part(cases, routines=False), args, [dtype], approximate, which=unfused)
    check_table(SCALARS, (specials(dtype),), [dtype], {"arctan2_1000", "big_plus"}, which=unfused)
    check_table(REDUCTIONS, (reduction_input(dtype),), [dtype], REDUCTION_APPROXIMATE, which=unfused)
