"""collapse-reductions: a reduce kernel over several trailing axes reads them as one row.

``x.sum()`` of a matrix, or ``x.sum(axis=(1, 2))`` of a 3-D array, reduces several
trailing axes.  The kernel writer's fast path is the row: one reduced axis, innermost,
read in blocks into vectorised lanes.  When every value of a kernel either spans all of
the trailing reduced axes or none of them, those axes can be read as one: this pass
rewrites the fused node for the merged domain (``(n0, n1 * n2)``) -- its body and its
plan -- and puts ``reshape`` views around it, so the printed ``fused`` stage is exactly
what is compiled::

    %k0_sum = fused %x {... plan=reduce<domain=[4, 8], reduced=[0, 1], ...>} : f32[]
  becomes
    %k0_sum_in0 = reshape %x {shape=[32]} : f32[32]
    %k0_sum = fused %k0_sum_in0 {... plan=reduce<domain=[32], reduced=[0], ...>} : f32[]

The driver runs a reshape as numpy does: a view of a C-contiguous array (numpy copies any
other); buffers a kernel writes are fresh C-contiguous arrays, so their reshapes are views.
An input that is a strided view (the interior ``u[1:-1, 1:-1]`` of a stencil, a transpose)
would be copied whole by that reshape -- five copies of the grid in a Laplacian's mean
square -- so a kernel reading one is not merged.  A kernel that does not qualify is left as
it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.ops.reduction import ARG_REDUCTIONS
from flowjit.compiler.ir.plan import KernelKind, KernelPlan
from flowjit.compiler.ir.types import TensorType
from flowjit.compiler.passes.base import Pass


def merged_shape(value: Value, domain: tuple, reduced: list[int], embed: dict) -> tuple | None:
    """The value's shape in the merged domain; None if it spans only part of the axes."""
    rank, count, shape = len(domain), len(reduced), value.shape
    if len(shape) == rank and shape[-count:] == domain[-count:]:
        return shape[:-count] + (math.prod(domain[-count:]),)
    if len(shape) == rank and all(size == 1 for size in shape[-count:]):
        return shape[:-count] + (1,)
    if value in embed and not any(entry in reduced for entry in embed[value] if entry is not None):
        return shape                            # a kept-only value (a reduction without keepdims)
    if all(size == 1 for size in shape):
        return shape
    return None


def strided_view(value: Value) -> bool:
    """Whether ``value`` is a view that is not C-contiguous when what it views is (kernel
    outputs and, as numpy's own reshape assumes, arguments): a transpose, a broadcast, or a
    slice that restricts an axis after its first one longer than 1, or steps."""
    producer = value.producer
    if producer is None or producer.op is ops.reshape:
        return False                            # (a reshape of a strided view is numpy's copy)
    if producer.op in (ops.transpose, ops.broadcast_to):
        return True
    if producer.op is not ops.slice:
        return False
    source, shape = producer.inputs[0].shape, value.shape
    attrs = producer.attrs
    long_axes = [axis for axis, size in enumerate(shape) if size > 1]
    if not long_axes:
        return strided_view(producer.inputs[0])
    first = long_axes[0]
    if attrs["steps"][first] != 1:
        return True
    if any(shape[axis] != source[axis] or attrs["steps"][axis] != 1 for axis in range(first + 1, len(shape))):
        return True
    return strided_view(producer.inputs[0])


def merged_embedding(embedding: tuple, merged: tuple, rank: int, axis: int) -> tuple:
    """A value's embedding in the merged domain: its trailing dimensions become one, along the
    merged axis (or broadcast); a value with only kept dimensions keeps its embedding."""
    if len(embedding) != rank:
        return embedding
    return embedding[:axis] + ((axis if merged[-1] != 1 else None),)


def reshaped_body(body: Graph, shapes: dict, attributes=lambda node: dict(node.attrs)) -> Graph | None:
    """``body`` with every value in its shape from ``shapes`` (an array constant reshaped with
    it); ``attributes(node)`` gives a node's attributes there, or None when it cannot be."""
    mapping: dict[Value, Value] = {}
    merged = Graph(body.name, [], [], [], body.attrs)
    for value in body.inputs:
        mapping[value] = merged.add_input(value.name, TensorType(shapes[value], value.dtype))
    for inner in body.nodes:
        attrs = attributes(inner)
        if attrs is None:
            return None
        if inner.op is ops.constant and shapes[inner.output] != inner.output.shape:
            attrs["value"] = np.reshape(attrs["value"], shapes[inner.output])
        copy = merged.add_node(inner.op, [mapping[v] for v in inner.inputs], attrs,
                               [TensorType(shapes[v], v.dtype) for v in inner.outputs], name=inner.name,
                               loc=inner.loc)
        for old, new in zip(inner.outputs, copy.outputs):
            mapping[old] = new
    merged.outputs = [mapping[value] for value in body.outputs]
    return merged


