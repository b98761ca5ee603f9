"""The kernel writer's common ground: iteration domains, how values map onto them, and a
writer that names values, loads, computes and stores them, and writes loop kernels (and
the elementwise epilogue of matmul kernels).  reduce.py extends it for reduce kernels;
kernel.py says what kernels look like.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from flowjit.compiler.codegen.scalar import CodegenError, expression, fast_path
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind, inlines_math
from flowjit.compiler.ir.ops.lowering import constructor, literal
from flowjit.compiler.ir.plan import KernelKind, KernelPlan
from flowjit.compiler.ir.printer import format_node
from flowjit.compiler.ir.types import compute_dtype
from flowjit.config import kernel_vector_bits

INDENT = "    "
SERIAL, PARALLEL = "kernel", "kernel_parallel"      # the two functions of every kernel module
KERNEL_OP_KINDS = (OpKind.ELEMENTWISE, OpKind.REDUCTION, OpKind.CONSTANT)      # (and the matmul BLAS runs)
STAGE_BLOCK = 256                       # elements per block of a staged innermost loop
# A loop kernel's innermost axis longer than 1 whose row of its widest values is narrower
# than this runs with its extent a constant, and so do the arrays along it
# (mathlib.known_last_extent): the axis an operand broadcast along kept apart from the others
# (``img * alpha[..., None]``).  One AVX2 vector: a row that fills one vectorises as it is.
SHORT_AXIS_BYTES = 32


@dataclass
class Block:
    """A block of the innermost loop that ``KernelWriter.staged_block`` runs in stages."""
    count: str                  # its length (an expression)
    size: int                   # its largest length (the stack buffers')
    index: list[str]            # the lines that set the loads' indices from j, the position in it
    finish: Callable            # finish(depth): the element's own work, at the end of the last stage
    reads: tuple = ()           # values ``finish`` reads


@dataclass
class KernelSource:
    name: str
    source: str                 # the whole module text: functions ``kernel`` and ``kernel_parallel``
    inputs: list[Value]         # outer values, in argument order (for matmul: the BLAS result first)
    outputs: list[Value]        # outer values written by the kernel
    kind: KernelKind
    parallel: bool = True       # False: no loop can run in parallel (the ``_parallel`` twin is serial)
    pitched: tuple = ()         # positions of the inputs passed as driver.pitched(view) gives them
    scratch: tuple = ()         # dtypes of the scratch vectors (one element per reduced position) passed last
    part_buffers: tuple = ()    # (CUDA) dtypes of the arrays a kernel reducing in parts takes last, from its launcher


PITCH_MIN_ELEMENTS = 1 << 16         # a loop kernel this large reads strided slices through pitches


def pitched_view(value: Value) -> bool:
    """Whether a loop kernel reads input ``value`` as a vector and row pitches (the driver's
    ``pitched``): a slice of rank 2 or more that keeps the last axis's unit step but is not
    C-contiguous -- a stencil's shifted interior ``u[1:-1, 2:]``.  numba types such a view as
    of any layout, with a run-time inner stride, and its loads become gathers: a Sobel filter
    over 4M pixels ran 4x slower so than through pitches, which LLVM reads as vectors."""
    producer = value.producer
    if producer is None or producer.op is not ops.slice or value.type.rank < 2:
        return False
    source, shape, steps = producer.inputs[0].shape, value.shape, producer.attrs["steps"]
    if steps[-1] != 1:
        return False
    long_axes = [axis for axis, size in enumerate(shape) if size > 1]
    return bool(long_axes) and any(shape[axis] != source[axis] for axis in range(long_axes[0] + 1, len(shape)))


def uniform_view(value: Value) -> bool:
    """Whether a kernel input is one element broadcast to its shape (np.zeros_like's scalar
    seen as an array): every element is the one at index 0, read once, not through strides of
    zero that numba cannot see are zero (its loads would be gathers)."""
    producer = value.producer
    return producer is not None and producer.op is ops.broadcast_to and producer.inputs[0].type.size == 1


def _identifier(value: Value) -> str:
    return value.name.replace(":", "_").replace(".", "_")


def _identity(shape) -> tuple:
    return tuple(None if size == 1 else axis for axis, size in enumerate(shape))


def operand_embedding(consumer_embed: tuple, consumer_rank: int, value: Value) -> tuple:
    """How a consumer reads an operand: numpy aligns shapes on the right."""
    offset = consumer_rank - value.type.rank
    return tuple(None if size == 1 else consumer_embed[offset + dim] for dim, size in enumerate(value.shape))


def index_text(embedding: tuple, names: dict | None = None) -> str:
    """The index of an element: ``i<axis>`` per embedded axis (or ``names[axis]``), 0 elsewhere."""
    names = names or {}
    return ", ".join("0" if entry is None else names.get(entry, f"i{entry}") for entry in embedding) or "0"


def local(prefix: str, value: Value, copy: str = "") -> str:
    """The local holding ``value`` in an unrolled copy (``copy``: ``_<k>``; or none): the copy's
    number goes after the prefix (``v2_sub``), where no value's name can end up (``v_sub_1`` is
    %sub_1's, not %sub's copy 1)."""
    return f"{prefix}{copy[1:]}_{_identifier(value)}"


def split_index(depth: int, flat: str, axes: list[int], suffix: str = "") -> list[str]:
    """Lines splitting the flat index ``flat`` over ``axes`` (row-major: the last is fastest) into
    ``i<axis><suffix>``."""
    lines, rest = [], flat
    for position, axis in enumerate(reversed(axes)):
        if position == len(axes) - 1:
            lines.append(f"{INDENT * depth}i{axis}{suffix} = {rest}")
        else:
            lines.append(f"{INDENT * depth}i{axis}{suffix} = {rest} % n{axis}")
            lines.append(f"{INDENT * depth}rest{suffix} = {rest} // n{axis}")
            rest = f"rest{suffix}"
    return lines


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
        self.outer_dims: dict[str, set] = {}    # array -> the dims its loads and stores index with i0
        self.argument: dict[Value, str] = {}
        self.outer_of = dict(zip(self.body.inputs, node.inputs))
        self.exported = dict(zip(self.body.outputs, node.outputs))
        self.matmul = next((n for n in self.body.nodes if n.op is ops.matmul), None)
        self.slicing: int | None = None       # the domain axis loads slice along (write_columns, parts)
        self.slice_index = "c"                # what indexes the slices
        self.slices: dict[tuple, str] = {}    # (array, leading indices) -> its slice's name
        self.pitched: set[Value] = set()      # inputs read through a vector and row pitches
        self.scratch_parameters: list[tuple] = []     # (name, dtype): scratch the driver passes
        self.copy = ""                        # suffix of an unrolled copy's locals (cuda_writer)
        self.index_names: dict[int, str] = {}     # axis -> its index variable, where not i<axis>
        self.access: dict[Value, str] = {}        # a view of an argument that loads and stores go through
        self.fast = False                         # computing routines by their fast paths (write_stages)
        self.staged_body = None                   # (reduce.ReduceWriter: a pass's loop run in stages)

    # -- names ------------------------------------------------------------------------------------
    def var(self, value: Value) -> str:
        """The local variable holding ``value`` (from here on it counts as computed)."""
        if value not in self.names:
            self.names[value] = local("v", value, self.copy)
        return self.names[value]

    def arguments(self) -> tuple[list[Value], list[Value]]:
        inputs = list(self.body.inputs)
        if self.matmul is not None:       # BLAS reads the matmul's operands; the epilogue reads the rest
            epilogue = [n for n in self.body.nodes if n is not self.matmul]
            inputs = [self.matmul.output] + [v for v in inputs if any(v in n.inputs for n in epilogue)]
        outputs = [v for v in self.body.outputs if v is not (self.matmul.output if self.matmul else None)]
        for index, value in enumerate(inputs):
            self.argument[value] = f"in{index}_{value.name.replace(':', '_').replace('.', '_')}"
        if (self.target == "cpu" and self.kind in (KernelKind.LOOP, KernelKind.REDUCE)
                and int(np.prod(self.domain, dtype=np.int64)) >= PITCH_MIN_ELEMENTS):
            self.pitched = {value for value in inputs if value in self.outer_of and pitched_view(self.outer_of[value])}
        for index, value in enumerate(outputs):
            self.argument[value] = f"out{index}"
        return inputs, outputs

    def note_extent(self, array: str, embedding: tuple, shape, pitched: bool = False) -> None:
        self.outer_dims.setdefault(array, set()).add(tuple(dim for dim, entry in enumerate(embedding) if entry == 0))
        for dim, entry in enumerate(embedding):
            if entry is not None and entry not in self.extents and shape[dim] != 1:
                self.extents[entry] = f"{array}_s{dim}" if pitched else f"{array}.shape[{dim}]"

    def parameters(self, value: Value) -> list[str]:
        """A kernel input's parameters: the array, or a pitched view's vector, sizes and pitches."""
        array = self.argument[value]
        if value not in self.pitched:
            return [array]
        rank = value.type.rank
        return [array] + [f"{array}_s{dim}" for dim in range(rank)] + [f"{array}_p{dim}" for dim in range(rank - 1)]

    # -- pieces -------------------------------------------------------------------------------------
    def load(self, value: Value, embedding: tuple) -> str:
        array = self.argument[value]
        if value in self.outer_of and uniform_view(self.outer_of[value]):
            return f"{array}[{', '.join('0' for _ in value.shape) or '0'}]"
        pitched = value in self.pitched
        self.note_extent(array, embedding, value.shape, pitched=pitched)
        if self.slicing is not None and embedding and embedding[-1] == self.slicing:
            # In write_columns' innermost loop: a slice of the row taken once outside it, read at
            # ``c`` (known not negative, so no wraparound select that would turn into a gather);
            # a pitched input's row is a stretch of its vector, a contiguous slice.
            leading = (self.pitched_index(array, embedding[:-1] + (None,)) if pitched
                       else index_text(embedding[:-1]))
            key = (array, leading if embedding[:-1] else "", pitched)
            if key not in self.slices:
                self.slices[key] = f"row{len(self.slices)}_{array}"
            return f"{self.slices[key]}[{self.slice_index}]"
        if pitched:
            # an unsigned index: numba adds no wraparound select, so the loads stay vectors
            return f"{array}[np.uint64({self.pitched_index(array, embedding)})]"
        return f"{self.access.get(value, array)}[{index_text(embedding, self.index_names)}]"

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
        out = node.output
        if node.op is ops.constant:
            # Used as a literal, not a local: numba passes the locals a prange loop reads as
            # arguments of the function it outlines the loop into, so LLVM would no longer see
            # them as constants (an integer division by a constant becomes an idiv per element).
            self.names[out] = literal(node.attrs["value"], out.dtype)
            return
        self.comment(depth, node)
        embed = self.embed[out]
        operands = [self.operand(node, value, embed, out.type.rank) for value in node.inputs]
        fast = self.fast and fast_path(node, self.target) is not None
        self.emit(depth, f"{self.var(out)} = {expression(node, operands, self.target, fast)}")

    def store(self, depth: int, value: Value) -> None:
        array = self.argument[value]
        embedding = self.embed[value]
        self.note_extent(array, embedding, value.shape)
        if self.slicing is not None and embedding and embedding[-1] == self.slicing:
            self.emit(depth, f"{self.load(value, embedding)} = {self.var(value)}")      # (through the slice)
            return
        self.emit(depth, f"{self.access.get(value, array)}[{index_text(embedding, self.index_names)}] = "
                         f"{self.var(value)}")

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
        # An axis no argument spans (a sum of a broadcast scalar, in a gradient) runs over its
        # size in the plan, a literal: the kernel then serves that size only.
        header = [f"{INDENT}n{axis} = {self.extents.get(axis, str(self.domain[axis]))}" for axis in range(len(self.domain))]
        parameters = ", ".join([name for v in inputs for name in self.parameters(v)] + [self.argument[v] for v in outputs]
                               + [name for name, _ in self.scratch_parameters])
        name = PARALLEL if self.parallel else SERIAL
        if self.parallel:
            body_lines = self.serial_in_parts(inputs, outputs) or body_lines
        lines = self.vector_width(header + body_lines)
        return "\n".join([f"def {name}({parameters}):"] + lines), inputs, outputs

    def serial_in_parts(self, inputs: list[Value], outputs: list[Value]) -> list[str] | None:
        """The parallel twin of a loop kernel as the serial kernel called on parts of the outer
        axis, one a thread, each argument that spans the axis sliced to the part; None where
        an argument spans it other than by its first dimension (or through pitches or scratch).

        The loop nest itself under ``prange`` ran 40% slower a thread than the serial kernel:
        numba outlines a prange body into a function whose loop state takes the registers that
        the serial loop keeps its constants' addresses in, so each iteration reloaded them
        (gelu of float32 on AVX2, one thread: 1.72 ns an element against 1.24).  Called
        through the serial kernel, each thread runs the serial loop's machine code, and the
        serial kernel is compiled once for both (a leading slice of an array keeps its layout)."""
        if not (self.target == "cpu" and type(self) is KernelWriter and self.kind is KernelKind.LOOP
                and 0 in self.extents and not self.pitched and not self.scratch_parameters):
            return None
        arguments = []
        for value in inputs + outputs:
            array = self.argument[value]
            dims = self.outer_dims.get(array, {()})
            if dims not in ({()}, {(0,)}) or (value in outputs and dims != {(0,)}):
                return None
            arguments.append(f"{array}[low:high]" if dims == {(0,)} else array)
        return [f"{INDENT}parts = fj.parallel_parts(n0)",
                f"{INDENT}{self.for_loop('part', 'parts', outer=True)}",
                f"{INDENT * 2}low, high = fj.part_bounds(part, parts, n0)",
                f"{INDENT * 2}{SERIAL}({', '.join(arguments)})"]

    def vector_width(self, lines: list[str]) -> list[str]:
        """``lines`` with ``fj.vector_width(bits)`` first in the function and in each ``prange``
        body (numba compiles those as functions of their own), where config.vector_bits asks
        for a width: what LLVM vectorises with is then in the source, and in the cache key."""
        if self.target != "cpu":
            return lines
        bits = kernel_vector_bits()
        if bits is None:
            return lines
        call = f"fj.vector_width({bits})"
        widened = [INDENT + call]
        for line in lines:
            widened.append(line)
            text = line.lstrip()
            if text.startswith("for ") and " in prange(" in text:
                widened.append(line[:len(line) - len(text)] + INDENT + call)
        return widened

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
        nodes = [node for node in self.body.nodes if node.op is not ops.constant and node is not self.matmul]
        short = self.short_inner_axis(outputs)
        stages = self.stages(nodes) if self.domain and not short else {}
        depth = 1
        for axis in range(len(self.domain) - (1 if stages else 0)):
            bound = str(self.domain[axis]) if short and axis == len(self.domain) - 1 else f"n{axis}"
            self.emit(depth, self.for_loop(f"i{axis}", bound, outer=axis == 0))
            depth += 1
            if short and axis == len(self.domain) - 2:
                # Inside the loop that vectorises (a parallel loop's body is outlined into a
                # function that receives the arrays as arguments, their extents unknown again).
                for value, view in self.access.items():
                    self.emit(depth, f"{view} = fj.known_last_extent({self.argument[value]}, {self.domain[-1]})")
        if stages:
            self.write_stages(depth, nodes, stages, outputs)
        else:
            for node in nodes:
                self.compute(depth, node)
            for value in outputs:
                self.store(depth, value)
        if len(self.lines) == start:
            self.emit(1, "pass")
        return self.lines[start:]

    def short_inner_axis(self, outputs: list[Value]) -> bool:
        """Whether the innermost axis is short (its row narrower than SHORT_AXIS_BYTES at
        the kernel's widest dtype); if so, the arrays along it are accessed through views
        whose last extent is the constant (``self.access``).

        Collapse-loops merges the axes every operand spans alike, so a short innermost axis
        is left where an operand is broadcast along it (a pixel's alpha over its 3 channels)
        or along the others (a per-channel mean).  Its loop of 3 never vectorised (an HWC
        image normalised per channel, 1182x1182x3 uint8: 8.6 ms, 1.9 ms with the constant;
        ``np.exp(x[:, None] - y)`` over 4M float32 elements with 2, 3 or 4 columns: 9-13 ms,
        1.3-1.7 ms); with the extent a constant LLVM unrolls it and vectorises the loop
        around it.  A row of 4 float64 or 8 float32 vectorised already (``v * x[:, None]``
        1.6 ms at 4 float64 columns; 3.6 ms unrolled)."""
        if not (self.target == "cpu" and type(self) is KernelWriter and self.kind is KernelKind.LOOP
                and len(self.domain) >= 2 and self.domain[-1] > 1):
            return False
        values = list(self.body.inputs) + [v for n in self.body.nodes for v in n.outputs]
        widest = max(compute_dtype(v.dtype).itemsize for v in values)
        if self.domain[-1] * widest >= SHORT_AXIS_BYTES:
            return False
        candidates = [v for v in self.body.inputs if not (v in self.outer_of and uniform_view(self.outer_of[v]))
                      and v not in self.pitched] + outputs
        for value in candidates:
            if value.type.rank >= 2 and value.shape[-1] == self.domain[-1] and value in self.argument:
                self.access[value] = "known_" + self.argument[value]
        return True

    # -- staged loops -------------------------------------------------------------------------------
    def stages(self, nodes: list[Node]) -> dict[Node, int]:
        """Each node's stage when the innermost loop must run in stages, else nothing.

        An inlined math function is a long chain of dependent operations; with several of them
        chained on one element, one iteration's work outgrows what the CPU overlaps across
        iterations and the loop runs at the chain's latency (8 chained float32 tanh: 2.1 ns each,
        against 0.7 ns for one).  Stage k computes the k-th function of every chain for a block
        of elements (and the cheap work around it), through stack buffers, so every stage loop
        has independent iterations.  A node's stage is the count of inlined functions on its
        longest input path, itself included (at least 1).

        A routine with a fast path (``scalar.fast_path``: sin, cos and tan) also runs in stages,
        its argument computed in a stage before its own: its stage then checks the block's
        arguments and runs the fast path when they all fit (``staged_block``).  With fewer than
        two stages and no such routine nothing changes.
        """
        depth: dict[Value, int] = {}
        stage: dict[Node, int] = {}
        made: dict[Value, int] = {}
        guarded = False
        for node in nodes:
            below = max((depth.get(value, 0) for value in node.inputs), default=0)
            if fast_path(node, self.target) is not None:
                guarded = True
                after = max((made.get(value, 0) for value in node.inputs), default=0)
                depth[node.output] = max(below, after) + 1
            else:
                depth[node.output] = below + (1 if inlines_math(node) else 0)
            stage[node] = made[node.output] = max(depth[node.output], 1)
        return stage if guarded or max(stage.values(), default=0) >= 2 else {}

    def write_stages(self, depth: int, nodes: list[Node], stage: dict[Node, int], outputs: list[Value]) -> None:
        """The innermost loop as blocks of STAGE_BLOCK elements, each block one loop per stage
        (``staged_block``)."""
        last = len(self.domain) - 1
        self.emit(depth, self.for_loop("block", f"(n{last} + {STAGE_BLOCK - 1}) // {STAGE_BLOCK}", outer=last == 0))
        depth += 1
        self.emit(depth, f"low = block * {STAGE_BLOCK}")
        self.emit(depth, f"count = min({STAGE_BLOCK}, n{last} - low)")
        self.emit(depth, "high = low + count")
        # Loads and stores along the innermost axis go through the block's slices, read at j:
        # indexing the arrays at low + j, LLVM vectorised the stage loops of a parallel twin
        # (a prange's body, outlined) at half the serial loop's speed (exp of float32, 2M
        # elements, one thread: 1.4-2.0 ns against 0.6-0.8; through slices 0.8).
        slices_at = len(self.lines)
        self.slicing, self.slice_index, self.slices = last, "j", {}

        def store(depth: int) -> None:
            # Every output is stored in the last stage (those made earlier pass through buffers),
            # after every read of the block: a kernel may write a variable's buffer that it also
            # reads (driver.old_value_dead: each element read at the index written), and a store
            # in stage 1 was read back as the old value by stage 2 (``w.assign(old * 2)``
            # beside ``np.sin(old * 3) + old``).
            for value in outputs:
                self.store(depth, value)
        self.staged_block(depth, nodes, stage, Block("count", STAGE_BLOCK, [f"i{last} = low + j"], store,
                                                     tuple(outputs)))
        self.slicing = None
        self.insert_slices(slices_at, depth)

    def staged_block(self, depth: int, nodes: list[Node], stage: dict[Node, int], block: "Block") -> None:
        """One block of the innermost loop, one loop over it per stage; values read by a later
        stage pass through stack buffers (kept in the loop's frame).

        A stage with routines that have a fast path first finds the largest magnitude of each
        one's argument over the block (a loop that vectorises, reading the buffer or the input),
        then runs its loop twice over: with the fast paths when every argument fits them, with
        the exact routines when one does not (float32 sin: 1.4 ns per element against 6.7)."""
        produced = {node.output: stage[node] for node in nodes}
        final = max(stage.values())
        crossing: dict[Value, str] = {}
        readers = [(node.inputs, stage[node]) for node in nodes] + [(block.reads, final)]
        for values, number in readers:
            for value in values:
                if produced.get(value, number) < number and value not in crossing:
                    crossing[value] = f"stage_{_identifier(value)}"
        for value, buffer in crossing.items():
            self.emit(depth, f"{buffer} = fj.stack_array({self._buffer_type(value)}, {block.size})")
        for number in range(1, final + 1):
            self.emit(depth, f"# stage {number}")
            members = [node for node in nodes if stage[node] == number]
            checks = self.fast_checks(depth, members, crossing, block)
            loop = functools.partial(self.stage_loop, number=number, members=members, crossing=crossing,
                                     produced=produced, block=block, final=number == final)
            if not checks:
                loop(depth)
                continue
            self.emit(depth, f"if {' and '.join(checks)}:")
            self.fast = True
            loop(depth + 1)
            self.fast = False
            self.emit(depth, "else:")
            loop(depth + 1)

    def fast_checks(self, depth: int, members: list[Node], crossing: dict[Value, str], block: "Block") -> list[str]:
        """For a stage's routines with fast paths: a loop over the block taking the largest
        magnitude of each one's argument (``fj.magnitude_f32``: integers, so that the loop
        vectorises and NaN counts as large), and the conditions that they fit."""
        guarded = [(node, fast_path(node, self.target)) for node in members]
        guarded = [(node, path) for node, path in guarded if path is not None]
        if not guarded:
            return []
        peaks: dict[Value, str] = {}
        for node, _ in guarded:
            peaks.setdefault(node.inputs[0], f"peak{len(peaks)}")
        for peak in peaks.values():
            self.emit(depth, f"{peak} = 0")
        self.emit(depth, f"for j in range({block.count}):")
        for line in block.index:
            self.emit(depth + 1, line)
        for value, peak in peaks.items():
            node, (_, magnitude, dtype) = next((node, path) for node, path in guarded if node.inputs[0] is value)
            read = f"{crossing[value]}[j]" if value in crossing else \
                self.operand(node, value, self.embed[node.output], node.output.type.rank)
            self.emit(depth + 1, f"{peak} = max({peak}, {magnitude}({constructor(dtype)}({read})))")
        return list(dict.fromkeys(f"{check}({peaks[node.inputs[0]]})" for node, (check, _, _) in guarded))

    def stage_loop(self, depth: int, number: int, members: list[Node], crossing: dict[Value, str],
                   produced: dict[Value, int], block: "Block", final: bool) -> None:
        """One stage's loop over the block: read what earlier stages left in buffers, compute
        the stage's nodes, leave what later stages read; in the last, the block's own work."""
        self.emit(depth, f"for j in range({block.count}):")
        inner = depth + 1
        for line in block.index:
            self.emit(inner, line)
        reads = {value for node in members for value in node.inputs}
        reads |= set(block.reads) if final else set()
        for value, buffer in crossing.items():
            if value in reads and produced[value] < number:
                read = f"{buffer}[j]" if value.dtype != np.bool_ else f"({buffer}[j] != 0)"
                self.emit(inner, f"{self.var(value)} = {read}")
        for node in members:
            self.compute(inner, node)
        for value, buffer in crossing.items():
            if produced[value] == number:
                self.emit(inner, f"{buffer}[j] = {self.var(value)}")
        if final:
            block.finish(inner)

    @staticmethod
    def _buffer_type(value: Value) -> str:
        """The stack buffer's element type: the value's computing dtype (bools as uint8)."""
        return "np.uint8" if value.dtype == np.bool_ else constructor(value.dtype)

    def pitched_index(self, array: str, embedding: tuple, names: dict | None = None) -> str:
        """The position in a pitched input's vector of its element at ``embedding`` (an axis's
        index is ``names``' or ``index_names``' entry for it, else ``i<axis>``); with the last
        entry None, where the row at the leading indices starts."""
        names = {**self.index_names, **(names or {})}
        last = len(embedding) - 1
        terms = [names.get(entry, f"i{entry}") + (f" * {array}_p{dim}" if dim < last else "")
                 for dim, entry in enumerate(embedding) if entry is not None]
        return " + ".join(terms) or "0"

    def insert_slices(self, at: int, depth: int) -> None:
        """Take, at line ``at``, the slices the loads made since ``self.slices`` was reset."""
        self.lines[at:at] = [INDENT * depth + (f"{name} = {array}[{leading} + low:{leading} + high]" if pitched else
                                               f"{name} = {array}[{leading + ', ' if leading else ''}low:high]")
                             for (array, leading, pitched), name in self.slices.items()]
