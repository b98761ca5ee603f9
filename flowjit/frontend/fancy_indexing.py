"""Indexing with integer arrays (``logp[np.arange(n), labels]``, ``x[:, idx]``), np.take and
np.take_along_axis: all as one ``gather`` of leading axes (compiler/ir/ops/gather.py).

numpy's rules: the integer arrays (and the Python ints beside them) broadcast together;
slices apply first, as basic indexing; when the indexed axes are adjacent their result axes
stand where they stood, otherwise in front.  The indexed axes are moved to the front, one
gather reads them, and a transpose puts the result axes where numpy puts them.  Boolean
masks have a data-dependent shape and are refused.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.errors import OpTypeError, ShapeError, UnsupportedFunctionError, user_location
from flowjit.frontend import numpy_api
from flowjit.frontend.tracer import Tracer


def is_index_array(item) -> bool:
    return isinstance(item, (Tracer, np.ndarray, list))


def _index_array(trace, item, what: str) -> Tracer:
    index = item if isinstance(item, Tracer) else numpy_api._as_tracer(trace, np.asarray(item))
    if index.dtype == np.bool_:
        raise UnsupportedFunctionError(f"{what}: indexing with a boolean array (a mask) has a data-dependent "
                                       f"shape; use np.where(mask, x, y) or a mask product", user_location())
    if index.dtype.kind not in "iu":
        raise OpTypeError(f"{what}: arrays used as indices must be of integer type, got {index._value.type}",
                          user_location())
    return index


def gather_axes(x: Tracer, indexed: dict[int, Tracer], in_place: bool) -> Tracer:
    """``x`` indexed on the axes of ``indexed`` (axis -> index array), every other axis whole:
    result axes at the first indexed axis when ``in_place`` (numpy's adjacent case), else in front."""
    axes = sorted(indexed)
    rest = [axis for axis in range(x.ndim) if axis not in indexed]
    moved = numpy_api.transpose(x, axes + rest)
    result = x._trace.emit1(ops.gather, [moved, *(indexed[axis] for axis in axes)], what="indexing")
    if not in_place or axes[0] == 0:
        return result
    count = result.ndim - len(rest)           # the broadcast index's rank
    first = axes[0]
    perm = list(range(count, count + first)) + list(range(count)) + list(range(count + first, result.ndim))
    return numpy_api.transpose(result, perm)


def getitem(x: Tracer, key: tuple) -> Tracer:
    """``x[key]`` for a key holding integer arrays."""
    what = f"indexing {x._value.type}"
    if any(item is None for item in key):
        raise UnsupportedFunctionError(f"{what}: np.newaxis (None) beside index arrays is not supported; "
                                       f"index first, then reshape", user_location())
    if sum(1 for item in key if item is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')", user_location())
    if any(item is Ellipsis for item in key):
        at = next(i for i, item in enumerate(key) if item is Ellipsis)
        key = key[:at] + (slice(None),) * (x.ndim - len(key) + 1) + key[at + 1:]
    if len(key) > x.ndim:
        raise ShapeError(f"too many indices for {what}: {len(key)} given", user_location())
    key = key + (slice(None),) * (x.ndim - len(key))
    # Slices first (basic indexing keeps the axis), then the arrays and ints on the sliced value.
    sliced = x[tuple(item if isinstance(item, slice) else slice(None) for item in key)]
    indexed = {axis: _index_array(x._trace, item, what) for axis, item in enumerate(key)
               if not isinstance(item, slice)}
    positions = sorted(indexed)
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    return gather_axes(sliced, indexed, in_place=adjacent)


def take(a, indices, axis=None, out=None, mode="raise"):
    """numpy.take: indices along one axis (the flattened array for axis=None); mode='wrap'
    and 'clip' bring out-of-range indices in first, 'raise' is numpy's IndexError."""
    numpy_api._reject_kwargs("np.take", {"out": out})
    trace = numpy_api._trace_of(a, indices)
    x = numpy_api._as_tracer(trace, a)
    if axis is None:
        x, axis = numpy_api.ravel(x), 0
    axis = numpy_api._axes(axis, x.ndim, "np.take")[0]
    index = _index_array(trace, indices, "np.take")
    size = x.shape[axis]
    if mode == "wrap":
        index = np.mod(index, size) if size else index
    elif mode == "clip":
        index = np.clip(index, 0, max(size - 1, 0))
    elif mode != "raise":
        raise ShapeError(f"np.take: clipmode must be one of 'clip', 'raise', or 'wrap', got {mode!r}",
                         user_location())
    return gather_axes(x, {axis: index}, in_place=True)


def take_along_axis(arr, indices, axis=-1):
    """numpy.take_along_axis: ``arr[i0, .., indices, .., ik]`` with each other axis's arange
    in its place, indices broadcast against arr's other axes."""
    trace = numpy_api._trace_of(arr, indices)
    x = numpy_api._as_tracer(trace, arr)
    index = _index_array(trace, indices, "np.take_along_axis")
    if axis is None:
        x, axis = numpy_api.ravel(x), 0
    if index.ndim != x.ndim:
        raise ShapeError(f"np.take_along_axis: `indices` and `arr` must have the same number of dimensions, "
                         f"got {index._value.type} and {x._value.type}", user_location())
    axis = numpy_api._axes(axis, x.ndim, "np.take_along_axis")[0]
    indexed = {}
    for dim in range(x.ndim):
        if dim == axis:
            indexed[dim] = index
        else:
            shape = [1] * x.ndim
            shape[dim] = x.shape[dim]
            indexed[dim] = trace.constant(np.arange(x.shape[dim], dtype=np.int64).reshape(shape))
    return gather_axes(x, indexed, in_place=True)


FUNCTIONS = {np.take: take, np.take_along_axis: take_along_axis}
METHODS = {"take": take}
