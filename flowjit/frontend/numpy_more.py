"""More numpy functions, each numpy's own definition written with the functions flowjit traces,
so they fuse as the ops they are made of: np.flip, np.moveaxis, np.vstack, np.hstack, np.split,
np.array_split, np.tile, np.repeat (and ``x.repeat``), np.meshgrid, np.ptp,
np.count_nonzero, np.nan_to_num, np.isclose, np.allclose, np.nansum, np.nanmean, np.nanprod,
np.nanvar, np.nanstd, np.nanmax, np.nanmin, np.trace (and ``x.trace``) of a matrix, np.inner, np.fliplr, np.flipud, np.column_stack
and np.atleast_1d/2d/3d; and np.linalg.inv, det and solve, as numpy's own calls (ops/linalg.py).

Arguments that decide shapes (axes, sections, reps, repeats) must be known while tracing, as
numpy's results' shapes depend on them.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.errors import OpTypeError, ShapeError, TracerConversionError, UnsupportedFunctionError, user_location
from flowjit.frontend import numpy_api
from flowjit.frontend.tracer import Tracer


def _known(value, what: str, role: str):
    """``value`` as numpy has it while tracing (an int, a sequence of ints): not a traced array."""
    if isinstance(value, Tracer) or any(isinstance(item, Tracer) for item in np.ravel(np.asarray(value, object))):
        raise TracerConversionError(f"{what}: {role} must be known while tracing (it decides the result's "
                                    f"shape), not a traced value", user_location())
    return value


def _normalized(axes, rank: int, what: str) -> tuple[int, ...]:
    try:
        return tuple(np.lib.array_utils.normalize_axis_tuple(_known(axes, what, "axis"), rank))
    except (np.exceptions.AxisError, ValueError, TypeError) as error:
        raise ShapeError(f"{what}: {error}", user_location()) from None


def _reject(what: str, **given) -> None:
    numpy_api._reject_kwargs(what, given)


# -- shapes ------------------------------------------------------------------------------------------
def flip(m, axis=None):
    (x,) = numpy_api._as_tracers(m)
    axes = range(x.ndim) if axis is None else _normalized(axis, x.ndim, "np.flip")
    return x[tuple(slice(None, None, -1) if dim in axes else slice(None) for dim in range(x.ndim))]


def moveaxis(a, source, destination):
    (x,) = numpy_api._as_tracers(a)
    sources = _normalized(source, x.ndim, "np.moveaxis")
    destinations = _normalized(destination, x.ndim, "np.moveaxis")
    if len(sources) != len(destinations):
        raise ShapeError("np.moveaxis: `source` and `destination` arguments must have the same number of "
                         "elements", user_location())
    order = [dim for dim in range(x.ndim) if dim not in sources]
    for target, dim in sorted(zip(destinations, sources)):
        order.insert(target, dim)
    return numpy_api.transpose(x, order)


def _at_least(x: Tracer, rank: int) -> Tracer:
    """np.atleast_1d / 2d / 3d of one array: a 1-d array becomes a row (and in 3-d, (1, n, 1));
    a matrix gains a last axis in 3-d."""
    if x.ndim >= rank:
        return x
    if rank == 3 and x.ndim > 0:
        return numpy_api.reshape(x, ((1,) if x.ndim == 1 else ()) + x.shape + (1,))
    return numpy_api.reshape(x, (1,) * (rank - x.ndim) + x.shape)


def _at_least_function(rank: int):
    def at_least(*arys):
        arrays = [_at_least(x, rank) for x in numpy_api._as_tracers(*arys)]
        return arrays[0] if len(arrays) == 1 else tuple(arrays)
    at_least.__name__ = f"atleast_{rank}d"
    return at_least


def fliplr(m):
    (x,) = numpy_api._as_tracers(m)
    if x.ndim < 2:
        raise ShapeError("np.fliplr: Input must be >= 2-d.", user_location())
    return x[:, ::-1]


def flipud(m):
    (x,) = numpy_api._as_tracers(m)
    if x.ndim < 1:
        raise ShapeError("np.flipud: Input must be >= 1-d.", user_location())
    return x[::-1]


def column_stack(tup):
    arrays = [numpy_api.reshape(x, (x.size, 1)) if x.ndim < 2 else x for x in numpy_api._as_tracers(*tup)]
    return numpy_api.concatenate(arrays, axis=1)


def vstack(tup, *, dtype=None, casting="same_kind"):
    _reject("np.vstack", dtype=dtype)
    return numpy_api.concatenate([_at_least(x, 2) for x in numpy_api._as_tracers(*tup)], axis=0)


def hstack(tup, *, dtype=None, casting="same_kind"):
    _reject("np.hstack", dtype=dtype)
    arrays = [_at_least(x, 1) for x in numpy_api._as_tracers(*tup)]
    return numpy_api.concatenate(arrays, axis=0 if arrays and arrays[0].ndim == 1 else 1)


def _split(what: str, ary, indices_or_sections, axis, equal: bool) -> list:
    (x,) = numpy_api._as_tracers(ary)
    (axis,) = _normalized(axis, x.ndim, what)
    length = x.shape[axis]
    sections = _known(indices_or_sections, what, "indices_or_sections")
    if np.ndim(sections) == 0:
        count = int(sections)
        if count <= 0:
            raise ShapeError(f"{what}: number sections must be larger than 0.", user_location())
        if equal and length % count:
            raise ShapeError(f"{what}: array split does not result in an equal division", user_location())
        each, extras = divmod(length, count)
        points = np.cumsum([0] + extras * [each + 1] + (count - extras) * [each]).tolist()
    else:
        points = [0] + [int(point) for point in sections] + [length]
    before = (slice(None),) * axis
    return [x[before + (slice(start, end),)] for start, end in zip(points, points[1:])]


def split(ary, indices_or_sections, axis=0):
    return _split("np.split", ary, indices_or_sections, axis, equal=True)


def array_split(ary, indices_or_sections, axis=0):
    return _split("np.array_split", ary, indices_or_sections, axis, equal=False)


def tile(A, reps):
    (x,) = numpy_api._as_tracers(A)
    reps = tuple(int(r) for r in np.atleast_1d(_known(reps, "np.tile", "reps")))
    if any(r < 0 for r in reps):
        raise ShapeError(f"np.tile: negative repetitions {reps}", user_location())
    shape = (1,) * (len(reps) - x.ndim) + x.shape
    reps = (1,) * (len(shape) - len(reps)) + reps
    interleaved = numpy_api.reshape(x, tuple(n for size in shape for n in (1, size)))
    spread = numpy_api.broadcast_to(interleaved, tuple(n for pair in zip(reps, shape) for n in pair))
    return numpy_api.reshape(spread, tuple(r * size for r, size in zip(reps, shape)))


def repeat(a, repeats, axis=None):
    """Each element ``repeats`` times along ``axis`` (None: of the flattened array): a broadcast
    for one count, a gather of numpy's own repeat of the positions for one count each."""
    from flowjit.frontend.numpy_arrays import take_static
    (x,) = numpy_api._as_tracers(a)
    if axis is None:
        x, axis = numpy_api.ravel(x), 0
    (axis,) = _normalized(axis, x.ndim, "np.repeat")
    counts = np.asarray(_known(repeats, "np.repeat", "repeats"))
    if counts.dtype.kind not in "iub" or np.any(counts < 0):
        raise OpTypeError(f"np.repeat: repeats must be non-negative integers, got {repeats!r}", user_location())
    if counts.size == 1:
        count = int(counts.reshape(()))
        shape = x.shape
        spread = numpy_api.broadcast_to(numpy_api.expand_dims(x, axis + 1),
                                        shape[:axis + 1] + (count,) + shape[axis + 1:])
        return numpy_api.reshape(spread, shape[:axis] + (shape[axis] * count,) + shape[axis + 1:])
    try:
        positions = np.repeat(np.arange(x.shape[axis]), counts)
    except ValueError as error:
        raise ShapeError(f"np.repeat: {error}", user_location()) from None
    return take_static(x, positions, axis)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ShapeError("np.meshgrid: Valid values for `indexing` are 'xy' and 'ij'.", user_location())
    arrays = [numpy_api.ravel(x) for x in numpy_api._as_tracers(*xi)]
    rank = len(arrays)
    shapes = [[1] * rank for _ in arrays]
    for dim, (shape, x) in enumerate(zip(shapes, arrays)):
        shape[dim] = x.size
    if indexing == "xy" and rank > 1:
        for shape in shapes[:2]:
            shape[0], shape[1] = shape[1], shape[0]
    grids = [numpy_api.reshape(x, tuple(shape)) for x, shape in zip(arrays, shapes)]
    if sparse:
        return tuple(grids)
    full = tuple(np.broadcast_shapes(*(tuple(shape) for shape in shapes)))
    return tuple(numpy_api.broadcast_to(grid, full) for grid in grids)


