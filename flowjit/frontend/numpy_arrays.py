"""numpy functions flowjit traces as compositions of its own ops: np.diff, np.roll, np.pad,
np.triu/np.tril, np.diag, np.outer, np.hypot, np.linalg.norm, np.cov, np.convolve and N-d
np.dot; and the frontend of the scan ops (np.cumsum, np.cumprod, ufunc.accumulate).

Each is written while tracing, with numpy's semantics (dtype rules, negative axes, argument
checks, the shapes of empty and 0-d inputs), out of slices, concatenations, where-masks,
reshapes, matmuls and reductions.  So each fuses with its neighbours like the ops it is
made of, and differentiates by their gradient rules; the reference interpreter runs the
same ops.  Where numpy takes its answer from a small index computation (which element a
pad or a roll copies), numpy itself computes the index map on ``np.arange`` while tracing,
and the result is the slices that map names.
"""

from __future__ import annotations

import math
import operator
import warnings

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.ops.base import normalize_axis
from flowjit.errors import OpTypeError, ShapeError, TracerConversionError, UnsupportedFunctionError, user_location
from flowjit.frontend import numpy_api
from flowjit.frontend.tracer import Tracer

_NO_VALUE = np._NoValue


# -- helpers ---------------------------------------------------------------------------------------
def _tracer(item, *others) -> Tracer:
    """``item`` in the trace: a numpy value (a list, a Python scalar) as numpy's asarray makes it."""
    trace = numpy_api._trace_of(item, *others)
    if isinstance(item, Tracer):
        return item
    array = np.asarray(item)
    return numpy_api._as_tracer(trace, array)


def _static(value, what: str, role: str):
    """``value`` (a shift, an order, a width), which must be known while tracing."""
    if isinstance(value, Tracer) or (isinstance(value, (tuple, list)) and any(isinstance(v, Tracer) for v in value)):
        traced = value if isinstance(value, Tracer) else next(v for v in value if isinstance(v, Tracer))
        raise TracerConversionError(f"{what}: {role} must be known while tracing (Python ints), not a traced "
                                    f"{traced._value.type} value; mark it static with static_argnums",
                                    user_location())
    return value


def _axis(axis, rank: int, what: str) -> int:
    try:
        return normalize_axis(operator.index(axis), rank)
    except ShapeError as error:
        raise ShapeError(f"{what}: {error.message}", user_location()) from None
    except TypeError:
        raise OpTypeError(f"{what}: axis {axis!r} is not an integer", user_location()) from None


def _along(x: Tracer, axis: int, index) -> Tracer:
    """``x[..., index]`` with ``index`` (a slice) on ``axis``."""
    return x[(slice(None),) * axis + (index,)]


def _constant(x: Tracer, value) -> Tracer:
    return x._trace.constant(np.asarray(value))


def _runs(indices: np.ndarray) -> list[tuple[int, int, int]]:
    """Maximal runs ``(first, length, step)`` of ``indices`` whose step is -1, 0 or 1."""
    runs, i = [], 0
    while i < len(indices):
        j, step = i + 1, 1
        if j < len(indices) and abs(int(indices[j]) - int(indices[i])) <= 1:
            step = int(indices[j]) - int(indices[i])
            while j < len(indices) and int(indices[j]) - int(indices[j - 1]) == step:
                j += 1
        runs.append((int(indices[i]), j - i, step))
        i = j
    return runs


def take_static(x: Tracer, indices: np.ndarray, axis: int) -> Tracer:
    """``np.take(x, indices, axis)`` for indices known while tracing: the slices (forward,
    backward, or one element broadcast) the index runs name, concatenated."""
    if len(indices) == 0:
        return _along(x, axis, slice(0, 0))
    if np.array_equal(indices, np.arange(x.shape[axis])):
        return x._copy()
    pieces = []
    for first, length, step in _runs(indices):
        if step == 1:
            pieces.append(_along(x, axis, slice(first, first + length)))
        elif step == -1:
            stop = first - length
            pieces.append(_along(x, axis, slice(first, stop if stop >= 0 else None, -1)))
        else:
            one = _along(x, axis, slice(first, first + 1))
            shape = list(x.shape)
            shape[axis] = length
            pieces.append(numpy_api.broadcast_to(one, tuple(shape)))
    return pieces[0] if len(pieces) == 1 else numpy_api.concatenate(pieces, axis=axis)


