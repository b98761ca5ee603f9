"""cse: global value numbering (Click, 1995) over the flat, ordered graph.

Two nodes with the same op, the same inputs, the same attributes and the same
annotations compute the same value; the later one is replaced by the earlier.
Commutative ops match either operand order.  A reduction matches the same reduction
with the other ``keepdims`` (``x.mean(axis=1)`` beside the ``keepdims=True`` mean inside
``x.std(axis=1)``'s expansion): the later one becomes a reshape of the earlier, a view.
Stateful ops (variables, random) never merge.  One sweep in graph order is enough: inputs
are numbered before their users.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.passes.base import Pass, Rewriter


def attr_key(value):
    """A hashable stand-in for an attribute value (arrays by dtype, shape and bytes)."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(attr_key(item) for item in value)
    if isinstance(value, np.dtype):
        return ("dtype", value.str)
    if isinstance(value, Graph):
        return ("graph", id(value))
    if isinstance(value, float) and value != value:
        return ("nan",)
    return value


def value_number(node: Node, attrs: dict | None = None, types: tuple | None = None) -> tuple:
    """The node's number; ``attrs`` and ``types`` stand in for its own when given."""
    operands = tuple(id(value) for value in node.inputs)
    if node.op.commutative:
        operands = tuple(sorted(operands))
    attrs = tuple((name, attr_key(value)) for name, value in (node.attrs if attrs is None else attrs).items())
    types = tuple(v.type for v in node.outputs) if types is None else types
    return (node.op, operands, attrs, types, node.requested_device,
            node.device, node.colocation, tuple(id(before) for before in node.control_inputs))


def other_keepdims_number(node: Node) -> tuple | None:
    """The number the same reduction has with the other ``keepdims``; None for other ops."""
    if node.op.kind is not OpKind.REDUCTION or "keepdims" not in node.attrs:
        return None
    attrs = dict(node.attrs, keepdims=not node.attrs["keepdims"])
    return value_number(node, attrs, tuple(node.op.infer_types([v.type for v in node.inputs], attrs)))


def kept_reductions(graph: Graph) -> set[tuple]:
    """The numbers of the ``keepdims=True`` reductions whose ``keepdims=False`` twin is in the
    graph too."""
    kept = {value_number(node) for node in graph.nodes if node.attrs.get("keepdims") is True
            and node.op.kind is OpKind.REDUCTION and not node.op.stateful}
    return {number for node in graph.nodes if node.attrs.get("keepdims") is False
            and (number := other_keepdims_number(node)) in kept}


@dataclass(frozen=True)
class CommonSubexpressionElimination(Pass):
    name = "cse"

    def run(self, graph: Graph) -> bool:
        changed = self.sweep(graph, kept_reductions(graph))
        # Merging may have made the inputs of two keepdims twins one value: once more for them.
        twins = kept_reductions(graph) if changed else set()
        return (self.sweep(graph, twins) or changed) if twins else changed

    @staticmethod
    def sweep(graph: Graph, kept: set[tuple]) -> bool:
        """One value-numbering sweep.  A reduction whose other-``keepdims`` twin came before is a
        reshape of it; a ``keepdims=False`` one whose twin comes later (its number in ``kept``)
        is computed with ``keepdims=True`` and reshaped, the twin merging into that: the kept
        dimension is what lets consumers of the keepdims form fuse with the reduction."""
        table: dict[tuple, Node] = {}
        views: dict[tuple, object] = {}

        def view(rewriter: Rewriter, source, shape: tuple):
            if (source, shape) not in views:
                views[source, shape] = rewriter.emit(ops.reshape, [source], {"shape": shape})
            return views[source, shape]

        def visit(node: Node, rewriter: Rewriter) -> None:
            if node.op.stateful:
                return
            key = value_number(node)
            existing = table.get(key)
            if existing is not None:
                for old, new in zip(node.outputs, existing.outputs):
                    rewriter.replace(old, new)
                return
            table[key] = node
            other = other_keepdims_number(node)
            if other in table:
                rewriter.replace(node.output, view(rewriter, table[other].output, node.output.shape))
            elif other in kept:
                twin = rewriter.emit(node.op, node.inputs, dict(node.attrs, keepdims=True))
                table[other] = twin.producer
                rewriter.replace(node.output, view(rewriter, twin, node.output.shape))

        return Rewriter(graph).sweep(visit)
