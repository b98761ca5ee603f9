"""The numpy surface flowjit traces: ufuncs, functions and ndarray methods, in one table.

Each entry lowers one numpy call to IR ops with numpy's exact semantics (dtype rules,
axis normalisation, keepdims).  Anything missing raises an error naming it.
"""

from __future__ import annotations

import builtins
import operator
import sys
import warnings

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.ops.base import normalize_axis
from flowjit.compiler.ir.ops.reduction import reduced_shape
from flowjit.compiler.ir.types import check_dtype
from flowjit.errors import (OpTypeError, ScalarOverflowError, ShapeError, TraceError, TracerConversionError,
                            UnsupportedFunctionError, user_location)
from flowjit.frontend.indexing import basic_index
from flowjit.frontend.tracer import Tracer, TraceContext, current_trace, lift_operands

# Every ufunc an op mirrors (``Op.ufunc``, set where the op is defined): the registry is the map.
UFUNCS = {op.ufunc: op for op in ops.all_ops().values() if isinstance(op.ufunc, np.ufunc)}
COMPARISONS = (ops.eq, ops.ne, ops.lt, ops.le, ops.gt, ops.ge)
# ufunc.reduce lowered to reductions: np.add.reduce(x, axis=0) is np.sum(x, axis=0).
UFUNC_REDUCTIONS = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min"}


SCIPY_UFUNCS = {op.special: op for op in ops.all_ops().values() if op.special is not None}


def _scipy_op(ufunc):
    """scipy.special's erf and expit, recognised without importing scipy ourselves: a user
    who calls them has imported it already."""
    special = sys.modules.get("scipy.special")
    name = getattr(ufunc, "__name__", None)
    if special is not None and name in SCIPY_UFUNCS and getattr(special, name, None) is ufunc:
        return SCIPY_UFUNCS[name]
    return None


def _reject_kwargs(name: str, kwargs: dict, allowed=()) -> None:
    extra = [key for key, value in kwargs.items() if key not in allowed and value is not None]
    if extra:
        raise UnsupportedFunctionError(f"{name}: argument(s) {', '.join(extra)} are not supported",
                                       user_location())


def apply_ufunc(trace: TraceContext, ufunc, method: str, inputs: tuple, kwargs: dict):
    name = f"np.{ufunc.__name__}"
    if ufunc is np.matmul and method == "__call__":
        _reject_kwargs(name, kwargs)
        return matmul(*inputs)
    if ufunc is np.positive and method == "__call__":
        return inputs[0]
    if ufunc is np.divmod and method == "__call__":
        return divmod_(*inputs, **kwargs)
    if ufunc is np.hypot and method == "__call__":
        from flowjit.frontend.numpy_arrays import hypot
        return hypot(trace, list(inputs), kwargs)
    if method == "accumulate" and ufunc in UFUNC_REDUCTIONS:
        from flowjit.frontend.numpy_arrays import accumulate
        return accumulate(ufunc, *inputs, **kwargs)
    if method == "reduce" and ufunc in UFUNC_REDUCTIONS:
        _reject_kwargs(f"{name}.reduce", kwargs, ("axis", "keepdims", "dtype"))
        return REDUCTIONS[UFUNC_REDUCTIONS[ufunc]](inputs[0], axis=kwargs.get("axis", 0),
                                                    dtype=kwargs.get("dtype"),
                                                    keepdims=kwargs.get("keepdims", False))
    op = UFUNCS.get(ufunc) or _scipy_op(ufunc)
    if op is None or method != "__call__":
        from flowjit.frontend.unsupported import ufunc_error
        raise ufunc_error(ufunc, method)
    out = kwargs.pop("out", None)
    if out is not None:
        return _call_into(trace, ufunc, method, inputs, kwargs, out)
    dtype = kwargs.pop("dtype", None)
    _reject_kwargs(name, kwargs)
    return _call_ufunc(trace, ufunc, op, name, list(inputs), dtype)


