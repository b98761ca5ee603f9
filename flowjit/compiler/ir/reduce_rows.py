"""What the row planner (passes/plan_reductions.py) and the backends that render its plans
both read off a reduce kernel's body: when each value is known, and which values run along
the reduced axes."""

from __future__ import annotations

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.plan import KernelPlan


def levels(body: Graph) -> tuple[dict[Value, int], dict[Node, int]]:
    """For each value, the pass after which it is known (a reduction's result is known after
    the pass that does it); for each reduction, the pass that does it."""
    level: dict[Value, int] = {}
    pass_of: dict[Node, int] = {}
    for node in body.nodes:
        inputs_level = max((level.get(v, 0) for v in node.inputs), default=0)
        if node.op.kind is OpKind.REDUCTION:
            pass_of[node] = inputs_level
            level[node.output] = inputs_level + 1
        else:
            level[node.output] = inputs_level
    return level, pass_of


def full_values(body: Graph, plan: KernelPlan) -> set[Value]:
    """Values that run along a reduced axis (computed per element of a row)."""
    return {value for node in body.nodes if node.op is not ops.constant for value in node.outputs
            if any(entry in plan.reduced for entry in plan.embedding(value.name) if entry is not None)}
