"""Merge the trailing reduced axes of a reduce kernel into one before writing it.

``x.sum()`` of a matrix, or ``x.sum(axis=(1, 2))`` of a 3-D array, reduces several
trailing axes.  The kernel writer's fast path is the row: one reduced axis, innermost,
read in blocks into vectorised lanes.  When every value of the kernel either spans all of
the trailing reduced axes or none of them, those axes can be read as one: the kernel is
written for the merged domain (``(n0, n1 * n2)``), and the driver passes its arguments
reshaped to it (a view of a C-contiguous array; numpy copies any other).  Buffers a kernel
writes are always fresh C-contiguous arrays, so their reshapes are views.

Used by the driver (driver.py) for every reduce kernel; a kernel that does not qualify is
written as it is.
"""

from __future__ import annotations

import math

from flowjit.compiler.codegen.reduce import ARG_REDUCTIONS
from flowjit.compiler.codegen.writer import domain_of, embeddings
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.types import TensorType


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


def collapse_trailing_reduction(node: Node) -> tuple[Node, dict[Value, tuple]] | None:
    """The fused ``node`` rewritten for its merged domain, and the shape each of its outer
    inputs and outputs takes there; None when it has fewer than two trailing reduced axes
    or a value that spans only some of them."""
    body: Graph = node.attrs["body"]
    if node.attrs["kind"] != "reduce":
        return None
    domain, axes = domain_of(body, "reduce")
    reduced = sorted(set(axes))
    rank = len(domain)
    if len(reduced) < 2 or reduced != list(range(rank - len(reduced), rank)):
        return None
    embed = embeddings(body, domain, axes)
    values = list(body.inputs) + [value for n in body.nodes for value in n.outputs]
    shapes = {value: merged_shape(value, domain, reduced, embed) for value in values}
    if any(shape is None for shape in shapes.values()):
        return None
    mapping: dict[Value, Value] = {}
    merged = Graph(body.name, [], [], [], body.attrs)
    for value in body.inputs:
        mapping[value] = merged.add_input(value.name, TensorType(shapes[value], value.dtype))
    for inner in body.nodes:
        attrs = dict(inner.attrs)
        if inner.op.kind is OpKind.REDUCTION and inner.op not in ARG_REDUCTIONS:
            attrs["axes"] = (rank - len(reduced),)
        elif inner.op.kind is OpKind.REDUCTION and len(reduced) < rank:
            return None                         # a position in the merged axis means another thing
        # (over every axis, numpy's argmax is the position in C order, which the merged axis is)
        copy = merged.add_node(inner.op, [mapping[v] for v in inner.inputs], attrs,
                               [TensorType(shapes[v], v.dtype) for v in inner.outputs], name=inner.name,
                               loc=inner.loc)
        for old, new in zip(inner.outputs, copy.outputs):
            mapping[old] = new
    merged.outputs = [mapping[value] for value in body.outputs]
    rewritten = Node(node.name, node.op, node.inputs, {**node.attrs, "body": merged},
                     [value.type for value in node.outputs], device=node.device, loc=node.loc)
    rewritten.outputs = node.outputs            # the driver allocates and names the originals
    outer = dict(zip(body.inputs, node.inputs)) | dict(zip(body.outputs, node.outputs))
    reshaped = {outer[value]: shapes[value] for value in outer if shapes[value] != value.shape}
    return rewritten, reshaped
