"""np.median, np.percentile and np.quantile (one ``quantile`` op per q, compiler/ir/ops/order.py):
numpy's values to the bit and numpy's dtypes (a weak scalar q keeps float32, a sequence of q is
float64), NaN, several axes and keepdims on every path; the errors; no gradient rule.  np.sort and
np.argsort (``sort`` and ``argsort`` ops): numpy's results to the bit, ties' order included, and
sort's gradient."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir.gradients import GradientError
from flowjit.errors import OpTypeError, ShapeError, TracerConversionError, UnsupportedAttributeError
from helpers import assert_same_result
from test_array_ops import PATHS, line_of

RNG = np.random.default_rng(15)
X = RNG.normal(size=(5, 6))
I8 = RNG.integers(-9, 9, (5, 6)).astype(np.int8)
F32 = RNG.normal(size=(4, 7)).astype(np.float32)
F16 = RNG.normal(size=(4, 7)).astype(np.float16)


def exactly_numpys(function, *args) -> None:
    """Every path gives numpy's result to the bit."""
    with np.errstate(all="ignore"):
        want = function(*args)
    for path, options in PATHS.items():
        got = flowjit.jit(function, **options)(*args)
        try:
            assert_same_result(got, want, exact=True)
        except AssertionError as error:
            raise AssertionError(f"{path}: {error}") from None


def test_order_statistics_match_numpy_exactly():
    def f(x, b, y, h):
        return (np.median(x), np.median(x, axis=0), np.median(x, axis=(0, 1), keepdims=True),
                np.percentile(x, 30, axis=1), np.percentile(x, [5, 50, 95], axis=0),
                np.quantile(b, 0.3, method="lower", axis=1), np.median(b, axis=0), np.percentile(b, 40, axis=0),
                np.percentile(y, 70, axis=0), np.percentile(y, [10, 90], axis=1), np.quantile(y, np.float64(0.25)),
                np.quantile(x, [[0.1], [0.7]], method="nearest"), np.median(np.where(x > 1, np.nan, x), axis=0),
                np.median(h, axis=1), np.percentile(h, 80, axis=0, method="midpoint"),
                np.median(x, axis=-1) - x.mean(axis=-1))                # feeds a fused kernel
    exactly_numpys(f, X, I8, F32, F16)


def test_order_statistic_errors():
    def out_of_range(x):
        return np.percentile(x, 120)  # range
    with pytest.raises(ShapeError, match=r"np\.percentile: q 120 must be in the range \[0, 100\]") as info:
        flowjit.jit(out_of_range)(X)
    assert info.value.location.line == line_of(out_of_range, "range")

    def method(x):
        return np.quantile(x, 0.5, method="cubic")
    with pytest.raises(ShapeError, match=r"np\.quantile: method 'cubic' is not one of numpy's"):
        flowjit.jit(method)(X)

    def traced_q(x):
        return np.quantile(x, x[0, 0])
    with pytest.raises(TracerConversionError, match=r"np\.quantile: q must be known while tracing"):
        flowjit.jit(traced_q)(X)

    def boolean(x):
        return np.percentile(x > 0, 50)
    with pytest.raises(OpTypeError, match=r"np\.percentile\(bool\[5,6\]\)"):
        flowjit.jit(boolean)(X)


def test_order_statistics_have_no_gradient_rule():
    def loss(x):
        return np.median(x, axis=0).sum()  # median
    with pytest.raises(GradientError, match=r"op 'quantile' \(%\w+\) has no gradient rule"):
        flowjit.jit(flowjit.grad(loss))(X)


