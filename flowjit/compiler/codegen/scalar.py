"""Scalar expressions for elementwise ops, in numba-compilable Python with numpy semantics.

An op computes at its ufunc's loop dtypes (``ufunc.resolve_dtypes``): operands are
cast to them first, the result is cast to the node's dtype.  float16 computes in float32
(numba has no CPU float16); the kernel stores round to the array's dtype.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.codegen.mathlib import VECTORIZED
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.types import TensorType, compute_dtype
from flowjit.errors import FlowjitError


class CodegenError(FlowjitError):
    pass


def constructor(dtype: np.dtype) -> str:
    dtype = compute_dtype(dtype)
    return "np.bool_" if dtype == np.bool_ else f"np.{dtype.name}"


def cast(expr: str, source: np.dtype, target: np.dtype) -> str:
    if np.dtype(target) == np.float16 and np.dtype(source) != np.float16:
        return f"fj_round_float16(np.float32({expr}))"
    source, target = compute_dtype(source), compute_dtype(target)
    if source == target:
        return expr
    if target == np.bool_:
        return f"({expr} != 0)"
    return f"{constructor(target)}({expr})"


def literal(value, dtype: np.dtype) -> str:
    dtype = compute_dtype(dtype)
    value = np.asarray(value).reshape(()).item()
    if dtype == np.bool_:
        return "True" if value else "False"
    if dtype.kind == "f":
        if value != value:
            text = "np.nan"
        elif value in (float("inf"), float("-inf")):
            text = "np.inf" if value > 0 else "-np.inf"
        else:
            text = repr(float(value))
        return f"{constructor(dtype)}({text})"
    return f"{constructor(dtype)}({int(value)})"


# Helpers the kernels import: numpy's integer and float division semantics.
HELPERS = '''
@njit(inline="always", error_model="numpy")
def fj_floordiv_int(a, b):
    # numpy: x // 0 is 0, and MIN // -1 wraps to MIN (numba's // would give 0 there).
    if b == 0:
        return a - a
    if b == -1:
        return -a
    return a // b

@njit(inline="always", error_model="numpy")
def fj_floordiv_uint(a, b):
    if b == 0:
        return a - a
    return a // b

@njit(inline="always", error_model="numpy")
def fj_mod_int(a, b):
    if b == 0:
        return a - a
    return a % b

@njit(inline="always", error_model="numpy")
def fj_fmod_int(a, b):
    # C's remainder, with the sign of the dividend; numpy gives 0 for x fmod 0 and MIN fmod -1.
    if b == 0 or b == -1:
        return a - a
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r

@njit(inline="always", error_model="numpy")
def fj_divmod_float(a, b):
    # numpy's npy_divmod: fmod, then the sign of the divisor for the remainder, floor for
    # the quotient; a zero divisor gives a / b and fmod's NaN.
    mod = np.fmod(a, b)
    if b == 0:
        return a / b, mod
    div = (a - mod) / b
    if mod != 0:
        if (b < 0) != (mod < 0):
            mod += b
            div -= 1.0
    else:
        mod = math.copysign(0.0, b)
    if div != 0:
        floordiv = np.floor(div)
        if div - floordiv > 0.5:
            floordiv += 1.0
    else:
        floordiv = math.copysign(0.0, a / b)
    return floordiv, mod

@njit(inline="always", error_model="numpy")
def fj_power_int(a, b):
    if b < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    result = a - a + 1
    base = a
    while b > 0:
        if b & 1:
            result = result * base
        base = base * base
        b >>= 1
    return result

@njit(inline="always", error_model="numpy")
def fj_round_float16(x):
    # float16 values live in float32; round to the nearest float16, ties to even, as numpy does.
    a = abs(x)
    if a != a or a == np.inf:
        return x
    if a >= 65520.0:
        return np.float32(math.copysign(np.inf, x))
    if a < 6.103515625e-05:
        quantum = 5.960464477539063e-08
    else:
        quantum = math.ldexp(1.0, math.frexp(a)[1] - 11)
    return np.float32(np.rint(np.float64(x) / quantum) * quantum)

@njit(inline="always", error_model="numpy")
def fj_sign_float(a):
    # NaN stays NaN; +-inf give +-1 (not inf - inf); -0.0 gives 0.0, as numpy does.
    if a != a:
        return a
    return a - a if a == 0 else (a > 0) - (a < 0)

@njit(inline="always", error_model="numpy")
def fj_power_scalar_float(a, b, general):
    # numpy's float power loop when the exponent is one broadcast value: -1, 0, 0.5, 1 and 2
    # are 1/a, 1, sqrt(a), a and a*a (so (-inf) ** 0.5 is nan and (-0.0) ** 0.5 is -0.0,
    # where C's pow gives inf and 0.0); any other exponent is pow: ``general``.
    if b == -1.0:
        return 1.0 / a
    if b == 0.0:
        return b + 1.0
    if b == 0.5:
        return np.sqrt(a)
    if b == 1.0:
        return a
    if b == 2.0:
        return a * a
    return general
'''


def _float(dtype) -> bool:
    return compute_dtype(dtype).kind == "f"


def _binary(symbol: str, bool_symbol: str | None = None):
    def emit(a, b, dtype):
        if compute_dtype(dtype) == np.bool_ and bool_symbol:
            return f"({a} {bool_symbol} {b})"
        return f"({a} {symbol} {b})"
    return emit


def _math(function: str):
    return lambda a, dtype: f"math.{function}({a})"


def _vectorized(name: str, fallback):
    """mathlib's inlined ``name`` where it has one for the loop dtype, else ``math.<fallback>``
    (or the ``fallback`` emitter)."""
    def emit(*operands):
        *arguments, dtype = operands
        key = (name, compute_dtype(dtype).name)
        if key in VECTORIZED:
            return f"{VECTORIZED[key]}({', '.join(arguments)})"
        if callable(fallback):
            return fallback(*operands)
        return f"math.{fallback}({', '.join(arguments)})"
    return emit


def _maximum(nan_from_first: bool, larger: bool):
    """maximum/minimum (NaN wins) and fmax/fmin (NaN loses).  Of two equal values (+0.0 and
    -0.0) numpy's float32/float64 loops return the second, its float16 loop the first."""
    def emit(a, b, dtype):
        if not _float(dtype):
            return f"({a} if {a} {'>=' if larger else '<='} {b} else {b})"
        compare = (">" if larger else "<") + ("=" if np.dtype(dtype) == np.float16 else "")
        nan_check = f"{a} != {a}" if nan_from_first else f"{b} != {b}"
        return f"({a} if ({a} {compare} {b} or {nan_check}) else {b})"
    return emit


