"""constant-powers: ``x ** c`` for a constant ``c`` becomes multiplies, sqrt and one division.

numpy's ``pow`` is a libm call per element, which also stops the loop vectoriser; jax
lowers integer powers to multiplications.  For a constant exponent (one value, however
broadcast) this pass writes the power in arithmetic, with numpy's results:

- integers ``|n| <= 8`` (float64: ``-4 <= n <= 7``): repeated squaring.  Integer dtypes wrap as numpy's integer power
  does (negative exponents stay: numpy raises for them at run time).
- half-integers ``|c| <= 4.5`` (float64: from -3.5): ``x**k * sqrt(x)``, and one division by that below zero.
  ``pow`` gives ``+0``/``+inf`` at ``-0.0`` and ``-inf`` and NaN for other negatives; the
  square root is taken of ``x`` with ``-0.0 -> +0.0`` and ``-inf -> +inf``, which does the same.
  ``0.5`` with a broadcast exponent stays ``sqrt(x)`` exactly: numpy's float loop
  special-cases it (so ``(-inf) ** 0.5`` is NaN there), as it does ``-1``, ``0``, ``1`` and ``2``.
- float32 (and float16 through float32) compute in float64 and round once, so the result
  is numpy's ``powf`` to a fraction of an ulp.  float64 negative powers divide once,
  ``1 / x**n``, where ``x**n`` is a normal number, and take ``(1/x)**n`` where it over- or
  underflows (``1 / x**n`` would be 0 where the true result is a denormal).

The error against numpy's pow, per exponent and dtype, is measured by
``python -m flowjit.compiler.codegen.power_accuracy`` (docs/math.md).  A constant ``x`` is
left to fold-constants, which calls numpy's own power.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.misc import constant_value
from flowjit.compiler.passes.base import Pass, Rewriter

# The exponents rewritten, per loop dtype: within 4 ulp of numpy's pow (docs/math.md).  float16
# and float32 compute in a wider type; float64 rounds at each multiply, and x**8, 1/x**5 and
# x**-4.5 measured 5 ulp off there, so those stay pow.
INTEGER_EXPONENTS = {np.dtype(np.float16): range(-8, 9), np.dtype(np.float32): range(-8, 9),
                     np.dtype(np.float64): range(-4, 8)}
HALF_EXPONENTS = {np.dtype(np.float16): (-4.5, 4.5), np.dtype(np.float32): (-4.5, 4.5),
                  np.dtype(np.float64): (-3.5, 4.5)}
MAX_INTEGER = 8                   # integer dtypes: 0 <= n <= 8 (numpy raises on negative powers)
_WIDER = {np.dtype(np.float16): np.dtype(np.float32), np.dtype(np.float32): np.dtype(np.float64),
          np.dtype(np.float64): np.dtype(np.float64)}


def exponent_of(node: Node) -> float | None:
    """The one value of ``node``'s constant exponent, if it has one and ``x`` is not constant."""
    x, c = node.inputs
    array = constant_value(c)
    if array is None and c.producer is not None and c.producer.op is ops.broadcast_to:
        array = constant_value(c.producer.inputs[0])     # simplify's form of np.full(shape, c)
    if array is None or array.size == 0 or array.dtype.kind == "c" or constant_value(x) is not None:
        return None          # (a complex power is numpy's npy_cpow, fj.complex_power: it unrolls small n)
    first = array.reshape(-1)[0]
    if not np.all(array == first) or not np.isfinite(first):
        return None
    return float(first)


def scalar_exponent(node: Node) -> bool:
    """Whether numpy's power loop reads the exponent with stride 0 (one value broadcast over
    the result): its float32/float64 loops then special-case -1, 0, 0.5, 1 and 2.  (The same
    test as codegen.scalar._scalar_exponent, which lowers the pow this pass leaves.)"""
    exponent, result = node.inputs[1].type, node.output.type
    return exponent.size == 1 and (exponent.rank == 0 or exponent.shape != result.shape)


def _constant(rw: Rewriter, value, dtype) -> Value:
    return rw.emit(ops.constant, [], {"value": np.asarray(value, dtype=dtype)})


def _cast(rw: Rewriter, value: Value, dtype) -> Value:
    return value if value.dtype == dtype else rw.emit(ops.cast, [value], {"dtype": np.dtype(dtype)})


def integer_power(rw: Rewriter, x: Value, n: int) -> Value:
    """x ** n for n >= 1 by repeated squaring: x**5 = (x*x)**2 * x."""
    result, square = None, x
    while True:
        if n & 1:
            result = square if result is None else rw.emit(ops.mul, [result, square])
        n >>= 1
        if not n:
            return result
        square = rw.emit(ops.mul, [square, square])


