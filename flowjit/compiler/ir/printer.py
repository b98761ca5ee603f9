"""The one text format, printed.  ``parser.parse`` reads back exactly what this writes.

    graph @softmax(%x: f32[4,8]) -> (f32[4,8]) {
      %max = max %x {axes=[1], keepdims=true} : f32[4,1] loc("softmax.py":5)
      ...
      return %div
    }

A node line is ``%name = op %a, %b {attrs} : type`` followed, when present, by
``ctrl(%n, ...)`` (control inputs), ``device("...")`` (requested), ``colocate(%n)`` (must
share a device with node n), ``placed("...")`` (assigned) and ``loc("file":line)``.  Attributes equal to their default are omitted.
"""

from __future__ import annotations

import json

import numpy as np

from flowjit.compiler.ir.graph import Graph, Node
from flowjit.compiler.ir.ops.base import AttrKind
from flowjit.compiler.ir.plan import KernelPlan
from flowjit.compiler.ir.types import TensorType, dtype_short_name

INDENT = "  "
# Constants with more elements than this print as packed hex bytes.
MAX_LITERAL_ELEMENTS = 16


def format_scalar(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (complex, np.complexfloating)):
        return f"complex<{format_scalar(value.real)}, {format_scalar(value.imag)}>"
    if isinstance(value, np.generic):
        return str(value)            # numpy's shortest repr that round-trips in its own dtype
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_array(array: np.ndarray) -> str:
    if array.size > MAX_LITERAL_ELEMENTS:
        return f'dense<"{np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes().hex()}">'
    if array.ndim == 0:
        return format_scalar(array[()])

    def nested(part):
        if part.ndim == 0:
            return format_scalar(part[()])
        return "[" + ", ".join(nested(sub) for sub in part) + "]"
    return nested(array)


def format_attr(value, indent: int) -> str:
    if value is None:
        return "none"
    if isinstance(value, Graph):
        return format_graph(value, indent)
    if isinstance(value, KernelPlan):
        return value.format()
    if isinstance(value, np.ndarray):
        return format_array(value)
    if isinstance(value, np.dtype):
        return dtype_short_name(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(item, indent) for item in value) + "]"
    return format_scalar(value)


def format_attrs(node: Node, indent: int) -> str:
    shown = []
    for name, value in node.attrs.items():
        spec = node.op.attrs.get(name)
        if spec is not None and not spec.required and _same(value, spec.default) \
                and spec.kind is not AttrKind.ARRAY:
            continue
        shown.append(f"{name}={format_attr(value, indent)}")
    return " {" + ", ".join(shown) + "}" if shown else ""


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return False
    return type(a) is type(b) and a == b


def format_types(types: list[TensorType]) -> str:
    if len(types) == 1:
        return str(types[0])
    return "(" + ", ".join(str(t) for t in types) + ")"


def format_node(node: Node, indent: int = 0) -> str:
    operands = ", ".join(f"%{value.name}" for value in node.inputs)
    line = f"%{node.name} = {node.op.name}"
    if operands:
        line += " " + operands
    line += format_attrs(node, indent)
    line += " : " + format_types([value.type for value in node.outputs])
    if node.control_inputs:
        line += " ctrl(" + ", ".join(f"%{before.name}" for before in node.control_inputs) + ")"
    if node.requested_device is not None:
        line += f" device({json.dumps(node.requested_device)})"
    if node.colocation is not None:
        line += f" colocate(%{node.colocation})"
    if node.device is not None:
        line += f" placed({json.dumps(node.device)})"
    if node.loc is not None:
        line += f" loc({json.dumps(node.loc.short_file)}:{node.loc.line})"
    return line


def format_graph(graph: Graph, indent: int = 0) -> str:
    pad = INDENT * indent
    params = ", ".join(f"%{value.name}: {value.type}" for value in graph.inputs)
    results = ", ".join(str(value.type) for value in graph.outputs)
    header = f"graph @{graph.name}({params}) -> ({results})"
    if graph.attrs:
        header += " attributes {" + ", ".join(
            f"{name}={format_attr(value, indent + 1)}" for name, value in graph.attrs.items()) + "}"
    lines = [header + " {"]
    for node in graph.nodes:
        lines.append(pad + INDENT + format_node(node, indent + 1))
    returned = ", ".join(f"%{value.name}" for value in graph.outputs)
    lines.append(pad + INDENT + ("return " + returned if returned else "return"))
    lines.append(pad + "}")
    return "\n".join(lines)


def print_graph(graph: Graph) -> str:
    """The graph's text, ending in a newline."""
    return format_graph(graph) + "\n"


def print_graphs(graphs: list[Graph]) -> str:
    """Several graphs (a partitioned program: one per device), a blank line between;
    ``parse_all`` reads them back."""
    return "\n".join(print_graph(graph) for graph in graphs)
