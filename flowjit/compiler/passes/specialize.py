"""specialize: give a graph's ``?`` dimensions the sizes fed at run time.

A graph built on placeholders with None dimensions carries them as the stand-in size
``types.DYNAMIC`` (printed ``?``): type rules ran on it unchanged.  Kernels read their
sizes at run time, so the program compiles per fed sizes from the same graph (mostly to
kernels it has already): this pass retypes
the inputs and infers every node's types again with its op's own type rule.

Attributes that hold sizes (reshape's shape, slice bounds, iota's shape and step,
broadcast_to's shape) were computed from the stand-in: an entry ``k * DYNAMIC + c`` (``x[:-1]``
stops at ``DYNAMIC - 1``, a flattened ``(?, 4)`` has ``4 * DYNAMIC`` elements) becomes
``k * n + c`` for the fed size ``n`` of the node's ``?`` dimensions.  A size that is no such
expression, or a node whose ``?`` dimensions were fed different sizes, is an error naming
the node and the user's line: no size is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import AttrKind
from flowjit.compiler.ir.types import DYNAMIC, TensorType
from flowjit.compiler.passes.base import Pass
from flowjit.errors import FlowjitError, TraceError

OFFSET_LIMIT = 1 << 20            # |c| in k * DYNAMIC + c: literal offsets (x[:-1], x[1:]) are small


class SpecializeError(FlowjitError, ValueError):
    """The fed sizes do not fit the graph (an op's type rule refused them, or a size
    attribute cannot follow them)."""


@dataclass(frozen=True)
class Specialize(Pass):
    """Retype inputs (name -> concrete shape) and infer every node's types again."""

    name = "specialize"
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def run(self, graph: Graph) -> bool:
        shapes = dict(self.shapes)
        before = {value: value.type for value in graph.inputs}
        for node in graph.nodes:
            for value in node.outputs:
                before[value] = value.type
        fed_sizes = set()
        for value in graph.inputs:
            if value.name in shapes:
                shape = tuple(shapes[value.name])
                _check_input(value, shape)
                fed_sizes.update(size for size, old in zip(shape, value.shape) if old == DYNAMIC)
                value.type = TensorType(shape, value.dtype)
        changed = any(value.type != before[value] for value in graph.inputs)
        for node in graph.nodes:
            attrs = _specialized_attrs(node, before, fed_sizes)
            try:
                types = node.op.infer_types([value.type for value in node.inputs], attrs)
            except TraceError as error:
                raise SpecializeError(f"%{node.name} ({node.op.name}{_where(node)}) does not fit the fed sizes: "
                                      f"{error.message} (operands {', '.join(str(v.type) for v in node.inputs)}; "
                                      f"the graph has {', '.join(str(before[v]) for v in node.inputs)})") from None
            if [t.rank for t in types] != [before[v].rank for v in node.outputs]:
                raise SpecializeError(f"%{node.name} ({node.op.name}{_where(node)}) changes rank for the fed sizes")
            node.attrs = attrs
            node.set_output_types(types)
        left = [value for value in graph.inputs if value.type.dynamic]
        if left:
            raise SpecializeError(f"input %{left[0].name} ({left[0].type}) has a ? dimension and no fed shape")
        return changed or any(v.type != before[v] for node in graph.nodes for v in node.outputs)


def _check_input(value: Value, shape: tuple[int, ...]) -> None:
    declared = value.shape
    if len(shape) != len(declared) or any(old != DYNAMIC and old != new for old, new in zip(declared, shape)):
        raise SpecializeError(f"input %{value.name} is {value.type}; it cannot take shape {list(shape)}")


def _where(node: Node) -> str:
    return f", traced at {node.loc}" if node.loc is not None else ""


def _specialized_attrs(node: Node, before: dict, fed_sizes: set) -> dict:
    """The node's attributes with sizes computed from the stand-in rewritten for the fed size:
    the size its ``?`` operands were fed, or (a node with no operand, such as an iota of
    ``x.shape``) the one size every ``?`` was fed."""
    sized = [name for name, spec in node.op.attrs.items() if spec.kind in (AttrKind.INT, AttrKind.INTS)
             and node.attrs.get(name) is not None and any(_multiple(entry)[0] for entry in _entries(node.attrs[name]))]
    if not sized:
        return node.attrs
    sizes = {value.type.shape[dim] for value in node.inputs
             for dim, old in enumerate(before[value].shape) if old == DYNAMIC} or set(fed_sizes)
    if len(sizes) != 1:
        what = "were fed different sizes" if sizes else "have no fed size"
        raise SpecializeError(f"%{node.name} ({node.op.name}{_where(node)}) holds sizes of ? dimensions in its "
                              f"attributes ({', '.join(sized)}), and the ? dimensions {what} "
                              f"{sorted(sizes)}: give the placeholders concrete sizes")
    (size,) = sizes
    attrs = dict(node.attrs)
    for name in sized:
        value = attrs[name]
        rewritten = [_rewrite(entry, size) for entry in _entries(value)]
        attrs[name] = rewritten[0] if isinstance(value, int) else tuple(rewritten)
    return attrs


def _entries(value) -> list[int]:
    return [value] if isinstance(value, int) else list(value)


def _multiple(entry: int) -> tuple[int, int]:
    """``entry`` as ``k * DYNAMIC + c`` with a small ``c``: (k, c); k is 0 for a plain size."""
    k, c = divmod(entry + OFFSET_LIMIT, DYNAMIC)
    return (k, c - OFFSET_LIMIT) if k > 0 else (0, entry)


def _rewrite(entry: int, size: int) -> int:
    k, c = _multiple(entry)
    return entry if k == 0 else k * size + c