def collapse_trailing_reduction(node: Node) -> tuple[Graph, KernelPlan, list, list] | None:
    """The fused ``node``'s body and plan for its merged domain, and the shape each of its
    inputs and outputs takes there; None when it has fewer than two trailing reduced axes
    or a value that spans only some of them."""
    body: Graph = node.attrs["body"]
    plan: KernelPlan = node.attrs["plan"]
    if plan.kind is not KernelKind.REDUCE:
        return None
    domain, axes = plan.domain, plan.reduced
    reduced = sorted(set(axes))
    rank = len(domain)
    if len(reduced) < 2 or reduced != list(range(rank - len(reduced), rank)):
        return None
    if any(strided_view(value) for value in node.inputs):
        return None                             # its reshape would copy it
    embed = {value: plan.embedding(value.name) for inner in body.nodes for value in inner.outputs}
    values = list(body.inputs) + [value for n in body.nodes for value in n.outputs]
    shapes = {value: merged_shape(value, domain, reduced, embed) for value in values}
    if any(shape is None for shape in shapes.values()):
        return None
    def attributes(inner: Node) -> dict | None:
        attrs = dict(inner.attrs)
        if inner.op.kind is OpKind.REDUCTION and inner.op not in ARG_REDUCTIONS:
            attrs["axes"] = (rank - len(reduced),)
        elif inner.op.kind is OpKind.REDUCTION and len(reduced) < rank:
            return None                         # a position in the merged axis means another thing
        # (over every axis, numpy's argmax is the position in C order, which the merged axis is)
        return attrs
    merged = reshaped_body(body, shapes, attributes)
    if merged is None:
        return None
    axis = rank - len(reduced)                   # the merged axis
    merged_plan = plan.replace(                  # (how its rows are read is planned afresh)
        domain=domain[:axis] + (math.prod(domain[axis:]),), reduced=(axis,),
        strategy=None, passes=(), scratch={}, direct=(),
        embed={value.name: merged_embedding(embed[value], shapes[value], rank, axis) for value in embed})
    return merged, merged_plan, [shapes[v] for v in body.inputs], [shapes[v] for v in body.outputs]


@dataclass(frozen=True)
class CollapseReductions(Pass):
    """Reduce kernels over several trailing axes read them as one row (reshape views around)."""

    name = "collapse-reductions"

    def collapse(self, node: Node, placed: set) -> tuple[Graph, KernelPlan, list, list] | None:
        """The node's merged body, plan and input and output shapes, or None to leave it
        (``placed``: values the driver may have a kernel write into a buffer that is not its
        own -- a concatenation's slice, a variable's value)."""
        return collapse_trailing_reduction(node)

    def run(self, graph: Graph) -> bool:
        placed = set()
        for node in graph.nodes:
            if node.op is ops.concat:
                for value in node.inputs:       # (np.stack's pieces: reshapes adding its axis)
                    placed.add(value)
                    if value.producer is not None and value.producer.op is ops.reshape:
                        placed.add(value.producer.inputs[0])
            elif node.op is ops.assign_variable:
                placed.update(node.inputs)
        replaced: dict[Value, Value] = {}
        renamed: dict[Node, Node] = {}
        nodes: list[Node] = []
        for node in graph.nodes:
            node.inputs = [replaced.get(value, value) for value in node.inputs]
            node.control_inputs = [renamed.get(before, before) for before in node.control_inputs]
            collapsed = self.collapse(node, placed) if node.op is ops.fused else None
            if collapsed is None:
                nodes.append(node)
                continue
            body, plan, input_shapes, output_shapes = collapsed
            inputs = [self.view(graph, nodes, node, value, shape, f"{node.name}_in{index}")
                      for index, (value, shape) in enumerate(zip(node.inputs, input_shapes))]
            merged = Node(node.name, ops.fused, inputs, {"body": body, "plan": plan},
                          [TensorType(shape, value.dtype) for value, shape in zip(node.outputs, output_shapes)],
                          requested_device=node.requested_device, device=node.device,
                          control_inputs=node.control_inputs, loc=node.loc)
            nodes.append(merged)
            renamed[node] = merged
            for index, (old, new) in enumerate(zip(node.outputs, merged.outputs)):
                replaced[old] = self.view(graph, nodes, node, new, old.shape, f"{node.name}_out{index}")
        graph.nodes = nodes
        graph.outputs = [replaced.get(value, value) for value in graph.outputs]
        return bool(renamed)

    @staticmethod
    def view(graph: Graph, nodes: list[Node], kernel: Node, value: Value, shape: tuple, name: str) -> Value:
        """``value`` as ``shape``: itself, or a reshape view appended to ``nodes``."""
        if value.shape == tuple(shape):
            return value
        node = Node(graph.unique_name(name), ops.reshape, [value], {"shape": tuple(shape)},
                    [TensorType(tuple(shape), value.dtype)], requested_device=kernel.requested_device,
                    device=kernel.device, loc=kernel.loc)
        nodes.append(node)
        return node.output
