"""The fused-kernel op: a node whose body (a sub-graph attribute) runs as one kernel.

Its type is its body's; its reference implementation interprets the body, so a fused
graph runs through the same oracle as the graph it came from.
"""

from __future__ import annotations

from flowjit.compiler.ir.evaluate import evaluate
from flowjit.compiler.ir.ops.base import AttrKind, Op, OpKind, register, required
from flowjit.compiler.ir.plan import KernelKind, KernelPlan, ReduceStrategy
from flowjit.errors import OpTypeError


def _fused_rule(types, attrs):
    body = attrs["body"]
    expected = [value.type for value in body.inputs]
    if list(types) != expected:
        raise OpTypeError(f"operands ({', '.join(map(str, types))}) do not match the body's inputs "
                          f"({', '.join(map(str, expected))})")
    check_plan(attrs["plan"], body)
    return [value.type for value in body.outputs]


def check_plan(plan: KernelPlan, body) -> None:
    """The plan describes this body: every value it computes has an embedding of its rank into
    the domain, along axes of the same extent (or a broadcast size-1 dimension)."""
    rank = len(plan.domain)
    if any(not 0 <= axis < rank for axis in plan.reduced):
        raise OpTypeError(f"plan reduces axes {list(plan.reduced)} of a rank-{rank} domain")
    if (plan.kind is KernelKind.REDUCE) != bool(plan.reduced):
        raise OpTypeError(f"a {plan.kind} plan {'needs' if plan.kind is KernelKind.REDUCE else 'has no'} "
                          f"reduced axes")
    for value in [v for node in body.nodes for v in node.outputs]:
        embedding = plan.embed.get(value.name)
        if embedding is None:
            raise OpTypeError(f"plan has no embedding for %{value.name}")
        if len(embedding) != value.type.rank:
            raise OpTypeError(f"plan embeds %{value.name} ({value.type}) with {len(embedding)} dimensions")
        placed = [axis for axis in embedding if axis is not None]
        if len(placed) != len(set(placed)):
            raise OpTypeError(f"plan embeds two dimensions of %{value.name} ({value.type}) along one axis: "
                              f"{list(embedding)}")
        for size, axis in zip(value.shape, embedding):
            if axis is None:
                continue
            if not 0 <= axis < rank or plan.domain[axis] != size:
                raise OpTypeError(f"plan embeds a dimension of %{value.name} ({value.type}) along axis "
                                  f"{axis} of the domain {list(plan.domain)}")
    names = {v.name for node in body.nodes for v in node.outputs}
    extra = sorted(set(plan.embed) - names)
    if extra:
        raise OpTypeError(f"plan embeds %{extra[0]}, which the body does not compute")
    if plan.strategy is not None:
        check_rows(plan, body)


def check_rows(plan: KernelPlan, body) -> None:
    """A reduce plan's row decisions name the body's values: each reduction done in exactly
    one pass, folded only where it is done, stores of the body's results, scratch values of
    the body, direct reads of its inputs."""
    reductions = [v.name for node in body.nodes if node.op.kind is OpKind.REDUCTION for v in node.outputs]
    done = [name for row in plan.passes for name in row.reduce]
    if sorted(done) != sorted(reductions):
        raise OpTypeError(f"plan's passes reduce {done}, the body's reductions are {reductions}")
    results = {v.name for v in body.outputs}
    values = {v.name for v in body.inputs} | {v.name for node in body.nodes for v in node.outputs}
    for index, row in enumerate(plan.passes):
        if set(row.fold) - set(row.reduce):
            raise OpTypeError(f"plan's pass {index} folds %{sorted(set(row.fold) - set(row.reduce))[0]}, "
                              f"which it does not reduce")
        if set(row.store) - results:
            raise OpTypeError(f"plan's pass {index} stores %{sorted(set(row.store) - results)[0]}, "
                              f"which is not a result of the kernel")
    for name, at in plan.scratch.items():
        if name not in values or not 0 <= at < len(plan.passes):
            raise OpTypeError(f"plan's scratch %{name} (written in pass {at}) is not a value of the body "
                              f"written by one of its {len(plan.passes)} passes")
    inputs = {v.name for v in body.inputs}
    if set(plan.direct) - inputs:
        raise OpTypeError(f"plan reads %{sorted(set(plan.direct) - inputs)[0]} directly, which is not an "
                          f"input of the kernel")
    if plan.strategy is ReduceStrategy.ACROSS:
        check_across(plan, body)


def check_across(plan: KernelPlan, body) -> None:
    """What reducing across rows asks (plan_reductions.across_rows decides it, and a backend
    renders it as given): a kept axis to run the blocks along, every reduction folded into
    its row's accumulator, nothing full-shaped stored, no argmax/argmin, no direct reads."""
    if set(plan.reduced) >= set(range(len(plan.domain))):
        raise OpTypeError(f"plan reduces across rows but keeps no axis of the domain {list(plan.domain)}")
    for index, row in enumerate(plan.passes):
        if set(row.fold) != set(row.reduce) or row.store:
            raise OpTypeError(f"plan reduces across rows, so pass {index} must fold every reduction it does "
                              f"and store nothing full-shaped: {row.format()}")
    from flowjit.compiler.ir.ops.reduction import ARG_REDUCTIONS
    for node in body.nodes:
        if node.op in ARG_REDUCTIONS:
            raise OpTypeError(f"plan reduces across rows, which finds no first position: %{node.output.name} "
                              f"is an {node.op.name}")
    if plan.direct:
        raise OpTypeError(f"plan reduces across rows and reads %{plan.direct[0]} directly: across rows, "
                          f"inputs are read where they are used")


def _fused_reference(arrays, attrs):
    return evaluate(attrs["body"], arrays, check_types=False)


fused = register(Op("fused", OpKind.FUSED, None, _fused_rule, _fused_reference,
                    attrs={"body": required(AttrKind.GRAPH), "plan": required(AttrKind.PLAN)},
                    doc="a kernel: its body sub-graph runs as one loop nest", complex=True))
