"""Integer-array indexing of leading axes, and its transpose.

- ``gather %x, %i0, ..., %ik-1``: numpy's ``x[i0, ..., ik-1]`` with k integer index arrays
  (broadcast together, negative indices counting from the end, an index out of bounds
  numpy's IndexError): shape ``broadcast(i...).shape + x.shape[k:]``.  The frontend brings
  every indexing with arrays to this form (moving the indexed axes to the front first).
- ``scatter_add %updates, %i0, ... {shape}``: zeros of ``shape`` with ``np.add.at`` of the
  updates at those indices (repeated indices add up): the gradient of gather, as gather of
  the cotangent is its gradient.

Both run outside kernels as one numpy call (OpKind.LIBRARY): fancy indexing and ``add.at``.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.ops.base import AttrKind, Op, OpKind, register, required
from flowjit.compiler.ir.types import TensorType
from flowjit.errors import OpTypeError, ShapeError


def _index_shape(op: str, indices, rank: int) -> tuple[int, ...]:
    if not indices:
        raise OpTypeError(f"{op} needs at least one index array")
    if len(indices) > rank:
        raise ShapeError(f"{op}: {len(indices)} index arrays for an array of {rank} dimensions")
    for index in indices:
        if index.dtype.kind not in "iu":
            raise OpTypeError(f"{op}: index arrays must be integers, got {index}")
    try:
        return np.broadcast_shapes(*(index.shape for index in indices))
    except ValueError:
        raise ShapeError(f"{op}: index arrays {', '.join(str(i) for i in indices)} do not broadcast "
                         f"to one shape") from None


def _gather_rule(types, attrs):
    source, *indices = types
    shape = _index_shape("gather", indices, source.rank)
    return [TensorType(shape + source.shape[len(indices):], source.dtype)]


def _scatter_rule(types, attrs):
    updates, *indices = types
    shape = tuple(attrs["shape"])
    expected = _index_shape("scatter_add", indices, len(shape)) + shape[len(indices):]
    if updates.shape != expected:
        raise ShapeError(f"scatter_add of {updates} into {list(shape)} needs updates of shape {list(expected)}")
    return [TensorType(shape, updates.dtype)]


def _scatter(updates, indices, shape, dtype):
    result = np.zeros(shape, dtype)
    np.add.at(result, tuple(indices), updates)
    return result


def _gather_grad(node, g, b):
    source, *indices = node.inputs
    return (b(scatter_add, [g, *indices], {"shape": source.shape}),) + (None,) * len(indices)


def _scatter_grad(node, g, b):
    indices = node.inputs[1:]
    return (b(gather, [g, *indices]),) + (None,) * len(indices)


def _compiled_gather(node):
    shapes = [value.shape for value in node.inputs[1:]]     # (the driver may hold a 0-d index as 1 element)

    def gather_(source, *indices):
        return np.asarray(source[tuple(index.reshape(shape) for index, shape in zip(indices, shapes))])
    return gather_


def _compiled_scatter(node):
    shape, dtype = tuple(node.attrs["shape"]), node.output.dtype
    shapes = [value.shape for value in node.inputs]

    def scatter_add_(updates, *indices):
        updates, *indices = (array.reshape(shape) for array, shape in zip((updates, *indices), shapes))
        if dtype == np.float16:           # held in float32: add in float16, as numpy's add.at does
            return _scatter(updates.astype(np.float16), indices, shape, np.float16).astype(np.float32)
        return _scatter(updates, indices, shape, updates.dtype)
    return scatter_add_


gather = register(Op("gather", OpKind.LIBRARY, None, _gather_rule,
                     lambda arrays, attrs: [np.array(arrays[0][tuple(arrays[1:])])],
                     doc="x[i0, ..., ik-1] with integer index arrays for the leading axes (numpy's fancy indexing)",
                     gradient=_gather_grad, extensions={"compiled": _compiled_gather}))

scatter_add = register(Op("scatter_add", OpKind.LIBRARY, None, _scatter_rule,
                          lambda arrays, attrs: [_scatter(arrays[0], arrays[1:], tuple(attrs["shape"]), arrays[0].dtype)],
                          attrs={"shape": required(AttrKind.INTS)},
                          doc="zeros of shape with np.add.at of updates at the index arrays (gather's gradient)",
                          gradient=_scatter_grad, extensions={"compiled": _compiled_scatter}))
