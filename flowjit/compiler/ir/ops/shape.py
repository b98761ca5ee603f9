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
                      attrs={"shape": required(AttrKind.INTS)}, doc="numpy.reshape",
                      gradient=lambda n, g, b: (b.reshape(g, n.inputs[0].shape),), complex=True))


def _transpose_rule(types, attrs):
    (source,) = types
    perm = attrs["perm"]
    if sorted(perm) != list(range(source.rank)):
        raise ShapeError(f"perm {list(perm)} is not a permutation of the axes of {source}")
    return [source.with_shape(tuple(source.shape[axis] for axis in perm))]


transpose = register(Op("transpose", OpKind.SHAPE, 1, _transpose_rule,
                        lambda arrays, attrs: [np.transpose(arrays[0], attrs["perm"])],
                        attrs={"perm": required(AttrKind.INTS)}, doc="numpy.transpose",
                        gradient=lambda n, g, b: (b(transpose, [g], {"perm": tuple(int(axis) for axis in np.argsort(n.attrs["perm"]))}),), complex=True))


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
                           attrs={"shape": required(AttrKind.INTS)}, doc="numpy.broadcast_to",
                           gradient=lambda n, g, b: (g,), complex=True))


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


def _slice_grad(node, g, b):
    """The cotangent put back where the slice took its elements, zeros elsewhere: one axis at
    a time, a reversed step read forwards, a step k > 1 spread by interleaving k - 1 zeros."""
    source = node.inputs[0].shape
    if 0 in g.shape:
        return None
    for axis, (start, step) in enumerate(zip(node.attrs["starts"], node.attrs["steps"])):
        count, size = g.shape[axis], source[axis]
        if count == size and step == 1:
            continue
        if step < 0:
            starts, stops, steps = [0] * g.type.rank, list(g.shape), [1] * g.type.rank
            starts[axis], stops[axis], steps[axis] = count - 1, -1, -1
            g = b(slice_, [g], {"starts": starts, "stops": stops, "steps": steps})
            start, step = start + (count - 1) * step, -step
        if step > 1:
            g = _interleave_zeros(g, axis, step, b)
        span = g.shape[axis]
        pieces = [_zeros(g, axis, start, b), g, _zeros(g, axis, size - start - span, b)]
        pieces = [piece for piece in pieces if piece is not None]
        g = pieces[0] if len(pieces) == 1 else b(concat, pieces, {"axis": axis})
    return g


def _zeros(like, axis: int, length: int, b):
    if length <= 0:
        return None
    shape = list(like.shape)
    shape[axis] = length
    return b.broadcast(b.like(0, like), shape)


def _interleave_zeros(g, axis: int, step: int, b):
    """[a, b, c] -> [a, 0.., b, 0.., c] with ``step - 1`` zeros between elements along ``axis``."""
    shape = list(g.shape)
    count = shape[axis]
    spread = b.reshape(g, shape[:axis + 1] + [1] + shape[axis + 1:])
    padded = b(concat, [spread, _zeros(spread, axis + 1, step - 1, b)], {"axis": axis + 1})
    flat = b.reshape(padded, shape[:axis] + [count * step] + shape[axis + 1:])
    starts, stops = [0] * len(shape), list(flat.shape)
    stops[axis] = (count - 1) * step + 1
    return b(slice_, [flat], {"starts": starts, "stops": stops, "steps": [1] * len(shape)})


slice_ = register(Op("slice", OpKind.SHAPE, 1, _slice_rule,
                    lambda arrays, attrs: [arrays[0][python_slices(attrs)]],
                    attrs={"starts": required(AttrKind.INTS), "stops": required(AttrKind.INTS),
                           "steps": required(AttrKind.INTS)},
                    doc="basic slicing x[start:stop:step, ...] with normalized bounds",
                    gradient=lambda n, g, b: (_slice_grad(n, g, b),), complex=True))


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


def _concat_grad(node, g, b):
    axis, offset, pieces = node.attrs["axis"], 0, []
    for value in node.inputs:
        starts, stops = [0] * g.type.rank, list(g.shape)
        starts[axis], stops[axis] = offset, offset + value.shape[axis]
        offset += value.shape[axis]
        pieces.append(b(slice_, [g], {"starts": starts, "stops": stops, "steps": [1] * g.type.rank}))
    return pieces


concat = register(Op("concat", OpKind.SHAPE, None, _concat_rule,
                     lambda arrays, attrs: [np.concatenate(arrays, axis=attrs["axis"])],
                     attrs={"axis": attr(AttrKind.INT, 0)}, doc="numpy.concatenate",
                     gradient=_concat_grad, complex=True))
