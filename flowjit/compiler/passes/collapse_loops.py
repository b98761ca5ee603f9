"""collapse-loops: a loop kernel runs adjacent domain axes that every value treats alike as one.

A loop kernel's nest has one loop per domain axis, and only the innermost one is vectorised.
An image's ``(h, w, 3)`` domain then runs a vector loop over 3 elements, 4 million times; a
``(4096, 1024)`` one restarts its vector loop at every row.  numpy's iterator coalesces such
axes, and so does this pass: two adjacent axes merge when every value of the kernel spans
both or neither of them (an operand broadcast along one axis but not the other keeps them
apart: ``x[n, m] * w[m]``).  The fused node's body and plan are rewritten for the merged
domain and ``reshape`` views go around it, as collapse-reductions does for reduce kernels, so
the printed ``fused`` stage is what is compiled::

    %k0 = fused %c {... plan=loop<domain=[1182, 1182, 3], ...>} : f32[1182,1182,3]
  becomes
    %k0_in0 = reshape %c {shape=[4191372]} : f32[4191372]
    %k0 = fused %k0_in0 {... plan=loop<domain=[4191372], ...>} : f32[4191372]
    %k0_out0 = reshape %k0 {shape=[1182, 1182, 3]} : f32[1182,1182,3]

An input that is a strided view would be copied by its reshape (numpy's reshape copies what it
cannot view), so a kernel that would have to merge the axes of one is left as it is.  Only
elementwise kernels qualify: every op in a loop kernel's body depends on its operands alone,
not on where in the domain it runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.plan import KernelKind, KernelPlan
from flowjit.compiler.passes.collapse_reductions import CollapseReductions, reshaped_body, strided_view


def _padded(value: Value, rank: int) -> tuple:
    """The value's shape aligned on the right with the domain's, as numpy broadcasts it."""
    return (1,) * (rank - len(value.shape)) + tuple(value.shape)


def _aligned(embedding: tuple, shape: tuple, rank: int) -> bool:
    """Whether an embedding is numpy's: dimension k along axis rank - len + k, size-1 ones broadcast."""
    offset = rank - len(shape)
    return len(embedding) == len(shape) and all(
        entry == (None if size == 1 else offset + dim) or (size == 1 and entry == offset + dim)
        for dim, (entry, size) in enumerate(zip(embedding, shape)))


def axis_groups(domain: tuple, shapes: list[tuple]) -> list[list[int]]:
    """Runs of adjacent domain axes that every (right-aligned) shape spans all or none of;
    an axis of size 1 joins its neighbour."""
    groups = [[0]]
    for axis in range(1, len(domain)):
        longer = [member for member in groups[-1] if domain[member] != 1]      # what the group spans
        alike = domain[axis] == 1 or not longer or all(
            (shape[longer[0]] == 1) == (shape[axis] == 1) for shape in shapes)
        if alike:
            groups[-1].append(axis)
        else:
            groups.append([axis])
    return groups


def merged_shape(padded: tuple, groups: list[list[int]], own_rank: int, rank: int) -> tuple:
    """A value's shape in the merged domain: one dimension per group, less the leading groups
    that lie wholly in the padding its own rank leaves."""
    first = rank - own_rank
    return tuple(math.prod(padded[axis] for axis in group) for group in groups if group[-1] >= first)


def collapse_loop(node: Node) -> tuple[Graph, KernelPlan, list, list] | None:
    """The fused ``node``'s body and plan for its merged domain, and the shape each of its inputs
    and outputs takes there; None when no two axes merge or the kernel does not qualify."""
    body: Graph = node.attrs["body"]
    plan: KernelPlan = node.attrs["plan"]
    domain, rank = plan.domain, len(plan.domain)
    if plan.kind is not KernelKind.LOOP or rank < 2:
        return None
    if any(inner.op.kind not in (OpKind.ELEMENTWISE, OpKind.CONSTANT) for inner in body.nodes):
        return None
    computed = [value for inner in body.nodes for value in inner.outputs]
    values = list(body.inputs) + computed
    if any(len(value.shape) > rank for value in values):
        return None
    if any(not _aligned(plan.embedding(value.name), value.shape, rank) for value in computed):
        return None
    padded = {value: _padded(value, rank) for value in values}
    if any(size not in (1, extent) for shape in padded.values() for size, extent in zip(shape, domain)):
        return None
    groups = axis_groups(domain, list(padded.values()))
    if len(groups) == rank:
        return None
    shapes = {value: merged_shape(padded[value], groups, len(value.shape), rank) for value in values}
    for outer, inner in zip(node.inputs, body.inputs):
        merges = sum(1 for size in inner.shape if size != 1) > sum(1 for size in shapes[inner] if size != 1)
        if merges and strided_view(outer):
            return None                             # its reshape would copy it
    new_rank = len(groups)
    merged = reshaped_body(body, shapes)
    embed = {}
    for value in computed:
        offset = new_rank - len(shapes[value])
        embed[value.name] = tuple(None if size == 1 else offset + dim for dim, size in enumerate(shapes[value]))
    merged_plan = plan.replace(domain=tuple(math.prod(domain[axis] for axis in group) for group in groups),
                               embed=embed)
    return merged, merged_plan, [shapes[v] for v in body.inputs], [shapes[v] for v in body.outputs]


@dataclass(frozen=True)
class CollapseLoops(CollapseReductions):
    """Loop kernels run adjacent axes every value treats alike as one (reshape views around)."""

    name = "collapse-loops"

    def collapse(self, node: Node, placed: set):
        # A piece of a concatenation is written through a view of its slice of the result,
        # which a merged shape cannot always take (a slice along a later axis is strided); a
        # variable's new value is written into the variable in place, found as the kernel's
        # own output (an optimiser's update of a weight matrix).
        if any(value in placed for value in node.outputs):
            return None
        return collapse_loop(node)
