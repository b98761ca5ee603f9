"""The kernel writer's common ground: iteration domains, how values map onto them, and a
writer that names values, loads, computes and stores them, and writes loop kernels (and
the elementwise epilogue of matmul kernels).  reduce.py extends it for reduce kernels;
kernel.py says what kernels look like.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowjit.compiler.codegen.scalar import CodegenError, expression, literal
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.printer import format_node
from flowjit.compiler.ir.plan import KernelKind, KernelPlan

INDENT = "    "
SERIAL, PARALLEL = "kernel", "kernel_parallel"      # the two functions of every kernel module
KERNEL_OP_KINDS = (OpKind.ELEMENTWISE, OpKind.REDUCTION, OpKind.CONSTANT)      # (and the matmul BLAS runs)


@dataclass
class KernelSource:
    name: str
    source: str                 # the whole module text: functions ``kernel`` and ``kernel_parallel``
    inputs: list[Value]         # outer values, in argument order (for matmul: the BLAS result first)
    outputs: list[Value]        # outer values written by the kernel
    kind: KernelKind
    parallel: bool = True       # False: no loop can run in parallel (the ``_parallel`` twin is serial)


def _identifier(value: Value) -> str:
    return value.name.replace(":", "_").replace(".", "_")


def _identity(shape) -> tuple:
    return tuple(None if size == 1 else axis for axis, size in enumerate(shape))


def operand_embedding(consumer_embed: tuple, consumer_rank: int, value: Value) -> tuple:
    """How a consumer reads an operand: numpy aligns shapes on the right."""
    offset = consumer_rank - value.type.rank
    return tuple(None if size == 1 else consumer_embed[offset + dim] for dim, size in enumerate(value.shape))


def index_text(embedding: tuple) -> str:
    return ", ".join("0" if entry is None else f"i{entry}" for entry in embedding) or "0"


class KernelWriter:
    """Writes one variant of a fused node's kernel: serial, or (``parallel``) with ``prange`` on
    the outer loop the plan lets run in parallel (``for_loop``)."""

    def __init__(self, node: Node, parallel: bool = False, target: str = "cpu"):
        self.node = node
        self.parallel = parallel
        self.target = target                    # which op lowering rules apply (Lowering.targets)
        self.parallel_loops = 0                 # prange loops written (0: no loop can run in parallel)
        self.body: Graph = node.attrs["body"]
        self.plan: KernelPlan = node.attrs["plan"]
        self.kind = self.plan.kind
        self.name = node.name
        self.domain, self.axes = self.plan.domain, self.plan.reduced
        if self.kind is KernelKind.REDUCE and not self.axes:
            raise CodegenError(f"kernel {self.name} reduces over no axes: run the expand-composites pass "
                               f"first (it lowers such reductions to casts)")
        self.embed = {value: self.plan.embedding(value.name)
                      for inner in self.body.nodes for value in inner.outputs}
        self.lines: list[str] = []
        self.names: dict[Value, str] = {}
        self.extents: dict[int, str] = {}
        self.argument: dict[Value, str] = {}
        self.outer_of = dict(zip(self.body.inputs, node.inputs))
        self.exported = dict(zip(self.body.outputs, node.outputs))
        self.matmul = next((n for n in self.body.nodes if n.op is ops.matmul), None)
        self.slicing: int | None = None       # the domain axis loads slice along (write_columns, parts)
        self.slice_index = "c"                # what indexes the slices
        self.slices: dict[tuple, str] = {}    # (array, leading indices) -> its slice's name

    # -- names ------------------------------------------------------------------------------------
    def var(self, value: Value) -> str:
        """The local variable holding ``value`` (from here on it counts as computed)."""
        if value not in self.names:
            self.names[value] = "v_" + _identifier(value)
        return self.names[value]

    def arguments(self) -> tuple[list[Value], list[Value]]:
        inputs = list(self.body.inputs)
        if self.matmul is not None:       # BLAS reads the matmul's operands; the epilogue reads the rest
            epilogue = [n for n in self.body.nodes if n is not self.matmul]
            inputs = [self.matmul.output] + [v for v in inputs if any(v in n.inputs for n in epilogue)]
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
        if self.slicing is not None and embedding and embedding[-1] == self.slicing:
            # In write_columns' innermost loop: a slice of the row taken once outside it, read at
            # ``c`` (known not negative, so no wraparound select that would turn into a gather).
            key = (array, index_text(embedding[:-1]) if embedding[:-1] else "")
            if key not in self.slices:
                self.slices[key] = f"row{len(self.slices)}_{array}"
            return f"{self.slices[key]}[{self.slice_index}]"
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
        if node.op.kind not in KERNEL_OP_KINDS:
            raise CodegenError(f"kernel {self.name}: %{node.name} ({node.op.name}, a {node.op.kind.value} op) cannot "
                               f"run inside a kernel; only elementwise ops, reductions and constants can")
        self.comment(depth, node)
        out = node.output
        if node.op is ops.constant:
            self.emit(depth, f"{self.var(out)} = {literal(node.attrs['value'], out.dtype)}")
            return
        embed = self.embed[out]
        operands = [self.operand(node, value, embed, out.type.rank) for value in node.inputs]
        self.emit(depth, f"{self.var(out)} = {expression(node, operands, self.target)}")

    def store(self, depth: int, value: Value) -> None:
        array = self.argument[value]
        self.note_extent(array, self.embed[value], value.shape)
        self.emit(depth, f"{array}[{index_text(self.embed[value])}] = {self.var(value)}")

    def for_loop(self, variable: str, bounds: str, outer: bool = False) -> str:
        """A loop header; ``outer``: the loop whose iterations may run in parallel."""
        if outer and self.parallel:
            self.parallel_loops += 1
            return f"for {variable} in prange({bounds}):"
        return f"for {variable} in range({bounds}):"

    # -- kernels ----------------------------------------------------------------------------------------
    def write_function(self) -> tuple[str, list[Value], list[Value]]:
        """The kernel function's text (``kernel``, or ``kernel_parallel``), its inputs and outputs."""
        inputs, outputs = self.arguments()
        body_lines = self.write_body(outputs)
        rank = len(self.domain)
        missing = [axis for axis in range(rank) if axis not in self.extents and self.domain[axis] != 1]
        if missing:
            raise CodegenError(f"kernel {self.name}: no argument gives the extent of domain axis {missing[0]}")
        header = [f"{INDENT}n{axis} = {self.extents.get(axis, '1')}" for axis in range(rank)]
        parameters = ", ".join(self.argument[v] for v in inputs + outputs)
        name = PARALLEL if self.parallel else SERIAL
        return "\n".join([f"def {name}({parameters}):"] + header + body_lines), inputs, outputs

    def outer_value(self, value: Value) -> Value:
        if value in self.outer_of:
            return self.outer_of[value]
        return self.exported.get(value, value)

    def constants(self, depth: int) -> None:
        for node in self.body.nodes:
            if node.op is ops.constant:
                self.compute(depth, node)

    def write_body(self, outputs: list[Value]) -> list[str]:
        """The kernel's lines after its extents (reduce.ReduceWriter writes reduce kernels)."""
        return self.write_loop(outputs)

    def write_loop(self, outputs: list[Value]) -> list[str]:
        start = len(self.lines)
        self.constants(1)
        depth = 1
        for axis in range(len(self.domain)):
            self.emit(depth, self.for_loop(f"i{axis}", f"n{axis}", outer=axis == 0))
            depth += 1
        for node in self.body.nodes:
            if node.op is ops.constant or node is self.matmul:
                continue
            self.compute(depth, node)
        for value in outputs:
            self.store(depth, value)
        if len(self.lines) == start:
            self.emit(1, "pass")
        return self.lines[start:]

    def insert_slices(self, at: int, depth: int) -> None:
        """Take, at line ``at``, the slices the loads made since ``self.slices`` was reset."""
        self.lines[at:at] = [INDENT * depth + f"{name} = {array}[{leading + ', ' if leading else ''}low:high]"
                             for (array, leading), name in self.slices.items()]