def _call_into(trace: TraceContext, ufunc, method: str, inputs: tuple, kwargs: dict, out):
    """``ufunc(..., out=x)``, as ``x += y`` calls it on a numpy array: numpy writes the result
    into x.  A traced x is rebound (tracer.write_in_place); a numpy array the function made is
    replaced by the traced result where Python rebinds its only name (tracer.write_into_local_array)."""
    from flowjit.frontend.tracer import write_in_place, write_into_local_array
    targets = out if isinstance(out, tuple) else (out,)
    name = f"np.{ufunc.__name__}"
    if len(targets) != 1 or targets[0] is None:
        raise UnsupportedFunctionError(f"{name}: out= must name one array", user_location())
    (target,) = targets
    where = f"{name}(..., out=x) on {target._value.type if isinstance(target, Tracer) else _numpy_type(target)}"
    instead = f"x = {name}(...)"

    def compute():
        return apply_ufunc(trace, ufunc, method, inputs, dict(kwargs))
    if isinstance(target, Tracer):
        return write_in_place(target, compute, where, instead)
    if not isinstance(target, np.ndarray):
        raise UnsupportedFunctionError(f"{name}: out= must be an array, not {type(target).__name__}",
                                       user_location())
    return write_into_local_array(target, _as_tracer(trace, compute()), where, instead)


def _numpy_type(array: np.ndarray) -> str:
    from flowjit.compiler.ir.types import TensorType
    return str(TensorType(array.shape, check_dtype(array.dtype)))


def divmod_(x1, x2, out=None, **kwargs):
    """np.divmod and divmod(): numpy's loop computes exactly floor_divide and remainder."""
    _reject_kwargs("np.divmod", {"out": out})
    return np.floor_divide(x1, x2, **kwargs), np.remainder(x1, x2, **kwargs)


# -- numpy 2's dtype rules for one ufunc call ------------------------------------------------------
def _is_python_scalar(item) -> bool:
    return isinstance(item, (bool, int, float, complex)) and not isinstance(item, np.generic)


def _spelled(operands: list) -> str:
    return ", ".join(repr(item) if _is_python_scalar(item) else str(item._value.type) for item in operands)


def _scalar_in(value, dtype: np.dtype, what: str) -> np.ndarray:
    """A Python scalar converted to the dtype numpy's loop reads it in."""
    if dtype.kind in "iu" and not isinstance(value, float):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ScalarOverflowError(f"{what}: Python integer {value} out of bounds for {dtype}", user_location())
        return np.asarray(value).astype(dtype)
    if dtype.kind == "b":
        return np.asarray(bool(value))
    if dtype.kind == "c":
        return np.asarray(complex(value)).astype(dtype)
    try:
        number = float(value)
    except OverflowError as error:
        raise ScalarOverflowError(f"{what}: {error}", user_location()) from None
    with np.errstate(all="ignore"):
        return np.asarray(number).astype(dtype)


