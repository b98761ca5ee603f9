"""Elementwise ops: numpy ufuncs, erf/sigmoid, cast and where.

Each ufunc op's dtype rule is numpy's own: the result dtype is what the ufunc gives
for those input dtypes (found once on 0-d operands and cached), so promotion follows
numpy 2 exactly.  Shapes broadcast.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from flowjit.compiler.ir.ops.base import (AttrKind, Op, OpKind, broadcast_shapes, register,
                                          required)
from flowjit.compiler.ir.ops.lowering import (Lowering, call, cast as cast_text, infix, is_bool, is_float,
                                              literal, lowering, per_float, routine, routine_call, typed)
from flowjit.compiler.ir.types import TensorType, check_dtype, compute_dtype, dtype_short_name, part_dtype
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


def _ufunc_op(name: str, ufunc, lower: Lowering, *, flops: float = 1.0, commutative: bool = False,
              grad=None, doc: str = "", complex_rule=None) -> Op:
    """``complex_rule``: the lowering at complex loop dtypes (numba's complex arithmetic and its
    numpy functions of complex scalars, or a library helper where numba's differs from numpy's);
    without one the op refuses complex values."""
    if complex_rule is not None:
        lower = dataclasses.replace(lower, complex=complex_rule)
    return register(Op(
        name=name, kind=OpKind.ELEMENTWISE, num_inputs=ufunc.nin,
        type_rule=_elementwise_rule(ufunc),
        reference=lambda arrays, attrs: [ufunc(*arrays)],
        commutative=commutative, ufunc=ufunc, doc=doc or f"numpy.{ufunc.__name__}",
        lowering=lower, flops=flops, gradient=grad, complex=complex_rule is not None))


def _complex_helper(name: str):
    """The library's helper at the loop dtype: ``fj.complex_divide_c64(a, b)``."""
    return lambda c, *operands: f"fj.{name}_{dtype_short_name(c.dtype)}({', '.join(operands)})"



# -- gradient rules (ir/gradients.py): rule(node, g, b) -> a cotangent per input, None for none ---
def _unary(derivative):
    """d/dx f(x) = derivative(b, x, out): the rule multiplies it by the cotangent."""
    return lambda node, g, b: (b.mul(g, derivative(b, node.inputs[0], node.output)),)


def _zero(node, g, b):
    """Piecewise constant (floor, sign, floor division...): zero almost everywhere."""
    return (None,) * len(node.inputs)


def _reciprocal_sqrt_of(b, value):
    return b(reciprocal, [b(sqrt, [value])])


def _extreme_grad(larger: bool):
    """max/min of two: the cotangent goes to the operand chosen; at a tie half to each, as the
    central difference of max(a, b) sees it (and jax.grad gives)."""
    def rule(node, g, b):
        x, y = node.inputs
        first = b(gt if larger else lt, [x, y])
        tie = b(eq, [x, y])
        half, one, nothing = b.like(0.5, g), b.like(1, g), b.like(0, g)
        share = b.select(first, one, b.select(tie, half, nothing))
        return b.mul(g, share), b.mul(g, b.sub(one, share))
    return rule


def _power_grad(node, g, b):
    base, exponent = node.inputs
    out = node.output
    one = b.like(1, out)
    d_base = b.mul(g, exponent, b(pow_, [base, b.sub(b.cast(exponent, out.dtype), one)]))
    if exponent.dtype.kind not in "fc":
        return d_base, None
    zero = b.like(0, out)
    log_base = b.select(b(eq, [base, zero]), zero, b(log, [base]))      # 0 ** y: no gradient through log 0
    return d_base, b.mul(g, out, log_base)


def _arctan2_grad(node, g, b):
    y, x = node.inputs
    scale = b.div(g, b.add(b.mul(x, x), b.mul(y, y)))
    return b.mul(scale, x), b.neg(b.mul(scale, y))


