"""np.clip and np.round (and ndarray.clip/round) with numpy's exact rules: bounds that equal x
keep x, Python int bounds past the dtype's range, numpy's power_of_ten for decimals."""

from __future__ import annotations

import operator

import numpy as np

from flowjit.errors import OpTypeError, ScalarOverflowError, user_location
from flowjit.frontend import numpy_api
from flowjit.frontend.tracer import Tracer


def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kwargs):
    numpy_api._reject_kwargs("np.clip", {"out": out, **kwargs})
    low = a_min if a_min is not None else min
    high = a_max if a_max is not None else max
    dtype = a.dtype if isinstance(a, Tracer) else np.asarray(a).dtype
    if dtype.kind in "iu":              # numpy: a Python int bound beyond the dtype's range clips nothing
        if type(low) is int and low <= np.iinfo(dtype).min:
            low = None
        if type(high) is int and high >= np.iinfo(dtype).max:
            high = None
        for bound in (low, high):       # ... and one beyond the other end is numpy's OverflowError
            if type(bound) is int and not np.iinfo(dtype).min <= bound <= np.iinfo(dtype).max:
                message = (f"Python integer {bound} out of bounds for {dtype}" if -2 ** 63 <= bound < 2 ** 64
                           else "Python int too large to convert to C long")
                raise ScalarOverflowError(f"np.clip: {message}", user_location())
    result = a
    if low is not None:
        result = _clip_bound(result, low, np.greater_equal)
    if high is not None:
        result = _clip_bound(result, high, np.less_equal)
    return result


def _clip_bound(x, bound, inside):
    """numpy's clip keeps x when it equals the bound (clip(-0.0, 0.0, 1) is -0.0, where
    np.maximum gives 0.0) and returns NaN for a NaN x or bound."""
    keep = inside(x, bound)
    if np.dtype(x.dtype).kind == "f":
        keep = np.logical_or(keep, np.isnan(x))
    return np.where(keep, x, bound)


def _power_of_ten(n: int) -> float:
    """numpy's power_of_ten (multiarray/calculation.c): exact to 1e22, then repeated * 10."""
    if n < 9:
        return float(10 ** n)
    value = 1e9
    for _ in range(n - 9):
        value *= 10.0
        if value == float("inf"):
            break
    return value


def round_(a, decimals=0, out=None):
    """numpy's PyArray_Round: integers keep their dtype (rounded through float64 when
    decimals < 0); floats compute rint(a * 10**d) / 10**d in their own dtype."""
    numpy_api._reject_kwargs("np.round", {"out": out})
    trace = numpy_api._trace_of(a)
    a = numpy_api._as_tracer(trace, a)
    decimals = operator.index(decimals)
    if a.dtype.kind in "iu":
        if decimals >= 0:
            return a._copy()                   # (a new array, as numpy's)
        scale = _power_of_ten(-decimals)
        return numpy_api.astype(np.multiply(np.rint(np.true_divide(a, scale)), scale), a.dtype)
    if decimals == 0:
        return np.rint(a)
    if a.dtype.kind == "b":
        raise OpTypeError(f"np.round({a._value.type}, decimals={decimals}): numpy cannot round a bool "
                          f"array to decimals other than 0 (its float64 result does not cast back to "
                          f"bool); use a.astype(np.float64)", user_location())
    if decimals > 0:
        scale = _power_of_ten(decimals)
        return np.true_divide(np.rint(np.multiply(a, scale)), scale)
    scale = _power_of_ten(-decimals)
    return np.multiply(np.rint(np.true_divide(a, scale)), scale)


FUNCTIONS = {np.clip: clip, np.round: round_, np.around: round_}
METHODS = {"clip": clip, "round": round_}