def _floordiv(a, b, dtype):
    if _float(dtype):
        return f"fj_divmod_float({a}, {b})[0]"
    return f"fj_floordiv_uint({a}, {b})" if np.dtype(dtype).kind == "u" else f"fj_floordiv_int({a}, {b})"


def _mod(a, b, dtype):
    return f"fj_divmod_float({a}, {b})[1]" if _float(dtype) else f"fj_mod_int({a}, {b})"


def _fmod(a, b, dtype):
    if _float(dtype):
        return f"np.fmod({a}, {b})"
    return f"fj_mod_int({a}, {b})" if np.dtype(dtype).kind == "u" else f"fj_fmod_int({a}, {b})"


def _power(a, b, dtype):
    if not _float(dtype):
        return f"fj_power_int({a}, {b})"
    key = ("pow", compute_dtype(dtype).name)
    return f"{VECTORIZED[key]}({a}, {b})" if key in VECTORIZED else f"({a} ** {b})"


def _scalar_exponent(node) -> bool:
    """Whether numpy's power loop sees ``node``'s exponent with stride 0 (one value broadcast
    over the result), where its float32/float64 loops take fj_power_scalar_float's fast paths.
    An exponent broadcast along some axes only is read with a stride and takes pow."""
    exponent, result = node.inputs[1].type, node.output.type
    return exponent.size == 1 and (exponent.rank == 0 or exponent.shape != result.shape)