# -- scalar lowerings shared by several ops (lowering.py has the common builders) ---------------------
def _maximum(nan_from_first: bool, larger: bool) -> Lowering:
    """maximum/minimum (NaN wins) and fmax/fmin (NaN loses).  Of two equal values (+0.0 and
    -0.0) numpy's float32/float64 loops return the second, its float16 loop the first."""
    def rule(c, a, b):
        if not is_float(c.dtype):
            return f"({a} if {a} {'>=' if larger else '<='} {b} else {b})"
        compare = (">" if larger else "<") + ("=" if np.dtype(c.dtype) == np.float16 else "")
        nan_check = f"{a} != {a}" if nan_from_first else f"{b} != {b}"
        return f"({a} if ({a} {compare} {b} or {nan_check}) else {b})"
    return lowering(rule)


def _truth(a, dtype) -> str:
    return a if is_bool(dtype) else f"({a} != 0)"


def _logical(symbol: str) -> Lowering:
    """logical_and/or/xor: truth tests of both operands (NaN is true), whatever their dtype."""
    return lowering(lambda c, a, b: f"({_truth(a, c.dtype)} {symbol} {_truth(b, c.dtype)})")


def _float_or_int(float_rule, int_rule, cuda_float=None) -> Lowering:
    """``cuda_float``: the float rule on the GPU (numba-cuda has no numpy ufuncs on scalars, and
    the CPU helpers' Python float constants would promote float32 to float64 there)."""
    def rule(float_rule):
        return lambda c, *operands: (float_rule if is_float(c.dtype) else int_rule)(c, *operands)
    return Lowering(rule(float_rule), {"cuda": rule(cuda_float)} if cuda_float else {})


def _rounding(function: str, cuda_function: str) -> Lowering:
    """floor/ceil/trunc/rint: ``function(a)`` on the CPU; on the GPU ``fj.<cuda_function>_f32`` /
    ``_f64`` at float loop dtypes, and the integer itself at integer ones (numpy's integer loops)."""
    float_rule = per_float(cuda_function)
    return Lowering(call(function).rule, {"cuda": lambda c, a: float_rule(c, a) if is_float(c.dtype) else a})


def _plain_divisor(c) -> bool:
    """Whether an integer division's divisor is a constant other than 0 and -1: there numba's
    ``//`` and ``%`` are numpy's (the floor; the divisor's sign), with no overflow (only MIN // -1
    overflows), and LLVM turns them into multiplications.  The helpers' tests of the divisor
    kept such a loop at a third of that speed (digit_sum, nine ``(x // 10**k) % 10`` of int32
    at 4M elements on one thread: 37.5 -> 12.6 ms)."""
    divisor = c.constants[1] if len(c.constants) == 2 else None
    return divisor is not None and divisor != 0 and divisor != -1


def _floordiv_int(c, a, b):
    if _plain_divisor(c):
        return f"({a} // {b})"
    return f"fj.floordiv_{'uint' if np.dtype(c.dtype).kind == 'u' else 'int'}({a}, {b})"


def _mod_int(c, a, b):
    return f"({a} % {b})" if _plain_divisor(c) else f"fj.mod_int({a}, {b})"


def _fmod_int(c, a, b):
    return _mod_int(c, a, b) if np.dtype(c.dtype).kind == "u" else f"fj.fmod_int({a}, {b})"


def _divmod(part: int):
    """Float floor division (0) or remainder (1): numpy's npy_divmod."""
    return lambda c, a, b: f"fj.divmod_float({a}, {b})[{part}]"


def _divmod_cuda(part: int):
    return lambda c, a, b: f"{per_float('divmod')(c, a, b)}[{part}]"


# numpy's float32/float64 power loops take fast paths when the exponent is one value broadcast
# over the result (stride 0): fj.power_scalar_float has them; float16's loop has none.
_POWER_FAST_PATH_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _power(c, a, b):
    if not is_float(c.dtype):
        return f"fj.power_int({a}, {b})"
    general = routine_call("pow", c.dtype, (a, b)) or f"({a} ** {b})"      # fj.pow_f32: vectorised
    exponent = c.inputs[1]
    scalar_exponent = exponent.size == 1 and (exponent.rank == 0 or exponent.shape != c.output.shape)
    if np.dtype(c.dtype) in _POWER_FAST_PATH_DTYPES and scalar_exponent:
        return f"fj.power_scalar_float({a}, {b}, {general})"
    return general


