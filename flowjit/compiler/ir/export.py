"""Graph exports: networkx (for analyses), DOT (for pictures) and JSON (for tools)."""

from __future__ import annotations

import json

import numpy as np

from flowjit.compiler.ir.graph import Graph
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.plan import KernelPlan


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


# Fill colours by op kind, and for the ops that move data between devices.
KIND_COLOURS = {
    OpKind.ELEMENTWISE: "#cfe2ff", OpKind.REDUCTION: "#ffd8a8", OpKind.LIBRARY: "#ffe8cc", OpKind.MATMUL: "#ffc9c9",
    OpKind.SHAPE: "#e9ecef", OpKind.CONSTANT: "#f8f9fa", OpKind.STATEFUL: "#fff3bf", OpKind.FUSED: "#d3f9d8",
}
TRANSFER_COLOUR = "#b197fc"


def to_dot(graph: Graph | list[Graph], title: str | None = None) -> str:
    """A Graphviz picture of one graph, or of a stage's graphs (one per device after
    partitioning).  Nodes are coloured by op kind; each device is a cluster, and each fused
    node a cluster of the nodes its kernel runs; data edges are solid, control edges dotted,
    and a send's transfer to its recv (matched by rendezvous key) dashed."""
    graphs = graph if isinstance(graph, list) else [graph]
    name = title or graphs[0].name
    lines = [f'digraph "{_dot_escape(name)}" {{', "  rankdir=TB;", "  compound=true;",
             '  node [shape=box, style=filled, fontname="monospace", fontsize=10];',
             '  edge [fontname="monospace", fontsize=9];']
    sends, recvs = {}, {}
    for index, part in enumerate(graphs):
        prefix = f"p{index}/" if len(graphs) > 1 else ""
        _dot_graph(part, prefix, lines, sends, recvs)
    for key, source in sends.items():
        if key in recvs:
            lines.append(f'  "{_dot_escape(source)}" -> "{_dot_escape(recvs[key])}" '
                         f'[style=dashed, color="{TRANSFER_COLOUR}", penwidth=2, label="transfer"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node_label(node) -> str:
    parts = [f"%{node.name} = {node.op.name}", ", ".join(str(v.type) for v in node.outputs)]
    return "\\n".join(_dot_escape(part) for part in parts)


def _dot_graph(graph: Graph, prefix: str, lines: list[str], sends: dict, recvs: dict) -> None:
    """One graph's nodes, clustered by device (the graph's own device after partitioning, else
    each node's), kernels as clusters inside, and its edges."""
    from flowjit.compiler.ir import ops
    ident: dict = {}                  # Value -> the DOT node that produces it

    def node_id(name: str) -> str:
        return _dot_escape(prefix + name)

    graph_device = graph.attrs.get("device") if isinstance(graph.attrs.get("device"), str) else None
    by_device: dict[str | None, list] = {}
    for node in graph.nodes:
        by_device.setdefault(graph_device or node.device, []).append(node)
    body_lines: list[str] = []
    edges: list[str] = []
    for node in graph.nodes:          # first who produces what, so that edges may point forward
        if node.op is ops.fused:
            for outer, inner in zip(node.outputs, node.attrs["body"].outputs):
                ident[outer] = node_id(f"{node.name}/{inner.producer.name}") if inner.producer is not None \
                    else None
        else:
            for output in node.outputs:
                ident[output] = node_id(node.name)
    for value in graph.inputs:
        ident[value] = node_id(value.name)
        label = _dot_escape(f"%{value.name}") + "\\n" + str(value.type)
        body_lines.append(f'  "{node_id(value.name)}" [shape=ellipse, fillcolor=white, label="{label}"];')
    for cluster, (device, nodes) in enumerate(by_device.items()):
        indent = "  "
        if device is not None:
            lines_out = body_lines
            lines_out.append(f'  subgraph "cluster_{_dot_escape(prefix)}device{cluster}" {{')
            lines_out.append(f'    label="{_dot_escape(device)}"; style=rounded; color="#495057";')
            indent = "    "
        for node in nodes:
            if node.op is ops.fused:
                _dot_kernel(node, prefix, indent, body_lines, edges, ident)
                continue
            colour = TRANSFER_COLOUR if node.op.name in ("send", "recv") else KIND_COLOURS.get(node.op.kind, "white")
            body_lines.append(f'{indent}"{node_id(node.name)}" [fillcolor="{colour}", label="{_node_label(node)}"];')
            if node.op.name == "send":
                sends[node.attrs.get("key")] = prefix + node.name
            elif node.op.name == "recv":
                recvs[node.attrs.get("key")] = prefix + node.name
        if device is not None:
            body_lines.append("  }")
    for node in graph.nodes:
        if node.op is ops.fused:
            continue
        for value in node.inputs:
            edges.append(f'  "{ident[value]}" -> "{node_id(node.name)}" [label="{value.type}"];')
        for before in node.control_inputs:
            edges.append(f'  "{_control_source(before, prefix, ident)}" -> "{node_id(node.name)}" [style=dotted];')
    for index, value in enumerate(graph.outputs):
        body_lines.append(f'  "{node_id(f"return:{index}")}" [shape=ellipse, fillcolor=white, label="return {index}"];')
        edges.append(f'  "{ident[value]}" -> "{node_id(f"return:{index}")}";')
    lines.extend(body_lines)
    lines.extend(edges)


def _control_source(node, prefix: str, ident: dict) -> str:
    return ident.get(node.outputs[0]) if node.outputs else _dot_escape(prefix + node.name)


def _dot_kernel(node, prefix: str, indent: str, lines: list[str], edges: list[str], ident: dict) -> None:
    """A fused node as a cluster of its body's nodes, wired to the values outside."""
    body = node.attrs["body"]
    inner_prefix = f"{prefix}{node.name}/"
    lines.append(f'{indent}subgraph "cluster_{_dot_escape(inner_prefix)}" {{')
    lines.append(f'{indent}  label="{_dot_escape(node.name)} ({node.attrs["plan"].kind})"; '
                 f'style="rounded,filled"; fillcolor="{KIND_COLOURS[OpKind.FUSED]}"; color="#2b8a3e";')
    inner: dict = {}
    for outer_value, body_input in zip(node.inputs, body.inputs):
        inner[body_input] = ident[outer_value]          # edges come straight from the outer producer
    for body_node in body.nodes:
        name = _dot_escape(inner_prefix + body_node.name)
        colour = KIND_COLOURS.get(body_node.op.kind, "white")
        lines.append(f'{indent}  "{name}" [fillcolor="{colour}", label="{_node_label(body_node)}"];')
        for value in body_node.inputs:
            style = "" if value.producer is not None else f' [label="{value.type}"]'
            edges.append(f'  "{inner[value]}" -> "{name}"{style};')
        for output in body_node.outputs:
            inner[output] = name
    lines.append(f"{indent}}}")
    for outer_output, body_output in zip(node.outputs, body.outputs):
        if ident.get(outer_output) is None:              # a body output that is one of its inputs
            ident[outer_output] = inner[body_output]


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