# -- reductions and tests --------------------------------------------------------------------------
def ptp(a, axis=None, out=None, keepdims=False):
    _reject("np.ptp", out=out)
    (x,) = numpy_api._as_tracers(a)
    return np.subtract(x.max(axis=axis, keepdims=keepdims), x.min(axis=axis, keepdims=keepdims))


def count_nonzero(a, axis=None, *, keepdims=False):
    (x,) = numpy_api._as_tracers(a)
    return numpy_api.astype(x, np.bool_).sum(axis=axis, keepdims=keepdims)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    (x,) = numpy_api._as_tracers(x)
    if x.dtype.kind == "c":
        raise UnsupportedFunctionError("np.nan_to_num of complex values is not supported", user_location())
    if x.dtype.kind != "f":
        return x._copy()
    info = np.finfo(x.dtype)
    with np.errstate(over="ignore"):
        replacements = [np.asarray(value, x.dtype)[()] for value in
                        (nan, info.max if posinf is None else posinf, info.min if neginf is None else neginf)]
    result = np.where(np.isnan(x), replacements[0], x)
    result = np.where(x == np.inf, replacements[1], result)
    return np.where(x == -np.inf, replacements[2], result)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy's: |a - b| <= atol + rtol |b| where b is finite, or a == b; b first made inexact."""
    arrays = iter(numpy_api._as_tracers(*(v for v in (a, b) if not numpy_api._is_python_scalar(v))))
    x, y = (v if numpy_api._is_python_scalar(v) else next(arrays) for v in (a, b))
    if isinstance(y, Tracer):
        y = numpy_api.astype(y, np.result_type(y.dtype, 1.0), copy=False)
    elif isinstance(y, int):
        y = float(y)
    result = (np.less_equal(np.abs(x - y), atol + rtol * np.abs(y)) & np.isfinite(y)) | (x == y)
    if equal_nan:
        result = result | (np.isnan(x) & np.isnan(y))
    return result


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).all()