def _power_cuda(c, a, b):
    """On the GPU: libdevice's pow at the loop precision (``**`` of float32 goes through float64)."""
    if not is_float(c.dtype):
        return f"fj.power_int({a}, {b})"
    exponent = c.inputs[1]
    scalar_exponent = exponent.size == 1 and (exponent.rank == 0 or exponent.shape != c.output.shape)
    if np.dtype(c.dtype) in _POWER_FAST_PATH_DTYPES and scalar_exponent:
        return per_float("power_scalar")(c, a, b)
    return per_float("pow")(c, a, b)


def _angle(numerator: float, denominator: float) -> Lowering:
    """deg2rad / rad2deg: numpy's ``x * (NPY_PI / 180)`` with the constant divided in the loop's
    float type (float32's is float32(pi) / 180 rounded to float32, not float32(pi / 180))."""
    def rule(c, a):
        kind = compute_dtype(c.dtype).type
        return f"({a} * {literal(kind(numerator) / kind(denominator), c.dtype)})"
    return lowering(rule)


def _heaviside(c, a, b):
    """numpy's npy_heaviside: NaN (numpy's own, positive) for NaN, ``h0`` (b) at 0, 0 below, 1 above."""
    one, zero = literal(1, c.dtype), literal(0, c.dtype)
    return f"({literal(np.nan, c.dtype)} if {a} != {a} else ({b} if {a} == {zero} else ({zero} if {a} < {zero} else {one})))"


def _reciprocal(c, a):
    if is_float(c.dtype):
        return f"({literal(1, c.dtype)} / {a})"
    # numpy computes 1.0 / a in float64 and converts: 1 and -1 are themselves, other values 0,
    # and 0 gives inf converted by the x86-64 instruction (INT_MIN for int32 and int64, else 0).
    dtype = np.dtype(c.dtype)
    at_zero = np.iinfo(dtype).min if dtype in (np.dtype(np.int32), np.dtype(np.int64)) else 0
    ones = f"({a} == 1)" if dtype.kind != "i" else f"(({a} == 1) - ({a} == -1))"
    return f"({literal(at_zero, dtype)} if {a} == 0 else {ones})"


def _on_floats(float_text: str, other_text: str) -> Lowering:
    """A predicate of floats (``{a}`` is the operand) that is constant for other dtypes."""
    return lowering(lambda c, a: float_text.format(a=a) if is_float(c.dtype) else other_text)


def _bool_or(bool_text: str, text: str) -> Lowering:
    """``bool_text`` on booleans, ``text`` on numbers (``{a}`` is the operand)."""
    return lowering(lambda c, a: (bool_text if is_bool(c.dtype) else text).format(a=a))


# -- unary -----------------------------------------------------------------------------------
_NEGATE = lowering(lambda c, a: f"(-{a})")              # (one text for every dtype, complex too)
_SELF_PRODUCT = lowering(lambda c, a: f"({a} * {a})")
neg = _ufunc_op("neg", np.negative, _NEGATE, grad=lambda n, g, b: (b.neg(g),), complex_rule=_NEGATE.rule)
abs_ = _ufunc_op("abs", np.absolute, _bool_or("{a}", "abs({a})"), grad=_unary(lambda b, x, out: b(sign, [x])),
                 complex_rule=_complex_helper("complex_abs"))
sqrt = _ufunc_op("sqrt", np.sqrt, call("math.sqrt"), flops=4, grad=_unary(lambda b, x, out: b.div(b.like(0.5, out), out)),
                 complex_rule=_complex_helper("complex_sqrt"))
square = _ufunc_op("square", np.square, _SELF_PRODUCT, grad=_unary(lambda b, x, out: b.mul(b.like(2, out), x)),
                   complex_rule=_SELF_PRODUCT.rule)
