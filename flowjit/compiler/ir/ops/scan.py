"""Scans along one axis: cumsum, cumprod, cummax, cummin (numpy's ``ufunc.accumulate`` of add,
multiply, maximum and minimum).

``scan {axis}`` keeps its operand's shape and dtype: the frontend casts to the dtype numpy
accumulates in first (np.cumsum of int8 is int64), so the op's reference is exactly
``ufunc.accumulate(x, axis, dtype=x.dtype)``.  A scan (OpKind.LIBRARY) runs outside fused kernels,
as one call the backend chooses (``Backend.library_call``): the CPU backend's scan kernels
(codegen/scans.py; ``extensions["combine"]`` names the step), or ``compiled_scan``, numpy's
own accumulate as the driver calls it on the float32 arrays that hold float16 values.  cumsum's
gradient is the reversed cumulative sum of the cotangent; the others have none.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.ops.base import AttrKind, Op, OpKind, normalize_axis, register, required
from flowjit.compiler.ir.ops.shape import slice_
from flowjit.compiler.ir.types import TensorType
from flowjit.errors import OpTypeError, ShapeError


def _scan_rule(types, attrs):
    (source,) = types
    if source.rank == 0:
        raise ShapeError(f"a scan needs an array of at least 1 dimension, got {source}")
    axis = attrs["axis"]
    normalize_axis(axis, source.rank)
    if axis < 0:
        raise ShapeError(f"scan axis {axis} must be non-negative")
    return [TensorType(source.shape, source.dtype)]


def _reversed(value, axis: int, b):
    """``value`` read backwards along ``axis``."""
    rank = value.type.rank
    starts, stops, steps = [0] * rank, list(value.shape), [1] * rank
    starts[axis], stops[axis], steps[axis] = value.shape[axis] - 1, -1, -1
    return b(slice_, [value], {"starts": starts, "stops": stops, "steps": steps})


def _cumsum_grad(node, g, b):
    """d/dx_i of sum_j g_j * cumsum(x)_j is sum_{j >= i} g_j: the cumsum of g read backwards."""
    axis = node.attrs["axis"]
    if g.shape[axis] == 0:
        return (g,)
    return (_reversed(b(cumsum, [_reversed(g, axis, b)], {"axis": axis}), axis, b),)


def compiled_scan(node):
    """The driver's call for a scan node: float16 accumulates in float16, as numpy's loop does,
    though the driver holds it in float32."""
    ufunc, axis, dtype = node.op.extensions["accumulate"], node.attrs["axis"], node.output.dtype
    if dtype == np.float16:
        def scan(array):
            return ufunc.accumulate(array.astype(np.float16), axis=axis).astype(np.float32)
    else:
        def scan(array):
            return ufunc.accumulate(array, axis=axis, dtype=dtype)
    scan.__name__ = f"{ufunc.__name__}_accumulate"
    return scan


def _scan(name: str, ufunc, gradient=None):
    def reference(arrays, attrs):
        (array,) = arrays
        try:
            return [ufunc.accumulate(array, axis=attrs["axis"], dtype=array.dtype)]
        except TypeError as error:
            raise OpTypeError(f"{name} of {array.dtype}: {error}") from None
    return register(Op(name, OpKind.LIBRARY, 1, _scan_rule, reference, attrs={"axis": required(AttrKind.INT)},
                       ufunc=None, doc=f"numpy.{ufunc.__name__}.accumulate along one axis, in the operand's dtype",
                       gradient=gradient, extensions={"accumulate": ufunc, "combine": ufunc.__name__,
                                                                 "compiled": compiled_scan}))


cumsum = _scan("cumsum", np.add, gradient=_cumsum_grad)
cumprod = _scan("cumprod", np.multiply)
cummax = _scan("cummax", np.maximum)
cummin = _scan("cummin", np.minimum)
