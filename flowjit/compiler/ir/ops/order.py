"""Order statistics and sorting: ``quantile {q, method, axes, keepdims, strong}``, numpy's np.quantile of
one q in [0, 1] with one of numpy's methods, or its np.median (method="median").

q is a Python float (weak: a float32 array's quantile is float32), or with ``strong`` a
float64 element of an array of q (np.percentile(x, [5, 95]) of float32 is float64, computed
so).  The result dtype is numpy's for that call.  A quantile runs outside kernels as one call of numpy's
own (a partition, linear in the size: numpy's is what a kernel would do), on float16 values
in float16 as numpy's; it has no gradient rule.

``sort {axis, kind, stable}`` and ``argsort`` (the same attributes; int64 indices) are numpy's
np.sort and np.argsort along one axis, each one call of numpy's own outside kernels (float16
sorted as float16, so argsort orders ties as numpy does).  sort's gradient sends the cotangent
back along a stable argsort's order (``unpermute``, numpy's put_along_axis; ``permute``, its
take_along_axis, is the gradient of that).

``searchsorted {side}`` and ``interp {left, right}`` are numpy's own calls too (float16 searched
as float16); neither has a gradient rule.
"""

from __future__ import annotations

import functools

import numpy as np

from flowjit.compiler.ir.ops.base import AttrKind, Op, OpKind, attr, numpy_call, register, required
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


quantile = register(Op("quantile", OpKind.LIBRARY, 1, _quantile_rule,
                       lambda arrays, attrs: [order_statistic(arrays[0], attrs)],
                       attrs={"q": required(AttrKind.FLOAT), "method": attr(AttrKind.STR, "linear"),
                              "axes": required(AttrKind.INTS), "keepdims": attr(AttrKind.BOOL, False),
                              "strong": attr(AttrKind.BOOL, False)},
                       doc="numpy.quantile of one q over axes (method='median': numpy.median)",
                       extensions={"compiled": numpy_call}))


# -- sort and argsort: numpy's own, one call each ------------------------------------------------------
KINDS = ("", "quicksort", "mergesort", "heapsort", "stable")     # "": numpy's default


def _sorted(array: np.ndarray, attrs, indices: bool) -> np.ndarray:
    """numpy's sort (or argsort) along ``axis`` with its kind (``stable``: numpy's stable=True)."""
    kind = attrs["kind"] or None
    stable = True if attrs["stable"] else None
    function = np.argsort if indices else np.sort
    return np.asarray(function(array, axis=attrs["axis"], kind=kind, stable=stable))


def _sort_rule(indices: bool):
    def rule(types, attrs):
        (source,) = types
        if source.rank == 0:
            raise ShapeError("sort of a 0-d array: numpy needs an axis")
        if not -source.rank <= attrs["axis"] < source.rank:
            raise ShapeError(f"axis {attrs['axis']} is out of bounds for {source}")
        if attrs["kind"] not in KINDS:
            raise OpTypeError(f"sort kind {attrs['kind']!r} is not one of numpy's: {', '.join(KINDS[1:])}")
        return [TensorType(source.shape, np.dtype(np.intp) if indices else source.dtype)]
    return rule


# -- a permutation along an axis, and its inverse: sort's gradient -------------------------------------
def _permute_rule(types, attrs):
    source, order = types
    if order.dtype.kind not in "iu" or order.shape != source.shape:
        raise OpTypeError(f"a permutation of {source} needs integer indices of its shape, got {order}")
    if not 0 <= attrs["axis"] < source.rank:
        raise ShapeError(f"axis {attrs['axis']} is out of bounds for {source}")
    return [TensorType(source.shape, source.dtype)]


def _permuted(array, order, axis: int, inverse: bool) -> np.ndarray:
    """``take_along_axis(array, order)``, or (``inverse``) the array it is that of: ``order`` a
    permutation of each line along ``axis``."""
    if not inverse:
        return np.take_along_axis(array, order, axis)
    result = np.empty_like(array)
    np.put_along_axis(result, order, array, axis)
    return result