reciprocal = _ufunc_op("reciprocal", np.reciprocal, lowering(_reciprocal), flops=4, grad=_unary(lambda b, x, out: b.neg(b.mul(out, out))),
                       complex_rule=_complex_helper("complex_reciprocal"))
exp = _ufunc_op("exp", np.exp, routine("exp", "exp"), flops=10, grad=_unary(lambda b, x, out: out),
                complex_rule=_complex_helper("complex_exp"))
exp2 = _ufunc_op("exp2", np.exp2, Lowering(lambda c, a: routine_call("exp2", c.dtype, (a,))
                                           or f"({literal(2, c.dtype)} ** {a})", {"cuda": per_float("exp2")},
                                           routine="exp2"),
                 flops=20, grad=_unary(lambda b, x, out: b.mul(out, b.like(math.log(2), out))))
expm1 = _ufunc_op("expm1", np.expm1, routine("expm1", "expm1"), flops=20, grad=_unary(lambda b, x, out: b.add(out, b.like(1, out))),
                  complex_rule=_complex_helper("complex_expm1"))
log = _ufunc_op("log", np.log, routine("log", "log"), flops=10, grad=_unary(lambda b, x, out: b(reciprocal, [x])),
                complex_rule=_complex_helper("complex_log"))
log2 = _ufunc_op("log2", np.log2, routine("log2", "log2"), flops=20, grad=_unary(lambda b, x, out: b.div(b.like(1 / math.log(2), out), x)))
log10 = _ufunc_op("log10", np.log10, routine("log10", "log10"), flops=20, grad=_unary(lambda b, x, out: b.div(b.like(1 / math.log(10), out), x)),
                  complex_rule=_complex_helper("complex_log10"))
log1p = _ufunc_op("log1p", np.log1p, routine("log1p", "log1p"), flops=20, grad=_unary(lambda b, x, out: b(reciprocal, [b.add(x, b.like(1, out))])))
sin = _ufunc_op("sin", np.sin, routine("sin", "sin", fast=True), flops=20, grad=_unary(lambda b, x, out: b(cos, [x])))
cos = _ufunc_op("cos", np.cos, routine("cos", "cos", fast=True), flops=20, grad=_unary(lambda b, x, out: b.neg(b(sin, [x]))))
tan = _ufunc_op("tan", np.tan, routine("tan", "tan", fast=True), flops=25, grad=_unary(lambda b, x, out: b.add(b.like(1, out), b.mul(out, out))))
arcsin = _ufunc_op("arcsin", np.arcsin, routine("arcsin", "asin"), flops=25, grad=_unary(lambda b, x, out: _reciprocal_sqrt_of(b, b.sub(b.like(1, out), b.mul(x, x)))))
arccos = _ufunc_op("arccos", np.arccos, routine("arccos", "acos"), flops=25, grad=_unary(lambda b, x, out: b.neg(_reciprocal_sqrt_of(b, b.sub(b.like(1, out), b.mul(x, x))))))
arctan = _ufunc_op("arctan", np.arctan, routine("arctan", "atan"), flops=25, grad=_unary(lambda b, x, out: b(reciprocal, [b.add(b.like(1, out), b.mul(x, x))])))
sinh = _ufunc_op("sinh", np.sinh, routine("sinh", "sinh"), flops=20, grad=_unary(lambda b, x, out: b(cosh, [x])))
cosh = _ufunc_op("cosh", np.cosh, routine("cosh", "cosh"), flops=20, grad=_unary(lambda b, x, out: b(sinh, [x])))
tanh = _ufunc_op("tanh", np.tanh, routine("tanh", "tanh"), flops=15, grad=_unary(lambda b, x, out: b.sub(b.like(1, out), b.mul(out, out))))
arcsinh = _ufunc_op("arcsinh", np.arcsinh, routine("arcsinh", "asinh", cuda=per_float("arcsinh")), flops=25,
                   grad=_unary(lambda b, x, out: _reciprocal_sqrt_of(b, b.add(b.mul(x, x), b.like(1, out)))))
