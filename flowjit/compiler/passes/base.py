"""What every pass shares: the registry by kebab-case name, and a one-sweep rewriter.

A pass is a frozen dataclass with a ``name`` and options as fields; ``run(graph)``
rewrites the graph in place and returns whether it changed anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import Op

PASSES: dict[str, type["Pass"]] = {}


@dataclass(frozen=True)
class Pass:
    name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name:
            PASSES[cls.name] = cls

    def run(self, graph: Graph) -> bool:
        raise NotImplementedError


class Rewriter:
    """Walks a graph once in order; rules replace a node's outputs by other values.

    ``emit`` adds a new node just before the one being visited.  Uses of a replaced
    value are redirected as the walk goes, so each rewrite sees already-rewritten
    inputs, and one sweep is linear in the graph's size.  A replacement must have
    exactly the type of what it replaces.
    """

    def __init__(self, graph: Graph, *, fastmath: bool = False, count_uses: bool = False):
        self.graph = graph
        self.fastmath = fastmath
        # How many times each value is read (by nodes and graph outputs), kept current as
        # rules emit nodes and replace values; only when asked for, as it costs a walk.
        self.uses: dict[Value, int] = {}
        if count_uses:
            for value in [v for node in graph.nodes for v in node.inputs] + list(graph.outputs):
                self.uses[value] = self.uses.get(value, 0) + 1
        self.replacements: dict[Value, Value] = {}
        self.changed = False
        self._new_nodes: list[Node] = []
        self._current: Node | None = None
        self.visited = 0                    # nodes the sweep has visited so far
        self._control_successors = {n for node in graph.nodes for n in node.control_inputs}

    def resolve(self, value: Value) -> Value:
        while value in self.replacements:
            value = self.replacements[value]
        return value

    def emit(self, op: Op, inputs: list[Value], attrs: dict | None = None, *, like: Node | None = None) -> Value:
        """A new single-output node placed before the node being visited, with the device
        requests and source location of ``like`` (default: the node being visited)."""
        current = like or self._current
        attrs = op.normalize_attrs(dict(attrs or {}))
        node = Node(self.graph.unique_name(op.name), op, inputs, attrs,
                    op.infer_types([v.type for v in inputs], attrs),
                    requested_device=current.requested_device if current else None,
                    device=current.device if current else None,
                    colocation=current.colocation if current else None, loc=current.loc if current else None)
        self._new_nodes.append(node)
        for value in inputs:
            self.uses[value] = self.uses.get(value, 0) + 1
        self.changed = True
        return node.output

    def replace(self, old: Value, new: Value) -> None:
        if old.type != new.type:
            raise AssertionError(f"rewrite of %{old.name} changes its type {old.type} -> {new.type}")
        if new is not old:
            self.replacements[old] = new
            self.uses[new] = self.uses.get(new, 0) + self.uses.get(old, 0)
            self.changed = True

    def redirect(self, node: Node) -> None:
        """Point ``node``'s inputs at their replacements.  A replaced value's producer that had
        control inputs hands them on: ``node`` now waits for them itself."""
        inputs = []
        for value in node.inputs:
            while value in self.replacements:
                producer = value.producer
                if producer is not None and producer.control_inputs:
                    node.control_inputs += [c for c in producer.control_inputs
                                            if c not in node.control_inputs and c is not node]
                value = self.replacements[value]
            inputs.append(value)
        node.inputs = inputs

    def size(self) -> int:
        """How many nodes the graph holds after this sweep, if the nodes not yet visited stay."""
        return len(self._new_nodes) + len(self.graph.nodes) - self.visited

    def sweep(self, visit: Callable[[Node, "Rewriter"], None]) -> bool:
        """Call ``visit`` on every node (inputs already redirected); drop nodes fully replaced."""
        self.visited = 0
        for node in self.graph.nodes:
            if self.replacements:
                self.redirect(node)
            self._current = node
            visit(node, self)
            self.visited += 1
            replaced = all(value in self.replacements for value in node.outputs) and node.outputs
            if not replaced or node.op.stateful or node in self._control_successors:
                self._new_nodes.append(node)
        self._current = None
        self.graph.nodes = self._new_nodes
        self.graph.outputs = [self.resolve(value) for value in self.graph.outputs]
        return self.changed


def plain(node: Node) -> bool:
    """One output, no control inputs, not stateful: a node a rewrite may copy, cut or drop."""
    return not node.control_inputs and not node.op.stateful and len(node.outputs) == 1


def kept_nodes(graph: Graph) -> set[Node]:
    """The nodes dce keeps: those the outputs, a stateful node or a control edge need."""
    roots = {node for node in graph.nodes if node.op.stateful}
    roots.update(before for node in graph.nodes for before in node.control_inputs)
    return live_nodes(graph, graph.outputs, roots)[0]


def live_nodes(graph: Graph, needed: set[Value] | list[Value], roots: set[Node]) -> tuple[set[Node], set[Value]]:
    """Nodes that ``roots`` or the ``needed`` values depend on (data and control), in one
    backward sweep; also every value those nodes read."""
    needed = set(needed)
    live: set[Node] = set()
    for node in reversed(graph.nodes):
        if node in roots or node in live or any(value in needed for value in node.outputs):
            live.add(node)
            needed.update(node.inputs)
            live.update(node.control_inputs)
    return live, needed
