"""dce: remove nodes whose results nobody uses."""

from __future__ import annotations

from dataclasses import dataclass

from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.passes.base import Pass, live_nodes


@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    """Drop nodes no output or live node needs; never a stateful node or one with control successors."""

    name = "dce"

    def run(self, graph: Graph) -> bool:
        roots = {node for node in graph.nodes if node.op.stateful}
        roots.update(before for node in graph.nodes for before in node.control_inputs)
        live, _ = live_nodes(graph, graph.outputs, roots)
        dead = {node for node in graph.nodes if node not in live}
        graph.remove_nodes(dead)
        return bool(dead)