def _reciprocal_of_power(rw: Rewriter, x: Value, power, guarded: bool) -> Value:
    """1 / power(x), the power a function of its base: one division where power(x) is a
    normal number, else power(1/x) (where 1 / power(x) would be 0 for a denormal result, or
    inf for a finite one).  Only float64 needs the guard: float32 computed in float64 has its
    powers in range, and where they underflow float64 the float32 result is inf anyway."""
    value = power(x)
    quotient = rw.emit(ops.div, [_constant(rw, 1, x.dtype), value])
    if not guarded:
        return quotient
    info = np.finfo(x.dtype)
    magnitude = rw.emit(ops.abs, [value])
    normal = rw.emit(ops.logical_and, [rw.emit(ops.ge, [magnitude, _constant(rw, info.tiny, x.dtype)]),
                                       rw.emit(ops.le, [magnitude, _constant(rw, info.max, x.dtype)])])
    return rw.emit(ops.where, [normal, quotient, power(rw.emit(ops.reciprocal, [x]))])


def _half_power(rw: Rewriter, x: Value, c: float, guarded: bool) -> Value:
    """x ** (k + 1/2) = x**k sqrt(x), and its reciprocal below zero.  -0.0 and -inf first
    become +0.0 and +inf (pow's results there); other negatives reach sqrt and give NaN."""
    infinity = _constant(rw, np.inf, x.dtype)
    no_negative_zero = rw.emit(ops.add, [x, _constant(rw, 0.0, x.dtype)])
    base = rw.emit(ops.where, [rw.emit(ops.eq, [x, _constant(rw, -np.inf, x.dtype)]), infinity, no_negative_zero])
    k = int(abs(c) - 0.5)

    def power(value: Value) -> Value:
        root = rw.emit(ops.sqrt, [value])
        return root if k == 0 else rw.emit(ops.mul, [integer_power(rw, value, k), root])
    if c > 0:
        return power(base)
    # sqrt(x) of a double is always normal: -0.5 needs no guard.
    return _reciprocal_of_power(rw, base, power, guarded and k > 0)


def rewrite_power(node: Node, rw: Rewriter) -> Value | None:
    """x ** c -> multiplies / sqrt / one division, for c a small integer or half-integer"""
    c = exponent_of(node)
    if c is None:
        return None
    x, out = node.inputs[0], node.output
    dtype = out.dtype
    if dtype.kind in "iu":
        if c != int(c) or not 0 <= c <= MAX_INTEGER:
            return None
        result = _ones(rw, node) if c == 0 else integer_power(rw, _cast(rw, x, dtype), int(c))
        return _shaped(rw, result, node)
    if dtype not in _WIDER:
        return None
    fast_path = scalar_exponent(node) and dtype != np.float16        # numpy's float16 loop has none
    integral = c == int(c) and int(c) in INTEGER_EXPONENTS[dtype]
    half = c - 0.5 == int(c - 0.5) and HALF_EXPONENTS[dtype][0] <= c <= HALF_EXPONENTS[dtype][1]
    if not (integral or half):
        return None
    if c == 0:
        return _shaped(rw, _ones(rw, node), node)
    x = _cast(rw, x, dtype)
    if c in (1, 2, -1) or (c == 0.5 and fast_path):       # one rounding in the dtype, as numpy's loop
        result = {1: lambda: x, 2: lambda: rw.emit(ops.mul, [x, x]), -1: lambda: rw.emit(ops.reciprocal, [x]),
                  0.5: lambda: rw.emit(ops.sqrt, [x])}[c]()
        return _shaped(rw, result, node)
    wide = _cast(rw, x, _WIDER[dtype])
    if integral:
        n = int(c)
        result = integer_power(rw, wide, n) if n > 0 else \
            _reciprocal_of_power(rw, wide, lambda value: integer_power(rw, value, -n), dtype == np.float64)
    else:
        result = _half_power(rw, wide, c, dtype == np.float64)
    return _shaped(rw, _cast(rw, result, dtype), node)


def _ones(rw: Rewriter, node: Node) -> Value:
    """x ** 0 is 1 for every x, NaN included."""
    return _constant(rw, 1, node.output.dtype)


def _shaped(rw: Rewriter, value: Value, node: Node) -> Value:
    """The result broadcast to the power's shape (an exponent can broadcast x)."""
    if value.shape != node.output.shape:
        value = rw.emit(ops.broadcast_to, [value], {"shape": node.output.shape})
    return value


@dataclass(frozen=True)
class ConstantPowers(Pass):
    name = "constant-powers"

    def run(self, graph: Graph) -> bool:
        def visit(node: Node, rw: Rewriter) -> None:
            if node.op is ops.pow:
                replacement = rewrite_power(node, rw)
                if replacement is not None:
                    rw.replace(node.output, replacement)
        return Rewriter(graph).sweep(visit)