def _call_ufunc(trace: TraceContext, ufunc, op, name: str, inputs: list, dtype):
    """``ufunc(*inputs, dtype=dtype)`` as numpy 2 computes it.

    Python scalars are weak (NEP 50): each takes the dtype of the loop numpy picks for the
    traced operands (int8 + 100 stays int8, float32 * 2.5 stays float32), and a Python int
    that does not fit it raises numpy's OverflowError (int8 + 1000, uint8 + -1), except in a
    comparison, where numpy answers for every element at once (int8 < 1000 is all True).
    ``dtype=`` picks the loop: the operands are cast to its dtypes before the op.
    """
    scalars = [_is_python_scalar(item) for item in inputs]
    if not any(scalars) and dtype is None:
        return trace.emit1(op, lift_operands(trace, inputs, name), what=name)
    operands = [item if scalar else _as_tracer(trace, item) for item, scalar in zip(inputs, scalars)]
    what = f"{name}({_spelled(operands)})"
    if dtype is not None:
        try:
            dtype = check_dtype(dtype, f"{name} dtype")
        except TraceError as error:
            raise type(error)(error.message, user_location()) from None
    # numpy's own verdict on 0-d stand-ins: its OverflowError, or a comparison's answer.
    samples = [item if scalar else np.zeros((), item.dtype) for item, scalar in zip(operands, scalars)]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sample = ufunc(*samples) if dtype is None else ufunc(*samples, dtype=dtype)
    except OverflowError as error:
        raise ScalarOverflowError(f"{what}: {error}", user_location()) from None
    except Exception:                 # numpy's other complaints come from the op's type rule
        sample = None
    signature = tuple((np.dtype(bool) if type(item) is bool else type(item)) if scalar else item.dtype
                      for item, scalar in zip(operands, scalars))
    try:
        fixed = {} if dtype is None else {"signature": (None,) * ufunc.nin + (dtype,)}
        loop = ufunc.resolve_dtypes(signature + (None,) * ufunc.nout, **fixed)
    except (TypeError, ValueError) as error:
        raise OpTypeError(f"{what}: {error}", user_location()) from None
    if op in COMPARISONS and sample is not None and any(
            scalar and type(item) is int and loop[i].kind in "iu"
            and not np.iinfo(loop[i]).min <= item <= np.iinfo(loop[i]).max
            for i, (item, scalar) in enumerate(zip(operands, scalars))):
        shape = np.broadcast_shapes(*(item.shape for item, scalar in zip(operands, scalars) if not scalar))
        return broadcast_to(trace.constant(np.asarray(sample)), shape)
    lifted = []
    for item, scalar, loop_dtype in zip(operands, scalars, loop):
        if scalar:
            lifted.append(trace.constant(_scalar_in(item, np.dtype(loop_dtype), what)))
        elif dtype is not None and item.dtype != loop_dtype:
            lifted.append(astype(item, loop_dtype))
        else:
            lifted.append(item)
    result = trace.emit1(op, lifted, what=name)
    out_dtype = np.dtype(loop[ufunc.nin])
    return astype(result, out_dtype) if dtype is not None and result.dtype != out_dtype else result


# -- helpers ---------------------------------------------------------------------------------------
def _trace_of(*items) -> TraceContext:
    for item in items:
        if isinstance(item, Tracer):
            return item._trace
    trace = current_trace()
    if trace is None:
        raise TraceError("flowjit numpy function called outside a trace", user_location())
    return trace


def _as_tracer(trace: TraceContext, item) -> Tracer:
    return item if isinstance(item, Tracer) else lift_operands(trace, [item])[0]


def _as_tracers(*items) -> list[Tracer]:
    """Each of ``items`` as a tracer of the trace the first traced one belongs to."""
    trace = _trace_of(*items)
    return [_as_tracer(trace, item) for item in items]


def _static_ints(value, what: str, role: str) -> tuple[int, ...]:
    """A shape, axis or permutation: an int or a sequence of ints, known while tracing."""
    items = (value,) if isinstance(value, (int, np.integer)) else value
    try:
        return tuple(operator.index(item) for item in items)
    except TracerConversionError:
        raise
    except TypeError:
        raise OpTypeError(f"{what}: {role} {value!r} is not an integer or a sequence of integers",
                          user_location()) from None


def _axes(axis, rank: int, what: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(rank))
    axes = _static_ints(axis, what, "axis")
    try:
        normalized = [normalize_axis(a, rank) for a in axes]
    except ShapeError as error:
        raise ShapeError(f"{what}: {error.message}", user_location()) from None
    if len(set(normalized)) != len(normalized):
        raise ShapeError(f"{what}: repeated axis in {axis}", user_location())
    return tuple(sorted(normalized))


def astype(x, dtype, copy=True, **kwargs):
    trace = _trace_of(x)
    x = _as_tracer(trace, x)
    try:
        dtype = check_dtype(dtype, "astype target")
    except TraceError as error:
        raise type(error)(error.message, user_location()) from None
    if x.dtype == dtype:
        return x._copy() if copy else x     # numpy's astype copies: x += ... on it must not reach x
    return trace.emit1(ops.cast, [x], {"dtype": dtype}, what="astype")


def _reduction(name: str):
    op = getattr(ops, name)

    def reduce(a, axis=None, dtype=None, out=None, keepdims=False, ddof=None, **kwargs):
        _reject_kwargs(f"np.{name}", {"out": out, **kwargs})
        trace = _trace_of(a)
        a = _as_tracer(trace, a)
        axes = _axes(axis, a.ndim, f"np.{name}")
        if dtype is not None:
            a = astype(a, dtype)
        attrs = {"axes": axes, "keepdims": bool(keepdims)}
        if ddof is not None:
            if name not in ("var", "std"):
                raise UnsupportedFunctionError(f"np.{name}: argument ddof is not supported", user_location())
            attrs["ddof"] = int(ddof)
        result = trace.emit1(op, [a], attrs, what=f"np.{name}")
        if dtype is not None and name in ("sum", "prod"):
            result = astype(result, dtype)
        return result
    reduce.__name__ = name
    return reduce