def _sign(a, dtype):
    return f"fj_sign_float({a})" if _float(dtype) else f"(({a} > 0) - ({a} < 0))"


def _isnan(a, dtype):
    return f"({a} != {a})" if _float(dtype) else "False"


def _isinf(a, dtype):
    return f"(abs({a}) == np.inf)" if _float(dtype) else "False"


def _isfinite(a, dtype):
    return f"(abs({a}) < np.inf)" if _float(dtype) else "True"


def _invert(a, dtype):
    return f"(not {a})" if compute_dtype(dtype) == np.bool_ else f"(~{a})"


def _reciprocal(a, dtype):
    if _float(dtype):
        return f"({literal(1, dtype)} / {a})"
    # numpy computes 1.0 / a in float64 and converts: 1 and -1 are themselves, other values 0,
    # and 0 gives inf converted by the x86-64 instruction (INT_MIN for int32 and int64, else 0).
    dtype = np.dtype(dtype)
    at_zero = np.iinfo(dtype).min if dtype in (np.dtype(np.int32), np.dtype(np.int64)) else 0
    ones = f"({a} == 1)" if dtype.kind != "i" else f"(({a} == 1) - ({a} == -1))"
    return f"({literal(at_zero, dtype)} if {a} == 0 else {ones})"


def _truth(a, dtype) -> str:
    return a if compute_dtype(dtype) == np.bool_ else f"({a} != 0)"


def _logical(symbol: str):
    """logical_and/or/xor: truth tests of both operands (NaN is true), whatever their dtype."""
    return lambda a, b, dtype: f"({_truth(a, dtype)} {symbol} {_truth(b, dtype)})"


def _logical_not(a, dtype):
    return f"(not {a})" if compute_dtype(dtype) == np.bool_ else f"({a} == 0)"


def _exp2(a, dtype):
    return f"({literal(2, dtype)} ** {a})"


UNARY = {
    ops.neg: lambda a, dtype: f"(-{a})",
    ops.abs: lambda a, dtype: a if compute_dtype(dtype) == np.bool_ else f"abs({a})",
    ops.sqrt: _math("sqrt"), ops.square: lambda a, dtype: f"({a} * {a})",
    ops.reciprocal: _reciprocal, ops.exp: _vectorized("exp", "exp"), ops.exp2: _vectorized("exp2", _exp2),
    ops.expm1: _vectorized("expm1", "expm1"), ops.log: _vectorized("log", "log"), ops.log2: _vectorized("log2", "log2"),
    ops.log10: _vectorized("log10", "log10"), ops.log1p: _vectorized("log1p", "log1p"),
    ops.sin: _vectorized("sin", "sin"), ops.cos: _vectorized("cos", "cos"), ops.tan: _vectorized("tan", "tan"),
    ops.arcsin: _vectorized("arcsin", "asin"), ops.arccos: _vectorized("arccos", "acos"),
    ops.arctan: _vectorized("arctan", "atan"),
    ops.sinh: _vectorized("sinh", "sinh"), ops.cosh: _vectorized("cosh", "cosh"), ops.tanh: _vectorized("tanh", "tanh"),
    ops.floor: lambda a, dtype: f"np.floor({a})", ops.ceil: lambda a, dtype: f"np.ceil({a})",
    ops.trunc: lambda a, dtype: f"np.trunc({a})", ops.rint: lambda a, dtype: f"np.rint({a})",
    ops.sign: _sign, ops.logical_not: _logical_not, ops.invert: _invert,
    ops.isnan: _isnan, ops.isinf: _isinf, ops.isfinite: _isfinite, ops.erf: _vectorized("erf", "erf"),
    ops.sigmoid: _vectorized("sigmoid", None),
}