def test_sorts_match_numpy_exactly():
    """Every axis (and None: flattened), numpy's kinds and stable=True, NaN (last), ties (a
    stable argsort keeps their order; numpy's default one too, as flowjit calls numpy's own),
    float16 (sorted as float16), integers, booleans and complex values; the sorted values feed
    fused kernels (the smallest three of exp(x) summed, the top two by take_along_axis)."""
    ties = np.round(X * 2) / 2
    ties[1, 2] = np.nan
    z = X + 1j * ties[::-1]

    def f(x, b, y, h, z):
        return (np.sort(x), np.sort(x, axis=0), np.sort(x, axis=None), np.argsort(x), np.argsort(x, axis=0, stable=True),
                x.argsort(axis=1, kind="mergesort"), np.sort(b, axis=0, kind="heapsort"), np.argsort(b),
                np.argsort(b > 0, stable=True), np.sort(y), np.argsort(h, axis=1), np.sort(h, axis=0),
                np.sort(z), np.argsort(z, axis=0), np.sort(np.exp(x) * 2, axis=1)[:, :3] + 1,
                np.take_along_axis(x, np.argsort(-x, axis=1, stable=True)[:, :2], axis=1) * 2)
    exactly_numpys(f, ties, I8, F32, np.round(F16), z)


def test_sort_errors():
    def in_place(x):
        x.sort()  # in place
        return x
    with pytest.raises(UnsupportedAttributeError, match=r"x\.sort\(\) sorts in place.*np\.sort\(x, axis\)") as info:
        flowjit.jit(in_place)(X)
    assert info.value.location.line == line_of(in_place, "in place")
    with pytest.raises(ShapeError, match=r"np\.sort: .*axis"):
        flowjit.jit(lambda x: np.sort(x, axis=2))(X)
    with pytest.raises(ShapeError, match=r"np\.argsort of a 0-d array"):
        flowjit.jit(lambda x: np.argsort(x.sum()))(X)
    with pytest.raises(OpTypeError, match=r"np\.sort: kind and stable cannot both be given"):
        flowjit.jit(lambda x: np.sort(x, kind="stable", stable=True))(X)


def test_sort_gradients_match_finite_differences():
    """The cotangent of each sorted value goes back to where it came from (every axis, None,
    every path); through take_along_axis of an argsort the same; and twice (the gradient of
    the permutation is its inverse's)."""
    from test_gradients import check

    def loss(x):
        s = np.sort(x * x, axis=1)
        return (s[:, -2:] * np.arange(2.0)).sum() + np.sort(x, axis=0)[0].sum() + np.sort(x, axis=None)[-3:].sum()
    check(loss, X)
    check(lambda x: (np.take_along_axis(x, np.argsort(x, axis=0), axis=0)[:2] ** 2).sum(), X, paths=("fused",))

    def inner(y):
        return (np.sort(y, axis=1) ** 3 * np.arange(6.0)).sum()
    check(lambda x: (flowjit.grad(inner)(x) ** 2).sum(), X, paths=("fused", "interpreter"))


def test_searchsorted_and_interp_match_numpy_exactly():
    """Both sides, the method, float16 searched as float16, NaN (searched last), interp's
    bounds, float32 and complex values, feeding fused kernels."""
    xp = np.sort(RNG.uniform(0, 10, 9))
    fp = RNG.normal(size=9)
    x = RNG.uniform(-1, 11, (3, 5))
    x[0, 0] = np.nan

    def f(x, xp, fp):
        return (np.searchsorted(xp, x), np.searchsorted(xp, x, side="right"), xp.searchsorted(x[0]),
                np.interp(x, xp, fp), np.interp(x, xp, fp, left=-1, right=2.5) * 2 + 1,
                np.interp(x.astype(np.float32), xp, fp + 1j), np.searchsorted(xp.astype(np.float16), x.astype(np.float16)),
                np.interp(x, xp.astype(np.float32), fp.astype(np.float32)))
    exactly_numpys(f, x, xp, fp)
    with pytest.raises(ShapeError, match=r"searchsorted: the sorted array must be 1-d"):
        flowjit.jit(np.searchsorted)(X, X)
    with pytest.raises(ShapeError, match=r"interp: xp and fp must be 1-d arrays of one non-zero length"):
        flowjit.jit(lambda x: np.interp(x, x[0], x[1, :3]))(X)
    with pytest.raises(TracerConversionError, match=r"np\.interp: left must be a real number known while tracing"):
        flowjit.jit(lambda x: np.interp(x, x[0], x[1], left=x[0, 0]))(X)
