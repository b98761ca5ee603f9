"""Graph exports: networkx (for analyses), DOT (for pictures) and JSON (for tools)."""

from __future__ import annotations

import json

import numpy as np

from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.plan import KernelPlan
from flowjit.compiler.ir.printer import format_attr


def to_networkx(graph: Graph):
    """A networkx.MultiDiGraph: nodes are node and input names; data edges carry
    ``value``/``type``, control edges ``control``."""
    import networkx as nx                      # imported on use: it is slow to import
    result = nx.MultiDiGraph(name=graph.name)
    for value in graph.inputs:
        result.add_node(value.name, op="input", type=str(value.type))
    for node in graph.nodes:
        result.add_node(node.name, op=node.op.name, kind=node.op.kind.value, device=node.device,
                        types=[str(value.type) for value in node.outputs])
        for value in node.inputs:
            source = value.producer.name if value.producer is not None else value.name
            result.add_edge(source, node.name, value=value.name, type=str(value.type), control=False)
        for before in node.control_inputs:
            result.add_edge(before.name, node.name, control=True)
    return result


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(graph: Graph) -> str:
    lines = [f'digraph "{_dot_escape(graph.name)}" {{', "  rankdir=TB;",
             '  node [shape=box, fontname="monospace"];']
    for value in graph.inputs:
        label = _dot_escape(f"%{value.name}") + "\\n" + str(value.type)
        lines.append(f'  "{_dot_escape(value.name)}" [shape=ellipse, label="{label}"];')
    for node in graph.nodes:
        parts = [f"%{node.name} = {node.op.name}", ", ".join(str(v.type) for v in node.outputs)]
        if node.device:
            parts.append(node.device)
        label = "\\n".join(_dot_escape(part) for part in parts)
        lines.append(f'  "{_dot_escape(node.name)}" [label="{label}"];')
        for value in node.inputs:
            source = value.producer.name if value.producer is not None else value.name
            lines.append(f'  "{_dot_escape(source)}" -> "{_dot_escape(node.name)}" '
                         f'[label="{value.type}"];')
        for before in node.control_inputs:
            lines.append(f'  "{_dot_escape(before.name)}" -> "{_dot_escape(node.name)}" [style=dashed];')
    for index, value in enumerate(graph.outputs):
        source = value.producer.name if value.producer is not None else value.name
        lines.append(f'  "return:{index}" [shape=ellipse, label="return {index}"];')
        lines.append(f'  "{_dot_escape(source)}" -> "return:{index}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _json_attr(value):
    if isinstance(value, KernelPlan):
        return value.to_json()
    if isinstance(value, Graph):
        return to_json_dict(value)
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def to_json_dict(graph: Graph) -> dict:
    return {
        "name": graph.name,
        "inputs": [{"name": v.name, "type": str(v.type)} for v in graph.inputs],
        "nodes": [{
            "name": node.name, "op": node.op.name, "kind": node.op.kind.value,
            "inputs": [v.name for v in node.inputs],
            "attrs": {k: _json_attr(v) for k, v in node.attrs.items()},
            "outputs": [{"name": v.name, "type": str(v.type)} for v in node.outputs],
            "control_inputs": [n.name for n in node.control_inputs],
            "requested_device": node.requested_device, "device": node.device,
            "loc": str(node.loc) if node.loc else None,
        } for node in graph.nodes],
        "outputs": [v.name for v in graph.outputs],
        "attrs": {k: _json_attr(v) for k, v in graph.attrs.items()},
    }


def to_json(graph: Graph) -> str:
    return json.dumps(to_json_dict(graph), indent=2, default=str) + "\n"
