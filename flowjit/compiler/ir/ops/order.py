"""Order statistics: ``quantile {q, method, axes, keepdims, strong}``, numpy's np.quantile of
one q in [0, 1] with one of numpy's methods, or its np.median (method="median").

q is a Python float (weak: a float32 array's quantile is float32), or with ``strong`` a
float64 element of an array of q (np.percentile(x, [5, 95]) of float32 is float64, computed
so).  The result dtype is numpy's for that call.  A quantile runs outside kernels as one call of numpy's
own (a partition, linear in the size: numpy's is what a kernel would do), on float16 values
in float16 as numpy's; it has no gradient rule.
"""

from __future__ import annotations

import functools

import numpy as np

from flowjit.compiler.ir.ops.base import AttrKind, Op, OpKind, attr, register, required
from flowjit.compiler.ir.ops.reduction import _check_axes, reduced_shape
from flowjit.compiler.ir.types import TensorType, check_dtype
from flowjit.errors import OpTypeError, ShapeError

METHODS = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf", "hazen",
           "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher", "midpoint", "nearest")


def order_statistic(array: np.ndarray, attrs) -> np.ndarray:
    axes, keepdims = tuple(attrs["axes"]), attrs["keepdims"]
    if attrs["method"] == "median":
        return np.asarray(np.median(array, axis=axes, keepdims=keepdims))
    q = np.float64(attrs["q"]) if attrs["strong"] else float(attrs["q"])
    return np.asarray(np.quantile(array, q, axis=axes, method=attrs["method"], keepdims=keepdims))


@functools.lru_cache(maxsize=None)
def _dtype(dtype: np.dtype, method: str, strong: bool) -> np.dtype:
    try:
        sample = order_statistic(np.zeros((2,), dtype), {"axes": (0,), "keepdims": False, "q": 0.5, "method": method,
                                                         "strong": strong})
    except TypeError as error:
        raise OpTypeError(f"not defined for dtype {dtype}: {error}") from None
    return check_dtype(sample.dtype, "result")


def _quantile_rule(types, attrs):
    (source,) = types
    axes = _check_axes(tuple(attrs["axes"]), source.rank)
    if attrs["method"] not in METHODS + ("median",):
        raise OpTypeError(f"quantile method {attrs['method']!r} is not one of numpy's: {', '.join(METHODS)}")
    if not 0.0 <= attrs["q"] <= 1.0:
        raise ShapeError(f"quantile q={attrs['q']} is outside [0, 1]")
    if any(source.shape[axis] == 0 for axis in axes):
        raise ShapeError(f"quantile of {source} over an empty axis")
    return [TensorType(reduced_shape(source.shape, axes, attrs["keepdims"]), _dtype(source.dtype, attrs["method"], attrs["strong"]))]


def _compiled_quantile(node):
    attrs, dtype = dict(node.attrs), node.output.dtype

    def quantile_(array):
        if dtype == np.float16:           # held in float32: computed in float16, as numpy's
            return order_statistic(array.astype(np.float16), attrs).astype(np.float32)
        return order_statistic(array, attrs)
    return quantile_


quantile = register(Op("quantile", OpKind.LIBRARY, 1, _quantile_rule,
                       lambda arrays, attrs: [order_statistic(arrays[0], attrs)],
                       attrs={"q": required(AttrKind.FLOAT), "method": attr(AttrKind.STR, "linear"),
                              "axes": required(AttrKind.INTS), "keepdims": attr(AttrKind.BOOL, False),
                              "strong": attr(AttrKind.BOOL, False)},
                       doc="numpy.quantile of one q over axes (method='median': numpy.median)",
                       extensions={"compiled": _compiled_quantile}))
