"""Discrete Fourier transforms along one axis: ``fft``, ``ifft``, ``rfft``, ``irfft {n, axis, norm}``.

Each is numpy.fft's transform of the same name with its ``n`` (the length transformed: the
axis is cut or padded with zeros to it) and ``norm``; the frontend fills ``n`` and a
non-negative ``axis`` in, and builds the n-dimensional transforms from these as numpy does.
The result's dtype is numpy's for that call (float32 and complex64 stay in single precision,
integers transform in float64).  A transform runs outside kernels as one call of numpy's own
(pocketfft, the library numpy ships: OpKind.LIBRARY), so it gives numpy's bits.  The ops have
no gradient rules (flowjit differentiates real values only).
"""

from __future__ import annotations

import functools

import numpy as np

from flowjit.compiler.ir.ops.base import AttrKind, Op, OpKind, attr, normalize_axis, register, required
from flowjit.compiler.ir.types import TensorType, check_dtype
from flowjit.errors import OpTypeError, ShapeError

NORMS = ("backward", "ortho", "forward")


def transformed_length(name: str, n: int) -> int:
    """The result's length along the axis for a transform of ``n`` points."""
    return n // 2 + 1 if name == "rfft" else n


@functools.lru_cache(maxsize=None)
def _dtype(name: str, dtype: np.dtype) -> np.dtype:
    try:
        sample = getattr(np.fft, name)(np.zeros((4,), dtype))
    except TypeError as error:
        raise OpTypeError(f"np.fft.{name} is not defined for {dtype}: {error}") from None
    return check_dtype(sample.dtype, "result")


def _rule(name: str):
    def rule(types, attrs):
        (source,) = types
        if source.rank == 0:
            raise ShapeError(f"np.fft.{name} needs an array of at least 1 dimension, got {source}")
        axis, n = attrs["axis"], attrs["n"]
        normalize_axis(axis, source.rank)
        if axis < 0:
            raise ShapeError(f"{name} axis {axis} must be non-negative")
        if n < 1:
            raise ShapeError(f"np.fft.{name}: invalid number of data points ({n}) specified")
        if attrs["norm"] not in NORMS:
            raise OpTypeError(f"np.fft.{name}: norm {attrs['norm']!r} is not one of {', '.join(NORMS)}")
        shape = list(source.shape)
        shape[axis] = transformed_length(name, n)
        return [TensorType(tuple(shape), _dtype(name, source.dtype))]
    return rule


def _compiled(node):
    function, attrs = getattr(np.fft, node.op.name), node.attrs
    n, axis, norm = attrs["n"], attrs["axis"], attrs["norm"]

    def transform(array):
        return function(array, n=n, axis=axis, norm=norm)
    transform.__name__ = f"fft_{node.op.name}"
    return transform


def _transform(name: str) -> Op:
    function = getattr(np.fft, name)

    def reference(arrays, attrs):
        return [function(arrays[0], n=attrs["n"], axis=attrs["axis"], norm=attrs["norm"])]
    return register(Op(name, OpKind.LIBRARY, 1, _rule(name), reference,
                       attrs={"n": required(AttrKind.INT), "axis": required(AttrKind.INT),
                              "norm": attr(AttrKind.STR, "backward")},
                       doc=f"numpy.fft.{name} of n points along one axis", complex=True,
                       extensions={"compiled": _compiled}))


fft = _transform("fft")
ifft = _transform("ifft")
rfft = _transform("rfft")
irfft = _transform("irfft")
