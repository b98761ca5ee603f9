"""numpy.fft and the parts of complex values: np.fft.fft/ifft/rfft/irfft (ops/fft.py), the n-d
transforms numpy builds from them (fft2, fftn, rfft2, rfftn and their inverses, one axis at a
time in numpy's order), fftshift/ifftshift (np.roll), and np.real, np.imag, np.angle with the
``.real``/``.imag``/``.conj()`` of a traced array."""

from __future__ import annotations

import operator

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.ops.fft import NORMS
from flowjit.errors import ShapeError, TracerConversionError, user_location
from flowjit.frontend import numpy_api
from flowjit.frontend.numpy_arrays import _tracer
from flowjit.frontend.tracer import Tracer


def _points(n, what: str) -> int:
    if isinstance(n, Tracer):
        raise TracerConversionError(f"{what}: n must be known while tracing (an int), not a traced "
                                    f"{n._value.type} value", user_location())
    n = operator.index(n)
    if n < 1:
        raise ShapeError(f"{what}: invalid number of data points ({n}) specified", user_location())
    return n


def _transform_1d(name: str, x: Tracer, n, axis: int, norm) -> Tracer:
    what = f"np.fft.{name}"
    if x.ndim == 0:
        raise ShapeError(f"{what} needs an array of at least 1 dimension, got {x._value.type}", user_location())
    (axis,) = numpy_api._axes(axis, x.ndim, what)
    length = x.shape[axis]
    n = _points(n if n is not None else (2 * (length - 1) if name == "irfft" else length), what)
    norm = "backward" if norm is None else norm
    if norm not in NORMS:
        raise ShapeError(f"{what}: norm {norm!r} is not one of {', '.join(NORMS)}", user_location())
    return x._trace.emit1(getattr(ops, name), [x], {"n": n, "axis": axis, "norm": norm}, what=what)


def _one_axis(name: str):
    def transform(a, n=None, axis=-1, norm=None, out=None):
        numpy_api._reject_kwargs(f"np.fft.{name}", {"out": out})
        return _transform_1d(name, _tracer(a), n, axis, norm)
    transform.__name__ = name
    return transform


def _several_axes(name: str, two: bool):
    """fftn, ifftn, rfftn, irfftn (``two``: fft2... with axes (-2, -1)), as numpy's ``_raw_fftnd``:
    the last axis first; the real transforms take the last axis themselves, the others fft/ifft."""
    real = name.startswith(("rfft", "irfft"))
    full = "ifft" if name.startswith("i") else "fft"

    def transform(a, s=None, axes=(-2, -1) if two else None, norm=None, out=None):
        what = f"np.fft.{name}{'2' if two else 'n'}"
        numpy_api._reject_kwargs(what, {"out": out})
        x = _tracer(a)
        if axes is None:
            axes = tuple(range(-len(s), 0)) if s is not None else tuple(range(x.ndim))
        axes = tuple(numpy_api._static_ints(axes, what, "axes"))
        sizes = [None] * len(axes) if s is None else [None if n == -1 else n       # (-1: the axis's length)
                                                      for n in numpy_api._static_ints(s, what, "s")]
        if len(sizes) != len(axes):
            raise ShapeError(f"{what}: s {s!r} and axes {axes!r} differ in length", user_location())
        if not axes:
            return x                                  # numpy returns its argument itself
        if real and name.startswith("irfft") and sizes[-1] is None:
            sizes[-1] = 2 * (x.shape[axes[-1]] - 1)
        last = len(axes) - 1
        if name.startswith("irfft"):          # inverse: the complex axes first, the real one last
            for axis, n in zip(axes[:last], sizes[:last]):
                x = _transform_1d("ifft", x, n, axis, norm)
            return _transform_1d("irfft", x, sizes[last], axes[last], norm)
        for index in reversed(range(len(axes))):
            kind = name if real and index == last else full
            x = _transform_1d(kind, x, sizes[index], axes[index], norm)
        return x
    transform.__name__ = name + ("2" if two else "n")
    return transform


def _shift(inverse: bool):
    def shift(x, axes=None):
        from flowjit.frontend.numpy_arrays import roll
        x = _tracer(x)
        axes = numpy_api._axes(axes, x.ndim, "np.fft.ifftshift" if inverse else "np.fft.fftshift")
        shifts = [-(x.shape[axis] // 2) if inverse else x.shape[axis] // 2 for axis in axes]
        return roll(x, shifts, axes) if axes else x
    return shift


def real(val):
    x = _tracer(val)
    return x._trace.emit1(ops.real, [x], what="np.real") if x.dtype.kind == "c" else x


def imag(val):
    x = _tracer(val)
    if x.dtype.kind == "c":
        return x._trace.emit1(ops.imag, [x], what="np.imag")
    return np.zeros_like(x)


def angle(z, deg=False):
    """numpy's: arctan2 of the imaginary and the real part (a real value's imaginary part is 0)."""
    x = _tracer(z)
    if x.dtype.kind == "c":
        result = np.arctan2(imag(x), real(x))
    else:
        result = np.arctan2(0, x)
    return result * (180 / np.pi) if deg else result


FUNCTIONS = {
    np.fft.fft: _one_axis("fft"), np.fft.ifft: _one_axis("ifft"),
    np.fft.rfft: _one_axis("rfft"), np.fft.irfft: _one_axis("irfft"),
    np.fft.fft2: _several_axes("fft", True), np.fft.ifft2: _several_axes("ifft", True),
    np.fft.rfft2: _several_axes("rfft", True), np.fft.irfft2: _several_axes("irfft", True),
    np.fft.fftn: _several_axes("fft", False), np.fft.ifftn: _several_axes("ifft", False),
    np.fft.rfftn: _several_axes("rfft", False), np.fft.irfftn: _several_axes("irfft", False),
    np.fft.fftshift: _shift(False), np.fft.ifftshift: _shift(True),
    np.real: real, np.imag: imag, np.angle: angle,
}
METHODS = {"conj": lambda self: np.conjugate(self), "conjugate": lambda self: np.conjugate(self)}
PROPERTIES = {"real": real, "imag": imag}