arccosh = _ufunc_op("arccosh", np.arccosh, routine("arccosh", "acosh", cuda=per_float("arccosh")), flops=25,
                   grad=_unary(lambda b, x, out: _reciprocal_sqrt_of(b, b.sub(b.mul(x, x), b.like(1, out)))))
arctanh = _ufunc_op("arctanh", np.arctanh, routine("arctanh", "atanh", cuda=per_float("arctanh")), flops=25,
                   grad=_unary(lambda b, x, out: b(reciprocal, [b.sub(b.like(1, out), b.mul(x, x))])))
cbrt = _ufunc_op("cbrt", np.cbrt, routine("cbrt", None, cuda=per_float("cbrt")), flops=20,
                 grad=_unary(lambda b, x, out: b.div(b.like(1 / 3, out), b.mul(out, out))))
fabs = _ufunc_op("fabs", np.fabs, lowering(lambda c, a: f"abs({a})"), grad=_unary(lambda b, x, out: b(sign, [x])))
deg2rad = _ufunc_op("deg2rad", np.deg2rad, _angle(math.pi, 180), grad=_unary(lambda b, x, out: b.like(math.pi / 180, out)))
radians = _ufunc_op("radians", np.radians, _angle(math.pi, 180), grad=_unary(lambda b, x, out: b.like(math.pi / 180, out)))
rad2deg = _ufunc_op("rad2deg", np.rad2deg, _angle(180, math.pi), grad=_unary(lambda b, x, out: b.like(180 / math.pi, out)))
degrees = _ufunc_op("degrees", np.degrees, _angle(180, math.pi), grad=_unary(lambda b, x, out: b.like(180 / math.pi, out)))
# the sign bit, NaN's and zero's too: copysign's (a select on it vectorises, as LLVM's copysign does)
signbit = _ufunc_op("signbit", np.signbit, lowering(lambda c, a: f"(math.copysign({literal(1, c.dtype)}, {a}) < "
                                                                f"{literal(0, c.dtype)})"))
floor = _ufunc_op("floor", np.floor, _rounding("np.floor", "floor"), grad=_zero)
ceil = _ufunc_op("ceil", np.ceil, _rounding("np.ceil", "ceil"), grad=_zero)
trunc = _ufunc_op("trunc", np.trunc, _rounding("np.trunc", "trunc"), grad=_zero)
rint = _ufunc_op("rint", np.rint, _rounding("np.rint", "rint"), grad=_zero)
# NaN stays NaN; +-inf give +-1 (not inf - inf); -0.0 gives 0.0, as numpy does.
sign = _ufunc_op("sign", np.sign, _float_or_int(lambda c, a: f"fj.sign_float({a})",
                                                 lambda c, a: f"(({a} > 0) - ({a} < 0))", per_float("sign")), grad=_zero)
logical_not = _ufunc_op("logical_not", np.logical_not, _bool_or("(not {a})", "({a} == 0)"))
invert = _ufunc_op("invert", np.invert, _bool_or("(not {a})", "(~{a})"))
def _complex_class(name: str):
    """numba's ``np.isnan`` of a complex value on the CPU; on the GPU, where numba-cuda has no
    numpy functions of scalars, the library's (cmath's): ``fj.complex_isnan``."""
    return lambda c, a: f"np.{name}({a})" if c.target == "cpu" else f"fj.complex_{name}({a})"


isnan = _ufunc_op("isnan", np.isnan, _on_floats("({a} != {a})", "False"), complex_rule=_complex_class("isnan"))
isinf = _ufunc_op("isinf", np.isinf, _on_floats("(abs({a}) == np.inf)", "False"), complex_rule=_complex_class("isinf"))
isfinite = _ufunc_op("isfinite", np.isfinite, _on_floats("(abs({a}) < np.inf)", "True"),
                     complex_rule=_complex_class("isfinite"))

