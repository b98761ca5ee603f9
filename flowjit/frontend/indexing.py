"""Basic indexing (integers, slices, None, Ellipsis) read into slice bounds and a result
shape, with numpy's errors; numpy_api.getitem emits the slice and the reshape."""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.ops.shape import slice_length
from flowjit.errors import ShapeError, UnsupportedFunctionError, user_location
from flowjit.frontend.tracer import Tracer


def basic_index(shape: tuple[int, ...], what, key) -> tuple[list, list, list, list]:
    """``(starts, stops, steps, final_shape)`` of ``value[key]`` for a value of ``shape``
    (``what`` names it in errors).  No arrays in the key: their shapes depend on data."""
    rank = len(shape)
    key = key if isinstance(key, tuple) else (key,)
    for item in key:
        if isinstance(item, Tracer) or isinstance(item, (list, np.ndarray)):
            raise UnsupportedFunctionError(
                "indexing with arrays (advanced indexing) is not supported; use basic indexing "
                "(integers, slices, None, ...) or np.where", user_location())
        if isinstance(item, (bool, np.bool_)):
            raise UnsupportedFunctionError(
                f"index {item!r}: a boolean scalar index (numpy adds an axis and selects all or nothing) is not "
                f"supported; use x[None] or an empty slice", user_location())
        if not (item is None or item is Ellipsis or isinstance(item, (int, np.integer, slice))):
            raise UnsupportedFunctionError(f"index {item!r} is not supported", user_location())
    if sum(1 for item in key if item is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')", user_location())
    consumed = sum(1 for item in key if item is not None and item is not Ellipsis)
    if consumed > rank:
        raise ShapeError(f"too many indices for {what}: {consumed} given", user_location())
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (rank - consumed) + key[at + 1:]
    else:
        key = key + (slice(None),) * (rank - consumed)
    starts, stops, steps, final_shape = [], [], [], []
    dim_index = 0
    for item in key:
        if item is None:
            final_shape.append(1)
            continue
        dim = shape[dim_index]
        if isinstance(item, slice):
            start, stop, step = item.indices(dim)
            final_shape.append(slice_length(start, stop, step))
        else:
            index = int(item)
            if not -dim <= index < dim:
                raise ShapeError(f"index {index} is out of bounds for axis {dim_index} with size {dim}",
                                 user_location())
            start, stop, step = index % dim, index % dim + 1, 1
        starts.append(start)
        stops.append(stop)
        steps.append(step)
        dim_index += 1
    return starts, stops, steps, final_shape