REDUCTIONS = {name: _reduction(name) for name in ("sum", "prod", "mean", "max", "min", "var", "std")}


def _arg_reduction(name: str):
    op = getattr(ops, name)

    def reduce(a, axis=None, out=None, *, keepdims=False):
        _reject_kwargs(f"np.{name}", {"out": out})
        trace = _trace_of(a)
        a = _as_tracer(trace, a)
        if axis is not None:
            axis = _axes(axis, a.ndim, f"np.{name}")[0]
        return trace.emit1(op, [a], {"axis": axis, "keepdims": bool(keepdims)}, what=f"np.{name}")
    return reduce


def _bool_reduction(name: str):
    def reduce(a, axis=None, out=None, keepdims=False, **kwargs):
        _reject_kwargs(f"np.{name}", {"out": out, **kwargs})
        trace = _trace_of(a)
        a = astype(_as_tracer(trace, a), np.bool_)
        axes = _axes(axis, a.ndim, f"np.{name}")
        if any(a.shape[axis] == 0 for axis in axes):      # the identity: all() is True, any() False
            shape = reduced_shape(a.shape, axes, bool(keepdims))
            return broadcast_to(trace.constant(np.asarray(name == "all")), shape)
        reduction = ops.max if name == "any" else ops.min
        return trace.emit1(reduction, [a], {"axes": axes, "keepdims": bool(keepdims)}, what=f"np.{name}")
    return reduce