def _permute_op(name: str, inverse: bool, doc: str) -> Op:
    def gradient(node, g, b):
        return b(unpermute if not inverse else permute, [g, node.inputs[1]], dict(node.attrs)), None
    return register(Op(name, OpKind.LIBRARY, 2, _permute_rule,
                       lambda arrays, attrs: [_permuted(arrays[0], arrays[1], attrs["axis"], inverse)],
                       attrs={"axis": required(AttrKind.INT)}, doc=doc, gradient=gradient,
                       extensions={"compiled": numpy_call}))


permute = _permute_op("permute", False, "take_along_axis(x, order, axis) of a permutation order (sort's gradient)")
unpermute = _permute_op("unpermute", True, "the x whose permute by order is the input (put_along_axis)")


def _sort_grad(node, g, b):
    """The cotangent goes back to where each sorted value came from: a stable argsort's order
    (ties in their first positions, as jax's sort does)."""
    axis = node.attrs["axis"] % node.inputs[0].type.rank
    order = b(argsort, [node.inputs[0]], {"axis": axis, "stable": True})
    return (b(unpermute, [g, order], {"axis": axis}),)


_SORT_ATTRS = {"axis": attr(AttrKind.INT, -1), "kind": attr(AttrKind.STR, ""), "stable": attr(AttrKind.BOOL, False)}
sort = register(Op("sort", OpKind.LIBRARY, 1, _sort_rule(False),
                   lambda arrays, attrs: [_sorted(arrays[0], attrs, False)], attrs=dict(_SORT_ATTRS), complex=True,
                   doc="numpy.sort along one axis (numpy's own: a sort is data-dependent work, not a loop to fuse)",
                   gradient=_sort_grad, extensions={"compiled": numpy_call}))
argsort = register(Op("argsort", OpKind.LIBRARY, 1, _sort_rule(True),
                      lambda arrays, attrs: [_sorted(arrays[0], attrs, True)], attrs=dict(_SORT_ATTRS), complex=True,
                      doc="numpy.argsort along one axis (numpy's own)",
                      extensions={"compiled": numpy_call}))


# -- searchsorted and interp: numpy's own binary searches ---------------------------------------------
def _search_rule(types, attrs):
    sorted_, values = types
    if sorted_.rank != 1:
        raise ShapeError(f"searchsorted: the sorted array must be 1-d, got {sorted_}")
    if attrs["side"] not in ("left", "right"):
        raise OpTypeError(f"searchsorted: side must be 'left' or 'right', got {attrs['side']!r}")
    return [TensorType(values.shape, np.dtype(np.intp))]


def _interp_rule(types, attrs):
    x, xp, fp = types
    if xp.rank != 1 or fp.rank != 1 or xp.shape != fp.shape or not xp.shape[0]:
        raise ShapeError(f"interp: xp and fp must be 1-d arrays of one non-zero length, got {xp} and {fp}")
    if "c" in (x.dtype.kind, xp.dtype.kind):
        raise OpTypeError("interp: x and xp must be real")
    return [TensorType(x.shape, np.dtype(np.complex128 if fp.dtype.kind == "c" else np.float64))]


def _bound(attrs, name):
    return attrs[name] if attrs[f"has_{name}"] else None


def _searched(arrays, attrs):
    return [np.asarray(np.searchsorted(arrays[0], arrays[1], side=attrs["side"]))]


def _interpolated(arrays, attrs):
    return [np.asarray(np.interp(*arrays, left=_bound(attrs, "left"), right=_bound(attrs, "right")))]


searchsorted = register(Op("searchsorted", OpKind.LIBRARY, 2, _search_rule, _searched,
                           attrs={"side": attr(AttrKind.STR, "left")},
                           doc="numpy.searchsorted of values in a sorted 1-d array (numpy's own)",
                           extensions={"compiled": numpy_call}))
interp = register(Op("interp", OpKind.LIBRARY, 3, _interp_rule, _interpolated,
                     attrs={"left": attr(AttrKind.FLOAT, 0.0), "has_left": attr(AttrKind.BOOL, False),
                            "right": attr(AttrKind.FLOAT, 0.0), "has_right": attr(AttrKind.BOOL, False)},
                     doc="numpy.interp: piecewise-linear interpolation at x of (xp, fp) (numpy's own)",
                     complex=True, extensions={"compiled": numpy_call}))
