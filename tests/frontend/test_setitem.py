"""``x[key] = v`` inside a jitted function: numpy's write, traced (frontend/setitem.py), checked
against numpy on hand-written programs and on random regions, values and dtypes; the writes
numpy would make where flowjit cannot follow are refused with the user's line."""

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flowjit
from flowjit.errors import FlowjitError


def heat(u, alpha=0.2, steps=3):
    for _ in range(steps):
        new = u.copy()
        new[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                                                   - 4 * u[1:-1, 1:-1])
        u = new
    return u


def clipped_and_patched(x):
    y = x * 2
    y[y < 0] = 0                     # a mask and a scalar: np.where
    y[0] = 5                         # a row
    y[:, -1] = np.arange(x.shape[0])  # a column from a vector
    y[1, 1:3] = 7.9
    return y


def rows_and_dtypes(x):
    z = np.zeros_like(x, dtype=np.int32)
    z[1:] = x[1:] * 3                # float into int32: numpy's assignment truncates
    w = x.astype(np.float32)
    w[:, :2] = 1e40                  # float64 into float32: inf
    b = x > 0
    b[0] = True
    return z, w, b


PROGRAMS = {"heat": (heat, lambda rng: (rng.random((6, 7)),)),
            "clipped_and_patched": (clipped_and_patched, lambda rng: (rng.standard_normal((4, 5)),)),
            "rows_and_dtypes": (rows_and_dtypes, lambda rng: (rng.standard_normal((4, 5)) * 3,))}


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_that_assign_match_numpy(name, fuse):
    function, make = PROGRAMS[name]
    args = make(np.random.default_rng(0))
    with np.errstate(all="ignore"):
        expected = function(*args)
        got = flowjit.jit(function, fuse=fuse)(*args)
    for a, b in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_every_name_bound_to_the_array_sees_the_write():
    def f(x):
        y = x + 0
        alias = y
        y[1:3] = 9
        return alias
    np.testing.assert_array_equal(flowjit.jit(f)(np.zeros(5)), [0, 9, 9, 0, 0])


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data())
def test_random_regions_and_values_match_numpy(shape, data):
    """Any region of integers and unit-step slices (negative bounds, empty ones, None and ...
    too), any value that broadcasts into it, any of three dtypes."""
    dtype = data.draw(st.sampled_from([np.float64, np.float32, np.int32]))
    key = []
    for size in shape:
        if data.draw(st.booleans()):
            key.append(data.draw(st.integers(-size, size - 1)))
        else:
            start = data.draw(st.one_of(st.none(), st.integers(-size - 1, size + 1)))
            stop = data.draw(st.one_of(st.none(), st.integers(-size - 1, size + 1)))
            key.append(slice(start, stop))
    if data.draw(st.booleans()) and key:
        key.insert(data.draw(st.integers(0, len(key))), None)
    key = tuple(key)
    region = np.zeros(shape)[key].shape
    value_shape = tuple(data.draw(st.sampled_from([1, n])) for n in region)[data.draw(st.integers(0, len(region))):]
    x = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
    value = (np.arange(int(np.prod(value_shape)), dtype=np.float64).reshape(value_shape) + 0.5) * -3

    def f(x, value):
        y = x.copy()
        y[key] = value
        return y * 1
    try:
        expected = f(x, value)
    except ValueError:                    # (numpy refuses it too: an array into one element)
        return
    got = flowjit.jit(f)(x, value)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("program, message", [
    (lambda x: x.__setitem__(0, 1), "into the caller's array (argument 'x')"),
    (lambda x: _write_after_a_view(x), "into an array that views of it"),
    (lambda x: _write_through_a_view(x), "through a view (slice)"),
    (lambda x: _strided(x), "a strided region (a step other than 1)"),
    (lambda x: _scatter(x), "integer-array indices (a scatter)"),
    (lambda x: _masked_array(x), "x[mask] = values with an array of"),
    (lambda x: _too_big(x), "could not broadcast the value's shape (4,) into the indexed shape (2,)"),
], ids=["argument", "view-taken", "through-view", "strided", "scatter", "mask-array", "broadcast"])
def test_writes_flowjit_cannot_follow_are_refused(program, message):
    with pytest.raises(FlowjitError, match=re.escape(message)) as info:
        flowjit.jit(program)(np.ones((4, 3)))
    assert info.value.location is not None and info.value.location.file == __file__


def _write_after_a_view(x):
    y = x + 1
    view = y[1:]
    y[0] = 3
    return view


def _write_through_a_view(x):
    y = x + 1
    y[1:][0] = 3
    return y


def _strided(x):
    y = x + 1
    y[::2] = 0
    return y


def _scatter(x):
    y = x + 1
    y[np.array([0, 2])] = 0
    return y


def _masked_array(x):
    y = x + 1
    y[y > 1] = np.arange(12.0)
    return y


def _too_big(x):
    y = x + 1
    y[0, 1:] = np.arange(4.0)
    return y


def test_a_traced_value_into_a_numpy_array_says_what_to_write():
    def f(x):
        z = np.zeros(3)
        z[:2] = x[1:]          # (one element, z[0] = x[1], goes through float(), whose error numpy replaces)
        return z
    with pytest.raises(FlowjitError, match=re.escape("make z a traced array first")) as info:
        flowjit.jit(f)(np.ones(3))
    assert info.value.location.file == __file__


def test_writes_reach_no_array_numpy_would_have_copied():
    """+x, np.concatenate([x]), np.round of integers and x.flatten() are new arrays in numpy:
    writing into them leaves x as it was."""
    def f(x):
        b = x * 1
        for make in (lambda b: +b, lambda b: np.concatenate([b]), lambda b: np.round(b), lambda b: b.flatten()):
            c = make(b)
            c[0] = 100
        return b
    x = np.arange(6)
    np.testing.assert_array_equal(flowjit.jit(f)(x), f(x))


def test_values_are_cast_to_the_dtype_before_anything_else():
    """x[mask] = 0.5 leaves the other int64 elements exact (np.where would promote them to
    float64 first); a Python int that does not fit is numpy's OverflowError."""
    def f(x):
        y = x + 0
        y[y > 3] = 0.5
        return y
    x = np.array([2 ** 53 + 1, 5, 1], np.int64)
    np.testing.assert_array_equal(flowjit.jit(f)(x), f(x))

    def overflow(x):
        y = x.astype(np.uint8)
        y[0] = -1
        return y
    with pytest.raises(OverflowError, match="Python integer -1 out of bounds for uint8"):
        flowjit.jit(overflow)(np.ones(3))


def test_a_boolean_scalar_index_is_refused():
    def f(x):
        y = x + 1
        y[False] = 5
        return y
    with pytest.raises(FlowjitError, match="a boolean scalar index"):
        flowjit.jit(f)(np.ones(3))