def _diagonal_offsets(x: Tracer, rows: int, columns: int) -> Tracer:
    """The (rows, columns) int64 array ``j - i``: which diagonal each element is on."""
    row = _constant(x, np.arange(rows, dtype=np.int64).reshape(rows, 1))
    column = _constant(x, np.arange(columns, dtype=np.int64).reshape(1, columns))
    return np.subtract(column, row)


# -- differences, rolls and pads ---------------------------------------------------------------------
def diff(a, n=1, axis=-1, prepend=_NO_VALUE, append=_NO_VALUE):
    """numpy.diff: ``a[1:] - a[:-1]`` n times along axis (``!=`` for booleans); integer
    differences keep the dtype (and wrap, as numpy's do)."""
    n = operator.index(_static(n, "np.diff", "n"))
    if n == 0:
        return a
    if n < 0:
        raise ShapeError(f"np.diff: order must be non-negative but got {n}", user_location())
    x = _tracer(a, prepend, append)
    if x.ndim == 0:
        raise ShapeError(f"np.diff requires input that is at least one dimensional, got {x._value.type}",
                         user_location())
    axis = _axis(axis, x.ndim, "np.diff")
    combined = []
    for extra in (prepend, None, append):
        if extra is None:
            combined.append(x)
        elif extra is not _NO_VALUE:
            extra = _tracer(extra, x)
            if extra.ndim == 0:
                shape = list(x.shape)
                shape[axis] = 1
                extra = numpy_api.broadcast_to(extra, tuple(shape))
            combined.append(extra)
    if len(combined) > 1:
        x = numpy_api.concatenate(combined, axis=axis)
    difference = np.not_equal if x.dtype == np.bool_ else np.subtract
    for _ in range(n):
        x = difference(_along(x, axis, slice(1, None)), _along(x, axis, slice(None, -1)))
    return x


