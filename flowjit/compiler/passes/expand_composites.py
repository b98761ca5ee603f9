"""expand-composites: write var and std in terms of mean, sub, mul, sum and div.

numpy computes ``var(x) = sum(|x - mean(x)|**2) / (N - ddof)`` in the dtype of
``mean(x)``; the expansion does the same, so kernels only need primitive reductions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node
from flowjit.compiler.passes.base import Pass, Rewriter


def expand_variance(node: Node, rw: Rewriter):
    """var(x) -> sum((x - mean(x))**2) / (N - ddof);  std(x) -> sqrt(var(x))"""
    (x,) = node.inputs
    axes, keepdims, ddof = node.attrs["axes"], node.attrs["keepdims"], node.attrs["ddof"]
    mean = rw.emit(ops.mean, [x], {"axes": axes, "keepdims": True})
    deviation = rw.emit(ops.sub, [x, mean])
    squared = rw.emit(ops.mul, [deviation, deviation])
    total = rw.emit(ops.sum, [squared], {"axes": axes, "keepdims": keepdims})
    count = int(np.prod([x.shape[axis] for axis in axes], dtype=np.int64)) - ddof
    divisor = rw.emit(ops.constant, [], {"value": np.asarray(count, dtype=total.dtype)})
    variance = rw.emit(ops.div, [total, divisor])
    if variance.dtype != node.output.dtype:
        variance = rw.emit(ops.cast, [variance], {"dtype": node.output.dtype})
    return rw.emit(ops.sqrt, [variance]) if node.op is ops.std else variance


@dataclass(frozen=True)
class ExpandComposites(Pass):
    name = "expand-composites"

    def run(self, graph: Graph) -> bool:
        def visit(node: Node, rw: Rewriter) -> None:
            if node.op is ops.var or node.op is ops.std:
                rw.replace(node.output, expand_variance(node, rw))
        return Rewriter(graph).sweep(visit)
