"""recompute-after-reductions: a cheap value read again after a reduction of it is computed again.

``(x - x.mean(axis=0)) / x.std(axis=0)``: ``x - mean`` is summed (squared) for the variance,
then divided by the standard deviation, which exists only once that sum is done.  Fused as
it stands, the variance's kernel stores ``x - mean`` for the division's kernel to read back
-- a write and a read of an array as large as ``x``.  Reading ``x`` again instead is one
transfer, and ``x - mean`` costs a subtraction.  XLA does the same: its fusions duplicate
cheap producers into each consumer.

A node that waits for a reduction and reads a cheap elementwise value (no math routine, no
graph result) that could be computed before that reduction is done -- and so in the
reduction's kernel, which would store it -- gets its own copy of the value's computation,
back through cheap elementwise nodes to what a kernel reads as it is (inputs, views,
constants, reductions' results): at most MAX_NODES nodes reading at most MAX_ARRAYS arrays as
large as the value.  The value's other readers keep the original (the reduction reads it in
its own kernel); one with no reader left is removed by the dce that follows.  Only reductions over leading axes and over every
axis count: a kernel over rows keeps a row in cache between its passes, where reading a
stored value back is cheap.  It runs in the fusion stage, after CSE (which would merge the
copy back), and is printed in the ``fused`` stage's input with ``--after``.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind, inlines_math
from flowjit.compiler.ir.ops.reduction import reduction_axes
from flowjit.compiler.passes.base import Pass, Rewriter, plain

MAX_NODES = 16
MAX_ARRAYS = 2


def _cheap(node: Node | None) -> bool:
    return node is not None and node.op.kind is OpKind.ELEMENTWISE and plain(node) and not inlines_math(node)


def _stored_reduction(node: Node) -> bool:
    """A reduction whose kernel would store what a later pass reads: over leading axes
    (columns) or over every axis; not one over rows."""
    if node.op.kind is not OpKind.REDUCTION:
        return False
    rank = node.inputs[0].type.rank
    axes = set(reduction_axes(node))
    return len(axes) == rank or rank - 1 not in axes


def _chain(value: Value) -> list[Node] | None:
    """The cheap nodes computing ``value``, each after those it reads; None if they are too
    many, read too many large arrays, or read another elementwise value (which a kernel
    would store as well)."""
    nodes: dict[Node, None] = {}
    leaves: dict[Value, None] = {}

    def visit(current: Value, depth: int) -> bool:
        producer = current.producer
        if not _cheap(producer):
            leaves[current] = None
            return producer is None or producer.op.kind is not OpKind.ELEMENTWISE
        if producer not in nodes:
            if depth >= MAX_NODES or not all(visit(operand, depth + 1) for operand in producer.inputs) \
                    or len(nodes) >= MAX_NODES:
                return False
            nodes[producer] = None
        return True
    if not visit(value, 0):
        return None
    big = [leaf for leaf in leaves if leaf.type.size == value.type.size]
    return list(nodes) if len(big) <= MAX_ARRAYS else None


@dataclass(frozen=True)
class RecomputeAfterReductions(Pass):
    name = "recompute-after-reductions"

    def run(self, graph: Graph) -> bool:
        reductions = {node: 1 << i for i, node in enumerate(n for n in graph.nodes if _stored_reduction(n))}
        if not reductions:
            return False
        after: dict[Value, int] = {}            # the reductions each value waits for (bits)
        for node in graph.nodes:
            bits = reductions.get(node, 0)
            for value in node.inputs:
                bits |= after.get(value, 0)
            for value in node.outputs:
                after[value] = bits
        outputs = set(graph.outputs)
        copies: dict[Value, Value | None] = {}

        def visit(node: Node, rw: Rewriter) -> None:
            waits = 0
            for value in node.inputs:
                waits |= after.get(value, 0)
            inputs = list(node.inputs)
            for i, value in enumerate(inputs):
                if not waits & ~after.get(value, 0) or value in outputs or not _cheap(value.producer) \
                        or value.type.size == 1:
                    continue                    # (computable no earlier than its reader, or a scalar)
                if value not in copies:
                    chain = _chain(value)
                    copies[value] = None if chain is None else self.copy(chain, value, rw)
                if copies[value] is not None:
                    inputs[i] = copies[value]
            if inputs != node.inputs:
                node.inputs = inputs
                rw.changed = True
        return Rewriter(graph).sweep(visit)

    @staticmethod
    def copy(nodes: list[Node], value: Value, rw: Rewriter) -> Value:
        mapping: dict[Value, Value] = {}
        for node in nodes:
            mapping[node.output] = rw.emit(node.op, [mapping.get(v, v) for v in node.inputs], node.attrs, like=node)
        return mapping[value]
