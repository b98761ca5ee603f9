"""np.median, np.percentile and np.quantile (one ``quantile`` op per q, compiler/ir/ops/order.py):
numpy's values to the bit and numpy's dtypes (a weak scalar q keeps float32, a sequence of q is
float64), NaN, several axes and keepdims on every path; the errors; no gradient rule."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir.gradients import GradientError
from flowjit.errors import OpTypeError, ShapeError, TracerConversionError
from helpers import assert_same_result
from test_array_ops import PATHS, line_of

RNG = np.random.default_rng(15)
X = RNG.normal(size=(5, 6))
I8 = RNG.integers(-9, 9, (5, 6)).astype(np.int8)
F32 = RNG.normal(size=(4, 7)).astype(np.float32)
F16 = RNG.normal(size=(4, 7)).astype(np.float16)


def test_order_statistics_match_numpy_exactly():
    def f(x, b, y, h):
        return (np.median(x), np.median(x, axis=0), np.median(x, axis=(0, 1), keepdims=True),
                np.percentile(x, 30, axis=1), np.percentile(x, [5, 50, 95], axis=0),
                np.quantile(b, 0.3, method="lower", axis=1), np.median(b, axis=0), np.percentile(b, 40, axis=0),
                np.percentile(y, 70, axis=0), np.percentile(y, [10, 90], axis=1), np.quantile(y, np.float64(0.25)),
                np.quantile(x, [[0.1], [0.7]], method="nearest"), np.median(np.where(x > 1, np.nan, x), axis=0),
                np.median(h, axis=1), np.percentile(h, 80, axis=0, method="midpoint"),
                np.median(x, axis=-1) - x.mean(axis=-1))                # feeds a fused kernel
    with np.errstate(all="ignore"):
        want = f(X, I8, F32, F16)
    for path, options in PATHS.items():
        got = flowjit.jit(f, **options)(X, I8, F32, F16)
        try:
            assert_same_result(got, want, exact=True)
        except AssertionError as error:
            raise AssertionError(f"{path}: {error}") from None


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
