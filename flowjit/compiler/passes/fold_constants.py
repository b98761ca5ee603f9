"""fold-constants: evaluate nodes whose inputs are all constants, with the op's own
reference implementation (one semantics for folding and interpreting, as tinygrad's
``python_alu``).  Results larger than ``size_limit`` elements stay in the graph, and
broadcasts are not folded (they would only multiply a constant's size); a folded
constant keeps the node's dtype exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node
from flowjit.compiler.ir.types import TensorType
from flowjit.compiler.ir.ops.misc import constant_value
from flowjit.compiler.passes.base import Pass, Rewriter


@dataclass(frozen=True)
class FoldConstants(Pass):
    name = "fold-constants"
    size_limit: int = 1 << 16

    def run(self, graph: Graph) -> bool:
        def visit(node: Node, rewriter: Rewriter) -> None:
            if node.op.stateful or node.op is ops.constant or node.op is ops.broadcast_to or not node.inputs:
                return
            if any(value.type.size > self.size_limit for value in node.outputs):
                return
            arrays = [constant_value(value) for value in node.inputs]
            if any(array is None for array in arrays):
                return
            try:
                results = node.op.evaluate(arrays, node.attrs)
            except (ArithmeticError, ValueError):
                return                    # e.g. integer to a negative power: left for run time
            for value, result in zip(node.outputs, results):
                if TensorType.of(result) != value.type:
                    raise AssertionError(f"folding %{node.name} ({node.op.name}) gave {TensorType.of(result)}, "
                                         f"expected {value.type}")
                rewriter.replace(value, rewriter.emit(ops.constant, [], {"value": result}))

        return Rewriter(graph).sweep(visit)
