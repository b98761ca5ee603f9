"""CUDA kernels from the same kernel plans as the CPU's: numba-cuda source, each line under its IR.

A CUDA kernel module has two functions:

- ``kernel``, the device code (compiled by the CUDA backend: ``cuda.jit``, or ``compile_ptx``),
  taking the kernel's input arrays then its output arrays, as the CPU kernel does;
- ``launch``, host code taking the same arrays and returning the work the launch covers:
  ``(elements, 1)`` for a loop kernel, ``(rows, row length)`` for a reduce kernel.

Loop kernels (and matmul epilogues) are grid-stride ``while`` loops over the flattened domain
(a ``range()`` loop would divide 64-bit integers for its trip count in every thread), taking
``loop_unroll()`` elements a trip, then one at a time (``write_elements``): each flat index
splits into per-axis indices, and broadcast operands read index 0 along their size-1
dimensions, as on the CPU.  Scalar code is each op's rule for the ``cuda`` target
(``Lowering.targets``), calling ``fj``: codegen/cuda_library.py.

Reduce kernels run one block per row (the kept axes, flattened; blocks stride over rows).
A row of at most ``row_slots()`` elements per thread is kept in registers: its input elements
are loaded once per row (those broadcast over the rows once per thread), and each pass of the
plan is straight code over the thread's slots.  A longer row is read again by each pass, a
block-strided loop taking ``row_unroll()`` elements a trip (their loads first, their
accumulations in row order) and then one at a time.  A pass computes its elementwise values,
stores its full-shaped outputs and accumulates its reductions in one accumulator per thread;
warp shuffles (``fj.shfl_xor``) then combine each warp's, one shared slot per warp the warps'
(argmax/argmin shuffle the position beside the value, the first position of the extreme winning).
``MAX_THREADS`` in the module bounds the block (its shared arrays), ``ROW_THREADS`` sets it
for a row in registers.  Values a later pass needs are computed again from the inputs (no
per-row scratch).  Any set of reduced axes renders this way.

The layouts other than a block per row -- column blocks (``columns``), a thread per short row
(``across``) and the whole domain in parts -- are written by ``CudaLayouts``
(cuda_layouts.py), a mixin of the reduce writer.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.codegen.cuda_layouts import CudaLayouts
from flowjit.compiler.codegen.cuda_shape import (COLUMN_LANES, MAX_PARTS, MAX_WARPS, PART_MIN, PART_THREADS, WARP,
                                                  loop_unroll, register_budget, row_slots, row_threads, row_unroll,
                                                  threads_for_row)
from flowjit.compiler.codegen.scalar import CodegenError
from flowjit.compiler.codegen.writer import (INDENT, KernelSource, KernelWriter, _identifier, _identity, local,
                                             split_index, uniform_view)
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.ops.lowering import cast
from flowjit.compiler.ir.ops.reduction import ARG_REDUCTIONS, accumulator_dtype
from flowjit.compiler.ir.plan import KernelKind
from flowjit.compiler.ir.reduce_rows import full_values, levels
from flowjit.compiler.ir.types import compute_dtype

MODULE_HEADER = '''"""flowjit CUDA kernel (generated): each line follows the IR line it implements."""
import math

import numpy as np
from numba import cuda

from flowjit.compiler.codegen import cuda_library as fj
'''


SHUFFLED = {np.dtype(t) for t in (np.int32, np.int64, np.float32, np.float64)}     # what shfl_xor_sync moves


def shuffled(value: str, offset: int, dtype: np.dtype) -> str:
    """The partner lane's ``value``: a warp shuffle moves 32- and 64-bit words, so a boolean or
    a narrow integer travels as an int64 and comes back in its dtype."""
    if dtype in SHUFFLED:
        return f"fj.shfl_xor({value}, {offset})"
    if dtype.kind == "c":                       # (its parts, each a float)
        return f"np.{dtype.name}(complex(fj.shfl_xor({value}.real, {offset}), fj.shfl_xor({value}.imag, {offset})))"
    if dtype == np.bool_:
        return f"(fj.shfl_xor(np.int64({value}), {offset}) != 0)"
    return f"np.{dtype.name}(fj.shfl_xor(np.int64({value}), {offset}))"


def _ahead(position: str, trips: int, step: str = "nthreads") -> str:
    """The position ``trips`` steps (``step``: a block's threads, or a grid's) after ``position``."""
    return position if trips == 0 else f"{position} + {step}" if trips == 1 else f"{position} + {trips} * {step}"


class CudaLoopWriter(KernelWriter):
    """A loop kernel (or a matmul's epilogue) as a grid-stride loop over the flattened domain."""

    def __init__(self, node: Node):
        super().__init__(node, parallel=False, target="cuda")
        self.fetches: dict[str, str] | None = None     # an unrolled trip's loads -> their locals
        self.fetch_count = 0
        self.registers: dict[str, tuple] | None = None   # a row kept in registers (CudaReduceWriter)
        self.layout = "blocks"                           # a reduce kernel's: blocks (a row each), columns, threads

    def write_body(self, outputs: list[Value]) -> list[str]:
        start = len(self.lines)
        self.constants(1)
        axes = list(range(len(self.domain)))
        nodes = [node for node in self.body.nodes if node.op is not ops.constant and node is not self.matmul]
        self.emit(1, f"total = {' * '.join(f'n{axis}' for axis in axes) or '1'}")
        self.emit(1, "flat = cuda.grid(1)")
        self.emit(1, "stride = cuda.gridsize(1)")
        unroll = loop_unroll()
        if unroll > 1:
            self.emit(1, f"while {_ahead('flat', unroll - 1, 'stride')} < total:     "
                         f"# ({unroll} elements a trip: every load issued before the first store)")
            self.write_elements(2, [f"f{copy}" for copy in range(unroll)], "flat", "stride", axes, nodes, [], outputs)
            self.emit(2, f"flat += {unroll} * stride")
        self.emit(1, "while flat < total:            # (a grid-stride loop; range() would divide for its trip count)")
        self.write_elements(2, ["flat"], "flat", "stride", axes, nodes, [], outputs)
        self.emit(2, "flat += stride")
        return self.lines[start:]

    def write_elements(self, depth: int, positions: list[str], first: str, step: str, axes: list[int],
                       nodes: list[Node], reductions: list[Node], stores: list[Value], end: str = "",
                       guarded: frozenset = frozenset()) -> None:
        """The work on the elements at ``positions`` (``first``; or ``f0``, ``f1``... at ``first``,
        ``first + step``...), flat over ``axes``: each element's ``nodes``, then its accumulations
        into ``reductions`` in order -- the order of the one-at-a-time loop, so unrolling changes
        no result -- then its stores, so that every load is issued before the first store (an
        output may alias an input as far as the compiler knows).  The copies' loads come first,
        each into a local (``fetched``), and their values are computed node by node, each node's
        for every copy: NVVM moves a load down to its first use, and a float division compiles to
        a branch (its slow path) that a later copy's loads would otherwise wait behind.  An
        unrolled copy's locals and indices carry its number; a ``guarded`` copy accumulates and
        stores only below ``end``."""
        outer = dict(self.names)
        copies = []
        for number, position in enumerate(positions):
            copy = "" if position == first else f"_{number}"
            if copy:
                self.emit(depth, f"{position} = {_ahead(first, number, step)}")
            self.lines.extend(split_index(depth, position, axes, copy))
            copies.append((copy, dict(outer), {axis: f"i{axis}{copy}" for axis in axes}, position))
        fetch_at, self.fetches = len(self.lines), {} if len(positions) > 1 else None
        for node in nodes + [None] * bool(reductions):       # (node by node, each copy's; then the elements)
            for copy, names, index_names, position in copies:
                self.copy, self.names, self.index_names = copy, names, index_names
                if node is not None:
                    self.compute(depth, node)
                    continue
                for reduction in reductions:
                    source = reduction.inputs[0]
                    element = self.names.get(source) or self.load(source, _identity(source.shape))
                    self.emit(depth, f"{local('x', reduction.output, copy)} = "
                                     f"{cast(element, source.dtype, accumulator_dtype(reduction))}")
        self.lines[fetch_at:fetch_at] = [f"{INDENT * depth}{name} = {text}"
                                         for text, name in (self.fetches or {}).items()]
        self.fetches = None

        def under_guard(number: int, position: str) -> int:
            if number not in guarded:
                return depth
            self.emit(depth, f"if {position} < {end}:")
            return depth + 1
        for number, (copy, names, index_names, position) in enumerate(copies):
            if reductions:
                inner = under_guard(number, position)
                for node in reductions:
                    self.accumulate(inner, node, local("x", node.output, copy), position)
        for number, (copy, names, index_names, position) in enumerate(copies):
            self.names, self.index_names = names, index_names
            if stores:
                inner = under_guard(number, position)
                for value in stores:
                    self.store(inner, value)
        self.copy, self.index_names, self.names = "", {}, outer

    def load(self, value: Value, embedding: tuple) -> str:
        return self.fetched(super().load(value, embedding))

    def fetched(self, text: str) -> str:
        """An element load of an unrolled trip as the local it is loaded into first (``write_elements``)."""
        if self.fetches is None or not self.copy:
            return text
        if text not in self.fetches:
            self.fetch_count += 1
            self.fetches[text] = f"e{self.fetch_count}"
        return self.fetches[text]

    def max_threads(self) -> int | None:
        """The most threads a block of this kernel may have, where it has a limit (None: none)."""
        return None

    def launch_checks(self) -> list[str]:
        """Host lines of ``launch`` refusing work the kernel was not written for."""
        return []

    def work(self) -> str:
        """What ``launch`` returns: the elements the grid covers, and 1."""
        return f"({' * '.join(f'n{axis}' for axis in range(len(self.domain))) or '1'}, 1)"

    def write_module(self) -> KernelSource:
        text, inputs, outputs = self.write_function()
        rank = len(self.domain)
        parameters = ", ".join(self.argument[v] for v in inputs + outputs)
        extents = [f"{INDENT}n{axis} = {self.extents.get(axis, str(self.domain[axis]))}" for axis in range(rank)]
        parts = ", *parts" if self.scratch_parameters else ""         # (the launcher's part buffers: unused here)
        launch = "\n".join([f"def launch({parameters}{parts}):"] + extents + self.launch_checks()
                           + [f"{INDENT}return {self.work()}"])
        limit = self.max_threads()
        limit = f"MAX_THREADS = {limit}          # (threads per block at most: its shared arrays' size)\n" if limit else ""
        if self.registers is not None:
            limit += (f"ROW_THREADS = {self.threads}          # (threads per row: {self.slots} row elements "
                      f"each in registers)\n")
        if self.layout == "columns":
            limit += f"ROW_THREADS = {WARP * COLUMN_LANES}          # (a block: {WARP} columns by {COLUMN_LANES} lanes of rows)\n"
        elif self.layout == "threads":
            limit += "THREAD_ROWS = True          # (a thread per row: launched as a loop kernel over the rows)\n"
        if self.scratch_parameters and self.layout == "columns":
            limit += (f"PART_SIZES = {self.groups * self.splits * WARP}, {self.groups}      # (each partial buffer's "
                      f"elements: {self.splits} splits of {self.groups} groups of 32 columns; a count per group)\n")
        elif self.scratch_parameters:
            limit += (f"PARTS = {MAX_PARTS}, {PART_MIN}, {PART_THREADS}      # (the domain in parts: at most, "
                      f"elements each at least, threads a block)\n")
        module = (f"{MODULE_HEADER}\n\n{limit}{chr(10) * 2 if limit else ''}# {self.name}: {self.kind} kernel, "
                  f"domain [{','.join(map(str, self.domain))}]\n{text}\n\n\n{launch}\n")
        return KernelSource(self.name, module, [self.outer_value(v) for v in inputs],
                            [self.exported[v] for v in outputs], self.kind, parallel=False,
                            part_buffers=tuple(dtype for _, dtype in self.scratch_parameters))


class CudaReduceWriter(CudaLayouts, CudaLoopWriter):
    """A reduce kernel: one block per row, a block-strided loop per pass (or the row in registers),
    warp-shuffle reductions."""

    def __init__(self, node: Node, keep_rows: bool = True):
        super().__init__(node)
        self.keep_rows = keep_rows

    def write_body(self, outputs: list[Value]) -> list[str]:
        if self.plan.strategy is None:
            raise CodegenError(f"reduce kernel {self.name} has no row plan: run the plan-reductions pass first")
        start = len(self.lines)
        self.reduced = sorted(set(self.axes))
        self.kept = [axis for axis in range(len(self.domain)) if axis not in self.reduced]
        self.level = levels(self.body)[0]
        self.full = full_values(self.body, self.plan)
        self.members = [n for n in self.body.nodes if n.op is not ops.constant]
        self.registers, self.slots, self.guarded = None, 0, frozenset()
        named = {v.name: v for n in self.body.nodes for v in n.outputs}
        self.constants(1)
        self.emit(1, f"ninner = {' * '.join(f'n{axis}' for axis in self.reduced)}")
        self.emit(1, f"nrows = {' * '.join(f'n{axis}' for axis in self.kept) or '1'}")
        self.computed_outer: set[Value] = set()
        passes = [([named[name].producer for name in row_pass.reduce], [named[name] for name in row_pass.store])
                  for row_pass in self.plan.passes]
        per_row = [value for value in outputs if value not in self.full]
        self.layout = self.choose_layout()
        if self.layout == "threads":
            self.write_thread_rows(passes, per_row)
            return self.lines[start:]
        self.emit(1, "tid = cuda.threadIdx.x")
        self.emit(1, "nthreads = cuda.blockDim.x")
        reductions = [n for n in self.members if n.op.kind is OpKind.REDUCTION]
        if self.layout == "columns":
            self.write_columns(passes[0], per_row, reductions)
            return self.lines[start:]
        for node in reductions:                # (a slot per warp; argmax/argmin's position beside)
            name, dtype = _identifier(node.output), accumulator_dtype(node)
            self.emit(1, f"shared_{name} = cuda.shared.array({MAX_WARPS}, np.{dtype.name})")
            if node.op in ARG_REDUCTIONS:
                self.emit(1, f"shared_at_{name} = cuda.shared.array({MAX_WARPS}, np.int64)")
        self.emit(1, "lane = tid % 32")
        self.emit(1, "warp = tid // 32")
        if self.in_parts():
            self.scratch_parameters = self.part_buffers()      # (passed last, by the launcher)
            self.write_parts(passes[0][0], per_row)
            return self.lines[start:]
        self.emit(1, "row = cuda.blockIdx.x")
        hoisted_at = len(self.lines)
        self.emit(1, "while row < nrows:")
        self.lines.extend(split_index(2, "row", self.kept))
        self.preload(len(self.lines), 2, hoisted_at)
        self.compute_outer(2, 0)
        for current, (pass_reductions, stores) in enumerate(passes):
            self.write_pass(2, pass_reductions, stores)
            self.compute_outer(2, current + 1)
        if per_row:
            self.emit(2, "if tid == 0:")
            for value in per_row:
                self.store(3, value)
        self.emit(2, "row += cuda.gridDim.x")
        self.write_preloads()
        return self.lines[start:]

    # -- a row in registers ----------------------------------------------------------------------------
    def register_slots(self) -> int:
        """Row elements each thread keeps in registers, its input elements loaded once per row
        and read by every pass from there (0: rows too long; the passes load them again).  The
        row's length is static (the domain's), and so are the threads: ``self.threads``, which
        the module's ``ROW_THREADS`` gives the launch."""
        length = int(np.prod([self.domain[axis] for axis in self.reduced], dtype=np.int64))
        self.row_length = length
        self.threads = threads_for_row(length, min(row_threads(), self.max_threads()))
        slots = -(-length // self.threads)
        return slots if self.keep_rows and 1 <= slots <= row_slots() else 0

    def preload(self, at: int, depth: int, hoisted_at: int) -> None:
        """Where the row's loads go (written last, once the passes have asked for them): loads
        that vary along the kept axes at ``at``, once per row; the others (a ``gamma`` broadcast
        over the rows) at ``hoisted_at``, once per thread."""
        self.slots = self.register_slots()
        self.registers: dict[str, tuple[str, int, np.dtype, bool]] | None = {} if self.slots else None
        self.guarded = frozenset(copy for copy in range(self.slots) if (copy + 1) * self.threads > self.row_length)
        self.preload_at = (at, depth, hoisted_at)

    def load(self, value: Value, embedding: tuple) -> str:
        text = KernelWriter.load(self, value, embedding)
        if (self.registers is None or not self.copy or (value in self.outer_of and uniform_view(self.outer_of[value]))
                or not any(entry in self.reduced for entry in embedding if entry is not None)):
            return self.fetched(text)
        if text not in self.registers:
            hoisted = not any(entry in self.kept for entry in embedding if entry is not None)
            self.registers[text] = (f"r{len(self.registers)}", int(self.copy[1:]), np.dtype(value.dtype), hoisted)
        return self.registers[text][0]

    def launch_checks(self) -> list[str]:
        if self.layout == "columns" and self.splits > 1:
            rows = " * ".join(f"n{axis}" for axis in self.kept)
            return [f"{INDENT}if {rows} != {self.columns}:      # (its partial buffers hold this many columns' splits)",
                    f"{INDENT * 2}raise ValueError(f'kernel {self.name} reduces {self.columns} columns: got {{{rows}}}')"]
        if self.registers is None:
            return []
        row = " * ".join(f"n{axis}" for axis in self.reduced)
        return [f"{INDENT}if {row} != {self.row_length}:      # (its rows are in registers: this length only)",
                f"{INDENT * 2}raise ValueError(f'kernel {self.name} holds rows of {self.row_length}: got {{{row}}}')"]

    def words(self) -> int:
        """32-bit registers the row's elements take per thread."""
        return sum(max(1, dtype.itemsize // 4) for _, _, dtype, _ in (self.registers or {}).values())

    def write_preloads(self) -> None:
        """The loads the passes read from registers, inserted where ``preload`` said.  A guarded
        copy past the row's end loads the row's last element instead: its values are computed
        (and not used), so they must be ones the ops take (no log of zero)."""
        if not self.registers:
            return
        at, depth, hoisted_at = self.preload_at
        for where, indent, hoisted in ((at, depth, False), (hoisted_at, 1, True)):
            lines = []
            for copy in range(self.slots):
                loads = [(name, text, dtype) for text, (name, number, dtype, up) in self.registers.items()
                         if number == copy and up == hoisted]
                if not loads:
                    continue
                position = _ahead("tid", copy)
                if copy in self.guarded:        # (past the row's end: the last element, never used)
                    position = f"min({position}, ninner - 1)"
                lines.append(f"{INDENT * indent}t{copy} = {position}")
                lines.extend(split_index(indent, f"t{copy}", self.reduced, f"_{copy}"))
                lines.extend(f"{INDENT * indent}{name} = {text}" for name, text, dtype in loads)
            self.lines[where:where] = lines

    def max_threads(self) -> int:
        if self.layout == "columns":
            return WARP * COLUMN_LANES
        return WARP * MAX_WARPS

    def work(self) -> str:
        """What ``launch`` returns: (rows, row length) -- the groups of 32 columns and a block's
        threads for column blocks, (rows, 1) for a thread per row (a loop kernel's launch)."""
        rows = " * ".join(f"n{axis}" for axis in self.kept) or "1"
        if self.layout == "columns":
            return f"(-(-({rows}) // 32) * {self.splits}, {WARP * COLUMN_LANES})"
        if self.layout == "threads":
            return f"({rows}, 1)"
        return f"({rows}, {' * '.join(f'n{axis}' for axis in self.reduced)})"

    def compute_outer(self, depth: int, upto: int) -> None:
        """Per-row values (not along the reduced axes) known after pass ``upto``."""
        for node in self.members:
            value = node.output
            if value in self.full or node.op.kind is OpKind.REDUCTION or value in self.computed_outer:
                continue
            if self.level[value] <= upto:
                self.compute(depth, node)
                self.computed_outer.add(value)

    def needed(self, wanted: list[Value]) -> list[Node]:
        """The full-shaped nodes computing ``wanted``, in body order."""
        todo: set[Value] = set()
        stack = [v for v in wanted if v in self.full]
        while stack:
            value = stack.pop()
            if value not in todo:
                todo.add(value)
                stack.extend(v for v in value.producer.inputs if v in self.full)
        return [n for n in self.members if n.output in todo]

    def write_pass(self, depth: int, reductions: list[Node], stores: list[Value], start: str = "tid",
                   end: str = "ninner", finish: bool = True) -> None:
        """One pass over the row positions ``start``, ``start + nthreads``... below ``end``:
        ``row_unroll()`` elements a trip, then one at a time for the rest; then the block's
        reductions (``finish``: into their values; else each thread keeps the block's total in
        its accumulator)."""
        if not reductions and not stores:
            return
        self.start_accumulators(depth, reductions, comments=True)
        nodes = self.needed([node.inputs[0] for node in reductions] + stores)
        self.emit(depth, f"t = {start}")
        if self.registers is not None:          # (the row in registers: one copy per slot, straight code)
            self.write_elements(depth, [f"t{copy}" for copy in range(self.slots)], "t", "nthreads", self.reduced,
                                nodes, reductions, stores, end, self.guarded)
        else:
            unroll = row_unroll()
            if unroll > 1:
                self.emit(depth, f"while {_ahead('t', unroll - 1)} < {end}:     "
                                 f"# ({unroll} elements a trip: every load issued before the first store)")
                self.write_elements(depth + 1, [f"t{copy}" for copy in range(unroll)], "t", "nthreads",
                                    self.reduced, nodes, reductions, stores)
                self.emit(depth + 1, f"t += {unroll} * nthreads")
            self.emit(depth, f"while t < {end}:")
            self.write_elements(depth + 1, ["t"], "t", "nthreads", self.reduced, nodes, reductions, stores)
            self.emit(depth + 1, "t += nthreads")
        for node in reductions:
            self.block_reduce(depth, node, finish)

    def start_accumulators(self, depth: int, reductions: list[Node], comments: bool = False) -> None:
        """Each reduction's accumulator at its identity (argmax/argmin's position at none yet),
        under its IR line (``comments``)."""
        for node in reductions:
            if comments:
                self.comment(depth, node)
            self.emit(depth, f"acc_{_identifier(node.output)} = {self.reduction_start(node, accumulator_dtype(node))}")
            if node.op in ARG_REDUCTIONS:
                self.emit(depth, f"at_{_identifier(node.output)} = -1")

    def accumulate(self, depth: int, node: Node, element: str, position: str) -> None:
        """Fold ``element`` (at row position ``position``) into the thread's accumulator."""
        name = _identifier(node.output)
        acc = f"acc_{name}"
        if node.op in ARG_REDUCTIONS:
            larger = "True" if node.op is ops.argmax else "False"
            self.emit(depth, f"if fj.arg_prefer({acc}, at_{name}, {element}, {position}, {larger}):")
            self.emit(depth + 1, f"{acc} = {element}")
            self.emit(depth + 1, f"at_{name} = {position}")
            return
        _, combine = node.op.combine(accumulator_dtype(node))
        self.emit(depth, f"{acc} = {combine(acc, element)}")

    def block_reduce(self, depth: int, node: Node, finish: bool = True) -> None:
        """The threads' accumulators into one: within each warp by shuffles (no shared memory, no
        barrier), then the warps' partials by every warp, so that every thread holds the total
        (``finish``: into the reduction's value).  argmax/argmin shuffle the position beside the
        value; ``fj.arg_prefer`` is a total order (the first position of the extreme wins), so
        both lanes of each exchange keep the same candidate."""
        name = _identifier(node.output)
        shared, acc = f"shared_{name}", f"acc_{name}"
        dtype = np.dtype(accumulator_dtype(node))
        identity = self.reduction_start(node, dtype)
        arg = node.op in ARG_REDUCTIONS
        if arg:
            larger = "True" if node.op is ops.argmax else "False"
        else:
            _, combine = node.op.combine(dtype)

        def warp_reduce(depth: int) -> None:
            for offset in (16, 8, 4, 2, 1):       # (every lane shuffles once: a combine may repeat an operand)
                self.emit(depth, f"other = {shuffled(acc, offset, dtype)}")
                if not arg:
                    self.emit(depth, f"{acc} = {combine(acc, 'other')}")
                    continue
                self.emit(depth, f"other_at = fj.shfl_xor(at_{name}, {offset})")
                self.emit(depth, f"if fj.arg_prefer({acc}, at_{name}, other, other_at, {larger}):")
                self.emit(depth + 1, f"{acc} = other")
                self.emit(depth + 1, f"at_{name} = other_at")
        warp_reduce(depth)
        self.emit(depth, "if lane == 0:")
        self.emit(depth + 1, f"{shared}[warp] = {acc}")
        if arg:
            self.emit(depth + 1, f"shared_at_{name}[warp] = at_{name}")
        self.emit(depth, "cuda.syncthreads()")
        # every warp combines the warps' partials (no second barrier; all threads get the total)
        self.emit(depth, f"{acc} = {shared}[lane] if lane < nthreads // 32 else {identity}")
        if arg:
            self.emit(depth, f"at_{name} = shared_at_{name}[lane] if lane < nthreads // 32 else -1")
        warp_reduce(depth)
        if finish:
            result = f"np.{np.dtype(node.output.dtype).name}(at_{name})" if arg else self.reduction_result(node, acc)
            self.emit(depth, f"{self.var(node.output)} = {result}")
        self.emit(depth, "cuda.syncthreads()         # (every warp has read the partials before the next reuse)")

    def reduction_start(self, node: Node, dtype: np.dtype) -> str:
        if node.op.combine is None:
            raise CodegenError(f"reduction '{node.op.name}' (%{node.name}) has no kernel rule: run the "
                               f"expand-composites pass first")
        return node.op.combine(dtype)[0]

    def reduction_result(self, node: Node, total: str) -> str:
        """The reduction's value from its ``total`` (a mean divides by ``ninner`` in its dtype)."""
        dtype = accumulator_dtype(node)
        if node.op is ops.mean and dtype.kind == "c":       # (numba's complex / would fail on a zero count)
            return cast(f"fj.complex_divide_c128({total}, np.complex128(ninner))", dtype, node.output.dtype)
        if node.op is ops.mean:
            return cast(f"({total} / np.{compute_dtype(dtype).name}(ninner))", dtype, node.output.dtype)
        return cast(total, dtype, node.output.dtype)


def cuda_kernel_source(node: Node) -> KernelSource:
    """The CUDA kernel module of one fused node, rendered from its plan."""
    if node.attrs["plan"].kind is not KernelKind.REDUCE:
        return CudaLoopWriter(node).write_module()
    writer = CudaReduceWriter(node)
    source = writer.write_module()
    if writer.registers is not None and writer.words() > register_budget(writer.threads):
        # (too many elements to keep: spills, or a block over the register file, would cost more)
        source = CudaReduceWriter(node, keep_rows=False).write_module()
    return source

