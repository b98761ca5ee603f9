"""prune: partial execution (whitepaper §4.2): keep only what the fetches need.

Fed values (``name`` or ``name:port``) become graph inputs, which stops the walk back
from the fetches; fetched values become the graph's outputs.  Target nodes (by default
every stateful node, so side effects are kept) run too, with what they need.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowjit.compiler.ir.graph import Graph, Value
from flowjit.compiler.passes.base import Pass, live_nodes
from flowjit.errors import FlowjitError


class PruneError(FlowjitError):
    pass


@dataclass(frozen=True)
class Prune(Pass):
    name = "prune"
    fetches: tuple[str, ...] | None = None     # None: the graph's outputs
    feeds: tuple[str, ...] = ()
    targets: tuple[str, ...] | None = None     # None: every stateful node

    def run(self, graph: Graph) -> bool:
        before = (list(graph.inputs), list(graph.nodes), list(graph.outputs))
        fed = {}
        for name in self.feeds:
            old = _find(graph, name, "feed")
            fed[old] = Value(graph.unique_name(old.name.replace(":", "_") + "_feed"), old.type)
        if fed:
            graph.inputs.extend(fed.values())
            for node in graph.nodes:
                node.inputs = [fed.get(value, value) for value in node.inputs]
            graph.outputs = [fed.get(value, value) for value in graph.outputs]
        if self.fetches is not None:
            graph.outputs = [fed.get(v, v) for v in (_find(graph, name, "fetch") for name in self.fetches)]
        targets = ({graph.node_named(n) for n in self.targets} if self.targets is not None
                   else {node for node in graph.nodes if node.op.stateful})
        live, needed = live_nodes(graph, graph.outputs, targets)
        graph.remove_nodes({node for node in graph.nodes if node not in live})
        if self.feeds or self.fetches is not None:
            graph.inputs = [value for value in graph.inputs if value in needed or value in fed.values()]
        return (list(graph.inputs), list(graph.nodes), list(graph.outputs)) != before


def _find(graph: Graph, name: str, what: str) -> Value:
    try:
        return graph.value_named(name)
    except KeyError:
        raise PruneError(f"{what} '{name}' names no value of graph @{graph.name}") from None
