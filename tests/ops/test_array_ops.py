"""np.diff, np.roll, np.pad, np.triu/np.tril, np.diag and np.outer (frontend/numpy_arrays.py):
each against numpy on the fused and unfused compiled paths and the reference interpreter, over
dtypes, axes, empty and 1-d inputs; the errors name the function, the shapes and the user's
line; gradients match finite differences.  Several calls share one jitted function, so each
path compiles a few kernels for the lot."""

import inspect

import numpy as np
import pytest

import flowjit
from flowjit.errors import OpTypeError, ShapeError, TracerConversionError, UnsupportedFunctionError
from helpers import assert_same_result, tolerance_for
from test_gradients import check

PATHS = {"fused": {}, "unfused": {"fuse": False}, "interpreter": {"backend": "interpreter"}}
# Gradients of the composite losses below are checked fused and interpreted: unfused, each
# backward op is a kernel of its own (a compile each, ~15 s a test), and the unfused forward
# values are checked by agree() already.
GRADIENT_PATHS = ("fused", "interpreter")
RNG = np.random.default_rng(11)
F64 = RNG.normal(size=(4, 5))
F32 = RNG.normal(size=(3, 6)).astype(np.float32)
I8 = RNG.integers(-100, 100, (4, 5)).astype(np.int8)
U8 = RNG.integers(0, 255, (5,)).astype(np.uint8)
VECTOR = RNG.normal(size=6)


def agree(function, *args):
    """Every path gives numpy's result: values, dtypes and shapes (to the rounding of the least
    precise float in the program; integers exact)."""
    with np.errstate(all="ignore"):
        expected = function(*args)
    rtol = tolerance_for(args, expected)
    for path, options in PATHS.items():
        got = flowjit.jit(function, **options)(*args)
        try:
            assert_same_result(got, expected, exact=rtol == 0.0, rtol=rtol)
        except AssertionError as error:
            raise AssertionError(f"{path}: {error}") from None


def line_of(function, marker: str) -> int:
    source, first = inspect.getsourcelines(function)
    return first + next(i for i, text in enumerate(source) if text.rstrip().endswith(f"# {marker}"))


# -- np.diff ----------------------------------------------------------------------------------------------
def test_diff_matches_numpy_over_orders_axes_and_dtypes():
    def f(x, y, b, u):
        return (np.diff(x), np.diff(x, n=2, axis=0), np.diff(x, axis=-2), np.diff(x, n=9),   # n past the length
                np.diff(y, prepend=0, append=y[:, :1]),     # an int64 prepend promotes float32 to float64
                np.diff(b),                                 # int8 differences wrap, as numpy's do
                np.diff(b > 0, axis=0),                     # booleans: not_equal
                np.diff(u, n=3), np.diff(x, n=0))
    agree(f, F64, F32, I8, U8)


def test_diff_errors_name_the_function_and_the_line():
    def zero_d(x):
        return np.diff(x.sum())  # zero-d
    with pytest.raises(ShapeError, match=r"np\.diff requires input that is at least one dimensional, got f64\[\]") as info:
        flowjit.jit(zero_d)(F64)
    assert info.value.location.line == line_of(zero_d, "zero-d")

    def negative(x):
        return np.diff(x, n=-1)
    with pytest.raises(ShapeError, match=r"np\.diff: order must be non-negative but got -1"):
        flowjit.jit(negative)(F64)

    def bad_axis(x):
        return np.diff(x, axis=2)
    with pytest.raises(ShapeError, match=r"np\.diff: axis 2 is out of bounds"):
        flowjit.jit(bad_axis)(F64)


# -- np.roll ----------------------------------------------------------------------------------------------
def test_roll_matches_numpy():
    def f(x, b, v):
        return (np.roll(x, 2), np.roll(x, -1, axis=1), np.roll(x, (1, -7), axis=(0, 1)),
                np.roll(x, 3, axis=(0, 0)),                # one axis twice: the shifts add
                np.roll(x, 5, axis=1),                     # a whole turn: a copy
                np.roll(b, 13, axis=-1), np.roll(v, -2), np.roll(v[:0], 1))
    agree(f, F64, I8, VECTOR)


def test_roll_errors():
    def mismatched(x):
        return np.roll(x, (1, 2, 3), axis=(0, 1))
    with pytest.raises(ShapeError, match=r"np\.roll: shift \(1, 2, 3\) and axis \(0, 1\) do not broadcast"):
        flowjit.jit(mismatched)(F64)

    def traced_shift(x):
        return np.roll(x, x.argmax())
    with pytest.raises(TracerConversionError, match=r"np\.roll: shift must be known while tracing \(Python ints\), "
                                                    r"not a traced i64\[\] value"):
        flowjit.jit(traced_shift)(F64)


# -- np.pad -------------------------------------------------------------------------------------------------
def test_pad_matches_numpy_for_every_supported_mode():
    def f(x, b, v):
        return (np.pad(x, 1), np.pad(x, ((1, 2), (0, 3)), constant_values=((1.5, 2), (3, 4))),
                np.pad(b, (2, 1), constant_values=7.9),     # the value is assigned: 7 in int8
                np.pad(x, 2, mode="edge"), np.pad(x, (3, 9), mode="wrap"),     # wider than the axis
                np.pad(x, (2, 7), mode="reflect"), np.pad(b, ((6, 2), (1, 0)), mode="symmetric"),
                np.pad(v, ((1, 1),), mode="reflect"), np.pad(x, 0, mode="edge"), np.pad(v[:0], 2))
    agree(f, F64, I8, VECTOR)


