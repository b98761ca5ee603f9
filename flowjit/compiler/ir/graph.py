"""The dataflow graph: a flat, ordered list of nodes over typed values (a jaxpr's shape).

A ``Node`` is one op application.  It produces zero or more ``Value``s; a value is
referenced as ``%node`` when its node has one output and ``%node:port`` otherwise, the
whitepaper's ``name:port``.  Graph inputs are values without a producer.  Control
inputs are happens-before edges that carry no data.
"""

from __future__ import annotations

import heapq
import re
from typing import Callable, Hashable, Iterable, Iterator, TypeVar

from flowjit.compiler.ir.types import TensorType
from flowjit.errors import Location


class Value:
    """One typed tensor: a graph input or a node's output."""

    __slots__ = ("name", "type", "producer", "port")

    def __init__(self, name: str, type: TensorType, producer: "Node | None" = None, port: int = 0):
        self.name = name
        self.type = type
        self.producer = producer
        self.port = port

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self):
        return self.type.dtype

    @property
    def tensor_name(self) -> str:
        """The whitepaper's ``name:port``: the producing node's name and this output's index
        (a graph input is ``name:0``)."""
        return f"{self.producer.name}:{self.port}" if self.producer is not None else f"{self.name}:0"

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


class Node:
    """One application of an op to input values, producing output values."""

    __slots__ = ("name", "op", "inputs", "attrs", "outputs", "requested_device", "device",
                 "colocation", "control_inputs", "loc")

    def __init__(self, name: str, op, inputs: list[Value], attrs: dict, output_types: list[TensorType],
                 *, requested_device: str | None = None, device: str | None = None,
                 colocation: str | None = None, control_inputs: list["Node"] | None = None,
                 loc: Location | None = None):
        self.name = name
        self.op = op
        self.inputs = list(inputs)
        self.attrs = dict(attrs)
        self.outputs: list[Value] = []
        self.set_output_types(output_types)
        self.requested_device = requested_device
        self.device = device
        self.colocation = colocation        # the name of a node this one must share a device with
        self.control_inputs = list(control_inputs or [])
        self.loc = loc

    def set_output_types(self, output_types: list[TensorType]) -> None:
        if len(output_types) == 1:
            names = [self.name]
        else:
            names = [f"{self.name}:{port}" for port in range(len(output_types))]
        if len(self.outputs) == len(output_types):
            for value, name, type in zip(self.outputs, names, output_types):
                value.name, value.type = name, type
        else:
            self.outputs = [Value(name, type, self, port)
                            for port, (name, type) in enumerate(zip(names, output_types))]

    def dependencies(self) -> set["Node"]:
        """The nodes this one waits for: producers of its inputs and its control inputs."""
        before = {value.producer for value in self.inputs if value.producer is not None}
        before.update(self.control_inputs)
        return before

    @property
    def output(self) -> Value:
        """The only output of a single-output node."""
        if len(self.outputs) != 1:
            raise ValueError(f"node %{self.name} ({self.op.name}) has {len(self.outputs)} outputs")
        return self.outputs[0]

    def __repr__(self) -> str:
        from flowjit.compiler.ir.printer import format_node
        return format_node(self)


def bridged_controls(controls: list[Node], dead: set[Node]) -> list[Node]:
    """``controls`` with each node of ``dead`` replaced by its own control inputs (transitively)."""
    result: list[Node] = []
    stack = list(reversed(controls))
    seen: set[Node] = set()
    while stack:
        before = stack.pop()
        if before in seen:
            continue
        seen.add(before)
        if before in dead:
            stack.extend(reversed(before.control_inputs))
        else:
            result.append(before)
    return result


Item = TypeVar("Item", bound=Hashable)