def roll(a, shift, axis=None):
    """numpy.roll: the elements that leave one end enter at the other (a concatenation of
    two slices per rolled axis); axis=None rolls the flattened array."""
    x = _tracer(a)
    if axis is None:
        _static(shift, "np.roll", "shift")
        return numpy_api.reshape(roll(numpy_api.ravel(x), shift, 0), x.shape)
    shifts = numpy_api._static_ints(_static(shift, "np.roll", "shift"), "np.roll", "shift")
    axes = numpy_api._static_ints(_static(axis, "np.roll", "axis"), "np.roll", "axis")
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise ShapeError(f"np.roll: shift {shift!r} and axis {axis!r} do not broadcast to one another",
                         user_location())
    count = max(len(shifts), len(axes))
    total = [0] * x.ndim
    for s, ax in zip(shifts * (count // len(shifts)), axes * (count // len(axes))):
        total[_axis(ax, x.ndim, "np.roll")] += s
    result = x
    for ax, s in enumerate(total):
        size = x.shape[ax]
        if size and s % size:
            result = take_static(result, np.roll(np.arange(size), s), ax)
    return result if result is not x else x._copy()


PAD_MODES = {"constant": ("constant_values",), "empty": (), "edge": (), "wrap": (),
             "reflect": ("reflect_type",), "symmetric": ("reflect_type",)}
NUMPY_PAD_MODES = {"linear_ramp": ("end_values",), "maximum": ("stat_length",), "mean": ("stat_length",),
                   "median": ("stat_length",), "minimum": ("stat_length",)}


def _pairs(value, rank: int, what: str, as_index: bool) -> list[tuple]:
    """numpy's _as_pairs: a scalar, a pair, or one pair per axis, as (before, after) per axis."""
    _static(value, "np.pad", what)
    array = np.asarray(value)
    if as_index:
        array = np.round(array).astype(np.intp)
        if array.size and array.min() < 0:
            raise ShapeError(f"np.pad: {what} {value!r} contains negative values", user_location())
    if array.ndim < 3 and array.size == 1:
        return [(array.ravel()[0], array.ravel()[0])] * rank
    if array.ndim < 3 and array.size == 2 and array.shape != (2, 1):
        return [tuple(array.ravel())] * rank
    try:
        return [tuple(pair) for pair in np.broadcast_to(array, (rank, 2))]
    except ValueError:
        raise ShapeError(f"np.pad: {what} {value!r} does not fit an array of {rank} dimensions "
                         f"(it broadcasts to ({rank}, 2))", user_location()) from None


def _fill(x: Tracer, value, axis: int, width: int) -> Tracer:
    """A block of ``value`` as wide as ``width`` along axis, in x's dtype (numpy assigns it)."""
    cell = np.empty((), x.dtype)
    cell[()] = value
    shape = list(x.shape)
    shape[axis] = width
    return numpy_api.broadcast_to(_constant(x, cell), tuple(shape))


def pad(array, pad_width, mode="constant", **kwargs):
    """numpy.pad, axis by axis as numpy pads: constant and empty fill a block; edge, wrap,
    reflect and symmetric copy the elements numpy's own pad of ``np.arange(n)`` names."""
    x = _tracer(array)
    if callable(mode) or mode in NUMPY_PAD_MODES:
        raise UnsupportedFunctionError(f"np.pad: mode={getattr(mode, '__name__', mode)!r} is not supported "
                                       f"(constant, edge, wrap, reflect, symmetric and empty are)",
                                       user_location())
    if mode not in PAD_MODES:
        raise ShapeError(f"np.pad: mode {mode!r} is not supported", user_location())
    unexpected = set(kwargs) - set(PAD_MODES[mode])
    if unexpected:
        raise OpTypeError(f"np.pad: unsupported keyword arguments for mode {mode!r}: {sorted(unexpected)}",
                          user_location())
    if kwargs.get("reflect_type", "even") != "even":
        raise UnsupportedFunctionError(f"np.pad: reflect_type={kwargs['reflect_type']!r} is not supported "
                                       f"(only 'even')", user_location())
    widths = _pairs(pad_width, x.ndim, "pad_width", as_index=True)
    values = _pairs(kwargs.get("constant_values", 0), x.ndim, "constant_values", as_index=False)
    result = x
    for axis, ((before, after), (low, high)) in enumerate(zip(widths, values)):
        before, after = int(before), int(after)
        if not before and not after:
            continue
        size = result.shape[axis]
        if mode in ("constant", "empty"):
            if mode == "empty":
                low = high = 0
            blocks = [_fill(result, low, axis, before)] if before else []
            blocks.append(result)
            blocks += [_fill(result, high, axis, after)] if after else []
            result = numpy_api.concatenate(blocks, axis=axis)
        elif size == 0:
            raise ShapeError(f"np.pad: can't extend empty axis {axis} of {x._value.type} using modes other "
                             f"than 'constant' or 'empty'", user_location())
        else:
            result = take_static(result, np.pad(np.arange(size), (before, after), mode=mode), axis)
    return result if result is not x else x._copy()


# -- triangles, diagonals, outer products -----------------------------------------------------------
def _triangle(name: str):
    upper = name == "triu"

    def triangle(m, k=0):
        x = _tracer(m)
        k = operator.index(_static(k, f"np.{name}", "k"))
        if x.ndim == 0:
            raise ShapeError(f"np.{name}: input must be at least 1-d, got {x._value.type}", user_location())
        rows, columns = x.shape[-2:] if x.ndim > 1 else (x.shape[0], x.shape[0])
        offsets = _diagonal_offsets(x, rows, columns)
        zero = _constant(x, np.zeros((), x.dtype))
        if upper:
            return numpy_api.where(np.greater_equal(offsets, _constant(x, np.int64(k))), x, zero)
        return numpy_api.where(np.less_equal(offsets, _constant(x, np.int64(k))), x, zero)
    triangle.__name__ = name
    return triangle


def diag(v, k=0):
    """numpy.diag: a 1-d v on the k-th diagonal of a square matrix, or a 2-d v's k-th diagonal
    (a strided slice of the flattened matrix)."""
    x = _tracer(v)
    k = operator.index(_static(k, "np.diag", "k"))
    if x.ndim == 1:
        size = x.shape[0] + abs(k)
        line = x
        if k:
            line = numpy_api.concatenate([x, _fill(x, 0, 0, abs(k))], axis=0)
        line = numpy_api.reshape(line, (size, 1) if k >= 0 else (1, size))
        on_diagonal = np.equal(_diagonal_offsets(x, size, size), _constant(x, np.int64(k)))
        return numpy_api.where(on_diagonal, line, _constant(x, np.zeros((), x.dtype)))
    if x.ndim == 2:
        rows, columns = x.shape
        start, length = (k, min(rows, columns - k)) if k >= 0 else (-k * columns, min(rows + k, columns))
        flat = numpy_api.ravel(x)
        if length <= 0:
            return flat[0:0]
        return flat[start:start + (length - 1) * (columns + 1) + 1:columns + 1]
    raise ShapeError(f"np.diag: input must be 1-d or 2-d, got {x._value.type}", user_location())


def outer(a, b, out=None):
    """numpy.outer: a.ravel()[:, None] * b.ravel()[None, :]."""
    numpy_api._reject_kwargs("np.outer", {"out": out})
    left, right = _tracer(a, b), _tracer(b, a)
    return np.multiply(numpy_api.reshape(left, (left.size, 1)), numpy_api.reshape(right, (1, right.size)))


# -- hypot ------------------------------------------------------------------------------------------------
def hypot(trace, inputs: list, kwargs: dict):
    """np.hypot(x1, x2) in numpy's loop dtype: float16 and float32 through the next wider float
    (no overflow there, one rounding); float64 as max * sqrt(1 + (min/max)**2), within 2 ulp of
    libm's, without overflow; an infinite operand gives inf even beside a NaN, as in C99."""
    numpy_api._reject_kwargs("np.hypot", kwargs)
    if len(inputs) != 2:
        raise OpTypeError(f"np.hypot takes 2 arguments, got {len(inputs)}", user_location())
    scalars = [numpy_api._is_python_scalar(item) for item in inputs]
    operands = [item if scalar else numpy_api._as_tracer(trace, item) for item, scalar in zip(inputs, scalars)]
    what = f"np.hypot({numpy_api._spelled(operands)})"
    signature = tuple((np.dtype(bool) if type(item) is bool else type(item)) if scalar else item.dtype
                      for item, scalar in zip(operands, scalars))
    try:
        dtype = np.dtype(np.hypot.resolve_dtypes(signature + (None,))[2])
    except (TypeError, ValueError) as error:
        raise OpTypeError(f"{what}: {error}", user_location()) from None
    x, y = (trace.constant(numpy_api._scalar_in(item, dtype, what)) if scalar else numpy_api.astype(item, dtype, copy=False)
            for item, scalar in zip(operands, scalars))
    ax, ay = np.absolute(x), np.absolute(y)
    if dtype.itemsize < 8:
        wide = np.float32 if dtype == np.float16 else np.float64
        ax, ay = numpy_api.astype(ax, wide), numpy_api.astype(ay, wide)
        result = numpy_api.astype(np.sqrt(np.add(np.multiply(ax, ax), np.multiply(ay, ay))), dtype)
    else:
        big, small = np.maximum(ax, ay), np.minimum(ax, ay)
        ratio = np.divide(small, big)
        result = np.multiply(big, np.sqrt(np.add(np.multiply(ratio, ratio), 1.0)))
        result = numpy_api.where(np.equal(big, 0.0), 0.0, result)
    infinite = np.logical_or(np.isinf(ax), np.isinf(ay))
    return numpy_api.where(infinite, np.inf, result)


# -- norms and covariances ---------------------------------------------------------------------------
def _sum(x, axis, keepdims=False):
    return numpy_api.REDUCTIONS["sum"](x, axis=axis, keepdims=keepdims)


def norm(x, ord=None, axis=None, keepdims=False):
    """numpy.linalg.norm: vector norms (2, 1, inf, -inf, 0, any p) and the matrix norms that
    need no singular values (Frobenius, 1, -1, inf, -inf); non-float input as float64, complex
    input as its magnitudes (every one of these norms reads only |x|, in the real dtype)."""
    x = _tracer(x)
    if x.dtype.kind == "c":
        x = np.absolute(x)
    if x.dtype.kind != "f":
        x = numpy_api.astype(x, np.float64)
    rank = x.ndim
    if axis is None:
        if ord is None or (ord in ("f", "fro") and rank == 2) or (ord == 2 and rank == 1):
            result = np.sqrt(_sum(np.multiply(x, x), None))
            return numpy_api.reshape(result, (1,) * rank) if keepdims else result
        axis = tuple(range(rank))
    elif not isinstance(axis, tuple):
        axis = (axis,)
    axis = tuple(_axis(item, rank, "np.linalg.norm") for item in axis)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis, keepdims)
    if len(axis) != 2:
        raise ShapeError(f"np.linalg.norm: improper number of dimensions to norm ({len(axis)} axes "
                         f"of {x._value.type})", user_location())
    if axis[0] == axis[1]:
        raise ShapeError(f"np.linalg.norm: duplicate axes given: {axis}", user_location())
    result = _matrix_norm(x, ord, axis)
    if keepdims:
        shape = list(x.shape)
        shape[axis[0]] = shape[axis[1]] = 1
        result = numpy_api.reshape(result, tuple(shape))
    return result


def _vector_norm(x, ord, axis, keepdims):
    if isinstance(ord, str):
        raise ShapeError(f"np.linalg.norm: invalid norm order {ord!r} for vectors", user_location())
    if ord is None or ord == 2:
        return np.sqrt(_sum(np.multiply(x, x), axis, keepdims))
    if ord == np.inf:
        return numpy_api.REDUCTIONS["max"](np.absolute(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return numpy_api.REDUCTIONS["min"](np.absolute(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return _sum(numpy_api.astype(np.not_equal(x, 0), x.dtype), axis, keepdims)
    if ord == 1:
        return _sum(np.absolute(x), axis, keepdims)
    total = _sum(np.power(np.absolute(x), float(ord)), axis, keepdims)
    return np.power(total, _constant(x, np.reciprocal(np.asarray(ord), dtype=total.dtype)))


def _matrix_norm(x, ord, axis):
    row, column = axis
    if ord in (None, "fro", "f"):
        return np.sqrt(_sum(np.multiply(x, x), axis))
    if ord in (1, -1, np.inf, -np.inf):
        if ord in (1, -1):               # the largest (smallest) column sum
            summed, extreme = row, column - (column > row)
        else:                            # the largest (smallest) row sum
            summed, extreme = column, row - (row > column)
        sums = _sum(np.absolute(x), summed)
        return numpy_api.REDUCTIONS["max" if ord > 0 else "min"](sums, axis=extreme)
    if ord in (2, -2, "nuc"):
        raise UnsupportedFunctionError(f"np.linalg.norm: ord={ord!r} of a matrix needs its singular values, "
                                       f"which flowjit does not compute", user_location())
    raise ShapeError(f"np.linalg.norm: invalid norm order {ord!r} for matrices", user_location())


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    """numpy.cov: rows (or columns, rowvar=False) are variables; the deviations from each
    variable's mean times their transpose, over N - ddof, in float64 unless dtype= says."""
    numpy_api._reject_kwargs("np.cov", {"fweights": fweights, "aweights": aweights})
    if ddof is not None and ddof != int(ddof):
        raise OpTypeError(f"np.cov: ddof must be an integer, got {ddof!r}", user_location())
    variables = [_tracer(item, m, y) for item in ((m,) if y is None else (m, y))]
    for item in variables:
        if item.ndim > 2:
            raise ShapeError(f"np.cov: {item._value.type} has more than 2 dimensions", user_location())
        if item.dtype.kind == "c":
            raise UnsupportedFunctionError(f"np.cov of complex values ({item._value.type}) is not supported yet",
                                           user_location())
    if dtype is None:
        dtype = np.result_type(*(item.dtype for item in variables), np.float64)
    blocks = []
    for item in variables:
        item = numpy_api.astype(item, dtype, copy=False)
        item = numpy_api.reshape(item, (1,) * (2 - item.ndim) + item.shape)
        blocks.append(item if rowvar or item.shape[0] == 1 else numpy_api.transpose(item))
    x = blocks[0] if len(blocks) == 1 else numpy_api.concatenate(blocks, axis=0)
    # One matrix of observations in rows (rowvar=False): centre its columns where they lie and
    # let the matmul read the transpose; centring the transposed view walked down each column.
    rows = not rowvar and len(variables) == 1 and variables[0].ndim == 2 and variables[0].shape[0] != 1
    if x.shape[0] == 0:
        return _constant(x, np.zeros((0, 0)))
    ddof = (0 if bias else 1) if ddof is None else int(ddof)
    fact = x.shape[1] - ddof
    if fact <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    if rows:
        observations = numpy_api.astype(variables[0], dtype, copy=False)
        centred = np.subtract(observations, numpy_api.REDUCTIONS["mean"](observations, axis=0, keepdims=True))
        product = numpy_api.matmul(numpy_api.transpose(centred), centred)
    else:
        centred = np.subtract(x, numpy_api.REDUCTIONS["mean"](x, axis=1, keepdims=True))
        product = numpy_api.matmul(centred, numpy_api.transpose(centred))
    with np.errstate(divide="ignore"):
        scale = np.true_divide(1, fact)
    if product.dtype == np.float64:
        product = np.multiply(product, _constant(x, scale))
    else:                                # numpy's c *= float64 scalar: the float64 loop, cast back
        product = numpy_api.astype(np.multiply(numpy_api.astype(product, np.float64), _constant(x, scale)),
                                   product.dtype)
    return numpy_api.squeeze(product)


# -- convolution ------------------------------------------------------------------------------------------
CONVOLVE_UNROLL = 64        # np.convolve is unrolled into one product per kernel element


def convolve(a, v, mode="full"):
    """numpy.convolve of 1-d arrays, as numpy computes it directly: the shorter one reversed
    slides over the longer (zero-padded for 'full' and 'same'); one sliced product per element
    of the shorter, summed in one fused loop."""
    x, w = _tracer(a, v), _tracer(v, a)
    x, w = (numpy_api.reshape(item, (1,)) if item.ndim == 0 else item for item in (x, w))
    if x.ndim != 1 or w.ndim != 1:
        raise ShapeError(f"np.convolve: a and v must be 1-d, got {x._value.type} and {w._value.type}",
                         user_location())
    if not x.size or not w.size:
        raise ShapeError(f"np.convolve: {'a' if not x.size else 'v'} cannot be empty", user_location())
    if w.shape[0] > x.shape[0]:
        x, w = w, x
    m = w.shape[0]
    if m > CONVOLVE_UNROLL:
        raise UnsupportedFunctionError(f"np.convolve with both operands longer than {CONVOLVE_UNROLL} elements "
                                       f"({x._value.type}, {w._value.type}) is not supported", user_location())
    if mode == "full":
        x = pad(x, m - 1)
    elif mode == "same":
        x = pad(x, (m // 2, (m - 1) // 2))
    elif mode != "valid":
        raise ShapeError(f"np.convolve: mode must be 'valid', 'same' or 'full', got {mode!r}", user_location())
    length = x.shape[0] - m + 1
    result = None
    for k in range(m):
        term = np.multiply(x[k:k + length], w[m - 1 - k])
        result = term if result is None else np.add(result, term)
    return result


# -- scans ----------------------------------------------------------------------------------------------------
SCANS = {np.add: ops.cumsum, np.multiply: ops.cumprod, np.maximum: ops.cummax, np.minimum: ops.cummin}


def accumulate(ufunc, a, axis=0, dtype=None, out=None, what: str | None = None):
    """``ufunc.accumulate`` along one axis (np.cumsum, np.maximum.accumulate...): the operand
    cast to the dtype numpy accumulates in (add's and multiply's of a small integer or a
    bool is int64, as their reductions'), then one scan op."""
    what = what or f"np.{ufunc.__name__}.accumulate"
    numpy_api._reject_kwargs(what, {"out": out})
    x = _tracer(a)
    if x.ndim == 0:
        raise ShapeError(f"{what}: cannot accumulate on a 0-d array ({x._value.type})", user_location())
    if axis is None and x.ndim != 1 or isinstance(axis, (tuple, list)):
        raise ShapeError(f"{what}: accumulate takes one axis, not {axis!r} (of {x._value.type})", user_location())
    axis = _axis(0 if axis is None else _static(axis, what, "axis"), x.ndim, what)
    try:
        result_dtype = ufunc.accumulate(np.zeros((1,), x.dtype), dtype=dtype).dtype
    except TypeError as error:
        raise OpTypeError(f"{what}({x._value.type}, dtype={dtype}): {error}", user_location()) from None
    x = numpy_api.astype(x, result_dtype, copy=False)
    return x._trace.emit1(SCANS[ufunc], [x], {"axis": axis}, what=what)


def _cumulative(name: str, ufunc):
    def cumulative(a, axis=None, dtype=None, out=None):
        x = _tracer(a)
        if axis is None:                 # numpy: the flattened array
            x, axis = numpy_api.ravel(x), 0
        return accumulate(ufunc, x, axis=_static(axis, f"np.{name}", "axis"), dtype=dtype, out=out,
                          what=f"np.{name}")
    cumulative.__name__ = name
    return cumulative


cumsum, cumprod = _cumulative("cumsum", np.add), _cumulative("cumprod", np.multiply)


# -- np.dot of N-d operands -----------------------------------------------------------------------
def dot_nd(a: Tracer, b: Tracer) -> Tracer:
    """numpy.dot for operands beyond 2-d: a sum product over a's last axis and b's second to
    last (b's only, for a 1-d b), unlike matmul's batch broadcasting: one matmul of a seen as
    (rows, K) and b moved to (K, columns), reshaped to a.shape[:-1] + b.shape[:-2] + b.shape[-1:]."""
    contracted = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if a.shape[-1] != contracted:
        raise ShapeError(f"np.dot: shapes {a.shape} and {b.shape} not aligned: {a.shape[-1]} (dim {a.ndim - 1}) "
                         f"!= {contracted} (dim {max(b.ndim - 2, 0)})", user_location())
    rows = math.prod(a.shape[:-1])
    left = numpy_api.reshape(a, (rows, contracted))
    if b.ndim == 1:
        return numpy_api.reshape(numpy_api.matmul(left, b), a.shape[:-1])
    moved = numpy_api.transpose(b, (b.ndim - 2,) + tuple(range(b.ndim - 2)) + (b.ndim - 1,))
    right = numpy_api.reshape(moved, (contracted, math.prod(b.shape[:-2]) * b.shape[-1]))
    return numpy_api.reshape(numpy_api.matmul(left, right), a.shape[:-1] + b.shape[:-2] + b.shape[-1:])


FUNCTIONS = {
    np.diff: diff, np.roll: roll, np.pad: pad, np.triu: _triangle("triu"), np.tril: _triangle("tril"),
    np.diag: diag, np.outer: outer, np.linalg.norm: norm, np.cov: cov, np.cumsum: cumsum, np.cumprod: cumprod,
    np.convolve: convolve,
}
METHODS = {"cumsum": cumsum, "cumprod": cumprod}
