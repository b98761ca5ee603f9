"""expand-composites: write var and std in terms of mean, sub, mul, sum and div.

numpy computes ``var(x) = sum(|x - mean(x)|**2) / max(N - ddof, 0)`` in the dtype of
``mean(x)``; the expansion does the same, so kernels only need primitive reductions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.passes.base import Pass, Rewriter


def needs_keepdims(axes) -> bool:
    """Whether ``x - mean(x, axes)`` needs the mean's reduced axes kept to broadcast right:
    not when they are the leading axes (all of them, or ``axis=0``), where the mean without
    them broadcasts the same way.  Without them it is the mean a user writes (``x.mean()``,
    ``x.mean(axis=0)``), which CSE then computes once for both (z-scores)."""
    return tuple(sorted(axes)) != tuple(range(len(axes)))


def expand_variance(node: Node, rw: Rewriter):
    """var(x) -> sum((x - mean(x))**2) / max(N - ddof, 0);  std(x) -> sqrt(var(x))"""
    (x,) = node.inputs
    axes, keepdims, ddof = node.attrs["axes"], node.attrs["keepdims"], node.attrs["ddof"]
    mean = rw.emit(ops.mean, [x], {"axes": axes, "keepdims": needs_keepdims(axes)})
    deviation = rw.emit(ops.sub, [x, mean])
    squared = rw.emit(ops.mul, [deviation, deviation])
    total = rw.emit(ops.sum, [squared], {"axes": axes, "keepdims": keepdims})
    # numpy divides by max(N - ddof, 0): ddof >= N gives inf (or NaN), never a negative variance
    count = max(int(np.prod([x.shape[axis] for axis in axes], dtype=np.int64)) - ddof, 0)
    divisor = rw.emit(ops.constant, [], {"value": np.asarray(count, dtype=total.dtype)})
    variance = rw.emit(ops.div, [total, divisor])
    if variance.dtype != node.output.dtype:
        variance = rw.emit(ops.cast, [variance], {"dtype": node.output.dtype})
    return rw.emit(ops.sqrt, [variance]) if node.op is ops.std else variance


def trivial_reduction(node: Node, rw: Rewriter):
    """reduce(x) over no axes (a 0-d x) -> x, cast to the reduction's dtype; argmax -> 0"""
    (x,) = node.inputs
    out = node.output
    if node.op in (ops.argmax, ops.argmin):
        if x.type.rank != 0:
            return None
        zero = rw.emit(ops.constant, [], {"value": np.zeros((), out.dtype)})
        return zero if not out.shape else rw.emit(ops.broadcast_to, [zero], {"shape": out.shape})
    if node.attrs["axes"] or node.op in (ops.var, ops.std):
        return None
    value = x if x.dtype == out.dtype else rw.emit(ops.cast, [x], {"dtype": out.dtype})
    return value if value.shape == out.shape else rw.emit(ops.reshape, [value], {"shape": out.shape})


@dataclass(frozen=True)
class ExpandComposites(Pass):
    """Lower ops kernels do not implement directly: var/std, and reductions over no axes."""

    name = "expand-composites"

    def run(self, graph: Graph) -> bool:
        def visit(node: Node, rw: Rewriter) -> None:
            if node.op is ops.var or node.op is ops.std:
                rw.replace(node.output, expand_variance(node, rw))
            elif node.op.kind is OpKind.REDUCTION:
                replacement = trivial_reduction(node, rw)
                if replacement is not None:
                    rw.replace(node.output, replacement)
        changed = False
        while Rewriter(graph).sweep(visit):     # an expansion can emit reductions over no axes
            changed = True
        return changed
