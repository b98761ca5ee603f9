"""One fused node -> the Python source of a Numba kernel, readable, each line under its IR.

A kernel takes its input arrays then its output arrays and returns nothing.  Sizes come
from the arrays at run time (kernels are size-generic); ranks, dtypes and which
dimensions broadcast are baked in.  0-d arrays are passed as shape (1,).

- loop kernels: one loop per domain axis, the body computes every node and stores the
  kernel's outputs; broadcast inputs read index 0 along their size-1 dimensions.
- reduce kernels: loops over the kept axes outside; inside, one pass over the reduced
  axes per dependent reduction (softmax: max, then sum, then the division), with the
  per-row scalars between passes; full-shaped outputs stored in the first pass that can
  compute them, and read back rather than recomputed by later passes.
- matmul kernels: the runtime calls BLAS; the kernel is the elementwise epilogue over
  its result.

Each kernel is written twice: serial, and with ``prange`` on the outermost loop for
inputs large enough to pay for threads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowjit.compiler.codegen.scalar import (CodegenError, cast, compute_dtype, constructor, expression,
                                             literal)
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.printer import format_node
from flowjit.compiler.passes.fuse import reduction_axes

INDENT = "    "


@dataclass
class KernelSource:
    name: str
    source: str                 # the module text: serial ``name`` and parallel ``name_parallel``
    inputs: list[Value]         # outer values, in argument order (for matmul: the BLAS result first)
    outputs: list[Value]        # outer values written by the kernel
    kind: str


def _identity(shape) -> tuple:
    return tuple(None if size == 1 else axis for axis, size in enumerate(shape))


def domain_of(body: Graph, kind: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    compute = [node for node in body.nodes if node.op is not ops.constant]
    if kind == "reduce":
        first = next(node for node in compute if node.op.kind is OpKind.REDUCTION)
        return first.inputs[0].shape, reduction_axes(first)
    return compute[0].output.shape, ()


def embeddings(body: Graph, domain, axes) -> dict[Value, tuple]:
    """For each value computed in the body: the domain axis of each of its dimensions."""
    embed: dict[Value, tuple] = {}
    for node in body.nodes:
        out = node.outputs[0] if node.outputs else None
        if node.op is ops.constant:
            embed[out] = (None,) * out.type.rank
        elif node.op is ops.matmul:
            embed[out] = _identity(out.shape)
        elif node.op.kind is OpKind.REDUCTION:
            source = node.inputs[0]
            source_embed = embed.get(source, _identity(source.shape))
            reduced = reduction_axes(node)
            entries = [None if dim in reduced else e for dim, e in enumerate(source_embed)]
            if not node.attrs["keepdims"]:
                entries = [e for dim, e in enumerate(entries) if dim not in reduced]
            embed[out] = tuple(entries)
        else:
            rank = out.type.rank
            if out.shape == tuple(domain):
                embed[out] = _identity(out.shape)
                continue
            entries = [None] * rank
            for value in node.inputs:
                if value in embed:
                    offset = rank - value.type.rank
                    for dim, entry in enumerate(embed[value]):
                        if entry is not None and value.shape[dim] != 1:
                            entries[offset + dim] = entry
            embed[out] = tuple(entries)
    return embed


def operand_embedding(consumer_embed: tuple, consumer_rank: int, value: Value) -> tuple:
    """How a consumer reads an operand: numpy aligns shapes on the right."""
    offset = consumer_rank - value.type.rank
    return tuple(None if size == 1 else consumer_embed[offset + dim] for dim, size in enumerate(value.shape))


def index_text(embedding: tuple) -> str:
    return ", ".join("0" if entry is None else f"i{entry}" for entry in embedding) or "0"


class KernelWriter:
    def __init__(self, node: Node):
        self.node = node
        self.body: Graph = node.attrs["body"]
        self.kind: str = node.attrs["kind"]
        self.name = node.name
        self.domain, self.axes = domain_of(self.body, self.kind)
        self.embed = embeddings(self.body, self.domain, self.axes)
        self.lines: list[str] = []
        self.names: dict[Value, str] = {}
        self.extents: dict[int, str] = {}
        self.argument: dict[Value, str] = {}
        self.outer_of = dict(zip(self.body.inputs, node.inputs))
        self.exported = dict(zip(self.body.outputs, node.outputs))
        self.matmul = next((n for n in self.body.nodes if n.op is ops.matmul), None)

    # -- names ------------------------------------------------------------------------------------
    def var(self, value: Value) -> str:
        if value not in self.names:
            self.names[value] = "v_" + value.name.replace(":", "_").replace(".", "_")
        return self.names[value]

    def arguments(self) -> tuple[list[Value], list[Value]]:
        inputs = list(self.body.inputs)
        if self.matmul is not None:
            inputs = [self.matmul.output] + inputs
        outputs = [v for v in self.body.outputs if v is not (self.matmul.output if self.matmul else None)]
        for index, value in enumerate(inputs):
            self.argument[value] = f"in{index}_{value.name.replace(':', '_').replace('.', '_')}"
        for index, value in enumerate(outputs):
            self.argument[value] = f"out{index}"
        return inputs, outputs

    def note_extent(self, array: str, embedding: tuple, shape) -> None:
        for dim, entry in enumerate(embedding):
            if entry is not None and entry not in self.extents and shape[dim] != 1:
                self.extents[entry] = f"{array}.shape[{dim}]"

    # -- pieces -------------------------------------------------------------------------------------
    def load(self, value: Value, embedding: tuple) -> str:
        array = self.argument[value]
        self.note_extent(array, embedding, value.shape)
        return f"{array}[{index_text(embedding)}]"

    def operand(self, consumer: Node, value: Value, consumer_embed: tuple, rank: int) -> str:
        if value in self.names:
            return self.names[value]
        if value in self.argument:
            return self.load(value, operand_embedding(consumer_embed, rank, value))
        raise CodegenError(f"%{value.name} is used in kernel {self.name} before it is computed")

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    def comment(self, depth: int, node: Node) -> None:
        self.emit(depth, "# " + format_node(node))

    def compute(self, depth: int, node: Node) -> None:
        """Assign the node's value to its local variable."""
        self.comment(depth, node)
        out = node.output
        if node.op is ops.constant:
            self.emit(depth, f"{self.var(out)} = {literal(node.attrs['value'], out.dtype)}")
            return
        embed = self.embed[out]
        operands = [self.operand(node, value, embed, out.type.rank) for value in node.inputs]
        self.emit(depth, f"{self.var(out)} = {expression(node, operands)}")

    def store(self, depth: int, value: Value) -> None:
        array = self.argument[value]
        self.note_extent(array, self.embed[value], value.shape)
        self.emit(depth, f"{array}[{index_text(self.embed[value])}] = {self.var(value)}")

    # -- kernels ----------------------------------------------------------------------------------------
    def write(self) -> KernelSource:
        inputs, outputs = self.arguments()
        if self.kind == "reduce":
            body_lines = self.write_reduce(outputs)
        else:
            body_lines = self.write_loop(outputs)
        rank = len(self.domain)
        missing = [axis for axis in range(rank) if axis not in self.extents and self.domain[axis] != 1]
        if missing:
            raise CodegenError(f"kernel {self.name}: no argument gives the extent of domain axis {missing[0]}")
        header = [f"{INDENT}n{axis} = {self.extents.get(axis, '1')}" for axis in range(rank)]
        parameters = ", ".join(self.argument[v] for v in inputs + outputs)
        serial = [f"def {self.name}({parameters}):"] + header + body_lines
        parallel_lines = [line.replace("for i", "for i", 1) for line in body_lines]
        for index, line in enumerate(parallel_lines):
            if line.lstrip().startswith("for i") and "range(" in line:
                parallel_lines[index] = line.replace("range(", "prange(", 1)
                break
        parallel = [f"def {self.name}_parallel({parameters}):"] + header + parallel_lines
        source = "\n".join(serial) + "\n\n\n" + "\n".join(parallel) + "\n"
        return KernelSource(self.name, source, [self.outer_value(v) for v in inputs],
                            [self.exported[v] for v in outputs], self.kind)

    def outer_value(self, value: Value) -> Value:
        if value in self.outer_of:
            return self.outer_of[value]
        return self.exported.get(value, value)

    def constants(self, depth: int) -> None:
        for node in self.body.nodes:
            if node.op is ops.constant:
                self.compute(depth, node)

    def write_loop(self, outputs: list[Value]) -> list[str]:
        start = len(self.lines)
        self.constants(1)
        depth = 1
        for axis in range(len(self.domain)):
            self.emit(depth, f"for i{axis} in range(n{axis}):")
            depth += 1
        if not self.domain:
            pass
        for node in self.body.nodes:
            if node.op is ops.constant or node is self.matmul:
                continue
            self.compute(depth, node)
        for value in outputs:
            self.store(depth, value)
        if len(self.lines) == start:
            self.emit(1, "pass")
        return self.lines[start:]

    def write_reduce(self, outputs: list[Value]) -> list[str]:
        start = len(self.lines)
        reduced = set(self.axes)
        kept = [axis for axis in range(len(self.domain)) if axis not in reduced]
        level: dict[Value, int] = {}
        pass_of: dict[Node, int] = {}
        members = [n for n in self.body.nodes if n.op is not ops.constant]
        for node in self.body.nodes:
            inputs_level = max((level.get(v, 0) for v in node.inputs), default=0)
            if node.op.kind is OpKind.REDUCTION:
                pass_of[node] = inputs_level
                level[node.output] = inputs_level + 1
            else:
                level[node.output] = inputs_level
        full = {n.output for n in members if any(e in reduced for e in self.embed[n.output] if e is not None)}
        outputs_set = set(outputs)
        full_outputs = [v for v in outputs if v in full]
        passes = max([p for p in pass_of.values()] + [level[v] for v in full_outputs] + [0]) + 1
        self.constants(1)
        depth = 1
        for axis in kept:
            self.emit(depth, f"for i{axis} in range(n{axis}):")
            depth += 1
        outer_depth = depth
        computed_outer: set[Value] = set()

        def compute_outer(upto: int) -> None:
            for node in members:
                value = node.output
                if value in full or node.op.kind is OpKind.REDUCTION or value in computed_outer:
                    continue
                if level[value] <= upto:
                    self.compute(outer_depth, node)
                    computed_outer.add(value)

        stored_full: dict[Value, int] = {}
        compute_outer(0)
        count = " * ".join(f"np.float64(n{axis})" for axis in sorted(reduced)) or "np.float64(1)"
        for current in range(passes):
            reductions = [n for n in members if pass_of.get(n) == current]
            stores = [v for v in full_outputs if level[v] == current]
            if not reductions and not stores:
                continue
            arg_reduction = any(n.op in (ops.argmax, ops.argmin) for n in reductions)
            for node in reductions:
                self.init_accumulator(outer_depth, node)
            if arg_reduction:
                self.emit(outer_depth, "t = 0")
            depth = outer_depth
            for axis in sorted(reduced):
                self.emit(depth, f"for i{axis} in range(n{axis}):")
                depth += 1
            needed = self.needed_full([n.inputs[0] for n in reductions] + stores, full, stored_full)
            saved = dict(self.names)
            for node in members:
                if node.output in needed:
                    if node.output in stored_full:
                        self.emit(depth, f"{self.var(node.output)} = "
                                         f"{self.argument[node.output]}[{index_text(self.embed[node.output])}]")
                    else:
                        self.compute(depth, node)
            for node in reductions:
                self.update_accumulator(depth, node)
            for value in stores:
                self.store(depth, value)
                stored_full[value] = current
            if arg_reduction:
                self.emit(depth, "t += 1")
            self.names = {k: v for k, v in saved.items()}
            for value in full:
                self.names.pop(value, None)
            for node in reductions:
                self.finish_accumulator(outer_depth, node, count)
            compute_outer(current + 1)
        for value in outputs:
            if value not in full:
                self.store(outer_depth, value)
        return self.lines[start:]

    def needed_full(self, roots: list[Value], full: set, stored: dict) -> set:
        needed, stack = set(), [v for v in roots if v in full]
        while stack:
            value = stack.pop()
            if value in needed:
                continue
            needed.add(value)
            if value in stored:
                continue
            stack.extend(v for v in value.producer.inputs if v in full)
        return needed

    # -- reductions --------------------------------------------------------------------------------------
    def accumulator_dtype(self, node: Node) -> np.dtype:
        out = compute_dtype(node.output.dtype)
        if node.op in (ops.sum, ops.prod, ops.mean) and out.kind == "f":
            return np.dtype(np.float64)
        return out

    def init_accumulator(self, depth: int, node: Node) -> None:
        acc = f"acc_{self.var(node.output)}"
        self.comment(depth, node)
        if node.op in (ops.argmax, ops.argmin):
            dtype = compute_dtype(node.inputs[0].dtype)
            start = _extreme(dtype, lowest=node.op is ops.argmax)
            self.emit(depth, f"{acc} = {start}")
            self.emit(depth, f"{acc}_index = 0")
            return
        dtype = self.accumulator_dtype(node)
        if node.op in (ops.sum, ops.mean):
            start = literal(0, dtype)
        elif node.op is ops.prod:
            start = literal(1, dtype)
        else:
            start = _extreme(dtype, lowest=node.op is ops.max)
        self.emit(depth, f"{acc} = {start}")

    def update_accumulator(self, depth: int, node: Node) -> None:
        acc = f"acc_{self.var(node.output)}"
        source = node.inputs[0]
        value = self.operand(node, source, self.embed.get(source, _identity(source.shape)), source.type.rank) \
            if source not in self.names else self.names[source]
        if node.op in (ops.argmax, ops.argmin):
            better = ">" if node.op is ops.argmax else "<"
            self.emit(depth, f"x = {value}")
            nan_rule = f" or (x != x and {acc} == {acc})" if compute_dtype(source.dtype).kind == "f" else ""
            self.emit(depth, f"if x {better} {acc}{nan_rule}:")
            self.emit(depth + 1, f"{acc} = x")
            self.emit(depth + 1, f"{acc}_index = t")
            return
        dtype = self.accumulator_dtype(node)
        term = cast(value, source.dtype, dtype)
        if node.op in (ops.sum, ops.mean):
            self.emit(depth, f"{acc} = {acc} + {term}" if dtype != np.bool_ else f"{acc} = {acc} | {term}")
        elif node.op is ops.prod:
            self.emit(depth, f"{acc} = {acc} * {term}" if dtype != np.bool_ else f"{acc} = {acc} & {term}")
        else:
            compare = ">" if node.op is ops.max else "<"
            if dtype == np.bool_:
                self.emit(depth, f"{acc} = {acc} | {term}" if node.op is ops.max else f"{acc} = {acc} & {term}")
            elif dtype.kind == "f":
                self.emit(depth, f"x = {term}")
                self.emit(depth, f"{acc} = x if (x {compare} {acc} or x != x) else {acc}")
            else:
                self.emit(depth, f"x = {term}")
                self.emit(depth, f"{acc} = x if x {compare} {acc} else {acc}")

    def finish_accumulator(self, depth: int, node: Node, count: str) -> None:
        acc = f"acc_{self.var(node.output)}"
        out = node.output
        if node.op in (ops.argmax, ops.argmin):
            self.emit(depth, f"{self.var(out)} = {constructor(out.dtype)}({acc}_index)")
        elif node.op is ops.mean:
            self.emit(depth, f"{self.var(out)} = {cast(f'({acc} / {count})', np.dtype(np.float64), out.dtype)}")
        else:
            self.emit(depth, f"{self.var(out)} = {cast(acc, self.accumulator_dtype(node), out.dtype)}")


def _extreme(dtype: np.dtype, lowest: bool) -> str:
    dtype = compute_dtype(dtype)
    if dtype == np.bool_:
        return "False" if lowest else "True"
    if dtype.kind == "f":
        return literal(-np.inf if lowest else np.inf, dtype)
    info = np.iinfo(dtype)
    return literal(info.min if lowest else info.max, dtype)


MODULE_HEADER = '''"""flowjit kernels (generated): each line follows the IR line it implements."""
import math

import numpy as np
from numba import njit, prange

from flowjit.compiler.codegen.mathlib import (exp_f32, exp_f64, log_f32, log_f64, sigmoid_f32,
                                              sigmoid_f64, tanh_f32, tanh_f64)
'''


def kernel_source(node: Node) -> KernelSource:
    """The source of the kernel for one fused node (a matmul without epilogue has none)."""
    return KernelWriter(node).write()


def module_source(kernel: KernelSource) -> str:
    from flowjit.compiler.codegen.scalar import HELPERS
    return MODULE_HEADER + HELPERS + "\n\n" + kernel.source
