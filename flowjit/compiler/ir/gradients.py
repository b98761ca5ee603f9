"""Reverse mode on the graph (whitepaper §4.1): extend a graph backwards from ``y`` to ``xs``.

``gradients(graph, y, xs)`` adds to ``graph`` the nodes that compute dy/dx for each x, as
TensorFlow's ``tf.gradients`` does: it walks the nodes that lie on a path from an x to y in
reverse order, asks each node's op for its gradient rule (``Op.gradient``, defined with the
op) and sums the contributions of a value's uses.  The backward nodes are ordinary ops, so
the program that uses them is optimised (CSE shares forward values), placed, fused and
compiled like any other.

A rule is ``rule(node, g, b) -> one entry per input``: ``g`` the cotangent of the node's
output, ``b`` a ``Builder`` that adds nodes; an entry is a value of the output's shape (it
is summed over broadcast axes and cast to the input's dtype here) or None for no gradient.
Integer and boolean values carry no gradient.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.reduction import reduced_shape, reduction_axes
from flowjit.errors import FlowjitError, Location


class GradientError(FlowjitError):
    def __init__(self, message: str, location: Location | None = None):
        super().__init__(f"{message}" + (f" (at {location})" if location else ""))
        self.location = location


def differentiable(value: Value) -> bool:
    return value.dtype.kind in "fc"


class Builder:
    """Adds backward nodes to a graph at ``loc``: the line of the forward op being differentiated."""

    def __init__(self, graph: Graph, loc: Location | None = None):
        self.graph, self.loc = graph, loc

    def __call__(self, op, inputs: list[Value], attrs: dict | None = None) -> Value:
        return self.graph.add_node(op, list(inputs), attrs or {}, loc=self.loc).outputs[0]

    def constant(self, value, dtype) -> Value:
        return self(ops.constant, [], {"value": np.asarray(value, dtype=dtype)})

    def like(self, value, of: Value) -> Value:
        """A 0-d constant of ``of``'s dtype."""
        return self.constant(value, of.dtype)

    # arithmetic on values (numpy's broadcasting applies)
    def add(self, a, b):
        return self(ops.add, [a, b])

    def sub(self, a, b):
        return self(ops.sub, [a, b])

    def mul(self, *factors):
        result = factors[0]
        for factor in factors[1:]:
            result = self(ops.mul, [result, factor])
        return result

    def div(self, a, b):
        return self(ops.div, [a, b])

    def neg(self, a):
        return self(ops.neg, [a])

    def select(self, condition, a, b):
        return self(ops.where, [condition, a, b])

    def cast(self, value: Value, dtype) -> Value:
        return value if value.dtype == np.dtype(dtype) else self(ops.cast, [value], {"dtype": np.dtype(dtype)})

    def reshape(self, value: Value, shape) -> Value:
        return value if tuple(value.shape) == tuple(shape) else self(ops.reshape, [value], {"shape": tuple(shape)})

    def broadcast(self, value: Value, shape) -> Value:
        if tuple(value.shape) == tuple(shape):
            return value
        return self(ops.broadcast_to, [value], {"shape": tuple(shape)})

    def sum_to(self, value: Value, shape: tuple[int, ...]) -> Value:
        """``value`` summed over the axes numpy broadcast to reach its shape from ``shape``."""
        shape = tuple(shape)
        if tuple(value.shape) == shape:
            return value
        lead = value.type.rank - len(shape)
        kept = tuple(lead + axis for axis, size in enumerate(shape) if size == 1 and value.shape[lead + axis] != 1)
        if not kept:        # only leading axes: summed away directly, no reshape between kernels
            return self(ops.sum, [value], {"axes": tuple(range(lead)), "keepdims": False})
        summed = self(ops.sum, [value], {"axes": tuple(range(lead)) + kept, "keepdims": True})
        return self.reshape(summed, shape)

    def zeros(self, value: Value) -> Value:
        return self.broadcast(self.like(0, value), value.shape)

    def kept(self, value: Value, node: Node) -> Value:
        """A reduction's result (or cotangent) with its reduced axes kept as 1s, so it
        broadcasts against the reduction's input."""
        axes = reduction_axes(node)
        return self.reshape(value, reduced_shape(node.inputs[0].shape, axes, True))


def gradients(graph: Graph, y: Value, xs: list[Value], grad_y: Value | None = None,
              loc: Location | None = None) -> list[Value]:
    """dy/dx for each x (summed over y's elements weighted by ``grad_y``, ones by default),
    added to ``graph``; an x that y does not depend on gets zeros."""
    found = backward(graph, [y], xs, [grad_y], loc)
    b = Builder(graph, loc)
    return [gradient if gradient is not None else b.zeros(x) for x, gradient in zip(xs, found)]


def backward(graph: Graph, ys: list[Value], xs: list[Value], grad_ys: list[Value | None] | None = None,
             loc: Location | None = None) -> list[Value | None]:
    """The sum over ``ys`` of d(y . grad_y)/dx for each x (``grad_y`` ones by default), added to
    ``graph``; None for an x that no y depends on (TensorFlow's ``tf.gradients``)."""
    b = Builder(graph, loc)
    grad_ys = list(grad_ys) if grad_ys is not None else [None] * len(ys)
    forward = list(graph.nodes)
    depends = set(xs)                       # values that depend on some x
    for node in forward:
        if any(value in depends for value in node.inputs):
            depends.update(node.outputs)
    needed = set(ys)                        # values some y depends on
    for node in reversed(forward):
        if any(value in needed for value in node.outputs):
            needed.update(node.inputs)
    adjoint: dict[Value, Value] = {}
    for y, grad_y in zip(ys, grad_ys):
        if not differentiable(y):
            raise GradientError(f"cannot differentiate {y.type} (%{y.name}): only floating-point results have "
                                f"gradients", loc)
        seed = grad_y if grad_y is not None else b.broadcast(b.like(1, y), y.shape)
        adjoint[y] = seed if y not in adjoint else b.add(adjoint[y], seed)
    for node in reversed(forward):
        if not any(value in adjoint for value in node.outputs):
            continue
        if not any(value in depends and value in needed and differentiable(value) for value in node.inputs):
            continue
        if len(node.outputs) != 1:
            raise GradientError(f"op '{node.op.name}' (%{node.name}) has several results: no gradient rule", node.loc)
        if any(value.dtype.kind == "c" for value in (*node.inputs, *node.outputs)):
            raise GradientError(f"op '{node.op.name}' (%{node.name}) computes with complex values, and flowjit "
                                f"differentiates real values only" + (f"; it was traced at {node.loc}" if node.loc
                                                                      else ""), loc)
        if node.op.gradient is None:
            raise GradientError(f"op '{node.op.name}' (%{node.name}) has no gradient rule"
                                + (f"; it was traced at {node.loc}" if node.loc else ""), loc)
        b.loc = node.loc or loc                 # backward nodes carry the line of the op they differentiate
        contributions = node.op.gradient(node, adjoint[node.output], b)
        for value, contribution in zip(node.inputs, contributions):
            if contribution is None or value not in depends or not differentiable(value):
                continue
            contribution = b.cast(b.sum_to(contribution, value.shape), value.dtype)
            adjoint[value] = contribution if value not in adjoint else b.add(adjoint[value], contribution)
    b.loc = loc
    return [adjoint.get(x) for x in xs]