def _nan_reduction(what: str, a, **unsupported):
    """``a`` as a tracer, and whether it holds floats (NaN); the arguments flowjit does not take
    (``dtype``, ``out``, ``where``...) refused where given."""
    _reject(what, **{name: value for name, value in unsupported.items() if value is not np._NoValue})
    (x,) = numpy_api._as_tracers(a)
    return x, x.dtype.kind in "fc"


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue):
    x, inexact = _nan_reduction("np.nansum", a, dtype=dtype, out=out, initial=initial, where=where)
    return (np.where(np.isnan(x), 0, x) if inexact else x).sum(axis=axis, keepdims=keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=np._NoValue):
    """numpy's: the sum without NaN over their count, divided as numpy's true_divide into the
    sum's dtype does (in float64, then rounded); NaN where a slice is all NaN."""
    x, inexact = _nan_reduction("np.nanmean", a, dtype=dtype, out=out, where=where)
    if not inexact:
        return x.mean(axis=axis, keepdims=keepdims)
    total = np.where(np.isnan(x), 0, x).sum(axis=axis, keepdims=keepdims)
    count = (~np.isnan(x)).sum(axis=axis, keepdims=keepdims)
    return numpy_api.astype(total / count, total.dtype, copy=False)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue):
    x, inexact = _nan_reduction("np.nanprod", a, dtype=dtype, out=out, initial=initial, where=where)
    return (np.where(np.isnan(x), 1, x) if inexact else x).prod(axis=axis, keepdims=keepdims)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=np._NoValue, mean=np._NoValue,
           correction=np._NoValue):
    """numpy's: the mean without NaN (divided into its dtype), the squares of the deviations of
    the values that are not NaN summed and divided by their count less ddof; NaN where that
    is not positive."""
    x, inexact = _nan_reduction("np.nanvar", a, dtype=dtype, out=out, where=where, mean=mean,
                                correction=correction)
    if not inexact:
        return x.var(axis=axis, ddof=ddof, keepdims=keepdims)
    missing = np.isnan(x)
    count = (~missing).sum(axis=axis, keepdims=True)
    total = np.where(missing, 0, x).sum(axis=axis, keepdims=True)
    deviation = np.where(missing, 0, x - numpy_api.astype(total / count, total.dtype, copy=False))
    squares = (deviation * deviation).sum(axis=axis, keepdims=keepdims)
    freedom = (~missing).sum(axis=axis, keepdims=keepdims) - ddof
    variance = numpy_api.astype(squares / freedom, squares.dtype, copy=False)
    return np.where(freedom <= 0, np.nan, variance)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=np._NoValue, mean=np._NoValue,
           correction=np._NoValue):
    return np.sqrt(nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where, mean=mean,
                          correction=correction))