BINARY = {
    ops.add: _binary("+", "|"), ops.sub: _binary("-"), ops.mul: _binary("*", "&"), ops.div: _binary("/"),
    ops.floordiv: _floordiv, ops.mod: _mod, ops.fmod: _fmod, ops.pow: _power,
    ops.maximum: _maximum(True, True), ops.minimum: _maximum(True, False),
    ops.fmax: _maximum(False, True), ops.fmin: _maximum(False, False),
    ops.arctan2: _vectorized("arctan2", "atan2"),
    ops.eq: _binary("=="), ops.ne: _binary("!="), ops.lt: _binary("<"), ops.le: _binary("<="),
    ops.gt: _binary(">"), ops.ge: _binary(">="),
    ops.logical_and: _logical("&"), ops.logical_or: _logical("|"), ops.logical_xor: _logical("!="),
    ops.bitwise_and: _binary("&"), ops.bitwise_or: _binary("|"), ops.bitwise_xor: _binary("^"),
}


_POWER_FAST_PATH_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))   # numpy's float16 loop has none


def loop_dtypes(op, input_dtypes) -> tuple[list[np.dtype], np.dtype]:
    """The dtypes the op's inner loop runs at (numpy's ufunc type resolution)."""
    ufunc = op.ufunc
    if ufunc is None and "ufunc_name" in op.extensions:
        from flowjit.compiler.ir.ops.elementwise import special
        ufunc = special(op.extensions["ufunc_name"])
    if not isinstance(ufunc, np.ufunc):                     # numpy-only fallback (no scipy)
        out = op.infer_types([TensorType((), dtype) for dtype in input_dtypes], {})[0].dtype
        return [out] * len(input_dtypes), out
    resolved = ufunc.resolve_dtypes(tuple(input_dtypes) + (None,))
    return [np.dtype(d) for d in resolved[:-1]], np.dtype(resolved[-1])


def expression(node, operands: list[str]) -> str:
    """The scalar expression computing ``node`` from operand expressions, in its dtype."""
    op = node.op
    in_dtypes = [value.dtype for value in node.inputs]
    out_dtype = node.output.dtype
    if op is ops.cast:
        return cast(operands[0], in_dtypes[0], out_dtype)
    if op is ops.truncate16:
        return f"np.uint16((np.int64(float32_bits({operands[0]})) >> 16) & 0xFFFF)"
    if op is ops.extend16:
        return f"bits_float32(np.int32(np.int64({operands[0]}) << 16))"
    if op is ops.where:
        condition = cast(operands[0], in_dtypes[0], np.dtype(np.bool_))
        a = cast(operands[1], in_dtypes[1], out_dtype)
        b = cast(operands[2], in_dtypes[2], out_dtype)
        return f"({a} if {condition} else {b})"
    table = UNARY if len(operands) == 1 else BINARY
    if op not in table:
        raise CodegenError(f"op '{op.name}' has no CPU kernel code (no fallback: report it)")
    loop_in, loop_out = loop_dtypes(op, in_dtypes)
    cast_operands = [cast(expr, dtype, loop) for expr, dtype, loop in zip(operands, in_dtypes, loop_in)]
    if op is ops.pow and loop_in[0] in _POWER_FAST_PATH_DTYPES and _scalar_exponent(node):
        text = f"fj_power_scalar_float({cast_operands[0]}, {cast_operands[1]}, {_power(*cast_operands, loop_in[0])})"
    else:
        text = table[op](*cast_operands, loop_in[0])
    if loop_out != out_dtype:
        return cast(text, loop_out, out_dtype)
    if out_dtype == np.float16:                  # numpy computes float16 in float32 and rounds
        return f"fj_round_float16(np.float32({text}))"
    return text if compute_dtype(out_dtype) == np.bool_ else f"{constructor(out_dtype)}({text})"
