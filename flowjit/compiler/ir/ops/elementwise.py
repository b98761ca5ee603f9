"""Elementwise ops: numpy ufuncs, erf/sigmoid, cast and where.

Each ufunc op's dtype rule is numpy's own: the result dtype is what the ufunc gives
for those input dtypes (found once on 0-d operands and cached), so promotion follows
numpy 2 exactly.  Shapes broadcast.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flowjit.compiler.ir.ops.base import (AttrKind, Op, OpKind, broadcast_shapes, register,
                                          required)
from flowjit.compiler.ir.types import TensorType, check_dtype
from flowjit.errors import OpTypeError


@functools.lru_cache(maxsize=None)
def _result_dtype(function, dtypes: tuple[np.dtype, ...]) -> np.dtype:
    operands = [np.zeros((), dtype) for dtype in dtypes]
    try:
        with np.errstate(all="ignore"):
            result = function(*operands)
    except (TypeError, np.exceptions.DTypePromotionError, ValueError) as error:
        names = ", ".join(str(dtype) for dtype in dtypes)
        raise OpTypeError(f"not defined for dtypes ({names}): {error}") from None
    return check_dtype(np.asarray(result).dtype, "result")


def _elementwise_rule(function):
    def rule(types: list[TensorType], attrs: dict) -> list[TensorType]:
        shape = broadcast_shapes(types)
        return [TensorType(shape, _result_dtype(function, tuple(t.dtype for t in types)))]
    return rule


def _ufunc_op(name: str, ufunc, *, commutative: bool = False, doc: str = "") -> Op:
    return register(Op(
        name=name, kind=OpKind.ELEMENTWISE, num_inputs=ufunc.nin,
        type_rule=_elementwise_rule(ufunc),
        reference=lambda arrays, attrs: [ufunc(*arrays)],
        commutative=commutative, ufunc=ufunc, doc=doc or f"numpy.{ufunc.__name__}"))


# -- unary -----------------------------------------------------------------------------------
neg = _ufunc_op("neg", np.negative)
abs_ = _ufunc_op("abs", np.absolute)
sqrt = _ufunc_op("sqrt", np.sqrt)
square = _ufunc_op("square", np.square)
reciprocal = _ufunc_op("reciprocal", np.reciprocal)
exp = _ufunc_op("exp", np.exp)
exp2 = _ufunc_op("exp2", np.exp2)
expm1 = _ufunc_op("expm1", np.expm1)
log = _ufunc_op("log", np.log)
log2 = _ufunc_op("log2", np.log2)
log10 = _ufunc_op("log10", np.log10)
log1p = _ufunc_op("log1p", np.log1p)
sin = _ufunc_op("sin", np.sin)
cos = _ufunc_op("cos", np.cos)
tan = _ufunc_op("tan", np.tan)
arcsin = _ufunc_op("arcsin", np.arcsin)
arccos = _ufunc_op("arccos", np.arccos)
arctan = _ufunc_op("arctan", np.arctan)
sinh = _ufunc_op("sinh", np.sinh)
cosh = _ufunc_op("cosh", np.cosh)
tanh = _ufunc_op("tanh", np.tanh)
floor = _ufunc_op("floor", np.floor)
ceil = _ufunc_op("ceil", np.ceil)
trunc = _ufunc_op("trunc", np.trunc)
rint = _ufunc_op("rint", np.rint)
sign = _ufunc_op("sign", np.sign)
logical_not = _ufunc_op("logical_not", np.logical_not)
invert = _ufunc_op("invert", np.invert)
isnan = _ufunc_op("isnan", np.isnan)
isinf = _ufunc_op("isinf", np.isinf)
isfinite = _ufunc_op("isfinite", np.isfinite)

# -- binary ----------------------------------------------------------------------------------
add = _ufunc_op("add", np.add, commutative=True)
sub = _ufunc_op("sub", np.subtract)
mul = _ufunc_op("mul", np.multiply, commutative=True)
div = _ufunc_op("div", np.divide)
floordiv = _ufunc_op("floordiv", np.floor_divide)
mod = _ufunc_op("mod", np.remainder)
fmod = _ufunc_op("fmod", np.fmod)
pow_ = _ufunc_op("pow", np.power)
maximum = _ufunc_op("maximum", np.maximum, commutative=True)
minimum = _ufunc_op("minimum", np.minimum, commutative=True)
fmax = _ufunc_op("fmax", np.fmax, commutative=True)
fmin = _ufunc_op("fmin", np.fmin, commutative=True)
arctan2 = _ufunc_op("arctan2", np.arctan2)
eq = _ufunc_op("eq", np.equal, commutative=True)
ne = _ufunc_op("ne", np.not_equal, commutative=True)
lt = _ufunc_op("lt", np.less)
le = _ufunc_op("le", np.less_equal)
gt = _ufunc_op("gt", np.greater)
ge = _ufunc_op("ge", np.greater_equal)
logical_and = _ufunc_op("logical_and", np.logical_and, commutative=True)
logical_or = _ufunc_op("logical_or", np.logical_or, commutative=True)
logical_xor = _ufunc_op("logical_xor", np.logical_xor, commutative=True)
bitwise_and = _ufunc_op("bitwise_and", np.bitwise_and, commutative=True)
bitwise_or = _ufunc_op("bitwise_or", np.bitwise_or, commutative=True)
bitwise_xor = _ufunc_op("bitwise_xor", np.bitwise_xor, commutative=True)


# -- erf and sigmoid: scipy.special's ufuncs when scipy is installed ---------------------------
# scipy is imported on first use, not when flowjit is (it costs a fifth of a second).
def _float_like(array: np.ndarray) -> np.ndarray:
    # scipy.special computes float16 and integers in float32 / float64, as numpy's exp does not.
    if array.dtype == np.float32 or array.dtype == np.float16:
        return array.astype(np.float32)
    return array.astype(np.float64)


_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def _erf_fallback(array):
    array = _float_like(np.asarray(array))
    return _erf_scalar(array).astype(array.dtype)


def _expit_fallback(array):
    array = _float_like(np.asarray(array))
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-array))).astype(array.dtype)


@functools.lru_cache(maxsize=None)
def special(name: str):
    """scipy.special.<name> if scipy is installed, else a numpy-only equivalent."""
    try:
        import scipy.special
        return getattr(scipy.special, name)
    except ImportError:
        return {"erf": _erf_fallback, "expit": _expit_fallback}[name]


def _special_rule(name: str):
    def rule(types, attrs):
        return _elementwise_rule(special(name))(types, attrs)
    return rule


erf = register(Op("erf", OpKind.ELEMENTWISE, 1, _special_rule("erf"),
                  lambda arrays, attrs: [special("erf")(arrays[0])], doc="scipy.special.erf"))
sigmoid = register(Op("sigmoid", OpKind.ELEMENTWISE, 1, _special_rule("expit"),
                      lambda arrays, attrs: [special("expit")(arrays[0])],
                      doc="scipy.special.expit: 1 / (1 + exp(-x))"))
erf.extensions["ufunc_name"] = "erf"
sigmoid.extensions["ufunc_name"] = "expit"


# -- cast and where ----------------------------------------------------------------------------
def _cast_rule(types, attrs):
    return [types[0].with_dtype(attrs["dtype"])]


cast = register(Op("cast", OpKind.ELEMENTWISE, 1, _cast_rule,
                   lambda arrays, attrs: [arrays[0].astype(attrs["dtype"])],
                   attrs={"dtype": required(AttrKind.DTYPE)}, doc="ndarray.astype"))


def _where_rule(types, attrs):
    shape = broadcast_shapes(types)
    return [TensorType(shape, _result_dtype(np.where, tuple(t.dtype for t in types)))]


where = register(Op("where", OpKind.ELEMENTWISE, 3, _where_rule,
                    lambda arrays, attrs: [np.where(*arrays)], doc="numpy.where(cond, x, y)"))
