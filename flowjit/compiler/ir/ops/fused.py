"""The fused-kernel op: a node whose body (a sub-graph attribute) runs as one kernel.

Its type is its body's; its reference implementation interprets the body, so a fused
graph runs through the same oracle as the graph it came from.
"""

from __future__ import annotations

from flowjit.compiler.ir.evaluate import evaluate
from flowjit.compiler.ir.ops.base import AttrKind, Op, OpKind, attr, register, required
from flowjit.errors import OpTypeError

KERNEL_KINDS = ("loop", "reduce", "matmul")


def _fused_rule(types, attrs):
    body = attrs["body"]
    expected = [value.type for value in body.inputs]
    if list(types) != expected:
        raise OpTypeError(f"operands ({', '.join(map(str, types))}) do not match the body's inputs "
                          f"({', '.join(map(str, expected))})")
    if attrs["kind"] not in KERNEL_KINDS:
        raise OpTypeError(f"kind '{attrs['kind']}' is not one of {', '.join(KERNEL_KINDS)}")
    return [value.type for value in body.outputs]


def _fused_reference(arrays, attrs):
    return evaluate(attrs["body"], arrays, check_types=False)


fused = register(Op("fused", OpKind.FUSED, None, _fused_rule, _fused_reference,
                    attrs={"body": required(AttrKind.GRAPH), "kind": attr(AttrKind.STR, "loop")},
                    doc="a kernel: its body sub-graph runs as one loop nest"))