# -- binary ----------------------------------------------------------------------------------
add = _ufunc_op("add", np.add, infix("+", "|"), commutative=True, grad=lambda n, g, b: (g, g),
                complex_rule=infix("+").rule)
sub = _ufunc_op("sub", np.subtract, infix("-"), grad=lambda n, g, b: (g, b.neg(g)), complex_rule=infix("-").rule)
mul = _ufunc_op("mul", np.multiply, infix("*", "&"), commutative=True, grad=lambda n, g, b: (b.mul(g, n.inputs[1]), b.mul(g, n.inputs[0])),
                complex_rule=infix("*").rule)
div = _ufunc_op("div", np.divide, infix("/"), flops=4, grad=lambda n, g, b: (b.div(g, n.inputs[1]), b.neg(b.div(b.mul(g, n.output), n.inputs[1]))),
                complex_rule=_complex_helper("complex_divide"))
floordiv = _ufunc_op("floordiv", np.floor_divide, _float_or_int(_divmod(0), _floordiv_int, _divmod_cuda(0)),
                     flops=4, grad=_zero)
mod = _ufunc_op("mod", np.remainder, _float_or_int(_divmod(1), _mod_int, _divmod_cuda(1)), flops=4,
                grad=lambda n, g, b: (g, b.neg(b.mul(g, b(floordiv, list(n.inputs))))))
fmod = _ufunc_op("fmod", np.fmod, _float_or_int(lambda c, a, b: f"np.fmod({a}, {b})", _fmod_int, per_float("fmod")),
                 flops=4, grad=lambda n, g, b: (g, b.neg(b.mul(g, b(trunc, [b.div(*n.inputs)])))))
pow_ = _ufunc_op("pow", np.power, Lowering(_power, {"cuda": _power_cuda}, routine="pow"), flops=20, grad=_power_grad,
                 complex_rule=_complex_helper("complex_power"))
maximum = _ufunc_op("maximum", np.maximum, _maximum(True, True), commutative=True, grad=_extreme_grad(larger=True))
minimum = _ufunc_op("minimum", np.minimum, _maximum(True, False), commutative=True, grad=_extreme_grad(larger=False))
fmax = _ufunc_op("fmax", np.fmax, _maximum(False, True), commutative=True, grad=_extreme_grad(larger=True))
fmin = _ufunc_op("fmin", np.fmin, _maximum(False, False), commutative=True, grad=_extreme_grad(larger=False))
arctan2 = _ufunc_op("arctan2", np.arctan2, routine("arctan2", "atan2"), flops=25, grad=_arctan2_grad)
logaddexp = _ufunc_op("logaddexp", np.logaddexp, routine("logaddexp", None, cuda=per_float("logaddexp")), flops=30,
                      commutative=True, grad=lambda n, g, b: tuple(b.mul(g, b(exp, [b.sub(x, n.output)])) for x in n.inputs))
logaddexp2 = _ufunc_op("logaddexp2", np.logaddexp2, routine("logaddexp2", None, cuda=per_float("logaddexp2")), flops=30,
                       commutative=True, grad=lambda n, g, b: tuple(b.mul(g, b(exp2, [b.sub(x, n.output)]))
                                                                    for x in n.inputs))
copysign = _ufunc_op("copysign", np.copysign, call("math.copysign"),
                     grad=lambda n, g, b: (b.mul(g, b(copysign, [b.like(1, n.output), n.inputs[0]]),
                                                 b(copysign, [b.like(1, n.output), n.inputs[1]])), None))
