"""np.median, np.percentile, np.quantile (and np.nanmedian's absence): one ``quantile`` op per
q (compiler/ir/ops/order.py), stacked in front for a sequence of q as numpy does; np.sort and
np.argsort (and ``x.argsort()``): one ``sort`` or ``argsort`` op."""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.ops.order import METHODS as QUANTILE_METHODS, order_statistic
from flowjit.errors import (OpTypeError, ShapeError, TracerConversionError, UnsupportedAttributeError,
                            UnsupportedFunctionError, user_location)
from flowjit.frontend import numpy_api
from flowjit.frontend.tracer import Tracer


def _quantiles(what: str, a, q, axis, method: str, keepdims: bool, scale: float):
    trace = numpy_api._trace_of(a)
    x = numpy_api._as_tracer(trace, a)
    if isinstance(q, Tracer):
        raise TracerConversionError(f"{what}: q must be known while tracing (numbers), not a traced "
                                    f"{q._value.type} value", user_location())
    levels = np.asarray(q, dtype=np.float64) / scale
    if levels.size and not (np.all(levels >= 0) and np.all(levels <= 1)):
        raise ShapeError(f"{what}: q {q!r} must be in the range [0, {scale:g}]", user_location())
    if method not in QUANTILE_METHODS + ("median",):
        raise ShapeError(f"{what}: method {method!r} is not one of numpy's: {', '.join(QUANTILE_METHODS)}",
                         user_location())
    axes = numpy_api._axes(axis, x.ndim, what)
    if any(x.shape[a] == 0 for a in axes):
        raise UnsupportedFunctionError(f"{what} of {x._value.type} over an empty axis (numpy's NaN with a "
                                       f"warning) is not supported", user_location())
    try:
        order_statistic(np.zeros((2,), x.dtype), {"axes": (0,), "keepdims": False, "method": method, "q": 0.5,
                                                  "strong": False})
    except TypeError as error:
        raise OpTypeError(f"{what}({x._value.type}): {error}", user_location()) from None
    strong = levels.ndim > 0 or isinstance(q, (np.ndarray, np.generic))    # numpy's float64 q, not a weak one
    if not levels.size:
        raise UnsupportedFunctionError(f"{what}: an empty sequence of q is not supported", user_location())
    results = [trace.emit1(ops.quantile, [x], {"q": float(level), "method": method, "axes": axes,
                                               "keepdims": bool(keepdims), "strong": strong}, what=what)
               for level in levels.ravel()]
    if levels.ndim == 0:
        return results[0]
    shape = levels.shape + results[0].shape
    return numpy_api.reshape(numpy_api.stack(results), shape)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    numpy_api._reject_kwargs("np.median", {"out": out})
    return _quantiles("np.median", a, 0.5, axis, "median", keepdims, 1.0)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               weights=None, interpolation=None):
    numpy_api._reject_kwargs("np.percentile", {"out": out, "weights": weights, "interpolation": interpolation})
    return _quantiles("np.percentile", a, q, axis, method, keepdims, 100.0)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             weights=None, interpolation=None):
    numpy_api._reject_kwargs("np.quantile", {"out": out, "weights": weights, "interpolation": interpolation})
    return _quantiles("np.quantile", a, q, axis, method, keepdims, 1.0)


def _sort(what: str, op, a, axis, kind, order, stable):
    """np.sort / np.argsort: one op along ``axis`` (None: of the flattened array, as numpy)."""
    numpy_api._reject_kwargs(what, {"order": order})
    (x,) = numpy_api._as_tracers(a)
    if axis is None:
        x, axis = numpy_api.ravel(x), 0
    if x.ndim == 0:
        raise ShapeError(f"{what} of a 0-d array: numpy's axis -1 is out of bounds (pass axis=None)",
                         user_location())
    (axis,) = numpy_api._axes(axis, x.ndim, what)
    if kind is not None and stable is not None:
        raise OpTypeError(f"{what}: kind and stable cannot both be given (numpy refuses it too)", user_location())
    return x._trace.emit1(op, [x], {"axis": axis, "kind": kind or "", "stable": bool(stable)}, what=what)


def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    return _sort("np.sort", ops.sort, a, axis, kind, order, stable)


def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    return _sort("np.argsort", ops.argsort, a, axis, kind, order, stable)


def sort_method(self, axis=-1, kind=None, order=None, *, stable=None):
    """``x.sort()`` sorts x in place, which a traced value cannot do."""
    raise UnsupportedAttributeError("x.sort() sorts in place, and traced arrays are immutable: use "
                                    "x = np.sort(x, axis)", user_location())


def searchsorted(a, v, side="left", sorter=None):
    numpy_api._reject_kwargs("np.searchsorted", {"sorter": sorter})
    inputs = numpy_api._as_tracers(a, v)
    return inputs[0]._trace.emit1(ops.searchsorted, inputs, {"side": side}, what="np.searchsorted")


def interp(x, xp, fp, left=None, right=None, period=None):
    numpy_api._reject_kwargs("np.interp", {"period": period})
    inputs = numpy_api._as_tracers(x, xp, fp)
    attrs = {}
    for name, bound in (("left", left), ("right", right)):
        if bound is not None:
            if isinstance(bound, Tracer) or not isinstance(bound, (int, float, np.integer, np.floating)):
                raise TracerConversionError(f"np.interp: {name} must be a real number known while tracing, got "
                                            f"{bound!r}", user_location())
            attrs.update({name: float(bound), f"has_{name}": True})
    return inputs[0]._trace.emit1(ops.interp, inputs, attrs, what="np.interp")


FUNCTIONS = {np.median: median, np.percentile: percentile, np.quantile: quantile, np.sort: sort, np.argsort: argsort,
             np.searchsorted: searchsorted, np.interp: interp}
METHODS = {"argsort": argsort, "sort": sort_method, "searchsorted": searchsorted}