def stable_topological_order(items: list[Item], predecessors: Callable[[Item], Iterable[Item]]) -> list[Item]:
    """``items`` with every item after its predecessors (those among ``items``); ties keep
    the given order.  Shorter than ``items`` when they form a cycle."""
    position = {item: index for index, item in enumerate(items)}
    waiting = dict.fromkeys(items, 0)
    successors: dict = {item: [] for item in items}
    for item in items:
        for before in set(predecessors(item)):
            if before in position and before is not item:
                waiting[item] += 1
                successors[before].append(item)
    ready = [position[item] for item in items if waiting[item] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        item = items[heapq.heappop(ready)]
        order.append(item)
        for successor in successors[item]:
            waiting[successor] -= 1
            if waiting[successor] == 0:
                heapq.heappush(ready, position[successor])
    return order


_NAME_SUFFIX = re.compile(r"^(.*?)(?:_(\d+))?$")


class Graph:
    """Ordered nodes, input values, output values and attributes."""

    def __init__(self, name: str = "main", inputs: Iterable[Value] = (), nodes: Iterable[Node] = (),
                 outputs: Iterable[Value] = (), attrs: dict | None = None):
        self.name = name
        self.inputs: list[Value] = list(inputs)
        self.nodes: list[Node] = list(nodes)
        self.outputs: list[Value] = list(outputs)
        self.attrs: dict = dict(attrs or {})
        self._names: dict[str, int] = {}
        for value in self.inputs:
            self._claim(value.name)
        for node in self.nodes:
            self._claim(node.name)

    # -- names -------------------------------------------------------------------------
    def _claim(self, name: str) -> None:
        base, number = _NAME_SUFFIX.match(name).groups()
        count = self._names.get(base, -1)
        self._names[base] = max(count, int(number) if number is not None else 0)
        self._names.setdefault(name, 0)

    def unique_name(self, base: str) -> str:
        """``base`` if unused, else ``base_1``, ``base_2``, ... (TensorFlow's naming)."""
        if base not in self._names:
            self._names[base] = 0
            return base
        number = self._names[base] + 1
        while f"{base}_{number}" in self._names:
            number += 1
        self._names[base] = number
        name = f"{base}_{number}"
        self._names[name] = 0
        return name

    # -- building ----------------------------------------------------------------------
    def add_input(self, name: str, type: TensorType) -> Value:
        value = Value(self.unique_name(name), type)
        self.inputs.append(value)
        return value

    def add_node(self, op, inputs: list[Value], attrs: dict | None = None,
                 output_types: list[TensorType] | None = None, *, name: str | None = None,
                 index: int | None = None, **fields) -> Node:
        """Append (or insert at ``index``) a node; infer output types when not given."""
        attrs = op.normalize_attrs(dict(attrs or {}))
        if output_types is None:
            output_types = op.infer_types([value.type for value in inputs], attrs)
        node = Node(self.unique_name(name or op.name), op, inputs, attrs, output_types, **fields)
        if index is None:
            self.nodes.append(node)
        else:
            self.nodes.insert(index, node)
        return node

    # -- queries -----------------------------------------------------------------------
    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def node_named(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def tensor_named(self, name: str) -> Value:
        """The value a whitepaper tensor name gives: ``node:port``, or ``node`` for its output 0
        (a graph input's port is 0).  KeyError when there is none."""
        node_name, _, port_text = name.rpartition(":") if ":" in name else (name, "", "0")
        if not port_text.isdigit():
            raise KeyError(name)
        port = int(port_text)
        for value in self.inputs:
            if value.name == node_name and port == 0:
                return value
        for node in self.nodes:
            if node.name == node_name:
                if port < len(node.outputs):
                    return node.outputs[port]
                break
        raise KeyError(name)

    def value_named(self, name: str) -> Value:
        for value in self.inputs:
            if value.name == name:
                return value
        for node in self.nodes:
            for value in node.outputs:
                if value.name == name:
                    return value
        raise KeyError(name)

    # -- rewriting ---------------------------------------------------------------------
    def remove_nodes(self, dead: set[Node]) -> None:
        """Drop ``dead``; a survivor that waited for a dead node waits for what that node
        waited for instead (control edges are bridged, never lost)."""
        if not dead:
            return
        self.nodes = [node for node in self.nodes if node not in dead]
        for node in self.nodes:
            if node.control_inputs and any(before in dead for before in node.control_inputs):
                node.control_inputs = bridged_controls(node.control_inputs, dead)

    def copy(self) -> "Graph":
        """A deep copy of the structure (attributes are shared, values are new)."""
        mapping: dict[Value, Value] = {}
        inputs = []
        for value in self.inputs:
            mapping[value] = Value(value.name, value.type)
            inputs.append(mapping[value])
        nodes = []
        node_map: dict[Node, Node] = {}
        for node in self.nodes:
            copy = Node(node.name, node.op, [mapping[value] for value in node.inputs], node.attrs,
                        [value.type for value in node.outputs],
                        requested_device=node.requested_device, device=node.device,
                        colocation=node.colocation, control_inputs=[node_map[before] for before in node.control_inputs],
                        loc=node.loc)
            for old, new in zip(node.outputs, copy.outputs):
                mapping[old] = new
            node_map[node] = copy
            nodes.append(copy)
        return Graph(self.name, inputs, nodes, [mapping[value] for value in self.outputs], self.attrs)

    def __str__(self) -> str:
        from flowjit.compiler.ir.printer import format_graph
        return format_graph(self)

    def __repr__(self) -> str:
        return f"<Graph @{self.name}: {len(self.inputs)} inputs, {len(self.nodes)} nodes>"
