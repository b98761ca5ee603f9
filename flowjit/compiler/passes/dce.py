"""dce: remove nodes whose results nobody uses."""

from __future__ import annotations

from dataclasses import dataclass

from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.passes.base import Pass, kept_nodes


@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    """Drop nodes no output or live node needs; never a stateful node or one with control successors."""

    name = "dce"

    def run(self, graph: Graph) -> bool:
        live = kept_nodes(graph)
        dead = {node for node in graph.nodes if node not in live}
        graph.remove_nodes(dead)
        return bool(dead)
