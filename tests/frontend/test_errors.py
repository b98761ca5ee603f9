"""Every trace-time error names the op, the shapes/dtypes and the user's own file:line."""

import inspect

import numpy as np
import pytest

import flowjit
from flowjit.errors import (ArgumentError, ShapeError, TracerConversionError,
                            UnsupportedFunctionError, TraceError)
from flowjit.errors import UnsupportedDTypeError

THIS_FILE = __file__


def line_of(marker: str) -> int:
    """The line of this file that carries ``# <marker>``."""
    for number, line in enumerate(open(THIS_FILE), start=1):
        if line.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(marker)


def assert_error(info, message: str, marker: str):
    error = info.value
    assert error.message == message
    assert error.location is not None
    assert (error.location.file, error.location.line) == (THIS_FILE, line_of(marker))
    assert str(error) == f"{THIS_FILE}:{line_of(marker)}: {message}"


def test_incompatible_shapes():
    def f(x, y):
        return x * 2 + y  # E-broadcast
    with pytest.raises(ShapeError) as info:
        flowjit.jit(f)(np.ones(3, np.float32), np.ones(4, np.float32))
    assert_error(info, "np.add(f32[3], f32[4]): shapes f32[3] and f32[4] do not broadcast together",
                 "E-broadcast")


def test_matmul_shapes():
    def f(a, b):
        return a @ b  # E-matmul
    with pytest.raises(ShapeError) as info:
        flowjit.jit(f)(np.ones((2, 3)), np.ones((4, 5)))
    assert_error(info, "matmul(f64[2,3], f64[4,5]): contracted dimensions differ: 3 vs 4", "E-matmul")


def test_reshape_size():
    def f(x):
        return x.reshape(4, 4)  # E-reshape
    with pytest.raises(ShapeError) as info:
        flowjit.jit(f)(np.ones((3, 5), np.int32))
    assert_error(info, "reshape(i32[3,5]): cannot reshape i32[3,5] (15 elements) to [4, 4]", "E-reshape")


def test_if_on_traced_value():
    def f(x):
        if x.sum() > 0:  # E-if
            return x
        return -x
    with pytest.raises(TracerConversionError) as info:
        flowjit.jit(f)(np.ones(3))
    assert_error(info, "the truth value (bool(), if, while, and/or) of a traced value (bool[]) is not known "
                       "while tracing: Python control flow cannot depend on array values. Use "
                       "np.where(cond, a, b) for a per-element choice, or mark the argument static with "
                       "static_argnums / static_argnames.", "E-if")


@pytest.mark.parametrize("convert, what", [(int, "int()"), (float, "float()"), (bool, "the truth value")])
def test_python_conversions(convert, what):
    def f(x):
        return convert(x[0])  # E-convert
    with pytest.raises(TracerConversionError) as info:
        flowjit.jit(f)(np.ones(3, np.float32))
    assert info.value.message.startswith(what)
    assert "of a traced value (f32[])" in info.value.message
    assert info.value.location.line == line_of("E-convert")


def test_asarray_of_traced_value():
    def f(x):
        return np.asarray(x) + 1  # E-asarray
    with pytest.raises(TracerConversionError) as info:
        flowjit.jit(f)(np.ones(3, np.float32))
    assert "a traced value (f32[3]) was converted to a concrete numpy array" in info.value.message
    assert info.value.location.line == line_of("E-asarray")


def test_unsupported_numpy_function():
    def f(x):
        return np.bincount(x)  # E-bincount
    with pytest.raises(UnsupportedFunctionError) as info:
        flowjit.jit(f)(np.ones(3))
    assert_error(info, "np.bincount is not supported by flowjit "
                       "(flowjit.supported_functions() lists what is supported)", "E-bincount")
    assert info.value.location.line == line_of("E-bincount")


def test_unsupported_ufunc_method():
    def f(x):
        return np.add.reduceat(x, [0, 2])  # E-reduceat
    with pytest.raises(UnsupportedFunctionError) as info:
        flowjit.jit(f)(np.ones(3))
    assert_error(info, "np.add.reduceat is not supported by flowjit "
                       "(flowjit.supported_functions() lists what is supported)", "E-reduceat")


@pytest.mark.parametrize("array, reason", [
    (np.ones(3, np.clongdouble), "this dtype is not supported"),
    (np.array(["a", "b"]), "only boolean, integer, floating-point and complex arrays can be traced"),
    (np.array([object()]), "only boolean, integer, floating-point and complex arrays can be traced"),
])
def test_unsupported_dtype(array, reason):
    with pytest.raises(UnsupportedDTypeError) as info:
        flowjit.jit(lambda x: x)(array)  # E-dtype
    assert info.value.message.startswith(f"argument 'x' has dtype {array.dtype}: {reason}")
    assert info.value.location.line == line_of("E-dtype")


def test_wrong_number_of_arguments():
    def f(x, y):
        return x + y
    with pytest.raises(ArgumentError) as info:
        flowjit.jit(f)(np.ones(3))  # E-args
    assert_error(info, "f(x, y): missing a required argument: 'y'", "E-args")
    with pytest.raises(ArgumentError) as info:
        flowjit.jit(f)(np.ones(3), np.ones(3), np.ones(3))  # E-args-many
    assert_error(info, "f(x, y): too many positional arguments", "E-args-many")
    assert isinstance(info.value, TypeError)       # callers catching TypeError still work


def test_boolean_mask_indexing():
    def f(x, i):
        return x[i > 0]  # E-index
    with pytest.raises(UnsupportedFunctionError) as info:
        flowjit.jit(f)(np.ones(3), np.array([0, 1, 2]))
    assert info.value.message.startswith("indexing f64[3]: indexing with a boolean array (a mask) has a "
                                         "data-dependent shape")
    assert info.value.location.line == line_of("E-index")


def test_item_assignment_into_an_argument():
    def f(x):
        x[0] = 1  # E-setitem
        return x
    with pytest.raises(TraceError) as info:
        flowjit.jit(f)(np.ones(3))
    assert_error(info, "x[...] = v on f64[3]: numpy would write the result into the caller's array (argument "
                       "'x'); flowjit never writes into arrays: write into a copy (x = x.copy() first), or build the result "
                       "with np.where or np.concatenate", "E-setitem")


def test_scalar_that_does_not_fit():
    def f(x):
        return x + 1000  # E-overflow
    with pytest.raises(OverflowError) as info:            # numpy 2's error, at the user's line
        flowjit.jit(f)(np.ones(3, np.int8))
    assert_error(info, "np.add(i8[3], 1000): Python integer 1000 out of bounds for int8", "E-overflow")


def test_bad_axis():
    def f(x):
        return x.sum(axis=2)  # E-axis
    with pytest.raises(ShapeError) as info:
        flowjit.jit(f)(np.ones((2, 3)))
    assert_error(info, "np.sum: axis 2 is out of bounds for a value of rank 2", "E-axis")


def test_errors_leave_no_cached_trace():
    calls = []

    def f(x):
        calls.append(1)
        return x + np.ones(4)
    jitted = flowjit.jit(f)
    for _ in range(2):
        with pytest.raises(ShapeError):
            jitted(np.ones(3))
    assert len(calls) == 2                     # a failed trace is not cached
    assert jitted(np.ones(4)).shape == (4,)    # and the function still works
