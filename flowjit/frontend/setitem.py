"""``x[key] = v`` on a traced array: numpy's write into x, as the in-place operators do it
(tracer.write_in_place): this Tracer object is rebound to the updated array, so every name
bound to it sees the write, and a write numpy would make elsewhere -- into an argument (the
caller's array), through a view, into an array that views of it would see -- is refused.

The updated array is built from what the IR has:

- basic indexing (integers, slices with step 1, ``None``, ``...``): ``v`` is broadcast to the
  indexed shape and cast to x's dtype (numpy's assignment casts unsafely), and the result is x's
  pieces around the region joined with it by concatenation, axis by axis (``new[1:-1, 1:-1] =
  ...`` of a stencil: the border rows, then the border columns around the interior);
- a boolean mask over x's leading axes with a scalar (``x[x < 0] = 0``): ``np.where``.

Strided regions (``x[::2] = v``), integer-array indices (a scatter) and masks with an array of
values are refused, with what to write instead.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.ops.shape import slice_length
from flowjit.errors import ScalarOverflowError, ShapeError, UnsupportedFunctionError, user_location
from flowjit.frontend.indexing import basic_index
from flowjit.frontend.tracer import Tracer, write_in_place


def setitem(x: Tracer, key, value) -> None:
    where = f"x[...] = v on {x._value.type}"
    viewed = x._viewed                  # (the pieces cut from x below are no views the user holds)
    write_in_place(x, lambda: assigned(x, key, value, where), where,
                   "into a copy (x = x.copy() first), or build the result with np.where or np.concatenate")
    x._viewed = viewed


def assigned(x: Tracer, key, value, where: str) -> Tracer:
    """The array numpy's ``x[key] = value`` leaves in x, as a new traced array."""
    value = _in_dtype(value, x.dtype, where)
    items = key if isinstance(key, tuple) else (key,)
    mask = items[0] if len(items) == 1 else None
    if mask is not None and isinstance(mask, (Tracer, np.ndarray)) and mask.dtype == np.bool_:
        return _masked(x, mask, value, where)
    if any(isinstance(item, (Tracer, np.ndarray, list)) for item in items):
        raise UnsupportedFunctionError(
            f"{where}: assignment through integer-array indices (a scatter) is not supported; build the "
            f"result with np.where over a mask of the positions", user_location())
    starts, stops, steps, final_shape = basic_index(x.shape, x._value.type, key)
    counts = [slice_length(start, stop, step) for start, stop, step in zip(starts, stops, steps)]
    if any(step != 1 and count > 1 for step, count in zip(steps, counts)):
        raise UnsupportedFunctionError(
            f"{where}: assignment to a strided region (a step other than 1) is not supported; build the "
            f"result with np.where over a mask of the positions", user_location())
    shape = np.shape(value)
    while len(shape) > len(final_shape) and shape[0] == 1:      # (numpy drops a value's leading 1s)
        shape = shape[1:]
    if shape != np.shape(value):
        value = np.reshape(value, shape)
    try:
        region = np.broadcast_to(value, tuple(final_shape))
    except ValueError:
        raise ShapeError(f"{where}: could not broadcast the value's shape {shape} into the indexed shape "
                         f"{tuple(final_shape)}", user_location()) from None
    if 0 in counts:
        return x                                   # (an empty region: nothing is written)
    region = np.reshape(region, tuple(counts)).astype(x.dtype)
    if not isinstance(region, Tracer):              # (a value known while tracing: a constant)
        region = x._trace.constant(np.ascontiguousarray(region))
    return _joined(x, starts, counts, region, 0)


def _in_dtype(value, dtype: np.dtype, where: str):
    """The value cast to x's dtype as numpy's assignment casts it (unsafely), before anything
    combines it with x (np.where would promote x first: int64 beside a float loses digits); a
    Python int that does not fit is numpy's OverflowError."""
    if isinstance(value, Tracer):
        return value.astype(dtype) if value.dtype != dtype else value
    if isinstance(value, int) and not isinstance(value, (bool, np.generic)) and np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ScalarOverflowError(f"{where}: Python integer {value} out of bounds for {np.dtype(dtype).name}",
                                      user_location())
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(dtype)


def _joined(x, starts: list, counts: list, region, axis: int):
    """``x`` with ``region`` in place at ``starts`` (axes before ``axis`` already cut to it)."""
    if axis == len(counts):
        return region
    start, count, size = starts[axis], counts[axis], x.shape[axis]
    before = (slice(None),) * axis
    if start == 0 and count == size:
        return _joined(x, starts, counts, region, axis + 1)
    middle = _joined(x[before + (slice(start, start + count),)], starts, counts, region, axis + 1)
    pieces = ([x[before + (slice(0, start),)]] if start > 0 else []) + [middle] + (
        [x[before + (slice(start + count, size),)]] if start + count < size else [])
    return np.concatenate(pieces, axis=axis)


def _masked(x: Tracer, mask, value, where: str) -> Tracer:
    """``x[mask] = value`` for a boolean mask over x's leading axes and one value."""
    if mask.shape != x.shape[:len(mask.shape)]:
        raise ShapeError(f"{where}: the boolean index's shape {tuple(mask.shape)} does not match x's leading "
                         f"axes {tuple(x.shape[:len(mask.shape)])}", user_location())
    if np.size(value) != 1:
        raise UnsupportedFunctionError(
            f"{where}: x[mask] = values with an array of {np.size(value)} values takes them in order over the "
            f"True positions, a data-dependent layout; write np.where(mask, values_shaped_like_x, x)",
            user_location())
    value = np.reshape(value, ())
    expanded = np.reshape(mask, tuple(mask.shape) + (1,) * (len(x.shape) - len(mask.shape)))
    return np.where(expanded, value, x)                 # (value is in x's dtype: no promotion)