def test_pad_errors():
    def reflect_odd(x):
        return np.pad(x, 1, mode="reflect", reflect_type="odd")  # odd
    with pytest.raises(UnsupportedFunctionError, match=r"np\.pad: reflect_type='odd' is not supported") as info:
        flowjit.jit(reflect_odd)(F64)
    assert info.value.location.line == line_of(reflect_odd, "odd")

    def statistic(x):
        return np.pad(x, 1, mode="mean")
    with pytest.raises(UnsupportedFunctionError, match=r"np\.pad: mode='mean' is not supported \(constant, edge"):
        flowjit.jit(statistic)(F64)

    def negative(x):
        return np.pad(x, -1)
    with pytest.raises(ShapeError, match=r"np\.pad: pad_width -1 contains negative values"):
        flowjit.jit(negative)(F64)

    def wrong_keyword(x):
        return np.pad(x, 1, mode="edge", constant_values=3)
    with pytest.raises(OpTypeError, match=r"unsupported keyword arguments for mode 'edge': \['constant_values'\]"):
        flowjit.jit(wrong_keyword)(F64)

    def empty_edge(x):
        return np.pad(x[:0], 1, mode="edge")
    with pytest.raises(ShapeError, match=r"np\.pad: can't extend empty axis 0 of f64\[0,5\]"):
        flowjit.jit(empty_edge)(F64)


# -- np.triu, np.tril, np.diag, np.outer ------------------------------------------------------------------
def test_triangles_diagonals_and_outer_products_match_numpy():
    def f(x, b, v):
        stacked = np.stack([x, 2 * x])
        return (np.triu(x), np.triu(x, k=1), np.tril(x, -2), np.tril(b, 3), np.triu(v),   # 1-d: a square
                np.triu(stacked, 1), np.tril(b > 0),
                np.diag(v), np.diag(v, 2), np.diag(v, -3), np.diag(x), np.diag(x, 2), np.diag(x, -3),
                np.diag(b, 9), np.outer(v, x), np.outer(b[0], [1, 2]))
    agree(f, F64, I8, VECTOR)


def test_triangle_and_diagonal_errors():
    def zero_d_triu(x):
        return np.triu(x.sum())  # triu
    with pytest.raises(ShapeError, match=r"np\.triu: input must be at least 1-d, got f64\[\]") as info:
        flowjit.jit(zero_d_triu)(F64)
    assert info.value.location.line == line_of(zero_d_triu, "triu")

    def three_d_diag(x):
        return np.diag(x[None])
    with pytest.raises(ShapeError, match=r"np\.diag: input must be 1-d or 2-d, got f64\[1,4,5\]"):
        flowjit.jit(three_d_diag)(F64)


# -- np.convolve ------------------------------------------------------------------------------------------
def test_convolve_matches_numpy_in_every_mode():
    def f(x, w, i):
        return (np.convolve(x, np.ones(4) / 4, mode="valid"), np.convolve(x, w), np.convolve(w, x, "same"),
                np.convolve(x, w[:4], "same"), np.convolve(i, i[:3]), np.convolve(w, 2.0),
                np.convolve(i, [1, -1], "valid"))
    agree(f, VECTOR, VECTOR[:3] * 2, U8.astype(np.int64))


def test_convolve_errors():
    def two_d(x):
        return np.convolve(x, x[0])  # conv
    with pytest.raises(ShapeError, match=r"np\.convolve: a and v must be 1-d, got f64\[4,5\] and f64\[5\]") as info:
        flowjit.jit(two_d)(F64)
    assert info.value.location.line == line_of(two_d, "conv")

    def long(x):
        return np.convolve(x, x)
    with pytest.raises(UnsupportedFunctionError, match=r"np\.convolve with both operands longer than 64 elements"):
        flowjit.jit(long)(np.ones(65))

    def empty(x):
        return np.convolve(x, x[:0])
    with pytest.raises(ShapeError, match=r"np\.convolve: v cannot be empty"):
        flowjit.jit(empty)(VECTOR)


# -- gradients ------------------------------------------------------------------------------------------------
WEIGHTS = RNG.normal(size=(8, 9))


def test_gradients_flow_through_the_compositions():
    """Each part's cotangent is (2 part + 1) * weights: it depends on x (so the backward program
    is computed, not folded) and is not zero where a part is (triu's and diag's zeros, so a rule
    that leaks cotangent into entries it masks is caught), as sin's cos(part) was.  sin runs once,
    on x: a sin (and its cos) inlined into every part's kernels, forward and backward, made this
    one program 35 kernels and 130 s of a cold compile (a kernel inlining six of them took 36 s);
    now it is ~10 s.  sin's own rule: test_gradients.py's test_unary_rules[sin]."""
    def loss(x):
        y = np.sin(x)
        parts = (np.diff(y, n=2, axis=1), np.roll(y, 2, axis=(0, 1)), np.pad(y, (1, 2), mode="reflect"),
                 np.pad(y, 1, mode="edge"), np.triu(y, 1), np.diag(np.diag(y[:, :4]), 1), np.outer(y[0], y[1]),
                 np.convolve(y[0], y[1, :3], "same")[None])
        return sum((part * (part + 1.0) * WEIGHTS[:part.shape[0], :part.shape[1]]).sum() for part in parts)
    check(loss, F64, paths=GRADIENT_PATHS)