def _nan_extreme(what: str, larger: bool):
    def extreme(a, axis=None, out=None, keepdims=False, initial=np._NoValue, where=np._NoValue):
        x, inexact = _nan_reduction(what, a, out=out, initial=initial, where=where)
        reduce = (lambda v: v.max(axis=axis, keepdims=keepdims)) if larger else \
            (lambda v: v.min(axis=axis, keepdims=keepdims))
        if not inexact:
            return reduce(x)
        missing = np.isnan(x)
        found = reduce(np.where(missing, -np.inf if larger else np.inf, x))
        return np.where(missing.all(axis=axis, keepdims=keepdims), np.nan, found)   # fmax.reduce: all NaN
    extreme.__name__ = what.removeprefix("np.")
    return extreme


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _reject("np.trace", dtype=dtype, out=out)
    (x,) = numpy_api._as_tracers(a)
    if x.ndim != 2 or _normalized((axis1, axis2), 2, "np.trace") != (0, 1):
        raise UnsupportedFunctionError(f"np.trace of {x._value.type} over axes ({axis1}, {axis2}): flowjit "
                                       f"takes the trace of a matrix (axes 0 and 1)", user_location())
    from flowjit.frontend.numpy_arrays import diag
    return diag(x, _known(offset, "np.trace", "offset")).sum()


def inner(a, b):
    """numpy's inner product over the last axes: a @ b.T of the arrays flattened to matrices."""
    x, y = numpy_api._as_tracers(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return np.multiply(x, y)
    if x.shape[-1] != y.shape[-1]:
        raise ShapeError(f"np.inner: shapes {x.shape} and {y.shape} not aligned: {x.shape[-1]} (dim "
                         f"{x.ndim - 1}) != {y.shape[-1]} (dim {y.ndim - 1})", user_location())
    size = x.shape[-1]
    left = numpy_api.reshape(x, (-1, size)) if x.ndim != 1 else x
    right = numpy_api.reshape(y, (-1, size)) if y.ndim != 1 else y
    product = numpy_api.matmul(left, numpy_api.transpose(right) if right.ndim == 2 else right)
    return numpy_api.reshape(product, x.shape[:-1] + y.shape[:-1])


# -- linear algebra: numpy's own LAPACK calls (compiler/ir/ops/linalg.py) ------------------------------
def _linalg(name: str):
    def function(*arrays):
        what = f"np.linalg.{name}"
        inputs = numpy_api._as_tracers(*arrays)
        return inputs[0]._trace.emit1(getattr(ops, name), inputs, {}, what=what)
    function.__name__ = name
    return function


FUNCTIONS = {np.flip: flip, np.moveaxis: moveaxis, np.vstack: vstack, np.hstack: hstack, np.split: split,
             np.array_split: array_split, np.tile: tile, np.repeat: repeat, np.meshgrid: meshgrid, np.ptp: ptp,
             np.count_nonzero: count_nonzero, np.nan_to_num: nan_to_num, np.isclose: isclose,
             np.allclose: allclose, np.nansum: nansum, np.nanmean: nanmean,
             np.nanprod: nanprod, np.nanvar: nanvar, np.nanstd: nanstd,
             np.nanmax: _nan_extreme("np.nanmax", True), np.nanmin: _nan_extreme("np.nanmin", False),
             np.trace: trace, np.inner: inner, np.fliplr: fliplr, np.flipud: flipud, np.column_stack: column_stack,
             np.atleast_1d: _at_least_function(1), np.atleast_2d: _at_least_function(2),
             np.atleast_3d: _at_least_function(3), np.linalg.inv: _linalg("inv"), np.linalg.det: _linalg("det"),
             np.linalg.solve: _linalg("solve")}
METHODS = {"repeat": repeat, "trace": trace}
