"""cse: global value numbering (Click, 1995) over the flat, ordered graph.

Two nodes with the same op, the same inputs, the same attributes and the same
annotations compute the same value; the later one is replaced by the earlier.
Commutative ops match either operand order.  Stateful ops (variables, random) never
merge.  One sweep in graph order is enough: inputs are numbered before their users.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowjit.compiler.ir.graph import Graph, Node
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


def value_number(node: Node) -> tuple:
    operands = tuple(id(value) for value in node.inputs)
    if node.op.commutative:
        operands = tuple(sorted(operands))
    attrs = tuple((name, attr_key(value)) for name, value in node.attrs.items())
    return (node.op, operands, attrs, tuple(v.type for v in node.outputs), node.requested_device,
            node.device, node.colocation, tuple(id(before) for before in node.control_inputs))


@dataclass(frozen=True)
class CommonSubexpressionElimination(Pass):
    name = "cse"

    def run(self, graph: Graph) -> bool:
        table: dict[tuple, Node] = {}

        def visit(node: Node, rewriter: Rewriter) -> None:
            if node.op.stateful:
                return
            key = value_number(node)
            existing = table.get(key)
            if existing is None:
                table[key] = node
                return
            for old, new in zip(node.outputs, existing.outputs):
                rewriter.replace(old, new)

        return Rewriter(graph).sweep(visit)
