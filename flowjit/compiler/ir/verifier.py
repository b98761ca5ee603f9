"""Checks a graph's invariants; an error reprints the IR around the bad node."""

from __future__ import annotations

from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.printer import INDENT, format_node
from flowjit.errors import FlowjitError, TraceError

WINDOW = 2


class VerificationError(FlowjitError):
    def __init__(self, message: str, graph: Graph, node: Node | None = None):
        self.message, self.node = message, node
        lines = [f"graph @{graph.name}: {message}"]
        if node is not None and node in graph.nodes:
            position = graph.nodes.index(node)
            start, stop = max(0, position - WINDOW), min(len(graph.nodes), position + WINDOW + 1)
            for index in range(start, stop):
                marker = "->" if index == position else "  "
                lines.append(f"{marker}{INDENT}{format_node(graph.nodes[index])}")
        if node is not None and node.loc is not None:
            lines.append(f"(node %{node.name} was traced at {node.loc})")
        super().__init__("\n".join(lines))


def verify(graph: Graph) -> None:
    """Raise ``VerificationError`` unless every invariant of the IR holds."""
    defined: set[Value] = set()
    names: set[str] = set()
    for value in graph.inputs:
        if value.producer is not None:
            raise VerificationError(f"input %{value.name} is a node's output", graph)
        if value.name in names:
            raise VerificationError(f"%{value.name} is defined twice", graph)
        names.add(value.name)
        defined.add(value)
    seen_nodes: set[Node] = set()
    for node in graph.nodes:
        _verify_node(graph, node, defined, names, seen_nodes)
    for value in graph.outputs:
        if value not in defined:
            raise VerificationError(f"output %{value.name} is not defined in the graph", graph)


def _verify_node(graph: Graph, node: Node, defined: set[Value], names: set[str], seen: set[Node]) -> None:
    if node.name in names:
        raise VerificationError(f"%{node.name} is defined twice", graph, node)
    names.add(node.name)
    for value in node.inputs:
        if value not in defined:
            where = "later" if value.producer in graph.nodes else "nowhere in this graph"
            raise VerificationError(f"%{node.name} reads %{value.name}, which is defined {where}",
                                    graph, node)
    for before in node.control_inputs:
        if before not in seen:
            raise VerificationError(f"%{node.name} has control input %{before.name}, which does not "
                                    f"come before it", graph, node)
    try:
        attrs = node.op.normalize_attrs(node.attrs)
        expected = node.op.infer_types([value.type for value in node.inputs], attrs)
    except TraceError as error:
        raise VerificationError(f"%{node.name} ({node.op.name}): {error.message}", graph, node) from None
    actual = [value.type for value in node.outputs]
    if expected != actual:
        raise VerificationError(
            f"%{node.name} ({node.op.name}) is typed ({', '.join(map(str, actual))}) but its op gives "
            f"({', '.join(map(str, expected))})", graph, node)
    for port, value in enumerate(node.outputs):
        if value.producer is not node or value.port != port:
            raise VerificationError(f"output {port} of %{node.name} is not linked to it", graph, node)
        defined.add(value)
    seen.add(node)
    for value in node.attrs.values():
        if isinstance(value, Graph):
            verify(value)