heaviside = _ufunc_op("heaviside", np.heaviside, lowering(_heaviside), grad=_zero)
eq = _ufunc_op("eq", np.equal, infix("=="), commutative=True, complex_rule=infix("==").rule)
ne = _ufunc_op("ne", np.not_equal, infix("!="), commutative=True, complex_rule=infix("!=").rule)
lt = _ufunc_op("lt", np.less, infix("<"))
le = _ufunc_op("le", np.less_equal, infix("<="))
gt = _ufunc_op("gt", np.greater, infix(">"))
ge = _ufunc_op("ge", np.greater_equal, infix(">="))
logical_and = _ufunc_op("logical_and", np.logical_and, _logical("&"), commutative=True)
logical_or = _ufunc_op("logical_or", np.logical_or, _logical("|"), commutative=True)
logical_xor = _ufunc_op("logical_xor", np.logical_xor, _logical("!="), commutative=True)
bitwise_and = _ufunc_op("bitwise_and", np.bitwise_and, infix("&"), commutative=True)
bitwise_or = _ufunc_op("bitwise_or", np.bitwise_or, infix("|"), commutative=True)
bitwise_xor = _ufunc_op("bitwise_xor", np.bitwise_xor, infix("^"), commutative=True)


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
                  lambda arrays, attrs: [special("erf")(arrays[0])], special="erf", doc="scipy.special.erf",
                  lowering=routine("erf", "erf"), flops=20,
                  gradient=_unary(lambda b, x, out: b.mul(b.like(2 / math.sqrt(math.pi), out), b(exp, [b.neg(b.mul(x, x))])))))
sigmoid = register(Op("sigmoid", OpKind.ELEMENTWISE, 1, _special_rule("expit"),
                      lambda arrays, attrs: [special("expit")(arrays[0])], special="expit",
                      doc="scipy.special.expit: 1 / (1 + exp(-x))",
                      lowering=routine("sigmoid", None, cuda=per_float("sigmoid")), flops=12,
                      gradient=_unary(lambda b, x, out: b.mul(out, b.sub(b.like(1, out), out)))))


# -- cast and where ----------------------------------------------------------------------------
def _cast_rule(types, attrs):
    return [types[0].with_dtype(attrs["dtype"])]


cast = register(Op("cast", OpKind.ELEMENTWISE, 1, _cast_rule,
                   lambda arrays, attrs: [arrays[0].astype(attrs["dtype"])],
                   attrs={"dtype": required(AttrKind.DTYPE)}, doc="ndarray.astype",
                   lowering=typed(lambda c, a: cast_text(a, c.inputs[0].dtype, c.dtype)),
                   gradient=lambda n, g, b: (g,), complex=True))


def _where_rule(types, attrs):
    shape = broadcast_shapes(types)
    return [TensorType(shape, _result_dtype(np.where, tuple(t.dtype for t in types)))]


def _where_grad(node, g, b):
    condition = node.inputs[0]
    return None, b.select(condition, g, b.zeros(g)), b.select(condition, b.zeros(g), g)


def _where(c, condition, a, b):
    condition, a, b = (cast_text(operand, value.dtype, dtype) for operand, value, dtype
                       in zip((condition, a, b), c.inputs, (np.dtype(np.bool_), c.dtype, c.dtype)))
    return f"({a} if {condition} else {b})"


where = register(Op("where", OpKind.ELEMENTWISE, 3, _where_rule,
                    lambda arrays, attrs: [np.where(*arrays)], doc="numpy.where(cond, x, y)",
                    lowering=typed(_where), gradient=_where_grad, complex=True))


# -- complex values: the conjugate, and the real and imaginary parts ------------------------------
conj = _ufunc_op("conj", np.conjugate, lowering(lambda c, a: a), grad=lambda n, g, b: (g,),
                 complex_rule=call("np.conjugate").rule)


def _part_rule(types, attrs):
    (source,) = types
    if source.dtype.kind != "c":
        raise OpTypeError(f"takes a complex operand, got {source}")
    return [source.with_dtype(part_dtype(source.dtype))]


def _part(name: str, function):
    """np.real / np.imag of a complex array (the frontend answers them itself for real ones)."""
    return register(Op(name, OpKind.ELEMENTWISE, 1, _part_rule,
                       lambda arrays, attrs: [np.ascontiguousarray(function(arrays[0]))],
                       doc=f"numpy.{function.__name__} of a complex array",
                       lowering=typed(lambda c, a: f"({a}).{name}"), complex=True))


real = _part("real", np.real)
imag = _part("imag", np.imag)
