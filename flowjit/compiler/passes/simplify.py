"""simplify: algebraic identities, each a small rule with a one-line docstring.

Rules that are exact in IEEE arithmetic always run.  Rules that change rounding, the
sign of zero or NaN behaviour run only with ``fastmath``.  A rule sees a node whose
inputs are already rewritten and returns the value that replaces its output, or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.ops.misc import constant_value
from flowjit.compiler.passes.base import Pass, Rewriter

Rule = Callable[[Node, Rewriter], "Value | None"]


def _all_equal(value: Value, scalar) -> bool:
    array = constant_value(value)
    return array is not None and array.size > 0 and bool(np.all(array == scalar))


def _exact_zero(zero: Value, node: Node, negative: bool) -> bool:
    """Whether ``x + zero`` (``negative``) or ``x - zero`` (not) is exactly x: for an integer result
    when zero is 0; for a float or complex one when each part of zero in the result's dtype is
    -0.0 (adding) or +0.0 (subtracting), as x + +0.0 turns -0.0 into +0.0."""
    array = constant_value(zero)
    if array is None or array.size == 0 or not np.all(array == 0):
        return False
    dtype = node.output.dtype
    if dtype.kind not in "fc":
        return True
    value = array.astype(dtype)
    parts = (value.real, value.imag) if dtype.kind == "c" else (value,)
    return all(bool(np.all(np.signbit(part) == negative)) for part in parts)


def _is_float(value: Value) -> bool:
    return value.dtype.kind == "f"


def _same_type(value: Value, node: Node) -> Value | None:
    return value if value.type == node.output.type else None


def _operand_pairs(node: Node):
    """(x, other) for each operand order the op allows."""
    a, b = node.inputs
    return [(a, b), (b, a)] if node.op.commutative else [(a, b)]


# -- exact rules ------------------------------------------------------------------------------------
def add_zero(node: Node, rw: Rewriter) -> Value | None:
    """x + 0 -> x   (for floats and complex only x + -0.0: x + +0.0 turns -0.0 into +0.0)"""
    for x, zero in _operand_pairs(node):
        if _exact_zero(zero, node, negative=True) or (rw.fastmath and _all_equal(zero, 0)):
            return _same_type(x, node)
    return None


def sub_zero(node: Node, rw: Rewriter) -> Value | None:
    """x - 0 -> x   (for floats and complex only x - +0.0)"""
    x, zero = node.inputs
    if _exact_zero(zero, node, negative=False) or (rw.fastmath and _all_equal(zero, 0)):
        return _same_type(x, node)
    return None


def _complex_inexact(node: Node, rw: Rewriter) -> bool:
    """A complex x * 1 or x / 1 is not x where a part is infinite (inf * 0 is NaN) or -0.0."""
    return node.output.dtype.kind == "c" and not rw.fastmath


def mul_one(node: Node, rw: Rewriter) -> Value | None:
    """x * 1 -> x   (complex: fastmath only)"""
    for x, one in _operand_pairs(node):
        if _all_equal(one, 1) and not _complex_inexact(node, rw):
            return _same_type(x, node)
    return None


def div_one(node: Node, rw: Rewriter) -> Value | None:
    """x / 1 -> x   (complex: fastmath only)"""
    x, one = node.inputs
    return _same_type(x, node) if _all_equal(one, 1) and not _complex_inexact(node, rw) else None


def pow_one(node: Node, rw: Rewriter) -> Value | None:
    """x ** 1 -> x"""
    x, one = node.inputs
    return _same_type(x, node) if _all_equal(one, 1) else None


def pow_two(node: Node, rw: Rewriter) -> Value | None:
    """x ** 2 -> x * x   (numpy computes both exactly as one rounded product)"""
    x, two = node.inputs
    if _all_equal(two, 2) and ops.mul.infer_types([x.type, x.type], {}) == [node.output.type]:
        return rw.emit(ops.mul, [x, x])
    return None


def neg_neg(node: Node, rw: Rewriter) -> Value | None:
    """-(-x) -> x"""
    inner = node.inputs[0].producer
    if inner is not None and inner.op is ops.neg:
        return _same_type(inner.inputs[0], node)
    return None


def transpose_transpose(node: Node, rw: Rewriter) -> Value | None:
    """transpose(transpose(x, p), q) -> transpose(x, p[q])   (or x when that is the identity)"""
    inner = node.inputs[0].producer
    if inner is None or inner.op is not ops.transpose:
        return None
    perm = tuple(inner.attrs["perm"][axis] for axis in node.attrs["perm"])
    source = inner.inputs[0]
    if perm == tuple(range(len(perm))):
        return _same_type(source, node)
    return rw.emit(ops.transpose, [source], {"perm": perm})


def reshape_reshape(node: Node, rw: Rewriter) -> Value | None:
    """reshape(reshape(x, s1), s2) -> reshape(x, s2)   (or x when s2 is x's shape)"""
    inner = node.inputs[0].producer
    if inner is None or inner.op is not ops.reshape:
        return None
    source = inner.inputs[0]
    if source.shape == node.output.shape:
        return source
    return rw.emit(ops.reshape, [source], {"shape": node.attrs["shape"]})


def reshape_of_reduction(node: Node, rw: Rewriter) -> Value | None:
    """reshape(reduce(x, keepdims=False), its keepdims shape) -> reduce(x, keepdims=True)
    (``x.mean(axis=1)[:, None]``: the kept axis lets the consumers fuse with the reduction)"""
    inner = node.inputs[0].producer
    if inner is None or inner.op.kind is not OpKind.REDUCTION or inner.attrs.get("keepdims") is not False:
        return None
    kept = dict(inner.attrs, keepdims=True)
    if inner.op.infer_types([v.type for v in inner.inputs], kept)[0] != node.output.type:
        return None
    return rw.emit(inner.op, list(inner.inputs), kept)


def reshape_of_broadcast(node: Node, rw: Rewriter) -> Value | None:
    """reshape(broadcast_to(a, S), T) -> broadcast_to(a as a scalar, T) when a has one element
    (a mean's gradient: the elementwise ops after it then see the broadcast and fold)"""
    inner = node.inputs[0].producer
    if inner is None or inner.op is not ops.broadcast_to or inner.inputs[0].type.size != 1:
        return None
    source = inner.inputs[0]
    scalar = source if not source.shape else rw.emit(ops.reshape, [source], {"shape": ()})
    return rw.emit(ops.broadcast_to, [scalar], {"shape": node.attrs["shape"]})


def no_op_shape(node: Node, rw: Rewriter) -> Value | None:
    """reshape / broadcast_to / transpose / slice / cast that change nothing -> x"""
    x = node.inputs[0]
    if x.type != node.output.type:
        return None
    if node.op is ops.transpose and node.attrs["perm"] != tuple(range(x.type.rank)):
        return None
    if node.op is ops.slice and any(step != 1 for step in node.attrs["steps"]):
        return None
    return x


def broadcast_scalar(node: Node, rw: Rewriter) -> Value | None:
    """f(broadcast_to(a, S), b) -> f(a, b) when implicit broadcasting gives the same shape,
    else -> broadcast_to(f(a, b), S)   (computes on the small shape, broadcasts once)"""
    broadcasts = [value for value in node.inputs
                  if value.producer is not None and value.producer.op is ops.broadcast_to]
    if not broadcasts or node.op is ops.pow:
        # pow: numpy's float loops special-case an exponent read with stride 0 ((-inf) ** 0.5
        # is NaN there, inf through pow), so moving a broadcast changes its result
        return None
    sources = [value.producer.inputs[0] if value in broadcasts else value for value in node.inputs]
    shape = node.output.shape
    if tuple(np.broadcast_shapes(*(v.shape for v in sources))) == shape:
        return rw.emit(node.op, sources, node.attrs)
    # Two new nodes replace this one: only worth it when a broadcast dies with it.
    if not any(rw.uses.get(value, 0) == node.inputs.count(value) for value in broadcasts):
        return None
    inner = rw.emit(node.op, sources, node.attrs)
    return rw.emit(ops.broadcast_to, [inner], {"shape": shape})


def uniform_constant(node: Node, rw: Rewriter) -> Value | None:
    """constant of one repeated value (np.zeros(shape), np.ones, np.full) -> broadcast_to(scalar)
    (bitwise equal elements: -0.0 and 0.0 differ, NaNs of one payload are one value)"""
    array = node.attrs["value"]
    if array.ndim == 0 or array.size < 2:
        return None
    flat = np.ascontiguousarray(array).reshape(-1)
    bits = flat.view(np.uint8).reshape(flat.size, -1)          # (complex128 has no 16-byte integer)
    if not bool(np.all(bits == bits[0])):
        return None
    scalar = rw.emit(ops.constant, [], {"value": flat[:1].reshape(())})
    return rw.emit(ops.broadcast_to, [scalar], {"shape": array.shape})


# -- fastmath rules ---------------------------------------------------------------------------------
def _zeros(node: Node, rw: Rewriter) -> Value:
    zero = rw.emit(ops.constant, [], {"value": np.zeros((), node.output.dtype)})
    return zero if not node.output.shape else rw.emit(ops.broadcast_to, [zero], {"shape": node.output.shape})


def mul_zero(node: Node, rw: Rewriter) -> Value | None:
    """x * 0 -> 0   (fastmath: wrong for x = inf, nan and the sign of zero)"""
    if any(_all_equal(zero, 0) for _, zero in _operand_pairs(node)):
        return _zeros(node, rw)
    return None


def sub_self(node: Node, rw: Rewriter) -> Value | None:
    """x - x -> 0   (fastmath: wrong for x = inf and nan)"""
    x, y = node.inputs
    return _zeros(node, rw) if x is y else None


def div_constant(node: Node, rw: Rewriter) -> Value | None:
    """a / c -> a * (1 / c)   (fastmath: rounds twice)"""
    a, c = node.inputs
    array = constant_value(c)
    if array is None or not _is_float(node.output) or c.dtype != node.output.dtype:
        return None
    with np.errstate(all="ignore"):
        reciprocal = rw.emit(ops.constant, [], {"value": (1 / array).astype(c.dtype)})
    product = ops.mul.infer_types([a.type, reciprocal.type], {})[0]
    return rw.emit(ops.mul, [a, reciprocal]) if product == node.output.type else None


EXACT_RULES: dict = {
    ops.add: [add_zero], ops.sub: [sub_zero], ops.mul: [mul_one], ops.div: [div_one],
    ops.pow: [pow_one, pow_two], ops.neg: [neg_neg], ops.transpose: [transpose_transpose, no_op_shape],
    ops.reshape: [reshape_reshape, reshape_of_reduction, reshape_of_broadcast, no_op_shape], ops.broadcast_to: [no_op_shape],
    ops.slice: [no_op_shape], ops.cast: [no_op_shape], ops.constant: [uniform_constant],
}
FASTMATH_RULES: dict = {ops.mul: [mul_zero], ops.sub: [sub_self], ops.div: [div_constant]}


@dataclass(frozen=True)
class Simplify(Pass):
    name = "simplify"
    fastmath: bool = False

    def rules_for(self, node: Node) -> list[Rule]:
        rules = list(EXACT_RULES.get(node.op, ()))
        if self.fastmath:
            rules += FASTMATH_RULES.get(node.op, ())
        if node.op.kind is OpKind.ELEMENTWISE:
            rules.append(broadcast_scalar)
        return rules

    def run(self, graph: Graph) -> bool:
        rewriter = Rewriter(graph, fastmath=self.fastmath, count_uses=True)

        def visit(node: Node, rw: Rewriter) -> None:
            if len(node.outputs) != 1 or node.op.stateful:
                return
            for rule in self.rules_for(node):
                replacement = rule(node, rw)
                if replacement is not None:
                    rw.replace(node.output, replacement)
                    return

        return rewriter.sweep(visit)