def reshape(a, shape=None, *args, order="C", newshape=None, copy=None):
    shape = shape if shape is not None else newshape
    if args:
        shape = (shape, *args)
    if order != "C":
        raise UnsupportedFunctionError("reshape: only order='C' is supported", user_location())
    trace = _trace_of(a)
    a = _as_tracer(trace, a)
    shape = _static_ints(shape, "reshape", "shape")
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape of {a._value.type} to {list(shape)}: only one dimension can be -1",
                         user_location())
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or a.size % known:
            raise ShapeError(f"reshape: cannot reshape {a._value.type} into shape {list(shape)}",
                             user_location())
        shape = tuple(a.size // known if d == -1 else d for d in shape)
    if shape == a.shape:
        return a
    return trace.emit1(ops.reshape, [a], {"shape": shape}, what="reshape")


def transpose(a, axes=None, *more):
    if more:
        axes = (axes, *more)
    trace = _trace_of(a)
    a = _as_tracer(trace, a)
    if axes is None:
        perm = tuple(reversed(range(a.ndim)))
    else:
        perm = tuple(normalize_axis(axis, a.ndim) for axis in _static_ints(axes, "transpose", "axes"))
    if perm == tuple(range(a.ndim)):
        return a
    return trace.emit1(ops.transpose, [a], {"perm": perm}, what="transpose")


def swapaxes(a, axis1, axis2):
    perm = list(range(a.ndim))
    axis1, axis2 = normalize_axis(axis1, a.ndim), normalize_axis(axis2, a.ndim)
    perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
    return transpose(a, perm)


def expand_dims(a, axis):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    rank = a.ndim + len(axes)
    axes = _axes(axes, rank, "np.expand_dims")
    dims = iter(a.shape)
    return reshape(a, tuple(1 if i in axes else next(dims) for i in range(rank)))


def squeeze(a, axis=None):
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = _axes(axis, a.ndim, "np.squeeze")
        for i in axes:
            if a.shape[i] != 1:
                raise ShapeError(f"np.squeeze: axis {i} of {a._value.type} has size {a.shape[i]}, not 1",
                                 user_location())
    return reshape(a, tuple(d for i, d in enumerate(a.shape) if i not in axes))


def ravel(a, order="C"):
    return reshape(a, (a.size,), order=order)


def broadcast_to(array, shape, subok=False):
    trace = _trace_of(array)
    array = _as_tracer(trace, array)
    shape = _static_ints(shape, "np.broadcast_to", "shape")
    if shape == array.shape:
        return array
    return trace.emit1(ops.broadcast_to, [array], {"shape": shape}, what="np.broadcast_to")


def concatenate(arrays, axis=0, out=None, dtype=None, casting=None):
    _reject_kwargs("np.concatenate", {"out": out, "casting": casting})
    trace = _trace_of(*arrays)
    arrays = [_as_tracer(trace, a) for a in arrays]
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    if not arrays:
        raise ShapeError("np.concatenate needs at least one array", user_location())
    axis = _axes(axis, arrays[0].ndim, "np.concatenate")[0]
    result = arrays[0]._copy() if len(arrays) == 1 else trace.emit1(ops.concat, arrays, {"axis": axis},
                                                                    what="np.concatenate")
    return astype(result, dtype) if dtype is not None else result


def stack(arrays, axis=0, out=None, dtype=None, casting=None):
    arrays = list(arrays)
    if not arrays:
        raise ShapeError("np.stack needs at least one array", user_location())
    shapes = {tuple(np.shape(a)) if not isinstance(a, Tracer) else a.shape for a in arrays}
    if len(shapes) != 1:
        raise ShapeError(f"np.stack: all arrays must have the same shape, got {sorted(shapes)}",
                         user_location())
    trace = _trace_of(*arrays)
    rank = len(next(iter(shapes))) + 1
    axis = _axes(axis, rank, "np.stack")[0]
    return concatenate([expand_dims(_as_tracer(trace, a), axis) for a in arrays], axis=axis, out=out,
                       dtype=dtype, casting=casting)


def where(condition, x=None, y=None):
    if x is None or y is None:
        raise UnsupportedFunctionError("np.where(condition) with one argument has a data-dependent shape; "
                                       "use np.where(condition, x, y)", user_location())
    trace = _trace_of(condition, x, y)
    inputs = [condition, x, y]
    if not any(_is_python_scalar(item) for item in inputs):
        return trace.emit1(ops.where, lift_operands(trace, inputs, "np.where"), what="np.where")
    # numpy: the result dtype treats Python scalars as weak, and a scalar is cast to it
    # unsafely (np.where(c, int8_array, 1000) holds -24 where c is false).
    operands = [item if _is_python_scalar(item) else _as_tracer(trace, item) for item in inputs]
    what = f"np.where({_spelled(operands)})"
    samples = [item if _is_python_scalar(item) else np.zeros((), item.dtype) for item in operands]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dtype = np.where(*samples).dtype
            lifted = [trace.constant(np.asarray(item).astype(np.bool_ if i == 0 else dtype))
                      if _is_python_scalar(item) else item for i, item in enumerate(operands)]
    except OverflowError as error:
        raise ScalarOverflowError(f"{what}: {error}", user_location()) from None
    return trace.emit1(ops.where, lifted, what="np.where")


def matmul(a, b):
    trace = _trace_of(a, b)
    a, b = (_as_tracer(trace, item) for item in (a, b))
    return trace.emit1(ops.matmul, [a, b], what="matmul")


def dot(a, b, out=None):
    _reject_kwargs("np.dot", {"out": out})
    ranks = (np.ndim(a) if not isinstance(a, Tracer) else a.ndim,
             np.ndim(b) if not isinstance(b, Tracer) else b.ndim)
    if 0 in ranks:
        return np.multiply(a, b)
    if builtins.max(ranks) > 2:
        from flowjit.frontend.numpy_arrays import dot_nd
        trace = _trace_of(a, b)
        return dot_nd(*(_as_tracer(trace, item) for item in (a, b)))
    return matmul(a, b)


def _full_like(fill):
    def like(a, *args, dtype=None, shape=None, **kwargs):
        value = fill if fill is not None else (args[0] if args else kwargs.pop("fill_value"))
        _reject_kwargs("np.full_like" if fill is None else "np.zeros_like", kwargs, ("order", "subok"))
        trace = _trace_of(a)
        dtype = check_dtype(dtype if dtype is not None else a.dtype)
        shape = a.shape if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        # A new array, writable in place (``total = np.zeros_like(x); total += y``), though it is
        # traced as a broadcast scalar, never materialised.
        if isinstance(value, Tracer):
            return broadcast_to(astype(value, dtype), shape)._copy()
        return broadcast_to(trace.constant(np.asarray(value).astype(dtype)), shape)._copy()
    return like


def _static_shape(a):
    return a.shape


FUNCTIONS = {
    np.sum: REDUCTIONS["sum"], np.prod: REDUCTIONS["prod"], np.mean: REDUCTIONS["mean"],
    np.max: REDUCTIONS["max"], np.amax: REDUCTIONS["max"], np.min: REDUCTIONS["min"],
    np.amin: REDUCTIONS["min"], np.var: REDUCTIONS["var"], np.std: REDUCTIONS["std"],
    np.argmax: _arg_reduction("argmax"), np.argmin: _arg_reduction("argmin"),
    np.any: _bool_reduction("any"), np.all: _bool_reduction("all"),
    np.where: where, np.dot: dot, np.reshape: reshape, np.transpose: transpose,
    np.swapaxes: swapaxes, np.expand_dims: expand_dims, np.squeeze: squeeze, np.ravel: ravel,
    np.broadcast_to: broadcast_to, np.concatenate: concatenate, np.stack: stack,
    np.zeros_like: _full_like(0), np.ones_like: _full_like(1), np.full_like: _full_like(None),
    np.shape: _static_shape, np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.astype: astype,
}


# -- indexing ----------------------------------------------------------------------------------------
def getitem(x: Tracer, key):
    """Basic indexing: a slice of ``x`` (unless it takes everything), reshaped for integer
    indices and ``None`` (indexing.py reads the key); a key with integer arrays is a gather
    (fancy_indexing.py)."""
    from flowjit.frontend import fancy_indexing
    items = key if isinstance(key, tuple) else (key,)
    if any(fancy_indexing.is_index_array(item) for item in items):
        return fancy_indexing.getitem(x, items)
    starts, stops, steps, final_shape = basic_index(x.shape, x._value.type, key)
    result = x
    identity = all(start == 0 and stop == dim and step == 1
                   for start, stop, step, dim in zip(starts, stops, steps, x.shape))
    if not identity:
        result = x._trace.emit1(ops.slice, [x], {"starts": starts, "stops": stops, "steps": steps},
                                what="indexing")
    return reshape(result, tuple(final_shape))


# ndarray methods and properties of a traced array: Tracer.__getattr__ looks names up here.
METHODS = {
    "sum": REDUCTIONS["sum"], "prod": REDUCTIONS["prod"], "mean": REDUCTIONS["mean"],
    "max": REDUCTIONS["max"], "min": REDUCTIONS["min"], "var": REDUCTIONS["var"],
    "std": REDUCTIONS["std"], "argmax": FUNCTIONS[np.argmax], "argmin": FUNCTIONS[np.argmin],
    "any": FUNCTIONS[np.any], "all": FUNCTIONS[np.all], "astype": astype, "transpose": transpose,
    "swapaxes": swapaxes, "squeeze": squeeze, "ravel": ravel,
    "flatten": lambda self, order="C": ravel(self, order)._copy(),      # (always a new array)
    "dot": dot,
    "reshape": lambda self, *shape, order="C": reshape(self, shape[0] if len(shape) == 1 else shape, order=order),
    "copy": lambda self, order="C": self._copy(),
}
PROPERTIES = {"T": lambda self: transpose(self), "mT": lambda self: swapaxes(self, -1, -2)}


def _register_compositions():
    """np.diff, np.pad, np.linalg.norm...: numpy functions written in terms of the ones above."""
    from flowjit.frontend import (einsum, fancy_indexing, histogram, numpy_arrays, numpy_more, order_statistics, rounding,
                                  spectral)
    for module in (rounding, numpy_arrays, fancy_indexing, einsum, order_statistics, histogram, spectral, numpy_more):
        FUNCTIONS.update(module.FUNCTIONS)
        METHODS.update(module.METHODS)
        PROPERTIES.update(getattr(module, "PROPERTIES", {}))


_register_compositions()
