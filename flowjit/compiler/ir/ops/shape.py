"""Ops that move data without arithmetic: reshape, transpose, broadcast, slice, concat."""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.ops.base import (AttrKind, Op, OpKind, attr, normalize_axis, register,
                                          required)
from flowjit.compiler.ir.types import TensorType
from flowjit.errors import OpTypeError, ShapeError


def _reshape_rule(types, attrs):
    (source,) = types
    shape = attrs["shape"]
    if any(dim < 0 for dim in shape):
        raise ShapeError(f"reshape target {list(shape)} must be fully known (no -1 in the IR)")
    if int(np.prod(shape, dtype=np.int64)) != source.size:
        raise ShapeError(f"cannot reshape {source} ({source.size} elements) to {list(shape)}")
    return [source.with_shape(shape)]


reshape = register(Op("reshape", OpKind.SHAPE, 1, _reshape_rule,
                      lambda arrays, attrs: [arrays[0].reshape(attrs["shape"])],
                      attrs={"shape": required(AttrKind.INTS)}, doc="numpy.reshape"))


def _transpose_rule(types, attrs):
    (source,) = types
    perm = attrs["perm"]
    if sorted(perm) != list(range(source.rank)):
        raise ShapeError(f"perm {list(perm)} is not a permutation of the axes of {source}")
    return [source.with_shape(tuple(source.shape[axis] for axis in perm))]


transpose = register(Op("transpose", OpKind.SHAPE, 1, _transpose_rule,
                        lambda arrays, attrs: [np.transpose(arrays[0], attrs["perm"])],
                        attrs={"perm": required(AttrKind.INTS)}, doc="numpy.transpose"))


def _broadcast_rule(types, attrs):
    (source,) = types
    shape = attrs["shape"]
    try:
        result = np.broadcast_shapes(source.shape, shape)
    except ValueError:
        result = None
    if result != tuple(shape):
        raise ShapeError(f"cannot broadcast {source} to shape {list(shape)}")
    return [source.with_shape(shape)]


broadcast_to = register(Op("broadcast_to", OpKind.SHAPE, 1, _broadcast_rule,
                           lambda arrays, attrs: [np.broadcast_to(arrays[0], attrs["shape"])],
                           attrs={"shape": required(AttrKind.INTS)}, doc="numpy.broadcast_to"))


def slice_length(start: int, stop: int, step: int) -> int:
    return len(range(start, stop, step))


def _slice_rule(types, attrs):
    (source,) = types
    starts, stops, steps = attrs["starts"], attrs["stops"], attrs["steps"]
    if not len(starts) == len(stops) == len(steps) == source.rank:
        raise ShapeError(f"slice of {source} needs {source.rank} starts, stops and steps")
    shape = []
    for dim, start, stop, step in zip(source.shape, starts, stops, steps):
        if step == 0:
            raise ShapeError("slice step cannot be zero")
        if not (0 <= start <= dim and -1 <= stop <= dim):
            raise ShapeError(f"slice {start}:{stop}:{step} is outside a dimension of size {dim}")
        shape.append(slice_length(start, stop, step))
    return [source.with_shape(shape)]


def python_slices(attrs) -> tuple[slice, ...]:
    """The attrs as Python slices (a stop of -1 with a negative step runs past index 0)."""
    return tuple(slice(start, None if stop < 0 else stop, step)
                 for start, stop, step in zip(attrs["starts"], attrs["stops"], attrs["steps"]))


slice_ = register(Op("slice", OpKind.SHAPE, 1, _slice_rule,
                    lambda arrays, attrs: [arrays[0][python_slices(attrs)]],
                    attrs={"starts": required(AttrKind.INTS), "stops": required(AttrKind.INTS),
                           "steps": required(AttrKind.INTS)},
                    doc="basic slicing x[start:stop:step, ...] with normalized bounds"))


def _concat_rule(types, attrs):
    first = types[0]
    axis = attrs["axis"]
    normalize_axis(axis, first.rank)
    if axis < 0:
        raise ShapeError(f"axis {axis} must be non-negative")
    for other in types[1:]:
        if other.rank != first.rank or any(a != b for i, (a, b) in enumerate(zip(first.shape, other.shape))
                                           if i != axis):
            shapes = ", ".join(str(t) for t in types)
            raise ShapeError(f"cannot concatenate {shapes} along axis {axis}")
    try:
        dtype = np.result_type(*(t.dtype for t in types))
    except TypeError as error:
        raise OpTypeError(str(error)) from None
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return [TensorType(shape, dtype)]


concat = register(Op("concat", OpKind.SHAPE, None, _concat_rule,
                     lambda arrays, attrs: [np.concatenate(arrays, axis=attrs["axis"])],
                     attrs={"axis": attr(AttrKind.INT, 0)}, doc="numpy.concatenate"))
